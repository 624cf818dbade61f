//! Member addresses: `host:port`, where the host is an IPv4 address, a bracketed IPv6 address or
//! a DNS name (`zaris-1:7001`, as compose files, StatefulSets and systemd units name nodes).
//!
//! Addresses are kept as the operator wrote them (status and member lists show the name) and
//! resolved when a connection is made, so a member that comes back with another IP is found
//! again on reconnect.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

/// Longest DNS name (RFC 1035, without the trailing dot).
const MAX_NAME_BYTES: usize = 253;
/// Longest label of a DNS name.
const MAX_LABEL_BYTES: usize = 63;

/// Checks that `addr` is `host:port` with a usable host and a non-zero port; the error says why
/// not.
pub fn check(addr: &str) -> Result<(), String> {
    let (host, port) = split(addr)?;
    match port.parse::<u16>() {
        Ok(0) => return Err(format!("{addr:?}: port 0 cannot be dialed")),
        Ok(_) => {}
        Err(_) => return Err(format!("{addr:?}: {port:?} is not a port (1-65535)")),
    }
    if let Some(ip) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return match ip.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(()),
            Err(_) => Err(format!("{addr:?}: {host} is not an IPv6 address")),
        };
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(());
    }
    check_name(host).map_err(|why| format!("{addr:?}: {why}"))
}

/// The host of `host:port`, without an IPv6 address's brackets: the name a member's
/// certificate must carry (the whole string if it is not `host:port`).
pub fn host(addr: &str) -> &str {
    match split(addr) {
        Ok((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
        Err(_) => addr,
    }
}

/// `host` and `port` of `host:port` (the host of an IPv6 address keeps its brackets).
fn split(addr: &str) -> Result<(&str, &str), String> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("{addr:?} is not host:port"));
    };
    if host.is_empty() {
        return Err(format!("{addr:?} has no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!(
            "{addr:?}: an IPv6 address goes in brackets, as in [::1]:7001"
        ));
    }
    Ok((host, port))
}

/// A DNS host name: dot-separated labels of letters, digits and hyphens (RFC 1123), no label
/// starting or ending with a hyphen, and not all digits (that would be a mistyped IPv4 address).
fn check_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("host name longer than {MAX_NAME_BYTES} bytes"));
    }
    for label in name.split('.') {
        let valid = !label.is_empty()
            && label.len() <= MAX_LABEL_BYTES
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(format!(
                "{name:?} is not an IP address or a host name (letters, digits, '-' and '.')"
            ));
        }
    }
    if name
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("{name:?} is not a valid IPv4 address"));
    }
    Ok(())
}

/// The address this node tells others to use when none is configured: the bound address, or,
/// when it is bound to every interface (`0.0.0.0`, `[::]`), this host's name with the bound
/// port, since an unspecified address reaches nothing. In a container that name is the
/// container's host name, which its network's DNS resolves.
pub fn default_advertise(bound: SocketAddr) -> String {
    if !bound.ip().is_unspecified() {
        return bound.to_string();
    }
    match host_name() {
        Some(name) => format!("{name}:{}", bound.port()),
        None => bound.to_string(),
    }
}

fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (check_name(name).is_ok()).then(|| name.to_owned())
}

/// Whether `addr` names the unspecified address, which nobody can dial.
pub fn is_unspecified(addr: &str) -> bool {
    split(addr)
        .ok()
        .and_then(|(host, _)| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .ok()
        })
        .is_some_and(|ip| ip.is_unspecified())
}

/// Resolves `addr` (`host:port`) to socket addresses; an error names the address.
pub async fn resolve(addr: &str) -> Result<Vec<SocketAddr>, String> {
    match tokio::net::lookup_host(addr).await {
        Ok(found) => {
            let found: Vec<SocketAddr> = found.collect();
            if found.is_empty() {
                Err(format!("{addr} resolves to no address"))
            } else {
                Ok(found)
            }
        }
        Err(err) => Err(format!("cannot resolve {addr}: {err}")),
    }
}

/// Every address of `members`, with its member's id.
pub fn member_addresses<'a>(
    members: impl IntoIterator<Item = (&'a u64, &'a zaris_raft::Member)>,
) -> Vec<(u64, String)> {
    members
        .into_iter()
        .flat_map(|(id, m)| [(*id, m.addr.clone()), (*id, m.peer_addr.clone())])
        .collect()
}

