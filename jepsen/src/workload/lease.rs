//! Lease workload: grant a lease, bind two keys to it in one transaction (or grant it with both
//! keys in one call, [`GRANT_WITH_KEYS_PERCENT`] of the time), then either keep it
//! alive for a while and revoke it, leave it to expire (polling until its keys are gone, then
//! probing that it stays gone), or renew it late in its TTL.
//!
//! Leases seen to end are offered to the other threads, which now and then ask for such an id
//! again (`GrantId`): Zaris never reuses an id, so it must refuse (`ID_IN_USE`). Then the thread
//! that held the ended lease renews it once more, like a forgotten keepalive: it must find
//! nothing, whoever asked for the id. Renewals go through the cluster's keepalive client
//! ([`Ctx::keepalive`]), which stays with whichever node answers them.

use std::time::Duration;

use rand::Rng;
use zaris_client::proto::{PutRequest, TxnOp, TxnRequest, txn_op};
use zaris_client::{LeaseId, RangeOptions};

use super::Ctx;
use crate::history::Call;
use crate::recorder::Process;

/// Percent of rounds that begin by asking for the id of another thread's ended lease.
const REGRANT_PERCENT: u32 = 25;
/// Percent of fresh grants that carry the lease's two keys (a Grant with keys) instead of
/// binding them afterwards in a transaction.
const GRANT_WITH_KEYS_PERCENT: u32 = 30;
/// At most this many ended leases are on offer.
const ENDED_KEPT: usize = 32;

