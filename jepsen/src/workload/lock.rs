//! Lock workload: each worker grants a lease, renews it from a second process, acquires a
//! contended lock, and while holding it writes to the harness's fenced resource and does guarded
//! puts in the store. Then it releases the lock, or abandons it (stops renewing) so the next
//! holder gets it only after the lease expires.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;
use zaris_client::{Error, Fence, FencingToken, LeaseId, LockOutcome, PutOptions, UnlockOutcome};

use super::Ctx;
use crate::history::Call;
use crate::recorder::Process;

pub const LOCK: &str = "lock/0";
pub const RESOURCE: &str = "resource/0";
/// How long one acquisition may wait before the worker gives up and withdraws.
const ACQUIRE_PATIENCE: Duration = Duration::from_secs(8);

pub async fn run(ctx: &Ctx, seed: u64, slot: u64) {
    let mut rng = ctx.rng(seed, slot);
    // Two Jepsen processes per worker: the lock user, and the renewer of its lease.
    let slots = ctx.slots * 2;
    let mut process = Process::new(slot * 2, slots);
    let renewer_process = Process::new(slot * 2 + 1, slots);
    let ttl = ctx.lease_ttl;
    let ttl_ms = ttl.as_millis() as u64;
    while !ctx.stop.is_cancelled() {
        let p = process.id();
        ctx.recorder.invoke(
            p,
            0,
            Call::Grant {
                lease: None,
                ttl_ms,
                keys: Vec::new(),
            },
        );
        let lease = match ctx.client.grant(ttl).await {
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
                granted.id
            }
            Err(err) => {
                if ctx.recorder.failed(
                    p,
                    0,
                    Call::Grant {
                        lease: None,
                        ttl_ms,
                        keys: Vec::new(),
                    },
                    &err,
                ) {
                    process.crashed();
                }
                if !ctx.pause(Duration::from_millis(100)).await {
                    return;
                }
                continue;
            }
        };
        let renewing = CancellationToken::new();
        let renewer = tokio::spawn(renew_loop(
            ctx.recorder.clone(),
            ctx.client.clone(),
            renewer_process,
            lease.get(),
            ttl,
            renewing.clone(),
        ));
        if let Some(token) = acquire(ctx, &mut process, lease.get()).await {
            for round in 0..rng.random_range(2..5u32) {
                if !ctx
                    .pause(Duration::from_millis(rng.random_range(50..250)))
                    .await
                {
                    break;
                }
                let p = process.id();
                let resource = ctx.resources[RESOURCE].clone();
                let call = Call::FencedWrite {
                    resource: RESOURCE.into(),
                    token,
                    accepted: None,
                };
                ctx.recorder.invoke(p, 0, call);
                let accepted = resource.write(ctx.recorder.now_ns(), token);
                ctx.recorder.ok(
                    p,
                    0,
                    Call::FencedWrite {
                        resource: RESOURCE.into(),
                        token,
                        accepted: Some(accepted),
                    },
                );
                guarded_put(ctx, &mut process, token, round).await;
            }
            if rng.random_range(0..100) < 75 {
                let p = process.id();
                let call = Call::Release {
                    lock: LOCK.into(),
                    lease: lease.get(),
                    token,
                };
                ctx.recorder.invoke(p, 0, call.clone());
                match ctx
                    .client
                    .unlock(LOCK, lease, FencingToken::new(token))
                    .await
                {
                    Ok(_) => ctx.recorder.ok(p, 0, call),
                    Err(err) => {
                        if ctx.recorder.failed(p, 0, call, &err) {
                            process.crashed();
                        }
                    }
                }
            }
            // Else: abandoned, like a holder that died. Its lease expires after the TTL.
        }
        renewing.cancel();
        let _ = renewer.await;
    }
}

