//! The egress gateway: the workspace holder's long-running entrypoint in a sandbox whose network
//! is an allowlist. The guest sits on an internal network whose only other member is the
//! gateway, and its resolver is the gateway. Lookups of names on the list are answered with the
//! gateway's own address (after the gateway resolved them upstream); every other lookup gets
//! NXDOMAIN and never leaves the gateway. A connection to the gateway on an allowed port names
//! its host (TLS SNI or the HTTP `Host` header, `peek.rs`); when that name is allowed on that
//! port, the gateway connects to an address it resolved for the name itself (never a private
//! one unless the entry opts in: `address.rs`) and relays both ways. Everything refused is
//! counted (`report.rs`), and a refused connection is told why in its protocol
//! (`refusal.rs`). The gateway runs as the sandbox user, with no capabilities: the holder's
//! namespaced sysctl lets it bind the low ports.
//! This module starts the gateway and runs its threads; the lookups are `lookups.rs`, a
//! connection's verdict `admission.rs`, and the bytes of an admitted one `relay.rs`.

mod address;
mod admission;
mod config;
mod dns;
mod drain;
mod http;
mod lookups;
mod name;
mod peek;
mod refusal;
mod relay;
mod report;
mod resolve;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admission::connection;
use config::Config;
use lookups::serve_lookups;
use report::Report;
use resolve::Resolver;

pub use report::print as print_report;

/// How long a loop waits after its socket failed (out of descriptors, say) before it tries again.
const FAILURE_PAUSE: Duration = Duration::from_millis(100);
const THREAD_STACK: usize = 256 * 1_024;

struct Gateway {
    config: Config,
    own: Ipv4Addr,
    /// The host's addresses: the controller's and this network namespace's default routes.
    host_addresses: Vec<Ipv4Addr>,
    resolver: Resolver,
    report: Report,
    /// Connections being served; each holds its threads (`Slot`).
    connections: AtomicUsize,
    /// Lookups waiting on the upstream, counted apart: busy connections never starve them.
    lookups: AtomicUsize,
}

/// `--gateway …`: serves until killed; an error before serving is returned.
pub fn run(args: &[String]) -> Result<(), String> {
    let config = config::parse(args)?;
    let own = own_address(&config)?;
    let mut host_addresses = config.denied.clone();
    host_addresses.extend(default_routes());
    let resolver = Resolver::new(config.resolvers.clone())?;
    let dns = UdpSocket::bind(SocketAddrV4::new(own, 53))
        .map_err(|e| format!("listening for lookups on {own}:53: {e}"))?;
    let mut listeners = Vec::new();
    for port in config.ports() {
        let listener = TcpListener::bind(SocketAddrV4::new(own, port))
            .map_err(|e| format!("listening on {own}:{port}: {e}"))?;
        listeners.push((port, listener));
    }
    let gateway = Arc::new(Gateway {
        config,
        own,
        host_addresses,
        resolver,
        report: Report::default(),
        connections: AtomicUsize::new(0),
        lookups: AtomicUsize::new(0),
    });
    gateway.report.publish();
    eprintln!("native-sandbox gateway: serving on {own}");
    let mut threads = Vec::new();
    for (port, listener) in listeners {
        let gateway = Arc::clone(&gateway);
        threads.push(
            spawn(move || accept_loop(&gateway, port, &listener)).map_err(|e| e.to_string())?,
        );
    }
    serve_lookups(&gateway, &dns);
    for thread in threads {
        let _ = thread.join();
    }
    Err("the gateway stopped serving".into())
}

fn spawn<F: FnOnce() + Send + 'static>(work: F) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(work)
}

/// What a slot is taken for: each kind has its own count and limit.
#[derive(Clone, Copy)]
enum Pool {
    Connection,
    Lookup,
}

impl Gateway {
    fn pool(&self, pool: Pool) -> (&AtomicUsize, usize) {
        match pool {
            Pool::Connection => (&self.connections, self.config.connections),
            Pool::Lookup => (&self.lookups, self.config.lookups),
        }
    }
}

