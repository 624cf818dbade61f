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

/// The machine's CPU time in clock ticks, all CPUs summed (`/proc/stat`): all of it, and what
/// the hypervisor gave to other guests while this one had work (`steal`). A virtual machine whose
/// host is busy loses cores to it, and every rate of that hour falls with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostTime {
    pub steal: u64,
    pub total: u64,
}

impl HostTime {
    /// The counters now; zero where `/proc/stat` cannot be read.
    pub fn now() -> HostTime {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| parse_proc_stat(&stat))
            .unwrap_or_default()
    }

    pub fn since(&self, before: &HostTime) -> HostTime {
        HostTime {
            steal: self.steal.saturating_sub(before.steal),
            total: self.total.saturating_sub(before.total),
        }
    }

    /// The share of the machine's time the host took, 0 to 1.
    pub fn steal_share(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.steal as f64 / self.total as f64
    }

    /// The host took enough that a run's rates are not the machine's own.
    pub fn disturbed(&self) -> bool {
        self.steal_share() > STEAL_WARNING_SHARE
    }
}

/// The `cpu` line: user, nice, system, idle, iowait, irq, softirq, steal, then guest times that
/// `user` already counts.
fn parse_proc_stat(stat: &str) -> Option<HostTime> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    Some(HostTime {
        steal: *ticks.get(7)?,
        total: ticks.iter().sum(),
    })
}

/// Above this share of stolen time a run's rates are not the machine's own: the bench says so.
const STEAL_WARNING_SHARE: f64 = 0.05;

/// What a workload cost the servers' processes, and this process: the load client, which shares
/// the machine's cores with them (on a 2-core machine a client that costs more leaves the servers
/// less; both systems' clients are Rust gRPC clients in this process). And what the host took
/// from the machine meanwhile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub servers: Cost,
    pub client: Cost,
    pub host: HostTime,
}

/// Runs `workload` and returns what it measured with what it cost the processes `pids` and this
/// one.
pub async fn costed(
    pids: &[u32],
    workload: impl Future<Output = anyhow::Result<Sample>>,
) -> anyhow::Result<(Sample, Spent)> {
    let me = [std::process::id()];
    let (servers, client, host) = (Cost::of(pids), Cost::of(&me), HostTime::now());
    let sample = workload.await?;
    let spent = Spent {
        servers: Cost::of(pids).since(&servers),
        client: Cost::of(&me).since(&client),
        host: HostTime::now().since(&host),
    };
    if spent.host.disturbed() {
        println!(
            "warning: the host took {:.0}% of this machine's CPU during that run (steal time): \
             its rates are not this machine's; measure again when the host is quiet",
            spent.host.steal_share() * 100.0
        );
    }
    Ok((sample, spent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_steal_is_read_from_proc_stat() {
        let stat = "cpu  100 5 50 800 10 1 4 30 7 0\ncpu0 50 2 25 400 5 0 2 15 3 0\nintr 1\n";
        let host = parse_proc_stat(stat).expect("parsed");
        assert_eq!(
            host,
            HostTime {
                steal: 30,
                total: 1000
            },
            "guest time is not counted twice"
        );
        let later = HostTime {
            steal: 130,
            total: 2000,
        };
        assert!((later.since(&host).steal_share() - 0.1).abs() < 1e-9);
        assert!(
            later.since(&host).disturbed(),
            "10% is above the 5% flagged"
        );
        assert_eq!(HostTime::default().steal_share(), 0.0);
        assert!(!HostTime::default().disturbed());
        assert_eq!(parse_proc_stat("cpu0 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 3\n"), None, "no steal field");
    }

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