async fn acquire(ctx: &Ctx, process: &mut Process, lease: u64) -> Option<u64> {
    let p = process.id();
    let call = Call::Acquire {
        lock: LOCK.into(),
        lease,
        token: None,
    };
    ctx.recorder.invoke(p, 0, call.clone());
    let started = tokio::time::Instant::now();
    let mut indeterminate = false;
    while started.elapsed() < ACQUIRE_PATIENCE && !ctx.stop.is_cancelled() {
        match ctx
            .client
            .lock(LOCK, LeaseId::new(lease), true, Duration::from_secs(1))
            .await
        {
            Ok(LockOutcome::Held { token }) => {
                ctx.recorder.ok(
                    p,
                    0,
                    Call::Acquire {
                        lock: LOCK.into(),
                        lease,
                        token: Some(token.get()),
                    },
                );
                return Some(token.get());
            }
            Err(Error::LeaseNotFound { .. }) => {
                complete_unacquired(ctx, process, call, indeterminate, "lease not found");
                return None;
            }
            Ok(_) => {}
            // A Lock call may have queued the lease even if it failed: the acquisition stays
            // open, and its outcome is unknown unless it later succeeds.
            Err(err) => indeterminate |= !err.is_definite(),
        }
    }
    // Withdraw; if the lock arrived meanwhile, the withdrawal answers HELD and we keep it.
    match ctx
        .client
        .unlock(LOCK, LeaseId::new(lease), FencingToken::NONE)
        .await
    {
        Ok(UnlockOutcome::HeldNow { token }) => {
            ctx.recorder.ok(
                p,
                0,
                Call::Acquire {
                    lock: LOCK.into(),
                    lease,
                    token: Some(token.get()),
                },
            );
            Some(token.get())
        }
        Ok(_) => {
            complete_unacquired(ctx, process, call, indeterminate, "gave up waiting");
            None
        }
        Err(_) => {
            complete_unacquired(ctx, process, call, true, "gave up; withdrawal failed");
            None
        }
    }
}

fn complete_unacquired(
    ctx: &Ctx,
    process: &mut Process,
    call: Call,
    indeterminate: bool,
    why: &str,
) {
    let p = process.id();
    if indeterminate {
        ctx.recorder.info(p, 0, call, why);
        process.crashed();
    } else {
        ctx.recorder.fail(p, 0, call, why);
    }
}

async fn guarded_put(ctx: &Ctx, process: &mut Process, token: u64, round: u32) {
    let p = process.id();
    let key = format!("lockdata/{token}/{round}");
    let call = Call::GuardedPut {
        lock: LOCK.into(),
        token,
        key: key.clone(),
    };
    ctx.recorder.invoke(p, 0, call.clone());
    let options = PutOptions {
        guard: Some(Fence {
            lock: LOCK.into(),
            token: FencingToken::new(token),
        }),
        ..PutOptions::default()
    };
    match ctx.client.put(key, "x", options).await {
        Ok(_) => ctx.recorder.ok(p, 0, call),
        // A refused write (guard failed) is definite: recorded as a fail.
        Err(err) => {
            if ctx.recorder.failed(p, 0, call, &err) {
                process.crashed();
            }
        }
    }
}

async fn renew_loop(
    recorder: Arc<crate::recorder::Recorder>,
    client: zaris_client::Client,
    mut process: Process,
    lease: u64,
    ttl: Duration,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ttl / 3) => {}
        }
        let p = process.id();
        recorder.invoke(p, 0, Call::Renew { lease, found: None });
        match client.keep_alive_once([LeaseId::new(lease)]).await {
            Ok(ack) => {
                let found = ack.renewed.iter().any(|r| r.id == LeaseId::new(lease));
                recorder.ok(
                    p,
                    0,
                    Call::Renew {
                        lease,
                        found: Some(found),
                    },
                );
                if !found {
                    return;
                }
            }
            Err(err) => {
                if recorder.failed(p, 0, Call::Renew { lease, found: None }, &err) {
                    process.crashed();
                }
            }
        }
    }
}
