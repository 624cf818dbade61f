//! zaris-jepsen: a Jepsen-style harness that drives real `zaris serve` processes (a
//! `fault-injection` build) through TCP proxies on every link, injects faults, records a history
//! and checks it. See jepsen/README.md.
//!
//! Code map: `cluster` (processes behind proxies), `proxy` (the links), `nemesis` (faults),
//! `workload` (clients), `recorder` + `history` (what happened), `check` + `logs` (is it right),
//! `edn` (saving histories), `run` (one run), `scenarios` (the CI matrix and the self-test),
//! `containers` (a cluster of containers under Docker's own faults).

pub mod check;
pub mod cluster;
pub mod containers;
pub mod edn;
pub mod history;
pub mod logs;
pub mod nemesis;
pub mod proxy;
pub mod recorder;
pub mod run;
pub mod scenarios;
pub mod secure;
pub mod workload;
