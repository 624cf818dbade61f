//! Handshakes in progress, counted per client address.
//!
//! A listener bounds its TLS handshakes in progress (`tls.rs`), and each may take up to the
//! handshake timeout. Without a bound per address, one host opening idle connections would hold
//! every slot and keep all other clients out until its connections time out. With it, one
//! address holds at most [`MAX_HANDSHAKES_PER_ADDRESS`]; a connection beyond that is closed at
//! once. (Many addresses together can still fill the listener's bound: that needs a firewall.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Most handshakes one client address may have in progress on one listener.
pub const MAX_HANDSHAKES_PER_ADDRESS: usize = 32;

#[derive(Clone, Debug, Default)]
pub struct HandshakeSlots {
    in_progress: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One handshake in progress; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    in_progress: Arc<Mutex<HashMap<IpAddr, usize>>>,
    address: IpAddr,
}

impl HandshakeSlots {
    /// A slot for a handshake from `address`, unless it has [`MAX_HANDSHAKES_PER_ADDRESS`]
    /// in progress already.
    pub fn take(&self, address: IpAddr) -> Option<Slot> {
        let mut in_progress = lock(&self.in_progress);
        let count = in_progress.entry(address).or_default();
        if *count >= MAX_HANDSHAKES_PER_ADDRESS {
            return None;
        }
        *count += 1;
        Some(Slot {
            in_progress: self.in_progress.clone(),
            address,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut in_progress = lock(&self.in_progress);
        if let Some(count) = in_progress.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                in_progress.remove(&self.address);
            }
        }
    }
}

fn lock(map: &Mutex<HashMap<IpAddr, usize>>) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
    map.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_gets_a_bounded_share_and_slots_come_back() {
        let slots = HandshakeSlots::default();
        let (a, b): (IpAddr, IpAddr) = ([127, 0, 0, 2].into(), [127, 0, 0, 1].into());
        let held: Vec<Slot> = (0..MAX_HANDSHAKES_PER_ADDRESS)
            .map(|_| slots.take(a).expect("a slot"))
            .collect();
        assert!(slots.take(a).is_none(), "one address over its share");
        let other = slots.take(b).expect("another address is not held back");
        drop(held);
        assert!(slots.take(a).is_some(), "slots come back when dropped");
        drop(other);
        assert!(lock(&slots.in_progress).is_empty());
    }
}
