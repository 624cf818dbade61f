//! Lock, Unlock, LockStatus and LockList: requests in (the Lock call's wait is the server's business, see
//! [`lock_wait_ms`]), answers out (HELD, QUEUED, BUSY, OVERTAKEN, RELEASED, WITHDRAWN, NOT_HOLDER
//! as values).

use zaris_core::{
    CancelOutcome, Command, FencingToken, LeaseId, Limits, LockInfo, LockOutcome, Outcome,
    Rejection, Request, Response, Revision,
};
use zaris_proto::v1::{self, ResponseHeader};

use super::validated;
use crate::error::ApiError;

/// A Lock call's LockAcquire, validated. The call's `timeout_ms` is the server's business: see
/// [`lock_wait_ms`].
pub fn lock_request(request: v1::LockRequest, limits: &Limits) -> Result<Request, ApiError> {
    let command = Command::LockAcquire {
        name: request.name,
        lease: LeaseId::new(request.lease),
        wait: request.wait,
        sent_after: request.seen_revision.map(Revision::new),
    };
    validated(None, command, limits)
}

/// How long a Lock call may block for the lock, in milliseconds: 0 without `wait` (then
/// `timeout_ms` is ignored) or when `timeout_ms` is 0; above `max_lock_wait_ms` → LIMIT_EXCEEDED.
pub fn lock_wait_ms(request: &v1::LockRequest, max_lock_wait_ms: u64) -> Result<u64, ApiError> {
    if !request.wait {
        return Ok(0);
    }
    if request.timeout_ms > max_lock_wait_ms {
        return Err(ApiError::limit_exceeded(
            "max_lock_wait_ms",
            max_lock_wait_ms,
            request.timeout_ms,
        ));
    }
    Ok(request.timeout_ms)
}

/// An Unlock, validated: token 0 withdraws the lease from the wait queue (core `LockCancel`), any
/// other token is a fenced release (`LockRelease`).
pub fn unlock_request(request: v1::UnlockRequest, limits: &Limits) -> Result<Request, ApiError> {
    let command = if request.token == 0 {
        Command::LockCancel {
            name: request.name,
            lease: LeaseId::new(request.lease),
        }
    } else {
        Command::LockRelease {
            name: request.name,
            lease: LeaseId::new(request.lease),
            token: FencingToken::new(request.token),
        }
    };
    validated(request.request_id, command, limits)
}

/// A Lock answer: HELD with the token; QUEUED with the queue position; BUSY with the holder; the
/// lease missing → LEASE_NOT_FOUND. A full queue is CAPACITY_EXCEEDED (an error).
///
/// For QUEUED, `holder_lease` is 0: the core outcome does not say who holds the lock. A caller that
/// wants it there can fill it from [`zaris_core::State::lock`].
pub fn lock_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::LockResponse, ApiError> {
    let mut answer = v1::LockResponse {
        header: Some(header),
        ..v1::LockResponse::default()
    };
    match response {
        Ok(Outcome::Lock(LockOutcome::Held { token })) => {
            answer.result = v1::LockResult::Held.into();
            answer.token = token.get();
        }
        Ok(Outcome::Lock(LockOutcome::Queued { position })) => {
            answer.result = v1::LockResult::Queued.into();
            answer.queue_position = position.into();
        }
        Ok(Outcome::Lock(LockOutcome::Busy { holder, .. })) => {
            // The holder's token is not the caller's business: `token` is for HELD only.
            answer.result = v1::LockResult::Busy.into();
            answer.holder_lease = holder.get();
        }
        Ok(Outcome::Lock(LockOutcome::Overtaken)) => {
            answer.result = v1::LockResult::Overtaken.into();
        }
        Err(Rejection::LeaseNotFound(_)) => {
            answer.result = v1::LockResult::LeaseNotFound.into();
        }
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Lock", &other)),
    }
    Ok(answer)
}

/// An Unlock answer: released → RELEASED; withdrawn from the queue → WITHDRAWN; handed the lock
/// before the withdrawal applied → HELD with its token; not holding with that token, or (token 0)
/// neither queued nor holding → NOT_HOLDER.
pub fn unlock_response(
    header: ResponseHeader,
    response: Response,
) -> Result<v1::UnlockResponse, ApiError> {
    let (result, token) = match response {
        Ok(Outcome::Unlocked { .. }) => (v1::UnlockResult::Released, 0),
        Ok(Outcome::Cancelled(CancelOutcome::Withdrawn)) => (v1::UnlockResult::Withdrawn, 0),
        Ok(Outcome::Cancelled(CancelOutcome::Held { token })) => {
            (v1::UnlockResult::Held, token.get())
        }
        Ok(Outcome::Cancelled(CancelOutcome::NotWaiting)) | Err(Rejection::NotHolder { .. }) => {
            (v1::UnlockResult::NotHolder, 0)
        }
        Err(rejection) => return Err(rejection.into()),
        Ok(other) => return Err(ApiError::unexpected("Unlock", &other)),
    };
    Ok(v1::UnlockResponse {
        header: Some(header),
        result: result.into(),
        token,
    })
}