/// Waits until every member's address resolves, for up to `timeout`; an error lists those that
/// never did. A new cluster's first start uses it: a mistyped name is then an error at start,
/// while containers started together get time to appear in their network's DNS.
pub async fn wait_resolvable(
    node_id: u64,
    members: &[(u64, String)],
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut logged = false;
    loop {
        let mut unresolved = Vec::new();
        for (id, addr) in members {
            if let Err(why) = resolve(addr).await {
                unresolved.push(format!("node {id}: {why}"));
            }
        }
        if unresolved.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "member addresses did not resolve within {} ms ({}); check the names in the \
                 initial cluster",
                timeout.as_millis(),
                unresolved.join("; ")
            );
        }
        if !logged {
            info!(node_id, unresolved = %unresolved.join("; "), "waiting for member names to resolve");
            logged = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Logs, once, the members whose names do not resolve now (a restarted node: its peers may be
/// down, which a majority tolerates, so this is a warning, not an error).
pub async fn warn_unresolved(node_id: u64, members: Vec<(u64, String)>) {
    for (id, addr) in members {
        if let Err(why) = resolve(&addr).await {
            warn!(node_id, peer = id, "{why}; Raft keeps retrying it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ip_addresses_are_accepted() {
        for ok in [
            "127.0.0.1:7001",
            "[::1]:7001",
            "zaris-1:7001",
            "node1.zaris.svc.cluster.local:7001",
            "localhost:1",
            "a:65535",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn malformed_addresses_say_what_is_wrong() {
        for (bad, why) in [
            ("zaris-1", "not host:port"),
            (":7001", "no host"),
            ("zaris-1:0", "port 0"),
            ("zaris-1:70000", "not a port"),
            ("zaris-1:http", "not a port"),
            ("::1:7001", "brackets"),
            ("[zaris]:7001", "not an IPv6 address"),
            ("-zaris:7001", "not an IP address or a host name"),
            ("zaris_1:7001", "not an IP address or a host name"),
            ("zar is:7001", "not an IP address or a host name"),
            ("zaris..1:7001", "not an IP address or a host name"),
            ("999.1.1.1:7001", "not a valid IPv4 address"),
        ] {
            let error = check(bad).expect_err(bad);
            assert!(error.contains(why), "{bad}: {error}");
        }
        let long = format!("{}:7001", "a".repeat(64));
        assert!(check(&long).is_err());
        let longer = format!("{}:7001", ["a"; 130].join("."));
        assert!(
            check(&longer)
                .expect_err("too long")
                .contains("longer than")
        );
    }

    #[test]
    fn the_host_is_what_a_certificate_must_name() {
        assert_eq!(host("zaris-1:7101"), "zaris-1");
        assert_eq!(host("127.0.0.1:7101"), "127.0.0.1");
        assert_eq!(host("[::1]:7101"), "::1");
    }

    #[test]
    fn an_unspecified_bind_address_is_never_advertised() {
        let bound: SocketAddr = "127.0.0.1:7001".parse().expect("addr");
        assert_eq!(default_advertise(bound), "127.0.0.1:7001");
        let any: SocketAddr = "0.0.0.0:7001".parse().expect("addr");
        let advertised = default_advertise(any);
        // This host has a name (Linux): it is used with the bound port.
        assert!(!is_unspecified(&advertised), "{advertised}");
        assert!(advertised.ends_with(":7001"), "{advertised}");
        assert!(is_unspecified("0.0.0.0:7001") && is_unspecified("[::]:7001"));
    }

    #[tokio::test]
    async fn names_resolve_and_unknown_names_are_errors() {
        let found = resolve("localhost:7001").await.expect("localhost resolves");
        assert!(
            found
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 7001)
        );
        // `.invalid` is reserved never to resolve (RFC 2606).
        let error = resolve("zaris-9.invalid:7001").await.expect_err("unknown");
        assert!(
            error.contains("cannot resolve zaris-9.invalid:7001"),
            "{error}"
        );
        let members = [
            (1, "localhost:7001".to_string()),
            (2, "zaris-9.invalid:7001".to_string()),
        ];
        let error = wait_resolvable(1, &members, Duration::from_millis(600))
            .await
            .expect_err("never resolves");
        let text = error.to_string();
        assert!(
            text.contains("node 2") && !text.contains("node 1"),
            "{text}"
        );
    }
}