pub async fn run(ctx: &Ctx, seed: u64, slot: u64) {
    let mut rng = ctx.rng(seed, slot);
    let mut process = Process::new(slot, ctx.slots);
    let ttl = ctx.lease_ttl;
    // Grants with keys made so far by this thread (names their keys).
    let mut made = 0u64;
    while !ctx.stop.is_cancelled() {
        // The old owner's forgotten keepalive, after someone asked for the id of its lease.
        for id in asked_again(ctx, slot) {
            renew(ctx, &mut process, id).await;
        }
        let ask_again = rng.random_range(0..100) < REGRANT_PERCENT;
        let mut granted = None;
        if let Some((owner, id)) = ask_again.then(|| take_ended(ctx, slot)).flatten() {
            let outcome = grant_id(ctx, &mut process, id).await;
            tell_owner(ctx, owner, id);
            match outcome {
                Some(true) => granted = Some((id, true)),
                Some(false) => {}
                None => {
                    if !ctx.pause(Duration::from_millis(100)).await {
                        return;
                    }
                    continue;
                }
            }
        }
        let with_keys = granted.is_none() && rng.random_range(0..100) < GRANT_WITH_KEYS_PERCENT;
        let (lease, reused, bound) = match granted {
            Some((id, reused)) => (id, reused, None),
            None if with_keys => {
                // Named before the id is known: unique per grant of this run.
                made += 1;
                let prefix = format!("lease/k{slot}-{made}/");
                let keys = vec![format!("{prefix}a"), format!("{prefix}b")];
                match grant_with_keys(ctx, &mut process, &keys).await {
                    Some(id) => (id, false, Some((prefix, keys))),
                    None => {
                        if !ctx.pause(Duration::from_millis(100)).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            None => match grant(ctx, &mut process).await {
                Some(id) => (id, false, None),
                None => {
                    if !ctx.pause(Duration::from_millis(100)).await {
                        return;
                    }
                    continue;
                }
            },
        };
        let (prefix, keys) = match bound {
            Some(bound) => bound,
            None => {
                // A re-granted id's keys differ from its first incarnation's.
                let prefix = if reused {
                    format!("lease/{lease}r/")
                } else {
                    format!("lease/{lease}/")
                };
                let keys = vec![format!("{prefix}a"), format!("{prefix}b")];
                if !put_leased(ctx, &mut process, lease, &keys).await {
                    continue;
                }
                (prefix, keys)
            }
        };
        let mut ended = false;
        match rng.random_range(0..100) {
            0..50 => {
                for _ in 0..rng.random_range(2..6) {
                    if !ctx.pause(ttl / 3).await {
                        return;
                    }
                    renew(ctx, &mut process, lease).await;
                    get_leased(ctx, &mut process, lease, &keys, &prefix, &mut rng).await;
                    time_to_live(ctx, &mut process, lease).await;
                }
                let p = process.id();
                ctx.recorder.invoke(p, 0, Call::Revoke { lease });
                match ctx.client.revoke(LeaseId::new(lease)).await {
                    Ok(_) => {
                        ctx.recorder.ok(p, 0, Call::Revoke { lease });
                        ended = true;
                    }
                    Err(err) => {
                        if ctx.recorder.failed(p, 0, Call::Revoke { lease }, &err) {
                            process.crashed();
                        }
                    }
                }
            }
            50..85 => {
                // Left to expire: watch the keys go, then check the lease stays gone.
                let give_up = ttl * 6;
                let started = tokio::time::Instant::now();
                while started.elapsed() < give_up {
                    if !ctx.pause(Duration::from_millis(100)).await {
                        return;
                    }
                    let present =
                        get_leased(ctx, &mut process, lease, &keys, &prefix, &mut rng).await;
                    if present == Some(0) {
                        ended = true;
                        break;
                    }
                }
                time_to_live(ctx, &mut process, lease).await;
                renew(ctx, &mut process, lease).await;
                get_leased(ctx, &mut process, lease, &keys, &prefix, &mut rng).await;
            }
            _ => {
                // Renewed late in its TTL (never after it): the renewal must still find it.
                if !ctx.pause(ttl.mul_f64(0.8)).await {
                    return;
                }
                renew(ctx, &mut process, lease).await;
                get_leased(ctx, &mut process, lease, &keys, &prefix, &mut rng).await;
            }
        }
        // Only first incarnations are offered: a re-granted id (a Zaris bug) stays with its
        // new owner.
        if ended && !reused {
            offer_ended(ctx, slot, lease);
        }
    }
}

/// A lease granted with a server-chosen id, or `None` (the op failed; recorded).
async fn grant(ctx: &Ctx, process: &mut Process) -> Option<u64> {
    let ttl = ctx.lease_ttl;
    let ttl_ms = ttl.as_millis() as u64;
    let p = process.id();
    let call = Call::Grant {
        lease: None,
        ttl_ms,
        keys: Vec::new(),
    };
    ctx.recorder.invoke(p, 0, call.clone());
    match ctx.client.grant(ttl).await {
        Ok(granted) => {
            ctx.recorder.ok(
                p,
                0,
                Call::Grant {
                    lease: Some(granted.id.get()),
                    ttl_ms,
                    keys: Vec::new(),
                },
            );
            Some(granted.id.get())
        }
        Err(err) => {
            if ctx.recorder.failed(p, 0, call, &err) {
                process.crashed();
            }
            None
        }
    }
}

/// A lease granted (id chosen by the server) with `keys` bound to it in the same step, or `None`
/// (the op failed; recorded).
async fn grant_with_keys(ctx: &Ctx, process: &mut Process, keys: &[String]) -> Option<u64> {
    let ttl = ctx.lease_ttl;
    let ttl_ms = ttl.as_millis() as u64;
    let p = process.id();
    let call = |lease| Call::Grant {
        lease,
        ttl_ms,
        keys: keys.to_vec(),
    };
    ctx.recorder.invoke(p, 0, call(None));
    let pairs = keys.iter().map(|key| (key.clone(), b"x".to_vec()));
    match ctx.client.grant_with_keys(ttl, pairs).await {
        Ok(granted) => {
            ctx.recorder.ok(p, 0, call(Some(granted.id.get())));
            Some(granted.id.get())
        }
        Err(err) => {
            if ctx.recorder.failed(p, 0, call(None), &err) {
                process.crashed();
            }
            None
        }
    }
}

/// Asks for a lease with id `id`: `Some(true)` granted, `Some(false)` refused (`ID_IN_USE`,
/// recorded as a `fail`: it certainly did not happen), `None` failed otherwise.
async fn grant_id(ctx: &Ctx, process: &mut Process, id: u64) -> Option<bool> {
    let ttl = ctx.lease_ttl;
    let p = process.id();
    let call = Call::GrantId {
        lease: id,
        ttl_ms: ttl.as_millis() as u64,
    };
    ctx.recorder.invoke(p, 0, call.clone());
    match ctx.client.grant_with_id(LeaseId::new(id), ttl).await {
        Ok(Some(granted)) if granted.id == LeaseId::new(id) => {
            ctx.recorder.ok(p, 0, call);
            Some(true)
        }
        Ok(Some(granted)) => {
            // Not what was asked: say so, and leave that lease alone (it expires).
            ctx.recorder
                .info(p, 0, call, format!("granted id {} instead", granted.id));
            process.crashed();
            None
        }
        Ok(None) => {
            ctx.recorder.fail(p, 0, call, "ID_IN_USE");
            Some(false)
        }
        Err(err) => {
            if ctx.recorder.failed(p, 0, call, &err) {
                process.crashed();
            }
            None
        }
    }
}

/// Offers an ended lease of thread `thread` to the others.
fn offer_ended(ctx: &Ctx, thread: u64, id: u64) {
    let mut ended = ctx.ended.lock().unwrap_or_else(|p| p.into_inner());
    ended.push((thread, id));
    if ended.len() > ENDED_KEPT {
        ended.remove(0);
    }
}

/// The newest ended lease of another thread than `thread`, `(owner, id)`, taken off the offer.
fn take_ended(ctx: &Ctx, thread: u64) -> Option<(u64, u64)> {
    let mut ended = ctx.ended.lock().unwrap_or_else(|p| p.into_inner());
    let at = ended.iter().rposition(|(owner, _)| *owner != thread)?;
    Some(ended.remove(at))
}

/// Tells thread `owner` that someone asked for the id of its ended lease `id`.
fn tell_owner(ctx: &Ctx, owner: u64, id: u64) {
    let mut asked = ctx.asked.lock().unwrap_or_else(|p| p.into_inner());
    asked.push((owner, id));
}

/// The ids of `thread`'s ended leases that someone asked for since it last looked.
fn asked_again(ctx: &Ctx, thread: u64) -> Vec<u64> {
    let mut asked = ctx.asked.lock().unwrap_or_else(|p| p.into_inner());
    let mine = asked
        .iter()
        .filter(|(owner, _)| *owner == thread)
        .map(|(_, id)| *id)
        .collect();
    asked.retain(|(owner, _)| *owner != thread);
    mine
}

async fn put_leased(ctx: &Ctx, process: &mut Process, lease: u64, keys: &[String]) -> bool {
    let p = process.id();
    let call = Call::PutLeased {
        lease,
        keys: keys.to_vec(),
    };
    ctx.recorder.invoke(p, 0, call.clone());
    let txn = TxnRequest {
        success: keys
            .iter()
            .map(|key| TxnOp {
                op: Some(txn_op::Op::Put(PutRequest {
                    key: key.clone().into_bytes(),
                    value: b"x".to_vec(),
                    lease,
                    ..PutRequest::default()
                })),
            })
            .collect(),
        ..TxnRequest::default()
    };
    match ctx.client.txn(txn).await {
        Ok(outcome) if outcome.succeeded => {
            ctx.recorder.ok(p, 0, call);
            true
        }
        Ok(_) => {
            ctx.recorder.fail(p, 0, call, "txn compare failed");
            false
        }
        Err(err) => {
            if ctx.recorder.failed(p, 0, call, &err) {
                process.crashed();
            }
            false
        }
    }
}

async fn renew(ctx: &Ctx, process: &mut Process, lease: u64) {
    let p = process.id();
    ctx.recorder
        .invoke(p, 0, Call::Renew { lease, found: None });
    match ctx.keepalive.keep_alive_once([LeaseId::new(lease)]).await {
        Ok(ack) => {
            let found = ack.renewed.iter().any(|r| r.id == LeaseId::new(lease));
            ctx.recorder.ok(
                p,
                0,
                Call::Renew {
                    lease,
                    found: Some(found),
                },
            );
        }
        Err(err) => {
            if ctx
                .recorder
                .failed(p, 0, Call::Renew { lease, found: None }, &err)
            {
                process.crashed();
            }
        }
    }
}

async fn time_to_live(ctx: &Ctx, process: &mut Process, lease: u64) {
    let p = process.id();
    ctx.recorder
        .invoke(p, 0, Call::TimeToLive { lease, found: None });
    match ctx.client.time_to_live(LeaseId::new(lease), false).await {
        Ok(ttl) => ctx.recorder.ok(
            p,
            0,
            Call::TimeToLive {
                lease,
                found: Some(ttl.is_some()),
            },
        ),
        // A query changes nothing: a failed one is a `fail` whatever the error.
        Err(err) => ctx.recorder.fail(
            p,
            0,
            Call::TimeToLive { lease, found: None },
            err.to_string(),
        ),
    }
}

/// Reads the lease's keys in one linearizable read from a random node; the number present.
async fn get_leased(
    ctx: &Ctx,
    process: &mut Process,
    lease: u64,
    keys: &[String],
    prefix: &str,
    rng: &mut rand::rngs::StdRng,
) -> Option<usize> {
    let p = process.id();
    let (node, client) = ctx.random_node(rng);
    let call = Call::GetLeased {
        lease,
        keys: keys.to_vec(),
        present: None,
    };
    ctx.recorder.invoke(p, node, call.clone());
    let options = RangeOptions {
        prefix: true,
        ..RangeOptions::default()
    };
    match client.range(prefix, options).await {
        Ok(response) => {
            let present: Vec<String> = response
                .kvs
                .iter()
                .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
                .collect();
            let count = present.len();
            ctx.recorder.ok(
                p,
                node,
                Call::GetLeased {
                    lease,
                    keys: keys.to_vec(),
                    present: Some(present),
                },
            );
            Some(count)
        }
        Err(err) => {
            ctx.recorder.fail(p, node, call, err.to_string());
            None
        }
    }
}