/// A LockStatus answer: `None` (no holder) → `held: false`.
pub fn lock_status_response(
    header: ResponseHeader,
    info: Option<LockInfo>,
) -> v1::LockStatusResponse {
    let mut answer = v1::LockStatusResponse {
        header: Some(header),
        ..v1::LockStatusResponse::default()
    };
    if let Some(info) = info {
        answer.held = true;
        answer.holder_lease = info.holder.get();
        answer.token = info.token.get();
        answer.waiters = info.waiters.len() as u64;
    }
    answer
}

/// A LockList request's `after_name` and `prefix` are lock names, or parts of one: longer than
/// `max_lock_name_bytes` is LIMIT_EXCEEDED.
pub fn check_lock_list(request: &v1::LockListRequest, limits: &Limits) -> Result<(), ApiError> {
    let max = u64::from(limits.max_lock_name_bytes);
    for name in [&request.after_name, &request.prefix] {
        if name.len() as u64 > max {
            return Err(ApiError::limit_exceeded(
                "max_lock_name_bytes",
                max,
                name.len() as u64,
            ));
        }
    }
    Ok(())
}

/// A held lock in a LockList page; `waiting` counts every waiter, listed or not.
pub fn lock_summary(info: LockInfo, waiting: usize) -> v1::LockSummary {
    v1::LockSummary {
        name: info.name,
        holder_lease: info.holder.get(),
        token: info.token.get(),
        waiters: info.waiters.iter().map(|lease| lease.get()).collect(),
        waiter_count: waiting as u64,
    }
}

#[cfg(test)]
mod tests {
    use zaris_core::{
        CancelOutcome, Command, LimitKind, LockInfo, LockOutcome, Outcome, Rejection, Request,
        RequestId, Revision,
    };
    use zaris_proto::v1::{self, ErrorCode};

    use super::*;
    use crate::convert::test_support::*;

    #[test]
    fn lock_requests() {
        let request = ok(lock_request(
            v1::LockRequest {
                name: "job".into(),
                lease: 5,
                wait: true,
                timeout_ms: 100,
                seen_revision: Some(7),
            },
            &small(),
        ));
        assert_eq!(
            request,
            Request::new(Command::LockAcquire {
                name: "job".into(),
                lease: LeaseId::new(5),
                wait: true,
                sent_after: Some(Revision::new(7)),
            })
        );
        let lock = |name: &str, lease| v1::LockRequest {
            name: name.into(),
            lease,
            ..Default::default()
        };
        assert_invalid(
            lock_request(lock("", 5), &small()),
            "lock name must not be empty",
        );
        assert_invalid(lock_request(lock("job", 0), &small()), "lease id 0");
        assert_limit(
            lock_request(lock("toolong", 5), &small()),
            ErrorCode::LimitExceeded,
            "max_lock_name_bytes",
        );
    }

    #[test]
    fn lock_waits() {
        let lock = |wait, timeout_ms| v1::LockRequest {
            name: "job".into(),
            lease: 1,
            wait,
            timeout_ms,
            seen_revision: None,
        };
        assert_eq!(ok(lock_wait_ms(&lock(false, 1_000_000), 500)), 0);
        assert_eq!(ok(lock_wait_ms(&lock(true, 0), 500)), 0);
        assert_eq!(ok(lock_wait_ms(&lock(true, 500), 500)), 500);
        assert_limit(
            lock_wait_ms(&lock(true, 501), 500),
            ErrorCode::LimitExceeded,
            "max_lock_wait_ms",
        );
    }

    #[test]
    fn unlock_requests() {
        let unlock = |token, request_id| v1::UnlockRequest {
            name: "job".into(),
            lease: 5,
            token,
            request_id,
        };
        assert_eq!(
            ok(unlock_request(unlock(0, None), &small())),
            Request::new(Command::LockCancel {
                name: "job".into(),
                lease: LeaseId::new(5)
            })
        );
        assert_eq!(
            ok(unlock_request(unlock(12, wire_id(1, 9)), &small())),
            Request::with_id(
                RequestId {
                    client_id: 1,
                    seq: 9,
                    seen_revision: Revision::ZERO,
                },
                Command::LockRelease {
                    name: "job".into(),
                    lease: LeaseId::new(5),
                    token: FencingToken::new(12)
                }
            )
        );
        assert_invalid(
            unlock_request(
                v1::UnlockRequest {
                    name: "job".into(),
                    token: 3,
                    ..Default::default()
                },
                &small(),
            ),
            "lease id 0",
        );
        assert_invalid(
            unlock_request(
                v1::UnlockRequest {
                    lease: 5,
                    ..Default::default()
                },
                &small(),
            ),
            "lock name must not be empty",
        );
    }

