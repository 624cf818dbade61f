//! `zaris serve`'s hidden fault-injection flags, the binary's one seam for them. With the
//! `fault-injection` feature off, `FaultArgs` has no flags at all and yields the server's empty
//! `FaultConfig`, so `serve.rs` needs no `cfg`.

use zaris_server::faults::FaultConfig;

// Test-only flags for the fault-injection harness (hidden). A plain comment: clap would show a
// doc comment of a flattened struct in `zaris serve --help`.
#[cfg(feature = "fault-injection")]
#[derive(clap::Args, Debug, Default)]
pub struct FaultArgs {
    /// Dial these addresses for Raft RPCs to these nodes, `id=host:port,...` (a proxy per link).
    #[arg(long, env = "ZARIS_PEER_OVERRIDE", hide = true)]
    peer_override: Option<String>,
    /// Run this node's lessor clock at this rate of real time (e.g. 0.5 or 1.5). openraft's
    /// election timeout and heartbeats are not scaled.
    #[arg(long, env = "ZARIS_CLOCK_RATE", hide = true)]
    clock_rate: Option<f64>,
    /// Switch on a deliberate safety bug (repeatable, or comma-separated): stale-reads,
    /// lock-ignores-holder, early-expiry, ack-before-commit, slightly-early-expiry,
    /// no-promotion-extension, renew-ack-before-commit, lease-id-reuse.
    #[arg(
        long = "bug",
        env = "ZARIS_BUG",
        hide = true,
        value_delimiter = ',',
        value_parser = parse_bug
    )]
    bugs: Vec<zaris_server::faults::Bug>,
    /// Pause the next snapshot install after the file `pause-next-snapshot-install` appears in
    /// the data dir this long after the snapshot is saved (the harness kills nodes in the middle
    /// of an install).
    #[arg(long, env = "ZARIS_SNAPSHOT_INSTALL_PAUSE_MS", hide = true)]
    snapshot_install_pause_ms: Option<u64>,
}

#[cfg(feature = "fault-injection")]
fn parse_bug(text: &str) -> Result<zaris_server::faults::Bug, String> {
    text.parse()
}

#[cfg(feature = "fault-injection")]
impl FaultArgs {
    pub fn to_config(&self) -> anyhow::Result<FaultConfig> {
        let mut faults = FaultConfig::default();
        if let Some(text) = &self.peer_override {
            faults.peer_overrides = crate::serve::parse_members("peer override", text)?;
        }
        if let Some(rate) = self.clock_rate {
            faults.clock_rate = rate;
        }
        faults.bugs = self.bugs.iter().copied().collect();
        if let Some(pause_ms) = self.snapshot_install_pause_ms {
            faults.snapshot_install_pause_ms = pause_ms;
        }
        Ok(faults)
    }
}

// Without the `fault-injection` feature: no flags.
#[cfg(not(feature = "fault-injection"))]
#[derive(clap::Args, Debug, Default)]
pub struct FaultArgs {}

#[cfg(not(feature = "fault-injection"))]
impl FaultArgs {
    pub fn to_config(&self) -> anyhow::Result<FaultConfig> {
        Ok(FaultConfig::default())
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    #[test]
    fn fault_flags_reach_the_node_config_and_stay_hidden() {
        use clap::{CommandFactory, Parser};
        use zaris_server::faults::Bug;

        #[derive(Parser, Debug)]
        struct Serve {
            #[command(flatten)]
            args: crate::serve::ServeArgs,
        }
        let parsed = Serve::try_parse_from([
            "serve",
            "--peer-override",
            "2=127.0.0.1:9102, 3=127.0.0.1:9103",
            "--clock-rate",
            "1.5",
            "--bug",
            "stale-reads",
            "--bug",
            "early-expiry,ack-before-commit",
            "--snapshot-install-pause-ms",
            "800",
        ])
        .expect("parse");
        let (config, _) = crate::serve::build_config(&parsed.args).expect("config");
        let faults = &config.faults;
        assert_eq!(
            faults.peer_overrides.get(&3).map(String::as_str),
            Some("127.0.0.1:9103")
        );
        assert_eq!(faults.clock_rate, 1.5);
        assert_eq!(faults.snapshot_install_pause_ms, 800);
        assert_eq!(
            faults.bugs.iter().copied().collect::<Vec<_>>(),
            vec![Bug::StaleReads, Bug::EarlyExpiry, Bug::AckBeforeCommit]
        );

        assert!(Serve::try_parse_from(["serve", "--bug", "no-such-bug"]).is_err());
        let bad_rate = Serve::try_parse_from(["serve", "--clock-rate", "0"]).expect("parse");
        assert!(crate::serve::build_config(&bad_rate.args).is_err());
        let bad_override =
            Serve::try_parse_from(["serve", "--peer-override", "2=nowhere"]).expect("parse");
        let error = crate::serve::build_config(&bad_override.args).expect_err("not host:port");
        assert!(error.to_string().contains("peer override"), "{error}");
        let bad_pause = Serve::try_parse_from(["serve", "--snapshot-install-pause-ms", "3600000"])
            .expect("parse");
        let error = crate::serve::build_config(&bad_pause.args).expect_err("pause too long");
        assert!(
            error.to_string().contains("snapshot install pause"),
            "{error}"
        );

        let help = Serve::command().render_long_help().to_string();
        for hidden in [
            "peer-override",
            "clock-rate",
            "snapshot-install-pause",
            "--bug",
            "ZARIS_BUG",
            "harness",
            "deliberate",
        ] {
            assert!(!help.contains(hidden), "{hidden} shows in the help");
        }
    }
}
