//! Admission: one guest connection, from its first bytes to its verdict. The name it asks for
//! (TLS SNI or the HTTP `Host` header, `peek.rs`) is read within bounds, judged against the
//! allowlist and its port, resolved, and filtered to the addresses it may reach
//! (`address.rs`); the upstream is connected and the connection handed to the relay
//! (`relay.rs`). A refusal is counted (`report.rs`) and told to the guest (`refusal.rs`).

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;

use super::address::{class, Class};
use super::http::Request;
use super::peek::{peek, Peeked, PEEK_MAX};
use super::refusal::{tell, Cause};
use super::relay::{relay, relay_request};
use super::resolve::Resolved;
use super::{ip_of, Gateway};

/// How long a connection may take, in all, to name its host, and its upstream (every address
/// tried, one after another) to accept.
const PEEK_WAIT: Duration = Duration::from_secs(10);
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// One guest connection on `port`: named, judged, then relayed or closed.
pub fn connection(gateway: &Gateway, port: u16, mut guest: TcpStream) {
    let peer = guest
        .peer_addr()
        .map(ip_of)
        .unwrap_or(Ipv4Addr::UNSPECIFIED);
    if !gateway.config.internal(peer) {
        gateway
            .report
            .refused(&peer.to_string(), port, "not from the sandbox");
        return;
    }
    let mut head = Vec::with_capacity(4_096);
    let named = match read_name(&mut guest, port, &mut head) {
        Ok(named) => named,
        Err(reason) => {
            let own = gateway.own.to_string();
            gateway.report.refused(&own, port, reason);
            tell(
                &mut guest,
                &head,
                Cause::Malformed,
                &format!("{own}:{port}"),
                reason,
            );
            return;
        }
    };
    let name = match &named {
        Named::Tls(name) => name.clone(),
        Named::Http(request) => request.host.clone(),
    };
    // Counted, and said to the guest in its protocol.
    let mut refuse = |cause, reason| {
        gateway.report.refused(&name, port, reason);
        tell(&mut guest, &head, cause, &format!("{name}:{port}"), reason);
    };
    let Some(allow_private) = gateway.config.allows_private(&name, port) else {
        let reason = if gateway.config.names(&name) {
            "port not allowed for this name"
        } else {
            "not on the allowlist"
        };
        refuse(Cause::Policy, reason);
        return;
    };
    let addresses = match gateway.resolver.resolve(&name) {
        Resolved::Addresses(addresses) => addresses,
        Resolved::NoSuchName => {
            refuse(Cause::Upstream, "the name does not exist");
            return;
        }
        Resolved::Failed(why) => {
            eprintln!("native-sandbox gateway: resolving {name}: {why}");
            refuse(Cause::Upstream, "the name could not be resolved");
            return;
        }
    };
    let permitted: Vec<Ipv4Addr> = addresses
        .iter()
        .copied()
        .filter(|a| a != &gateway.own)
        .filter(|a| match class(*a, &gateway.host_addresses) {
            Class::Public => true,
            Class::Private => allow_private,
            Class::Unusable => false,
        })
        .collect();
    if permitted.is_empty() {
        refuse(
            Cause::Policy,
            "resolves only to private or unusable addresses",
        );
        return;
    }
    let deadline = std::time::Instant::now() + CONNECT_WAIT;
    let Some(upstream) = permitted.iter().find_map(|address| {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        TcpStream::connect_timeout(&SocketAddr::V4(SocketAddrV4::new(*address, port)), left).ok()
    }) else {
        refuse(Cause::Upstream, "the upstream did not accept");
        return;
    };
    // Counted as allowed once both directions run.
    let started = || gateway.report.allowed();
    let refuse = |reason| gateway.report.refused(&name, port, reason);
    let relayed = match named {
        Named::Tls(_) => relay(guest, upstream, &head, gateway.config.relay_idle, started),
        Named::Http(request) => relay_request(guest, upstream, &head, &request, started, refuse),
    };
    if !relayed {
        gateway.report.refused(&name, port, "the gateway is busy");
    }
}

/// What the first bytes of a connection name: a TLS server name, or a plain HTTP request.
enum Named {
    Tls(String),
    Http(Request),
}

/// Reads until the connection names its host (within `PEEK_WAIT` in all, `PEEK_MAX` bytes).
fn read_name(guest: &mut TcpStream, port: u16, head: &mut Vec<u8>) -> Result<Named, &'static str> {
    let deadline = std::time::Instant::now() + PEEK_WAIT;
    let mut buffer = [0u8; 4_096];
    loop {
        match peek(head, port) {
            Peeked::Name(name) => break Ok(Named::Tls(name)),
            Peeked::Request(request) => break Ok(Named::Http(request)),
            Peeked::Unnamed(reason) => break Err(reason),
            Peeked::Incomplete if head.len() >= PEEK_MAX => break Err("no host named in time"),
            Peeked::Incomplete => {}
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || guest.set_read_timeout(Some(left)).is_err() {
            break Err("no host named in time");
        }
        match guest.read(&mut buffer) {
            Ok(0) => break Err("closed before naming a host"),
            Ok(n) => head.extend_from_slice(&buffer[..n]),
            Err(_) => break Err("no host named in time"),
        }
    }
    .and_then(|name| {
        guest
            .set_read_timeout(None)
            .map(|()| name)
            .map_err(|_| "the connection failed")
    })
}
