//! Every bound the state machine enforces, in one place.
//!
//! Limits are part of the replicated state (fixed when the cluster is bootstrapped) so that every
//! node applies the same log with the same bounds: a node configured differently must not be able to
//! accept what the others reject.

use serde::{Deserialize, Serialize};

use crate::types::DurationMs;

/// Largest key, in bytes.
pub const DEFAULT_MAX_KEY_BYTES: u32 = 4 * 1024;
/// Largest value, in bytes.
pub const DEFAULT_MAX_VALUE_BYTES: u32 = 1024 * 1024;
/// Largest lock name, in bytes.
pub const DEFAULT_MAX_LOCK_NAME_BYTES: u32 = 256;
/// Shortest TTL. Must exceed the election timeout so a leader change cannot expire a lease that was
/// renewed on time (the server checks this against its configuration at start).
pub const DEFAULT_MIN_TTL_MS: DurationMs = DurationMs::new(2_000);
/// Longest TTL: one week.
pub const DEFAULT_MAX_TTL_MS: DurationMs = DurationMs::new(7 * 24 * 3_600 * 1_000);
/// Compares plus operations (both branches) in one transaction.
pub const DEFAULT_MAX_TXN_OPS: u32 = 128;
/// Lease ids in one renew or revoke batch.
pub const DEFAULT_MAX_BATCH_IDS: u32 = 10_000;
/// Leases queued behind a lock's holder.
pub const DEFAULT_MAX_WAITERS_PER_LOCK: u32 = 1_000;
/// Keys bound to one lease.
pub const DEFAULT_MAX_KEYS_PER_LEASE: u32 = 10_000;
/// Live leases in the cluster.
pub const DEFAULT_MAX_LEASES: u64 = 5_000_000;
/// Remembered request ids for de-duplicating retried writes.
pub const DEFAULT_DEDUP_CAPACITY: u32 = 65_536;
/// Bytes the remembered responses may take (on every replica and in every snapshot).
pub const DEFAULT_DEDUP_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The smallest `dedup_max_bytes` accepted: a response of up to 1/256 of it is remembered whole.
pub const MIN_DEDUP_MAX_BYTES: u64 = 64 * 1024;
/// The largest `dedup_max_bytes` accepted.
pub const MAX_DEDUP_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// The largest `dedup_capacity` accepted.
pub const MAX_DEDUP_CAPACITY: u32 = 16 * 1024 * 1024;
/// The state quota: keys, values, leases, lock places, users and roles, as `state/size.rs`
/// charges them (etcd's default backend quota is also 2 GiB).
pub const DEFAULT_MAX_STATE_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// The smallest quota accepted.
pub const MIN_STATE_BYTES: u64 = 1024 * 1024;
/// The largest quota accepted: with the largest de-duplication table, a snapshot then stays
/// below the codec's absolute ceiling (`codec::MAX_SNAPSHOT_BYTES`).
pub const MAX_STATE_BYTES: u64 = 8 * 1024 * 1024 * 1024;
/// What a snapshot holds beyond what the quota and the de-duplication table charge: the limits,
/// counters, the switch and the lengths of the tables.
const SNAPSHOT_FIXED_BYTES: u64 = 64 * 1024;
/// Charged per remembered request beyond `dedup_max_bytes`' own charge: the estimate that
/// charge is built on may undercount an encoded response by a few bytes per item, so twice the
/// bytes are allowed, plus the entry's ids and revisions.
const DEDUP_ENTRY_ENCODED_BYTES: u64 = 64;

/// The bounds, validated before a request is proposed and re-checked when it is applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_key_bytes: u32,
    pub max_value_bytes: u32,
    pub max_lock_name_bytes: u32,
    pub min_ttl_ms: DurationMs,
    pub max_ttl_ms: DurationMs,
    pub max_txn_ops: u32,
    pub max_batch_ids: u32,
    pub max_waiters_per_lock: u32,
    pub max_keys_per_lease: u32,
    pub max_leases: u64,
    pub dedup_capacity: u32,
    pub dedup_max_bytes: u64,
    /// The state quota, in bytes (`state/size.rs` says what is charged).
    pub max_state_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: DEFAULT_MAX_KEY_BYTES,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_lock_name_bytes: DEFAULT_MAX_LOCK_NAME_BYTES,
            min_ttl_ms: DEFAULT_MIN_TTL_MS,
            max_ttl_ms: DEFAULT_MAX_TTL_MS,
            max_txn_ops: DEFAULT_MAX_TXN_OPS,
            max_batch_ids: DEFAULT_MAX_BATCH_IDS,
            max_waiters_per_lock: DEFAULT_MAX_WAITERS_PER_LOCK,
            max_keys_per_lease: DEFAULT_MAX_KEYS_PER_LEASE,
            max_leases: DEFAULT_MAX_LEASES,
            dedup_capacity: DEFAULT_DEDUP_CAPACITY,
            dedup_max_bytes: DEFAULT_DEDUP_MAX_BYTES,
            max_state_bytes: DEFAULT_MAX_STATE_BYTES,
        }
    }
}

