//! End-to-end tests of the `zaris` binary: real processes on 127.0.0.1 with OS-chosen ports,
//! killed with SIGKILL where a test needs a crash. Every process is killed when its handle drops.

mod backup;
mod cli;
mod crash;
mod demo;
mod dump;
mod fatal;
mod handover;
mod names;
mod procs;
mod ttl_floor;
