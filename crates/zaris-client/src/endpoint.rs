//! Endpoint strings, and the set of members a client talks to (with the cached Raft leader).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::codegen::Service;
use tonic::transport::{Channel, Endpoint, Uri};
use zaris_proto::cork::Corked;

use crate::error::Error;

/// Most endpoints a client keeps; redirects to further new addresses are not cached.
/// Interval of HTTP/2 pings on every connection.
const HTTP2_PING_INTERVAL: Duration = Duration::from_secs(5);
/// A connection whose ping is not answered within this is closed.
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) const MAX_ENDPOINTS: usize = 64;

/// A validated endpoint: `authority` is `host:port`; `scheme` is the one given, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub(crate) authority: String,
    pub(crate) scheme: Option<Scheme>,
}

/// An endpoint's explicit scheme: it must agree with the client's TLS settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

/// How a client connects to every member.
#[derive(Debug, Clone)]
pub(crate) struct Connect {
    pub(crate) timeout: Duration,
    pub(crate) tls: Option<crate::ClientTls>,
}

impl Connect {
    /// Checks that an explicit scheme agrees with the TLS settings.
    pub(crate) fn check(&self, address: &Address) -> Result<(), Error> {
        let invalid = |reason: &str| Error::InvalidEndpoint {
            endpoint: address.authority.clone(),
            reason: reason.to_owned(),
        };
        match (address.scheme, &self.tls) {
            (Some(Scheme::Https), None) => Err(invalid(
                "https:// needs TLS settings: the CA that signed the servers' certificates \
                 (--cacert, ZARIS_CACERT, or ClientOptions::with_tls)",
            )),
            (Some(Scheme::Http), Some(_)) => Err(invalid(
                "http:// with TLS settings: use host:port or https://host:port",
            )),
            _ => Ok(()),
        }
    }
}

/// Accepts `host:port`, `http://host:port` or `https://host:port` (a trailing `/` is allowed);
/// anything else is [`Error::InvalidEndpoint`]. Whether TLS is used is the client's setting
/// ([`Connect::check`] refuses a scheme that disagrees).
pub(crate) fn parse_endpoint(raw: &str) -> Result<Address, Error> {
    let invalid = |reason: &str| Error::InvalidEndpoint {
        endpoint: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(invalid("empty endpoint"));
    }
    let (with_scheme, scheme) = match trimmed.split_once("://") {
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("http") => {
            (trimmed.to_owned(), Some(Scheme::Http))
        }
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => {
            (format!("http://{rest}"), Some(Scheme::Https))
        }
        Some((scheme, _)) => {
            return Err(invalid(&format!(
                "unsupported scheme {scheme:?}; use host:port, http://host:port or \
                 https://host:port"
            )));
        }
        None => (format!("http://{trimmed}"), None),
    };
    let uri: Uri = with_scheme
        .parse()
        .map_err(|err| invalid(&format!("not a valid address: {err}")))?;
    let authority = uri
        .authority()
        .ok_or_else(|| invalid("missing host"))?
        .as_str()
        .to_owned();
    if authority.contains('@') {
        return Err(invalid("user info is not supported"));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("missing host"));
    }
    if uri.port_u16().is_none() {
        return Err(invalid("missing port (expected host:port)"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(invalid("a path is not allowed (expected host:port)"));
    }
    Ok(Address { authority, scheme })
}

/// One member the client can send to.
#[derive(Debug)]
struct Node {
    address: Address,
    channel: Channel,
    /// Learned from a redirect rather than given by the caller.
    learned: bool,
    /// The member that last answered here (from response headers), if any has.
    member_id: Option<u64>,
}

/// Where the next attempt goes.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) index: usize,
    pub(crate) authority: String,
    pub(crate) channel: Channel,
}

/// The endpoints, the cached Raft leader, and the rotation cursor, shared by all clones of a
/// client. Never locked across an `.await`.
#[derive(Debug)]
pub(crate) struct Endpoints {
    connect: Connect,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Never empty; only grows (leader addresses learned from redirects are appended).
    nodes: Vec<Node>,
    /// Index into `nodes` of the cached Raft leader.
    raft_leader: Option<usize>,
    /// Index into `nodes` tried when no leader is cached.
    cursor: usize,
}

