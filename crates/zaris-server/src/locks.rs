//! Lock calls waiting in a queue: woken when an applied entry hands them the lock, or when their
//! lease ends. Bounded by the per-lock waiter limit, which the state machine enforces.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::oneshot;
use zaris_core::{LeaseId, Token};

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    Acquired(Token),
    LeaseEnded,
}

#[derive(Debug, Default)]
pub struct LockWaiters {
    waiting: Mutex<BTreeMap<(String, LeaseId), oneshot::Sender<Wake>>>,
}

impl LockWaiters {
    /// Registers interest before proposing, so a hand-over applied right after the proposal's
    /// own entry is not missed. Replaces an older registration for the same lock and lease.
    pub fn register(&self, name: &str, lease: LeaseId) -> oneshot::Receiver<Wake> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert((name.to_string(), lease), tx);
        rx
    }

    pub fn forget(&self, name: &str, lease: LeaseId) {
        self.lock().remove(&(name.to_string(), lease));
    }

    pub fn acquired(&self, name: &str, lease: LeaseId, token: Token) {
        if let Some(tx) = self.lock().remove(&(name.to_string(), lease)) {
            let _ = tx.send(Wake::Acquired(token));
        }
    }

    pub fn lease_ended(&self, lease: LeaseId) {
        let mut waiting = self.lock();
        let ended: Vec<(String, LeaseId)> = waiting
            .keys()
            .filter(|(_, l)| *l == lease)
            .cloned()
            .collect();
        for key in ended {
            if let Some(tx) = waiting.remove(&key) {
                let _ = tx.send(Wake::LeaseEnded);
            }
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<(String, LeaseId), oneshot::Sender<Wake>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}
