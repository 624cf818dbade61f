//! The workloads: what the clients do while the nemesis breaks things.

pub mod lease;
pub mod lock;
pub mod register;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use zaris_client::{Client, ClientOptions};

use crate::recorder::Recorder;

/// Which workload a run drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Read / write / compare-and-set on a few keys; reads sent to random nodes.
    Register,
    /// Grant, renew, revoke, put with lease, read; some leases left to expire.
    Lease,
    /// Lease-backed locks; holders write to a fenced resource and do guarded puts.
    Lock,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Register => "register",
            Workload::Lease => "lease",
            Workload::Lock => "lock",
        }
    }
}

/// Client timeouts: short, so operations complete (often as `info`) while faults are active.
pub fn client_options() -> ClientOptions {
    ClientOptions::default()
        .with_connect_timeout(Duration::from_millis(500))
        .with_timeout(Duration::from_millis(2_000))
        .with_backoff(Duration::from_millis(20), Duration::from_millis(200))
}

/// The harness's fenced resource: accepts a write only if its token is at least the highest it
/// has accepted. Its log is checked afterwards.
/// One write to a fenced resource: (time_ns, token, accepted).
pub type FencedWrite = (u64, u64, bool);

#[derive(Debug, Default)]
pub struct FencedResource {
    /// The highest token accepted, and every write seen.
    state: Mutex<(u64, Vec<FencedWrite>)>,
}

impl FencedResource {
    pub fn write(&self, now_ns: u64, token: u64) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let accepted = token >= state.0;
        if accepted {
            state.0 = token;
        }
        state.1.push((now_ns, token, accepted));
        accepted
    }

    pub fn log(&self) -> Vec<FencedWrite> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }
}

/// What every worker gets.
#[derive(Debug)]
pub struct Ctx {
    pub recorder: Arc<Recorder>,
    /// Knows every node (through the client proxies).
    pub client: Client,
    /// A second client of the whole cluster, for the lease workload's renewals only: like the
    /// client library's background keepalive stream, it stays with whichever node answers them.
    pub keepalive: Client,
    /// Leases the lease workload saw end, `(thread, id)`, newest last: other threads ask for
    /// their ids again (`GrantId`), which Zaris must refuse.
    pub ended: Mutex<Vec<(u64, u64)>>,
    /// `(owner thread, id)` of ended leases whose id another thread asked for: the owner renews
    /// each once more, and must find nothing.
    pub asked: Mutex<Vec<(u64, u64)>>,
    /// One client per node, for requests aimed at a particular node.
    pub per_node: BTreeMap<u64, Client>,
    pub stop: CancellationToken,
    pub lease_ttl: Duration,
    pub resources: BTreeMap<String, Arc<FencedResource>>,
    /// Number of worker slots (process ids are `slot + k * slots`).
    pub slots: u64,
}

impl Ctx {
    /// A context for `slots` workers with the harness's lease TTL and one fenced resource
    /// ([`lock::RESOURCE`]), which the run checks afterwards.
    pub fn new(
        recorder: Arc<Recorder>,
        client: Client,
        keepalive: Client,
        per_node: BTreeMap<u64, Client>,
        slots: u64,
    ) -> Arc<Ctx> {
        Arc::new(Ctx {
            recorder,
            client,
            keepalive,
            ended: Mutex::new(Vec::new()),
            asked: Mutex::new(Vec::new()),
            per_node,
            stop: CancellationToken::new(),
            lease_ttl: Duration::from_millis(crate::run::LEASE_TTL_MS),
            resources: BTreeMap::from([(
                lock::RESOURCE.to_owned(),
                Arc::new(FencedResource::default()),
            )]),
            slots,
        })
    }

    pub fn rng(&self, seed: u64, slot: u64) -> StdRng {
        StdRng::seed_from_u64(seed ^ (slot.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
    }

    /// A random node and its client.
    pub fn random_node(&self, rng: &mut StdRng) -> (u64, &Client) {
        use rand::Rng;
        let index = rng.random_range(0..self.per_node.len());
        let (id, client) = self
            .per_node
            .iter()
            .nth(index)
            .unwrap_or_else(|| unreachable!("per_node is never empty"));
        (*id, client)
    }

    /// Sleeps, or returns false if the run is stopping.
    pub async fn pause(&self, duration: Duration) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = tokio::time::sleep(duration) => true,
        }
    }
}
