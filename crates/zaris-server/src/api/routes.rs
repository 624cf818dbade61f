//! The JSON API's paths and query parameters, parsed into a [`Route`] (no I/O): what is not
//! understood is refused with the parameter it is about, never ignored.

use percent_encoding::percent_decode_str;

/// A call refused before it reaches any state: an unknown path, a malformed parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 404 for an unknown path, 400 for the rest.
    pub http_status: u16,
    pub message: String,
}

impl Refusal {
    fn not_found(message: impl Into<String>) -> Self {
        Refusal {
            http_status: 404,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Refusal {
            http_status: 400,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Page size when a call names none: what one console page shows.
pub const DEFAULT_PAGE: u64 = 100;

/// A JSON API call, understood.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /api/v1/node`: the answering member's own view (role, term, indexes); never forwarded.
    Node,
    /// `GET /api/v1/cluster`: the members as the Raft leader sees them (lag, last contact).
    Cluster,
    /// `GET /api/v1/stats`: the leader's last five minutes of rates and commit latency.
    Stats,
    /// `GET /api/v1/leases?after=ID&limit=N`: leases by ascending id.
    Leases { after: u64, limit: u64 },
    /// `GET /api/v1/leases/ID`: one lease, with its keys and locks.
    Lease { id: u64 },
    /// `POST /api/v1/leases/ID/revoke`: ends a lease (its keys go, its locks pass on).
    Revoke { id: u64 },
    /// `GET /api/v1/locks?prefix=P&after=NAME&limit=N`: held locks by name, with their queues.
    Locks {
        prefix: String,
        after: String,
        limit: u64,
    },
    /// `GET /api/v1/presence/GROUP?limit=N`: the members of presence group GROUP.
    Presence { group: String, limit: u64 },
}

impl Route {
    /// Whether the answering member serves the call from its own state (no leader needed).
    pub fn local(&self) -> bool {
        matches!(self, Route::Node)
    }

    /// Parses a call: `post` for POST (else GET), `path` as received (percent-encoded), `query`
    /// without the `?`.
    pub fn parse(post: bool, path: &str, query: &str) -> Result<Route, Refusal> {
        let rest = path
            .strip_prefix("/api/v1/")
            .ok_or_else(|| not_found(path))?;
        let segments: Vec<String> = rest
            .trim_end_matches('/')
            .split('/')
            .map(decode)
            .collect::<Result<_, _>>()?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let params = Params::parse(query)?;
        let route = match (post, segments.as_slice()) {
            (false, ["node"]) => params.none(Route::Node)?,
            (false, ["cluster"]) => params.none(Route::Cluster)?,
            (false, ["stats"]) => params.none(Route::Stats)?,
            (false, ["leases"]) => {
                params.only(&["after", "limit"])?;
                Route::Leases {
                    after: params.number("after")?.unwrap_or(0),
                    limit: params.limit()?,
                }
            }
            (false, ["leases", id]) => params.none(Route::Lease { id: lease_id(id)? })?,
            (true, ["leases", id, "revoke"]) => params.none(Route::Revoke { id: lease_id(id)? })?,
            (false, ["locks"]) => {
                params.only(&["prefix", "after", "limit"])?;
                Route::Locks {
                    prefix: params.text("prefix").unwrap_or_default(),
                    after: params.text("after").unwrap_or_default(),
                    limit: params.limit()?,
                }
            }
            (false, ["presence", group]) => {
                params.only(&["limit"])?;
                if group.is_empty() || group.contains('/') {
                    return Err(Refusal::invalid(
                        "a presence group name is not empty and has no '/'",
                    ));
                }
                Route::Presence {
                    group: (*group).to_owned(),
                    limit: params.limit()?,
                }
            }
            (true, _) if Route::parse(false, path, query).is_ok() => {
                return Err(Refusal::invalid(format!("{path} is read-only: use GET")));
            }
            _ => return Err(not_found(path)),
        };
        Ok(route)
    }
}

/// The `prefix` of `GET /api/v1/events?prefix=P` (empty: every key), its only parameter.
pub fn events_prefix(query: &str) -> Result<String, Refusal> {
    let params = Params::parse(query)?;
    params.only(&["prefix"])?;
    Ok(params.text("prefix").unwrap_or_default())
}

fn not_found(path: &str) -> Refusal {
    Refusal::not_found(format!(
        "no such API path: {path} (see docs/api.md, \"JSON API\")"
    ))
}

fn decode(text: &str) -> Result<String, Refusal> {
    percent_decode_str(&text.replace('+', " "))
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| Refusal::invalid(format!("{text:?} is not UTF-8 once decoded")))
}

fn lease_id(text: &str) -> Result<u64, Refusal> {
    match text.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(Refusal::invalid(format!(
            "{text:?} is not a lease id (a positive integer)"
        ))),
    }
}

/// Most query parameters a request may carry: no route takes more than three, and the check for
/// repeated names compares each with those before it.
const MAX_QUERY_PARAMS: usize = 8;

/// Query parameters, each at most once.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(query: &str) -> Result<Params, Refusal> {
        let mut params: Vec<(String, String)> = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            if params.len() == MAX_QUERY_PARAMS {
                return Err(Refusal::invalid(format!(
                    "more than {MAX_QUERY_PARAMS} query parameters"
                )));
            }
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (name, value) = (decode(name)?, decode(value)?);
            if params.iter().any(|(seen, _)| *seen == name) {
                return Err(Refusal::invalid(format!(
                    "query parameter {name:?} given twice"
                )));
            }
            params.push((name, value));
        }
        Ok(Params(params))
    }

    fn only(&self, allowed: &[&str]) -> Result<(), Refusal> {
        match self
            .0
            .iter()
            .find(|(name, _)| !allowed.contains(&name.as_str()))
        {
            None => Ok(()),
            Some((name, _)) if allowed.is_empty() => Err(Refusal::invalid(format!(
                "unknown query parameter {name:?}: this path takes none"
            ))),
            Some((name, _)) => Err(Refusal::invalid(format!(
                "unknown query parameter {name:?}: this path takes {}",
                allowed.join(", ")
            ))),
        }
    }

    fn none(&self, route: Route) -> Result<Route, Refusal> {
        self.only(&[])?;
        Ok(route)
    }

    fn text(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value.clone())
    }

    fn number(&self, name: &str) -> Result<Option<u64>, Refusal> {
        self.text(name)
            .map(|value| {
                value.parse::<u64>().map_err(|_| {
                    Refusal::invalid(format!(
                        "query parameter {name}={value:?} is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }

    /// `limit`: [`DEFAULT_PAGE`] when absent; 0 is refused (the gRPC API's "0 = the maximum" would
    /// let one console call load a whole page of 10,000). The upper bound is the gRPC call's.
    fn limit(&self) -> Result<u64, Refusal> {
        match self.number("limit")? {
            None => Ok(DEFAULT_PAGE),
            Some(0) => Err(Refusal::invalid("limit must be at least 1")),
            Some(limit) => Ok(limit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(post: bool, path: &str, query: &str) -> Result<Route, String> {
        Route::parse(post, path, query).map_err(|e| e.to_string())
    }

    #[test]
    fn paths_and_parameters_make_routes() {
        assert_eq!(parse(false, "/api/v1/node", ""), Ok(Route::Node));
        assert_eq!(parse(false, "/api/v1/cluster/", ""), Ok(Route::Cluster));
        assert_eq!(parse(false, "/api/v1/stats", ""), Ok(Route::Stats));
        assert_eq!(
            parse(false, "/api/v1/leases", ""),
            Ok(Route::Leases {
                after: 0,
                limit: DEFAULT_PAGE
            })
        );
        assert_eq!(
            parse(false, "/api/v1/leases", "after=7&limit=20"),
            Ok(Route::Leases {
                after: 7,
                limit: 20
            })
        );
        assert_eq!(
            parse(false, "/api/v1/leases/42", ""),
            Ok(Route::Lease { id: 42 })
        );
        assert_eq!(
            parse(true, "/api/v1/leases/42/revoke", ""),
            Ok(Route::Revoke { id: 42 })
        );
        assert_eq!(
            parse(false, "/api/v1/locks", "prefix=jobs%2F&after=jobs%2Fa+b"),
            Ok(Route::Locks {
                prefix: "jobs/".into(),
                after: "jobs/a b".into(),
                limit: DEFAULT_PAGE
            })
        );
        assert_eq!(
            parse(false, "/api/v1/presence/work%C3%A9rs", "limit=5"),
            Ok(Route::Presence {
                group: "workérs".into(),
                limit: 5
            })
        );
    }

    #[test]
    fn the_event_feed_takes_a_prefix_only() {
        assert_eq!(events_prefix(""), Ok(String::new()));
        assert_eq!(events_prefix("prefix=svc%2Fa+b"), Ok("svc/a b".into()));
        assert_eq!(events_prefix("from=3").map_err(|e| e.http_status), Err(400));
        assert_eq!(
            events_prefix("prefix=%FF").map_err(|e| e.http_status),
            Err(400)
        );
    }

    #[test]
    fn what_is_not_understood_is_refused_by_name() {
        let refused = |post, path, query, says: &str| {
            let message = parse(post, path, query).expect_err(path);
            assert!(message.contains(says), "{path}?{query}: {message}");
        };
        refused(false, "/api/v1/leasez", "", "no such API path");
        let many: Vec<String> = (0..10_000).map(|i| format!("p{i}=1")).collect();
        let many = many.join("&");
        refused(
            false,
            "/api/v1/leases",
            &many,
            "more than 8 query parameters",
        );
        refused(false, "/metrics", "", "no such API path");
        refused(false, "/api/v1/leases/0", "", "not a lease id");
        refused(false, "/api/v1/leases/-3", "", "not a lease id");
        refused(false, "/api/v1/leases/x", "", "not a lease id");
        refused(false, "/api/v1/leases", "limit=0", "at least 1");
        refused(false, "/api/v1/leases", "limit=ten", "limit=\"ten\"");
        refused(false, "/api/v1/leases", "after=1&after=2", "given twice");
        refused(
            false,
            "/api/v1/leases",
            "sort=ttl",
            "unknown query parameter \"sort\"",
        );
        refused(false, "/api/v1/cluster", "x=1", "takes none");
        refused(true, "/api/v1/leases", "", "read-only");
        refused(false, "/api/v1/leases/5/revoke", "", "no such API path");
        refused(false, "/api/v1/presence/a%2Fb", "", "has no '/'");
        refused(false, "/api/v1/locks", "prefix=%FF", "not UTF-8");
    }
}
