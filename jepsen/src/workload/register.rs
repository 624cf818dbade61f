//! Register workload: reads, writes and compare-and-sets on a few keys. Every write's value is
//! unique, so the linearizability checker can tell them apart. Reads go to random nodes.

use std::time::Duration;

use rand::Rng;
use zaris_client::proto::{Compare, PutRequest, TxnOp, TxnRequest, compare, txn_op};

use super::Ctx;
use crate::history::Call;
use crate::recorder::Process;

pub const KEYS: [&str; 3] = ["reg/0", "reg/1", "reg/2"];

pub async fn run(ctx: &Ctx, seed: u64, slot: u64) {
    let mut rng = ctx.rng(seed, slot);
    let mut process = Process::new(slot, ctx.slots);
    let mut written = 0u64;
    // The last value this worker saw per key: the `from` of its next compare-and-set.
    let mut seen: [Option<u64>; KEYS.len()] = [None; KEYS.len()];
    loop {
        let pause = Duration::from_millis(rng.random_range(5..25));
        if !ctx.pause(pause).await {
            return;
        }
        let key_index = rng.random_range(0..KEYS.len());
        let key = KEYS[key_index].to_owned();
        let roll = rng.random_range(0..100);
        let p = process.id();
        if roll < 50 {
            let (node, client) = ctx.random_node(&mut rng);
            ctx.recorder.invoke(
                p,
                node,
                Call::Read {
                    key: key.clone(),
                    value: None,
                },
            );
            match client.get(key.clone()).await {
                Ok(kv) => {
                    let value = kv.and_then(|kv| String::from_utf8(kv.value).ok()?.parse().ok());
                    seen[key_index] = value;
                    ctx.recorder.ok(p, node, Call::Read { key, value });
                }
                // A read changes nothing: a failed read is a `fail` whatever the error.
                Err(err) => {
                    ctx.recorder
                        .fail(p, node, Call::Read { key, value: None }, err.to_string())
                }
            }
        } else if roll < 80 || seen[key_index].is_none() {
            written += 1;
            let value = (slot + 1) * 1_000_000 + written;
            let call = Call::Write {
                key: key.clone(),
                value,
            };
            ctx.recorder.invoke(p, 0, call.clone());
            let put = ctx
                .client
                .put(key, value.to_string(), zaris_client::PutOptions::default())
                .await;
            match put {
                Ok(_) => {
                    seen[key_index] = Some(value);
                    ctx.recorder.ok(p, 0, call);
                }
                Err(err) => {
                    if ctx.recorder.failed(p, 0, call, &err) {
                        process.crashed();
                    }
                }
            }
        } else {
            let Some(from) = seen[key_index] else {
                continue;
            };
            written += 1;
            let to = (slot + 1) * 1_000_000 + written;
            let call = Call::Cas {
                key: key.clone(),
                from,
                to,
            };
            ctx.recorder.invoke(p, 0, call.clone());
            let txn = TxnRequest {
                compares: vec![Compare {
                    key: key.clone().into_bytes(),
                    target: compare::Target::Value as i32,
                    result: compare::Result::Equal as i32,
                    operand: Some(compare::Operand::Value(from.to_string().into_bytes())),
                }],
                success: vec![TxnOp {
                    op: Some(txn_op::Op::Put(PutRequest {
                        key: key.into_bytes(),
                        value: to.to_string().into_bytes(),
                        ..PutRequest::default()
                    })),
                }],
                ..TxnRequest::default()
            };
            match ctx.client.txn(txn).await {
                Ok(outcome) if outcome.succeeded => {
                    seen[key_index] = Some(to);
                    ctx.recorder.ok(p, 0, call);
                }
                Ok(_) => {
                    seen[key_index] = None;
                    ctx.recorder.fail(p, 0, call, "compare failed");
                }
                Err(err) => {
                    if ctx.recorder.failed(p, 0, call, &err) {
                        process.crashed();
                    }
                }
            }
        }
    }
}