/// One in-flight connection or lookup, taken before its thread is spawned and held until it
/// is over: the threads the gateway runs stay within `config.connections` (a relay has two)
/// and `config.lookups`.
struct Slot(Arc<Gateway>, Pool);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.pool(self.1).0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn slot(gateway: &Arc<Gateway>, pool: Pool) -> Option<Slot> {
    let (count, limit) = gateway.pool(pool);
    let before = count.fetch_add(1, Ordering::AcqRel);
    let slot = Slot(Arc::clone(gateway), pool);
    (before < limit).then_some(slot)
}

fn ip_of(address: SocketAddr) -> Ipv4Addr {
    match address {
        SocketAddr::V4(v4) => *v4.ip(),
        SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

fn accept_loop(gateway: &Arc<Gateway>, port: u16, listener: &TcpListener) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            std::thread::sleep(FAILURE_PAUSE);
            continue;
        };
        let peer = stream
            .peer_addr()
            .map(ip_of)
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let busy = || {
            gateway
                .report
                .refused(&peer.to_string(), port, "the gateway is busy")
        };
        let Some(held) = slot(gateway, Pool::Connection) else {
            busy();
            continue;
        };
        let spawned = spawn(move || {
            connection(&held.0, port, stream);
            drop(held);
        });
        if spawned.is_err() {
            busy();
        }
    }
}

/// The gateway's address on the internal network.
fn own_address(config: &Config) -> Result<Ipv4Addr, String> {
    crate::interface_addresses::ipv4()
        .map_err(|e| format!("reading the interfaces: {e}"))?
        .into_iter()
        .rfind(|ip| config.internal(*ip))
        .ok_or_else(|| "the gateway has no address on the sandbox network".into())
}

/// The gateways of this namespace's default routes (the host's addresses on its networks).
fn default_routes() -> Vec<Ipv4Addr> {
    let Ok(table) = std::fs::read_to_string("/proc/net/route") else {
        return Vec::new();
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let gateway = u32::from_str_radix(fields.get(2)?, 16).ok()?;
            // The table prints each address's network-order bytes read as a native integer.
            (gateway != 0).then(|| Ipv4Addr::from(gateway.to_ne_bytes()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(pids: &str) -> Arc<Gateway> {
        let args: Vec<String> = [
            "--subnet",
            "10.9.0.0/24",
            "--pids",
            pids,
            "--host",
            "a.example",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Arc::new(Gateway {
            config: config::parse(&args).unwrap(),
            own: Ipv4Addr::new(10, 9, 0, 2),
            host_addresses: Vec::new(),
            resolver: Resolver::new(vec![Ipv4Addr::new(10, 9, 0, 1)]).unwrap(),
            report: Report::default(),
            connections: AtomicUsize::new(0),
            lookups: AtomicUsize::new(0),
        })
    }

    #[test]
    fn connections_that_take_every_slot_leave_the_lookups_theirs() {
        // The smallest budget: one connection slot.
        let gateway = gateway("1");
        assert_eq!(gateway.config.connections, 1);
        let held = slot(&gateway, Pool::Connection).expect("the one connection slot");
        assert!(
            slot(&gateway, Pool::Connection).is_none(),
            "no second connection"
        );
        let lookups: Vec<Slot> = (0..config::LOOKUP_SLOTS)
            .map(|_| slot(&gateway, Pool::Lookup).expect("a lookup slot"))
            .collect();
        assert!(
            slot(&gateway, Pool::Lookup).is_none(),
            "lookups are bounded too"
        );
        drop(held);
        assert!(
            slot(&gateway, Pool::Connection).is_some(),
            "a slot comes back"
        );
        drop(lookups);
        assert_eq!(gateway.lookups.load(Ordering::Acquire), 0);
        assert_eq!(gateway.connections.load(Ordering::Acquire), 0);
    }
}