/// Names a limit in rejections, so the message can say which one was hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LimitKind {
    KeyBytes,
    ValueBytes,
    LockNameBytes,
    TxnOps,
    BatchIds,
    WaitersPerLock,
    KeysPerLease,
    Leases,
    StateBytes,
}

impl LimitKind {
    /// The name used in messages and in the API reference.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::KeyBytes => "max_key_bytes",
            LimitKind::ValueBytes => "max_value_bytes",
            LimitKind::LockNameBytes => "max_lock_name_bytes",
            LimitKind::TxnOps => "max_txn_ops",
            LimitKind::BatchIds => "max_batch_ids",
            LimitKind::WaitersPerLock => "max_waiters_per_lock",
            LimitKind::KeysPerLease => "max_keys_per_lease",
            LimitKind::Leases => "max_leases",
            LimitKind::StateBytes => "max_state_bytes",
        }
    }
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Limits {
    /// The bound a [`LimitKind`] names.
    pub fn get(&self, kind: LimitKind) -> u64 {
        match kind {
            LimitKind::KeyBytes => self.max_key_bytes.into(),
            LimitKind::ValueBytes => self.max_value_bytes.into(),
            LimitKind::LockNameBytes => self.max_lock_name_bytes.into(),
            LimitKind::TxnOps => self.max_txn_ops.into(),
            LimitKind::BatchIds => self.max_batch_ids.into(),
            LimitKind::WaitersPerLock => self.max_waiters_per_lock.into(),
            LimitKind::KeysPerLease => self.max_keys_per_lease.into(),
            LimitKind::Leases => self.max_leases,
            LimitKind::StateBytes => self.max_state_bytes,
        }
    }

    /// Checks that the limits themselves make sense (used when a cluster is bootstrapped).
    pub fn check(&self) -> Result<(), String> {
        if self.min_ttl_ms == DurationMs::ZERO || self.min_ttl_ms > self.max_ttl_ms {
            return Err(format!(
                "TTL bounds are inconsistent: min_ttl_ms={} max_ttl_ms={}",
                self.min_ttl_ms.get(),
                self.max_ttl_ms.get()
            ));
        }
        let nonzero = [
            (LimitKind::KeyBytes, self.max_key_bytes as u64),
            (LimitKind::ValueBytes, self.max_value_bytes as u64),
            (LimitKind::LockNameBytes, self.max_lock_name_bytes as u64),
            (LimitKind::TxnOps, self.max_txn_ops as u64),
            (LimitKind::BatchIds, self.max_batch_ids as u64),
            (LimitKind::KeysPerLease, self.max_keys_per_lease as u64),
            (LimitKind::Leases, self.max_leases),
        ];
        for (kind, value) in nonzero {
            if value == 0 {
                return Err(format!("{kind} must be at least 1"));
            }
        }
        let ranges = [
            (
                "dedup_max_bytes",
                self.dedup_max_bytes,
                MIN_DEDUP_MAX_BYTES,
                MAX_DEDUP_MAX_BYTES,
            ),
            (
                "dedup_capacity",
                self.dedup_capacity.into(),
                0,
                MAX_DEDUP_CAPACITY.into(),
            ),
            (
                "max_state_bytes",
                self.max_state_bytes,
                MIN_STATE_BYTES,
                MAX_STATE_BYTES,
            ),
        ];
        for (name, value, min, max) in ranges {
            if !(min..=max).contains(&value) {
                return Err(format!(
                    "{name} must be between {min} and {max}, not {value}"
                ));
            }
        }
        Ok(())
    }

    /// The largest snapshot a state within these limits can encode to: the quota, the
    /// de-duplication table's bound and a fixed part (`state/size.rs` charges every record at
    /// least its encoded size; a property test checks it). A node refuses a larger snapshot
    /// from a peer.
    pub fn max_snapshot_bytes(&self) -> u64 {
        self.max_state_bytes
            .saturating_add(self.dedup_max_bytes.saturating_mul(2))
            .saturating_add(u64::from(self.dedup_capacity) * DEDUP_ENTRY_ENCODED_BYTES)
            .saturating_add(SNAPSHOT_FIXED_BYTES)
    }
}

// Limits that pass `check` always give a snapshot bound below the codec's ceiling.
const _: () = assert!(
    MAX_STATE_BYTES
        + 2 * MAX_DEDUP_MAX_BYTES
        + MAX_DEDUP_CAPACITY as u64 * DEDUP_ENTRY_ENCODED_BYTES
        + SNAPSHOT_FIXED_BYTES
        <= crate::codec::MAX_SNAPSHOT_BYTES as u64
);
