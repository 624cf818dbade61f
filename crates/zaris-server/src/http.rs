//! The HTTP side door: Prometheus metrics, liveness and readiness, and the console's JSON API
//! (`/api/v1/...`, see `api/`).

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use openraft::async_runtime::WatchReceiver;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use zaris_raft::Raft;

use crate::api::{Api, ApiCall, ApiReply, ForwardedCredential};
use crate::health::{Health, QuorumAck};
use crate::node::{SHUTDOWN_GRACE, within_grace};

pub async fn serve(
    listener: TcpListener,
    api: Api,
    raft: Raft,
    health: Health,
    election_timeout: Duration,
    allowed_hosts: AllowedHosts,
    shutdown: CancellationToken,
) {
    let live = health.clone();
    let console_and_api = Router::new()
        .route("/api/v1/events", {
            let api = api.clone();
            get(move |uri: Uri, headers: HeaderMap| {
                let api = api.clone();
                async move { events(&api, &uri, &headers) }
            })
        })
        .route(
            "/api/v1/{*path}",
            any(move |method: Method, uri: Uri, headers: HeaderMap| {
                let api = api.clone();
                async move { api_call(&api, &method, &uri, &headers).await }
            }),
        )
        .route(
            "/",
            get(|| async { console(CONSOLE_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/app.js",
            get(|| async { console(CONSOLE_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/app.css",
            get(|| async { console(CONSOLE_CSS, "text/css; charset=utf-8") }),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            allowed_hosts,
            check_host,
        ));
    // Probes and scrapes name the node however the operator set them up, and read no cluster
    // data: they answer for any host.
    let app = console_and_api
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
    let serve = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .into_future();
    // The client of an event feed that stopped reading never closes (nor is its feed polled, to
    // see the stop).
    match within_grace(serve, &shutdown).await {
        Some(Ok(())) => {}
        Some(Err(e)) => tracing::warn!(error = %e, "HTTP server stopped with an error"),
        None => tracing::warn!(
            grace = ?SHUTDOWN_GRACE,
            "HTTP connections still open after the shutdown grace period; dropping them"
        ),
    }
}

/// The console: a page, a script and a style sheet, built into the binary (no CDN, no build
/// step) and reading nothing but the JSON API.
const CONSOLE_HTML: &str = include_str!("console/index.html");
const CONSOLE_JS: &str = include_str!("console/app.js");
const CONSOLE_CSS: &str = include_str!("console/app.css");

fn console(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // Scripts and styles from this origin only, no inline script: data shown from the
            // cluster (keys, values, names) cannot run as code even if it got into the page.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// One JSON API call: GET or POST, credential from `Authorization: Bearer <token>`.
async fn api_call(api: &Api, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
    let reply = if method != Method::GET && method != Method::POST {
        ApiReply::error(405, "INVALID_ARGUMENT", "use GET, or POST to act")
    } else if method == Method::POST
        && let Some(refusal) = cross_site(headers)
    {
        refusal
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
    json_reply(reply)
}

fn json_reply(reply: ApiReply) -> Response {
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

/// `GET /api/v1/events`: a Server-Sent Events feed of this member's applied key changes.
fn events(api: &Api, uri: &Uri, headers: &HeaderMap) -> Response {
    let feed = forwarded_credential(headers)
        .and_then(|credential| api.events(credential, uri.query().unwrap_or_default()));
    match feed {
        Ok(feed) => (
            [(header::CACHE_CONTROL, "no-store")],
            Sse::new(feed).keep_alive(KeepAlive::default()),
        )
            .into_response(),
        Err(reply) => json_reply(reply),
    }
}

/// The host names this listener serves the console and its API for, besides any IP address and
/// `localhost`: the node's advertised name and those given with `--http-allowed-host`.
///
/// Why: a page of another site can have its own name resolve to this listener's address (DNS
/// rebinding). Its requests are then same-origin for the browser, so the action header and the
/// origin check let them through, but they name the attacker's host; refused here, the page
/// can read and do nothing, even with auth off.
#[derive(Clone, Debug, Default)]
pub struct AllowedHosts(Arc<Vec<String>>);

impl AllowedHosts {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> = names
            .into_iter()
            // As a Host header is read: `console.example:9001` and ` console.example` (a list
            // written with spaces after its commas) mean `console.example`.
            .map(|name| normalized_host(name.trim()))
            .filter(|name| !name.is_empty())
            .collect();
        names.sort();
        names.dedup();
        AllowedHosts(Arc::new(names))
    }

    /// Whether a request whose `Host` header is `host` (`name[:port]`) may be answered.
    pub fn allows(&self, host: &str) -> bool {
        let name = normalized_host(host);
        name.parse::<std::net::IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.0.contains(&name)
    }
}

/// A `Host` header's name or address as the allowlist compares it: without its port, a
/// trailing dot or upper case (`Console.Example.:9001` → `console.example`).
fn normalized_host(host: &str) -> String {
    host_name(host).trim_end_matches('.').to_ascii_lowercase()
}

/// The name or address of a `Host` header, without its port: `[::1]:80` → `::1`.
fn host_name(host: &str) -> &str {
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split_once(']').map_or(bracketed, |(ip, _)| ip);
    }
    match host.rsplit_once(':') {
        // One colon: a port. More: an IPv6 address without brackets (no port).
        Some((name, _port)) if !name.contains(':') => name,
        _ => host,
    }
}

async fn check_host(
    State(allowed): State<AllowedHosts>,
    request: axum::extract::Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|host| host.to_str().unwrap_or_default().to_owned());
    match host {
        Some(host) if !allowed.allows(&host) => json_reply(ApiReply::error(
            403,
            "PERMISSION_DENIED",
            &format!(
                "this listener does not serve the console for host {host:?}: use its IP address, \
                 localhost or its advertised name, or allow the name with \
                 --http-allowed-host (a page whose name only resolves here is refused)"
            ),
        )),
        _ => next.run(request).await,
    }
}

/// The header a POST must carry. A page of another site can make a browser send a plain POST
/// (a form) but not one with a custom header, unless a CORS preflight allows it, which this
/// server never does: so a site the operator visits cannot revoke leases through the console's
/// API while auth is off (with auth on it could not send the token either).
pub const ACTION_HEADER: &str = "x-zaris-action";

/// Why a POST is refused as possibly cross-site: without [`ACTION_HEADER`], or from a page
/// whose `Origin` is not this listener's `Host`.
fn cross_site(headers: &HeaderMap) -> Option<ApiReply> {
    let refuse = |why: &str| Some(ApiReply::error(403, "PERMISSION_DENIED", why));
    if !headers.contains_key(ACTION_HEADER) {
        return refuse(
            "a POST to the JSON API must carry the header `X-Zaris-Action: 1` (so that another \
             site's page cannot make a browser send it)",
        );
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    match (origin, host) {
        (Some(origin), Some(host))
            if origin.split_once("://").map(|(_, rest)| rest) != Some(host) =>
        {
            refuse(&format!(
                "a POST from a page of {origin} is not accepted by this listener ({host})"
            ))
        }
        _ => None,
    }
}

fn forwarded_credential(headers: &HeaderMap) -> Result<ForwardedCredential, ApiReply> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(ForwardedCredential::Anonymous);
    };
    crate::auth::bearer_token_sha256(value.as_bytes())
        .map(ForwardedCredential::Token)
        .map_err(ApiReply::from)
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
    if let QuorumAck::Since(since_quorum_ack) = QuorumAck::of(&metrics) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_answers_for_addresses_localhost_and_the_names_it_was_given() {
        let allowed = AllowedHosts::new([
            "Zaris-1".to_owned(),
            "console.example.".to_owned(),
            " spaced.example".to_owned(),
            "ported.example:9001".to_owned(),
        ]);
        for host in [
            "spaced.example",
            "ported.example:9001",
            "127.0.0.1:9001",
            "10.1.2.3",
            "[::1]:9001",
            "::1",
            "localhost:9001",
            "LOCALHOST",
            "app.localhost:80",
            "zaris-1:9001",
            "console.example",
            "console.example.:9001",
        ] {
            assert!(allowed.allows(host), "{host}");
        }
        for host in [
            "evil.example:9001",
            "zaris-1.evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io:9001",
            "",
        ] {
            assert!(!allowed.allows(host), "{host}");
        }
    }
}
