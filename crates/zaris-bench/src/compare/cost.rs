//! What a workload cost the servers: CPU time and context switches of every thread of their
//! processes, read from `/proc` before and after. Per request, these are steadier than the
//! throughput on a shared 2-core machine, where a run's rate moves by a quarter between runs.

use std::future::Future;
use std::path::Path;

use crate::load::Sample;

/// CPU time and context switches of a set of processes, all threads summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub cpu_ns: u64,
    pub switches: u64,
}

impl Cost {
    /// The counters of `pids` now. A thread that has ended is no longer counted, so threads
    /// that come and go during a workload are undercounted; the servers' threads live long.
    pub fn of(pids: &[u32]) -> Cost {
        let mut total = Cost::default();
        for pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                total.add(&task_cost(&task.path()));
            }
        }
        total
    }

    fn add(&mut self, other: &Cost) {
        self.cpu_ns += other.cpu_ns;
        self.switches += other.switches;
    }

    /// What was spent between `before` and this reading.
    pub fn since(&self, before: &Cost) -> Cost {
        Cost {
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            switches: self.switches.saturating_sub(before.switches),
        }
    }

    /// CPU microseconds per request answered.
    pub fn cpu_us_per(&self, sample: &Sample) -> f64 {
        self.cpu_ns as f64 / 1e3 / sample.ok.max(1) as f64
    }

    /// Context switches per request answered.
    pub fn switches_per(&self, sample: &Sample) -> f64 {
        self.switches as f64 / sample.ok.max(1) as f64
    }
}

/// One thread's counters: `schedstat`'s first field is its CPU time in ns; `status` has its
/// voluntary and involuntary context switches. Unreadable (the thread ended): zero.
fn task_cost(task: &Path) -> Cost {
    let cpu_ns = std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| parse_schedstat(&s))
        .unwrap_or(0);
    let switches = std::fs::read_to_string(task.join("status"))
        .map(|s| parse_switches(&s))
        .unwrap_or(0);
    Cost { cpu_ns, switches }
}

fn parse_schedstat(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

fn parse_switches(status: &str) -> u64 {
    status
        .lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            matches!(
                name,
                "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches"
            )
            .then(|| value.trim().parse::<u64>().ok())?
        })
        .sum()
}

/// What a workload cost the servers' processes, and this process: the load client, which shares
/// the machine's cores with them (on a 2-core machine a client that costs more leaves the servers
/// less; both systems' clients are Rust gRPC clients in this process).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub servers: Cost,
    pub client: Cost,
}

/// Runs `workload` and returns what it measured with what it cost the processes `pids` and this
/// one.
pub async fn costed(
    pids: &[u32],
    workload: impl Future<Output = anyhow::Result<Sample>>,
) -> anyhow::Result<(Sample, Spent)> {
    let me = [std::process::id()];
    let (servers, client) = (Cost::of(pids), Cost::of(&me));
    let sample = workload.await?;
    let spent = Spent {
        servers: Cost::of(pids).since(&servers),
        client: Cost::of(&me).since(&client),
    };
    Ok((sample, spent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_read_from_procfs_text() {
        assert_eq!(parse_schedstat("123456789 2000 37\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        let status = "Name:\tzaris\nvoluntary_ctxt_switches:\t40\nnonvoluntary_ctxt_switches:\t2\n";
        assert_eq!(parse_switches(status), 42);
        assert_eq!(parse_switches("Name:\tx\n"), 0);
    }

    #[tokio::test]
    async fn a_workload_is_charged_to_the_servers_and_to_this_client_apart() {
        // Spins until this process has spent 15 ms of CPU by its own counters, not for a span of
        // wall-clock time: tests running beside it on a loaded machine may take the CPU meanwhile.
        let me = [std::process::id()];
        let (sample, spent) = costed(&[], async {
            let before = Cost::of(&me);
            // Bounded, so unreadable counters fail the assertion below rather than hang.
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while Cost::of(&me).since(&before).cpu_ns < 15_000_000
                && std::time::Instant::now() < give_up
            {
                std::hint::black_box(0u64);
            }
            Ok(Sample::default())
        })
        .await
        .expect("the workload ran");
        assert_eq!(sample.ok, 0);
        assert_eq!(spent.servers, Cost::default(), "no server processes");
        assert!(spent.client.cpu_ns >= 15_000_000, "{spent:?}");
    }

    #[test]
    fn this_process_is_seen_spending_cpu() {
        let me = [std::process::id()];
        let before = Cost::of(&me);
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let spent = Cost::of(&me).since(&before);
        assert!(spent.cpu_ns > 0, "{spent:?}");
        let sample = Sample {
            ok: 4,
            ..Sample::default()
        };
        assert_eq!(
            Cost {
                cpu_ns: 8_000,
                switches: 6
            }
            .cpu_us_per(&sample),
            2.0
        );
    }
}
