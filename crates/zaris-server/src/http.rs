//! The HTTP side door: Prometheus metrics, liveness and readiness, and the console's JSON API
//! (`/api/v1/...`, see `api/`).

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use openraft::async_runtime::WatchReceiver;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

use crate::api::{Api, ApiCall, ApiReply, ForwardedCredential};
use crate::health::Health;

pub async fn serve(
    listener: TcpListener,
    api: Api,
    raft: Raft,
    health: Health,
    election_timeout: Duration,
    shutdown: CancellationToken,
) {
    let live = health.clone();
    let app = Router::new()
        .route(
            "/api/v1/{*path}",
            any(move |method: Method, uri: Uri, headers: HeaderMap| {
                let api = api.clone();
                async move { api_call(&api, &method, &uri, &headers).await }
            }),
        )
        .route("/metrics", get(metrics))
        .route(
            "/health",
            get(move || {
                let health = live.clone();
                async move { healthy(&health) }
            }),
        )
        .route(
            "/ready",
            get(move || {
                let (raft, health) = (raft.clone(), health.clone());
                async move { ready(&raft, &health, election_timeout) }
            }),
        );
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "HTTP server stopped with an error");
    }
}

/// One JSON API call: GET or POST, credential from `Authorization: Bearer <token>`.
async fn api_call(api: &Api, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
    let reply = if method != Method::GET && method != Method::POST {
        ApiReply {
            status: 405,
            body: r#"{"error":{"code":"INVALID_ARGUMENT","message":"use GET, or POST to act"}}"#
                .into(),
        }
    } else {
        match forwarded_credential(headers) {
            Err(reply) => reply,
            Ok(credential) => {
                let call = ApiCall {
                    from: api.node_id(),
                    post: method == Method::POST,
                    path: uri.path().to_owned(),
                    query: uri.query().unwrap_or_default().to_owned(),
                    credential,
                };
                api.answer(call, false).await
            }
        }
    };
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            // Every answer is of the moment it was read: never serve one from a cache.
            (header::CACHE_CONTROL, "no-store"),
        ],
        reply.body,
    )
        .into_response()
}

fn forwarded_credential(headers: &HeaderMap) -> Result<ForwardedCredential, ApiReply> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(ForwardedCredential::Anonymous);
    };
    match crate::auth::bearer_credential(value.as_bytes()) {
        Ok(zaris_core::auth::Credential::Token(sha256)) => Ok(ForwardedCredential::Token(sha256)),
        Ok(_) => Ok(ForwardedCredential::Anonymous),
        Err(error) => Err(ApiReply {
            status: 401,
            body: serde_json::json!({
                "error": {"code": "UNAUTHENTICATED", "message": error.to_string()}
            })
            .to_string(),
        }),
    }
}

async fn metrics() -> (StatusCode, String) {
    match crate::metrics::prometheus() {
        Some(handle) => (StatusCode::OK, handle.render()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics recorder unavailable\n".into(),
        ),
    }
}

/// Live unless this node's Raft has failed for good.
fn healthy(health: &Health) -> (StatusCode, String) {
    match health.failure() {
        None => (StatusCode::OK, "ok\n".into()),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("raft failed: {reason}\n"),
        ),
    }
}

/// Ready when this node's Raft runs and it can serve or redirect: a leader that a quorum has
/// acknowledged within the election timeout (a leader cut off from its quorum, or one whose
/// voters include a dead member, cannot commit anything), or a follower that knows a leader.
fn ready(raft: &Raft, health: &Health, election_timeout: Duration) -> (StatusCode, String) {
    if let Some(reason) = health.failure() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("raft failed: {reason}\n"),
        );
    }
    let metrics = raft.metrics().borrow_watched().clone();
    let sole_voter = metrics
        .membership_config
        .membership()
        .voter_ids()
        .eq([metrics.id]);
    // A sole voter is its own quorum: it commits whenever its disk does.
    if metrics.state == openraft::ServerState::Leader && !sole_voter {
        let since_quorum_ack = metrics
            .last_quorum_acked
            .map(|acked| openraft::Instant::elapsed(&*acked));
        return match since_quorum_ack {
            Some(since) if since <= election_timeout => (StatusCode::OK, "ready\n".into()),
            Some(since) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Raft leader without a quorum for {} ms: cannot commit\n",
                    since.as_millis()
                ),
            ),
            None => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Raft leader not yet acknowledged by a quorum: cannot commit\n".into(),
            ),
        };
    }
    match metrics.current_leader {
        Some(_) => (StatusCode::OK, "ready\n".into()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no Raft leader known\n".into(),
        ),
    }
}