impl Endpoints {
    /// Builds lazily connected channels for `addresses`; duplicates are dropped. Must run inside
    /// a Tokio runtime (channels spawn their connection task there).
    pub(crate) fn new(addresses: Vec<Address>, connect: Connect) -> Result<Self, Error> {
        let mut nodes: Vec<Node> = Vec::with_capacity(addresses.len());
        for address in addresses {
            if nodes
                .iter()
                .any(|node| node.address.authority == address.authority)
            {
                continue;
            }
            if nodes.len() == MAX_ENDPOINTS {
                return Err(Error::InvalidEndpoint {
                    endpoint: address.authority,
                    reason: format!("more than {MAX_ENDPOINTS} endpoints"),
                });
            }
            connect.check(&address)?;
            let channel = lazy_channel(&address, &connect)?;
            nodes.push(Node {
                address,
                channel,
                learned: false,
                member_id: None,
            });
        }
        if nodes.is_empty() {
            return Err(Error::InvalidEndpoint {
                endpoint: String::new(),
                reason: "no endpoints given".to_owned(),
            });
        }
        Ok(Endpoints {
            connect,
            state: Mutex::new(State {
                nodes,
                raft_leader: None,
                cursor: 0,
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is consistent after every statement, so a panic elsewhere cannot leave it
        // half-updated: keep using it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached Raft leader, else the endpoint under the rotation cursor.
    pub(crate) fn pick(&self) -> Target {
        let state = self.state();
        let index = state
            .raft_leader
            .filter(|index| *index < state.nodes.len())
            .unwrap_or(state.cursor % state.nodes.len());
        let node = &state.nodes[index];
        Target {
            index,
            authority: node.address.authority.clone(),
            channel: node.channel.clone(),
        }
    }

    /// The endpoint at `index` answered successfully: remember it for the next calls.
    pub(crate) fn succeeded(&self, index: usize) {
        let mut state = self.state();
        if state.raft_leader.is_none() {
            state.cursor = index;
        }
    }

    /// The endpoint at `index` could not serve the call: forget it as leader and move the cursor
    /// past it (unless a concurrent call already moved it).
    pub(crate) fn failed(&self, index: usize) {
        let mut state = self.state();
        if state.raft_leader == Some(index) {
            state.raft_leader = None;
        }
        let len = state.nodes.len();
        if state.nodes.get(index).is_some_and(|node| node.learned) {
            // A redirect target failed: move past the endpoint under the cursor, the member that
            // keeps sending us there.
            state.cursor = (state.cursor + 1) % len;
        } else if state.cursor == index {
            state.cursor = (index + 1) % len;
        }
    }

    /// Member `member_id` answered at endpoint `index`.
    pub(crate) fn answered_as(&self, index: usize, member_id: u64) {
        if member_id == 0 {
            return;
        }
        if let Some(node) = self.state().nodes.get_mut(index) {
            node.member_id = Some(member_id);
        }
    }

    /// Whether endpoint `index` was learned from a redirect (not given by the caller).
    pub(crate) fn is_learned(&self, index: usize) -> bool {
        self.state()
            .nodes
            .get(index)
            .is_some_and(|node| node.learned)
    }

    /// A member said the Raft leader is member `leader_id` (0: unknown), serving clients at
    /// `address` ("host:port"): cache it. An endpoint where that member has answered before is
    /// preferred over the address (which may be a name only the cluster's network resolves);
    /// otherwise the address is used, added to the endpoints if new. Returns the leader's index,
    /// or `None` if the address is unusable or the endpoint list is full (the caller then
    /// rotates instead).
    pub(crate) fn redirect(&self, leader_id: u64, address: &str) -> Option<usize> {
        let mut state = self.state();
        if leader_id != 0
            && let Some(index) = state
                .nodes
                .iter()
                .position(|n| n.member_id == Some(leader_id))
        {
            state.raft_leader = Some(index);
            return Some(index);
        }
        let address = parse_endpoint(address).ok()?;
        let index = match state
            .nodes
            .iter()
            .position(|n| n.address.authority == address.authority)
        {
            Some(index) => index,
            None => {
                if state.nodes.len() >= MAX_ENDPOINTS {
                    return None;
                }
                self.connect.check(&address).ok()?;
                let channel = lazy_channel(&address, &self.connect).ok()?;
                state.nodes.push(Node {
                    address,
                    channel,
                    learned: true,
                    member_id: None,
                });
                state.nodes.len() - 1
            }
        };
        state.raft_leader = Some(index);
        Some(index)
    }

    /// Number of endpoints known.
    pub(crate) fn len(&self) -> usize {
        self.state().nodes.len()
    }

    /// The endpoints' `host:port` authorities, in order.
    pub(crate) fn authorities(&self) -> Vec<String> {
        self.state()
            .nodes
            .iter()
            .map(|node| node.address.authority.clone())
            .collect()
    }

    /// `host:port` of the cached Raft leader, if any.
    pub(crate) fn raft_leader(&self) -> Option<String> {
        let state = self.state();
        state
            .raft_leader
            .and_then(|index| state.nodes.get(index))
            .map(|node| node.address.authority.clone())
    }
}

fn lazy_channel(address: &Address, connect: &Connect) -> Result<Channel, Error> {
    let invalid = |err: tonic::transport::Error| Error::InvalidEndpoint {
        endpoint: address.authority.clone(),
        reason: err.to_string(),
    };
    let scheme = if connect.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut endpoint =
        Endpoint::from_shared(format!("{scheme}://{}", address.authority)).map_err(invalid)?;
    if let Some(tls) = &connect.tls {
        endpoint = endpoint.tls_config(tls.config()).map_err(invalid)?;
    }
    // HTTP/2 pings find a member that stopped answering (paused, or cut off without a reset)
    // under a long-lived stream (KeepAlive, Watch) that would otherwise wait forever.
    let endpoint = endpoint
        .http2_keep_alive_interval(HTTP2_PING_INTERVAL)
        .keep_alive_timeout(HTTP2_PING_TIMEOUT)
        .keep_alive_while_idle(true);
    // The connect timeout is the connector's, not the endpoint's: tonic would put the endpoint's
    // around its own connector, and a dial that timed out would no longer read as a connect
    // failure (a request never sent), only as an unknown error. tonic puts TLS over this.
    Ok(endpoint.connect_with_connector_lazy(CorkedConnector::new(connect.timeout)))
}

/// The connector tonic's `Endpoint::connect_lazy` uses (hyper's, resolving host names, setting
/// TCP_NODELAY, its connect timeout split over a name's addresses) with each connection corked
/// ([`zaris_proto::cork`]): requests that become ready together, such as the next renewals of
/// keepalive streams that one entry answered, leave in one write instead of one each.
#[derive(Clone, Debug)]
struct CorkedConnector(HttpConnector);

impl CorkedConnector {
    fn new(connect_timeout: Duration) -> Self {
        let mut http = HttpConnector::new();
        // `https` too: tonic puts TLS over the connection it gets.
        http.enforce_http(false);
        // Small requests: Nagle's algorithm would hold one back for the last one's ACK.
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        CorkedConnector(http)
    }
}

impl Service<Uri> for CorkedConnector {
    type Response = TokioIo<Corked<TcpStream>>;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move { Ok(TokioIo::new(Corked::new(connecting.await?.into_inner()))) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> (Option<Scheme>, String) {
        match parse_endpoint(raw) {
            Ok(address) => (address.scheme, address.authority),
            Err(err) => panic!("{raw:?} rejected: {err}"),
        }
    }

    fn rejected(raw: &str) -> String {
        match parse_endpoint(raw) {
            Ok(address) => panic!("{raw:?} accepted as {address:?}"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn host_port_leaves_the_scheme_to_the_tls_settings() {
        assert_eq!(ok("127.0.0.1:7001"), (None, "127.0.0.1:7001".into()));
        assert_eq!(
            ok(" node-1.example:7001 "),
            (None, "node-1.example:7001".into())
        );
        assert_eq!(ok("[::1]:7001").1, "[::1]:7001");
    }

    #[test]
    fn urls_are_accepted_with_or_without_trailing_slash() {
        let http = (Some(Scheme::Http), "127.0.0.1:7001".to_owned());
        assert_eq!(ok("http://127.0.0.1:7001"), http);
        assert_eq!(ok("http://127.0.0.1:7001/"), http);
        assert_eq!(ok("HTTP://localhost:1").1, "localhost:1");
        assert_eq!(
            ok("https://zaris-1:7001/"),
            (Some(Scheme::Https), "zaris-1:7001".to_owned())
        );
    }

    #[test]
    fn a_scheme_must_agree_with_the_tls_settings() {
        let plain = Connect {
            timeout: Duration::from_secs(1),
            tls: None,
        };
        let tls = Connect {
            tls: Some(crate::ClientTls::new("-----BEGIN CERTIFICATE-----")),
            ..plain.clone()
        };
        let parse = |raw| parse_endpoint(raw).expect("parses");
        assert!(plain.check(&parse("127.0.0.1:1")).is_ok());
        assert!(plain.check(&parse("http://127.0.0.1:1")).is_ok());
        let error = plain
            .check(&parse("https://127.0.0.1:1"))
            .expect_err("https without TLS settings");
        assert!(error.to_string().contains("--cacert"), "{error}");
        assert!(tls.check(&parse("127.0.0.1:1")).is_ok());
        assert!(tls.check(&parse("https://127.0.0.1:1")).is_ok());
        let error = tls
            .check(&parse("http://127.0.0.1:1"))
            .expect_err("http with TLS settings");
        assert!(error.to_string().contains("http:// with TLS"), "{error}");
    }

    #[test]
    fn bad_endpoints_are_rejected_with_a_reason() {
        assert!(rejected("").contains("empty endpoint"));
        assert!(rejected("   ").contains("empty endpoint"));
        assert!(rejected("127.0.0.1").contains("missing port"));
        assert!(rejected("http://127.0.0.1").contains("missing port"));
        assert!(rejected("grpc://127.0.0.1:7001").contains("unsupported scheme"));
        assert!(rejected("127.0.0.1:7001/v1").contains("path"));
        assert!(rejected("127.0.0.1:notaport").contains("127.0.0.1:notaport"));
        assert!(rejected("user@host:1").contains("user info"));
    }

    fn connect() -> Connect {
        Connect {
            timeout: Duration::from_secs(1),
            tls: None,
        }
    }

    fn addresses(raw: &[&str]) -> Vec<Address> {
        raw.iter()
            .map(|raw| parse_endpoint(raw))
            .collect::<Result<_, _>>()
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn duplicates_are_dropped_and_empty_lists_rejected() {
        let set = Endpoints::new(
            addresses(&["127.0.0.1:1", "http://127.0.0.1:1/", "127.0.0.1:2"]),
            connect(),
        );
        let set = match set {
            Ok(set) => set,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(set.authorities(), ["127.0.0.1:1", "127.0.0.1:2"]);
        assert!(Endpoints::new(Vec::new(), connect()).is_err());
    }

    #[tokio::test]
    async fn rotation_redirect_and_leader_cache() {
        let set = match Endpoints::new(addresses(&["127.0.0.1:1", "127.0.0.1:2"]), connect()) {
            Ok(set) => set,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(set.pick().authority, "127.0.0.1:1");
        set.failed(0);
        assert_eq!(set.pick().authority, "127.0.0.1:2");
        set.failed(1);
        assert_eq!(set.pick().authority, "127.0.0.1:1");
        // A stale failure report for an endpoint no longer under the cursor moves nothing.
        set.failed(1);
        assert_eq!(set.pick().authority, "127.0.0.1:1");

        // A redirect to a known address caches it without growing the list.
        assert_eq!(set.redirect(0, "127.0.0.1:2"), Some(1));
        assert_eq!(set.len(), 2);
        assert_eq!(set.pick().authority, "127.0.0.1:2");
        assert_eq!(set.raft_leader().as_deref(), Some("127.0.0.1:2"));

        // A redirect to a new address adds it.
        assert_eq!(set.redirect(0, "127.0.0.1:3"), Some(2));
        assert_eq!(
            set.authorities(),
            ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
        );
        assert_eq!(set.pick().authority, "127.0.0.1:3");

        // The cached leader, learned from a redirect, failing drops the cache and moves the
        // cursor past the member that sent us there.
        set.failed(2);
        assert_eq!(set.raft_leader(), None);
        assert_eq!(set.pick().authority, "127.0.0.1:2");

        // Unusable redirect addresses are ignored.
        assert_eq!(set.redirect(0, ""), None);
        assert_eq!(set.redirect(0, "no-port"), None);
        assert_eq!(set.len(), 3);
    }

    /// Issue 11: a redirect names the leader by id and by an address that may resolve only on the
    /// cluster's own network; an endpoint where that member answered is used instead.
    #[tokio::test]
    async fn a_redirect_prefers_the_endpoint_where_the_leader_answered() {
        let set = match Endpoints::new(addresses(&["127.0.0.1:1", "127.0.0.1:2"]), connect()) {
            Ok(set) => set,
            Err(err) => panic!("{err}"),
        };
        set.answered_as(1, 2);
        assert_eq!(set.redirect(2, "zaris-2:7001"), Some(1));
        assert_eq!(set.len(), 2, "the name was not added");
        assert!(!set.is_learned(1));

        // An unknown member's address is added, marked as learned from a redirect.
        assert_eq!(set.redirect(3, "zaris-3:7001"), Some(2));
        assert!(set.is_learned(2));
        // It fails: the cursor moves past the member that sent us there.
        assert_eq!(set.pick().authority, "zaris-3:7001");
        set.failed(2);
        assert_eq!(set.raft_leader(), None);
        assert_eq!(set.pick().authority, "127.0.0.1:2");
    }
}
