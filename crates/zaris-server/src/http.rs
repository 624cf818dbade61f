//! The HTTP side door: Prometheus metrics, liveness and readiness.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use openraft::async_runtime::WatchReceiver;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

pub async fn serve(listener: TcpListener, raft: Raft, shutdown: CancellationToken) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/ready",
            get(move || {
                let raft = raft.clone();
                async move { ready(&raft) }
            }),
        );
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "HTTP server stopped with an error");
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

/// Ready when this node knows a Raft leader (so it can serve or redirect).
fn ready(raft: &Raft) -> (StatusCode, &'static str) {
    let leader = raft.metrics().borrow_watched().current_leader;
    match leader {
        Some(_) => (StatusCode::OK, "ready\n"),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no Raft leader known\n"),
    }
}
