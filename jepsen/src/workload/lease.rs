//! Lease workload: grant a lease, bind two keys to it in one transaction, then either keep it
//! alive for a while and revoke it, leave it to expire (polling until its keys are gone, then
//! probing that it stays gone), or renew it late in its TTL.

use std::time::Duration;

use rand::Rng;
use zaris_client::RangeOptions;
use zaris_client::proto::{PutRequest, TxnOp, TxnRequest, TxnResult, txn_op};

use super::Ctx;
use crate::history::Call;
use crate::recorder::Process;

pub async fn run(ctx: &Ctx, seed: u64, slot: u64) {
    let mut rng = ctx.rng(seed, slot);
    let mut process = Process::new(slot, ctx.slots);
    let ttl = ctx.lease_ttl;
    let ttl_ms = ttl.as_millis() as u64;
    while !ctx.stop.is_cancelled() {
        let p = process.id();
        let grant = Call::Grant {
            lease: None,
            ttl_ms,
        };
        ctx.recorder.invoke(p, 0, grant.clone());
        let lease = match ctx.client.grant(ttl).await {
            Ok(granted) => {
                ctx.recorder.ok(
                    p,
                    0,
                    Call::Grant {
                        lease: Some(granted.id),
                        ttl_ms,
                    },
                );
                granted.id
            }
            Err(err) => {
                if ctx.recorder.failed(p, 0, grant, &err) {
                    process.crashed();
                }
                if !ctx.pause(Duration::from_millis(100)).await {
                    return;
                }
                continue;
            }
        };
        let keys = vec![format!("lease/{lease}/a"), format!("lease/{lease}/b")];
        if !put_leased(ctx, &mut process, lease, &keys).await {
            continue;
        }
        match rng.random_range(0..100) {
            0..50 => {
                for _ in 0..rng.random_range(2..6) {
                    if !ctx.pause(ttl / 3).await {
                        return;
                    }
                    renew(ctx, &mut process, lease).await;
                    get_leased(ctx, &mut process, lease, &keys, &mut rng).await;
                    time_to_live(ctx, &mut process, lease).await;
                }
                let p = process.id();
                ctx.recorder.invoke(p, 0, Call::Revoke { lease });
                match ctx.client.revoke(lease).await {
                    Ok(_) => ctx.recorder.ok(p, 0, Call::Revoke { lease }),
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
                    if get_leased(ctx, &mut process, lease, &keys, &mut rng).await == Some(0) {
                        break;
                    }
                }
                time_to_live(ctx, &mut process, lease).await;
                renew(ctx, &mut process, lease).await;
                get_leased(ctx, &mut process, lease, &keys, &mut rng).await;
            }
            _ => {
                // Renewed late in its TTL (never after it): the renewal must still find it.
                if !ctx.pause(ttl.mul_f64(0.8)).await {
                    return;
                }
                renew(ctx, &mut process, lease).await;
                get_leased(ctx, &mut process, lease, &keys, &mut rng).await;
            }
        }
    }
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
        Ok(response) if response.result == TxnResult::CompareSucceeded as i32 => {
            ctx.recorder.ok(p, 0, call);
            true
        }
        Ok(response) => {
            ctx.recorder
                .fail(p, 0, call, format!("txn result {}", response.result));
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
    match ctx.client.keep_alive_once([lease]).await {
        Ok(ack) => {
            let found = ack.renewed.iter().any(|r| r.id == lease);
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
    match ctx.client.time_to_live(lease, false).await {
        Ok(ttl) => ctx.recorder.ok(
            p,
            0,
            Call::TimeToLive {
                lease,
                found: Some(ttl.found),
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
    match client.range(format!("lease/{lease}/"), options).await {
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
