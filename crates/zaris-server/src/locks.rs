//! Lock calls waiting in a queue: woken when an applied entry hands them the lock, or when their
//! lease ends. Bounded by the per-lock waiter limit (the state machine enforces it) times the
//! concurrent calls per (lock, lease): a call's wait is forgotten when its [`Registration`] is
//! dropped, however the call ends (answered, failed, or cancelled by its client halfway).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::oneshot;
use zaris_core::{FencingToken, LeaseId};

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    Acquired(FencingToken),
    LeaseEnded,
}

/// Lease first, so that everything one lease waits for is one contiguous range: a lease's end
/// (inside apply) wakes its waits in O(log n + its own waits), never a scan of every waiter.
type Key = (LeaseId, String);
/// The calls waiting per (lease, lock), each with its id.
type Waiting = BTreeMap<Key, Vec<(u64, oneshot::Sender<Wake>)>>;

#[derive(Debug, Default)]
pub struct LockWaiters {
    next_id: AtomicU64,
    /// Several calls may wait for the same (lock, lease), e.g. a client's retry beside the
    /// original: each has its own id, and each is woken.
    waiting: Mutex<Waiting>,
}

/// A registered wait, forgotten when dropped. A guard, not a call to make on every way out: a
/// Lock call whose client went away is dropped at its next await, and a wait it left behind
/// would stay until its lease ended, or for good for a lease that never existed.
#[derive(Debug)]
pub struct Registration<'a> {
    waiters: &'a LockWaiters,
    key: Key,
    id: u64,
    pub woken: oneshot::Receiver<Wake>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.waiters.forget(&self.key, self.id);
    }
}

impl LockWaiters {
    /// Registers interest before proposing, so a hand-over applied right after the proposal's
    /// own entry is not missed.
    pub fn register(&self, name: &str, lease: LeaseId) -> Registration<'_> {
        let (tx, woken) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let key = (lease, name.to_string());
        self.lock().entry(key.clone()).or_default().push((id, tx));
        Registration {
            waiters: self,
            key,
            id,
            woken,
        }
    }

    /// Waits registered and not yet woken or forgotten.
    pub fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn forget(&self, key: &Key, id: u64) {
        let mut waiting = self.lock();
        if let Some(list) = waiting.get_mut(key) {
            list.retain(|(waiter, _)| *waiter != id);
            if list.is_empty() {
                waiting.remove(key);
            }
        }
    }

    pub fn acquired(&self, name: &str, lease: LeaseId, token: FencingToken) {
        let woken = self.lock().remove(&(lease, name.to_string()));
        for (_, tx) in woken.into_iter().flatten() {
            let _ = tx.send(Wake::Acquired(token));
        }
    }

    pub fn lease_ended(&self, lease: LeaseId) {
        let mut waiting = self.lock();
        let ended: Vec<Key> = waiting
            .range((lease, String::new())..)
            .take_while(|((l, _), _)| *l == lease)
            .map(|(key, _)| key.clone())
            .collect();
        for key in ended {
            for (_, tx) in waiting.remove(&key).into_iter().flatten() {
                let _ = tx.send(Wake::LeaseEnded);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_waits_for_the_same_lock_and_lease_are_all_woken() {
        let waiters = LockWaiters::default();
        let first = waiters.register("m", LeaseId::new(7));
        let mut second = waiters.register("m", LeaseId::new(7));
        let mut other = waiters.register("m", LeaseId::new(8));
        // One call gives up; the other must still be woken.
        drop(first);
        assert_eq!(waiters.len(), 2);
        waiters.acquired("m", LeaseId::new(7), FencingToken::new(42));
        assert_eq!(
            second.woken.try_recv(),
            Ok(Wake::Acquired(FencingToken::new(42)))
        );
        assert!(other.woken.try_recv().is_err());
        waiters.lease_ended(LeaseId::new(8));
        assert_eq!(other.woken.try_recv(), Ok(Wake::LeaseEnded));
    }

    #[test]
    fn a_lease_end_wakes_exactly_that_leases_waits() {
        let waiters = LockWaiters::default();
        let mut mine: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|name| waiters.register(name, LeaseId::new(5)))
            .collect();
        let mut before = waiters.register("a", LeaseId::new(4));
        let mut after = waiters.register("a", LeaseId::new(6));
        waiters.lease_ended(LeaseId::new(5));
        for registration in &mut mine {
            assert_eq!(registration.woken.try_recv(), Ok(Wake::LeaseEnded));
        }
        assert!(before.woken.try_recv().is_err());
        assert!(after.woken.try_recv().is_err());
        assert_eq!(waiters.lock().len(), 2);
    }

    #[test]
    fn a_wait_is_forgotten_however_its_call_ends() {
        let waiters = LockWaiters::default();
        // Cancelled halfway: the call's future, and its registration, are dropped unwoken.
        let cancelled = waiters.register("m", LeaseId::new(7));
        let never_existed = waiters.register("m", LeaseId::new(999));
        assert_eq!(waiters.len(), 2);
        drop((cancelled, never_existed));
        assert_eq!(waiters.len(), 0);
        assert!(waiters.lock().is_empty(), "no empty lists are left behind");

        // Woken, then dropped: nothing is left either, and the wake-up was delivered.
        let mut woken = waiters.register("m", LeaseId::new(7));
        waiters.acquired("m", LeaseId::new(7), FencingToken::new(3));
        assert_eq!(
            woken.woken.try_recv(),
            Ok(Wake::Acquired(FencingToken::new(3)))
        );
        drop(woken);
        assert!(waiters.lock().is_empty());
    }
}