    #[test]
    fn lock_responses() {
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Held {
                token: FencingToken::new(44),
            })),
        ));
        assert_eq!(
            answer,
            v1::LockResponse {
                header: Some(header(5)),
                result: v1::LockResult::Held.into(),
                token: 44,
                holder_lease: 0,
                queue_position: 0,
            }
        );
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Queued { position: 2 })),
        ));
        assert_eq!(answer.result(), v1::LockResult::Queued);
        assert_eq!((answer.token, answer.queue_position), (0, 2));
        let answer = ok(lock_response(
            header(5),
            Ok(Outcome::Lock(LockOutcome::Busy {
                holder: LeaseId::new(8),
                token: FencingToken::new(40),
            })),
        ));
        assert_eq!(answer.result(), v1::LockResult::Busy);
        assert_eq!((answer.token, answer.holder_lease), (0, 8));
        let answer = ok(lock_response(
            header(5),
            Err(Rejection::LeaseNotFound(LeaseId::new(5))),
        ));
        assert_eq!(answer.result(), v1::LockResult::LeaseNotFound);
        assert_eq!(answer.header, Some(header(5)));

        assert_limit(
            lock_response(
                header(5),
                Err(Rejection::LimitExceeded {
                    limit: LimitKind::WaitersPerLock,
                    max: 1,
                    actual: 2,
                }),
            ),
            ErrorCode::CapacityExceeded,
            "max_waiters_per_lock",
        );
        assert_internal(lock_response(
            header(5),
            Ok(Outcome::Unlocked { next: None }),
        ));
    }

    #[test]
    fn unlock_responses() {
        let cases = [
            (
                Ok(Outcome::Unlocked {
                    next: Some((LeaseId::new(6), FencingToken::new(50))),
                }),
                v1::UnlockResult::Released,
                0,
            ),
            (
                Ok(Outcome::Unlocked { next: None }),
                v1::UnlockResult::Released,
                0,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::Withdrawn)),
                v1::UnlockResult::Withdrawn,
                0,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::Held {
                    token: FencingToken::new(33),
                })),
                v1::UnlockResult::Held,
                33,
            ),
            (
                Ok(Outcome::Cancelled(CancelOutcome::NotWaiting)),
                v1::UnlockResult::NotHolder,
                0,
            ),
            (
                Err(Rejection::NotHolder {
                    lock: "job".into(),
                    lease: LeaseId::new(5),
                    token: FencingToken::new(3),
                }),
                v1::UnlockResult::NotHolder,
                0,
            ),
        ];
        for (response, result, token) in cases {
            let answer = ok(unlock_response(header(2), response));
            assert_eq!(answer.header, Some(header(2)));
            assert_eq!(answer.result(), result);
            assert_eq!(answer.token, token);
        }
        assert_invalid(
            unlock_response(header(2), Err(Rejection::InvalidArgument("x".into()))),
            "x",
        );
        assert_internal(unlock_response(
            header(2),
            Ok(Outcome::Lock(LockOutcome::Held {
                token: FencingToken::new(1),
            })),
        ));
    }

    #[test]
    fn lock_list_names_are_bounded_like_lock_names() {
        let request = |after: &str, prefix: &str| v1::LockListRequest {
            after_name: after.into(),
            prefix: prefix.into(),
            limit: 0,
        };
        assert!(check_lock_list(&request("jobs", "job"), &small()).is_ok());
        assert_limit(
            check_lock_list(&request("toolong", ""), &small()),
            ErrorCode::LimitExceeded,
            "max_lock_name_bytes",
        );
        assert_limit(
            check_lock_list(&request("", "toolong"), &small()),
            ErrorCode::LimitExceeded,
            "max_lock_name_bytes",
        );
    }

    #[test]
    fn lock_summaries_list_waiters_and_count_them_all() {
        let summary = lock_summary(
            LockInfo {
                name: "job".into(),
                holder: LeaseId::new(5),
                token: FencingToken::new(12),
                waiters: vec![LeaseId::new(6)],
            },
            3,
        );
        assert_eq!(
            summary,
            v1::LockSummary {
                name: "job".into(),
                holder_lease: 5,
                token: 12,
                waiters: vec![6],
                waiter_count: 3,
            }
        );
    }

    #[test]
    fn lock_status_responses() {
        let answer = lock_status_response(
            header(3),
            Some(LockInfo {
                name: "job".into(),
                holder: LeaseId::new(5),
                token: FencingToken::new(12),
                waiters: vec![LeaseId::new(6), LeaseId::new(7)],
            }),
        );
        assert_eq!(
            answer,
            v1::LockStatusResponse {
                header: Some(header(3)),
                held: true,
                holder_lease: 5,
                token: 12,
                waiters: 2,
            }
        );
        assert_eq!(
            lock_status_response(header(3), None),
            v1::LockStatusResponse {
                header: Some(header(3)),
                ..Default::default()
            }
        );
    }
}
