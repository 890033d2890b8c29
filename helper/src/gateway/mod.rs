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

mod address;
mod config;
mod dns;
mod drain;
mod http;
mod name;
mod peek;
mod refusal;
mod report;
mod resolve;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use address::{class, Class};
use config::Config;
use dns::{bare_answer, parse_query, Malformed, Query, RCODE_NXDOMAIN, RCODE_SERVFAIL, TYPE_A};
use drain::{drain, LINGER};
use http::{Body, Chunked, Request};
use peek::{peek, Peeked, PEEK_MAX};
use refusal::{tell, Cause};
use report::Report;
use resolve::{Resolved, Resolver};

pub use report::print as print_report;

/// How long a connection may take, in all, to name its host, and its upstream (every address
/// tried, one after another) to accept.
const PEEK_WAIT: Duration = Duration::from_secs(10);
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long a loop waits after its socket failed (out of descriptors, say) before it tries again.
const FAILURE_PAUSE: Duration = Duration::from_millis(100);
/// The TTL of the gateway's answers: short, so a changed upstream is asked again soon.
const ANSWER_TTL: u32 = 30;
const RELAY_BYTES: usize = 64 * 1_024;
const THREAD_STACK: usize = 256 * 1_024;

struct Gateway {
    config: Config,
    own: Ipv4Addr,
    /// The host's addresses: the controller's and this network namespace's default routes.
    host_addresses: Vec<Ipv4Addr>,
    resolver: Resolver,
    report: Report,
    /// Connections and lookups being served; each holds its threads (`Slot`).
    in_flight: AtomicUsize,
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
        in_flight: AtomicUsize::new(0),
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

/// One in-flight connection or lookup, taken before its thread is spawned and held until it
/// is over: the threads the gateway runs stay within `config.in_flight` (a relay has two).
struct Slot(Arc<Gateway>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

fn slot(gateway: &Arc<Gateway>) -> Option<Slot> {
    let before = gateway.in_flight.fetch_add(1, Ordering::AcqRel);
    let slot = Slot(Arc::clone(gateway));
    (before < gateway.config.in_flight).then_some(slot)
}

fn serve_lookups(gateway: &Arc<Gateway>, socket: &UdpSocket) {
    let mut buffer = [0u8; 1_500];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buffer) else {
            std::thread::sleep(FAILURE_PAUSE);
            continue;
        };
        if !gateway.config.internal(ip_of(from)) {
            continue;
        }
        // Only a listed name's A question waits on the upstream, on a thread of its own; every
        // other answer, and a busy gateway's, is sent at once.
        let query = match answer_at_once(gateway, &buffer[..n]) {
            Ok(Some(answer)) => {
                let _ = socket.send_to(&answer, from);
                continue;
            }
            Ok(None) => continue,
            Err(query) => query,
        };
        let busy = query.answer(RCODE_SERVFAIL, None, 0);
        let refuse = || {
            gateway
                .report
                .refused(&query.name, 53, "the gateway is busy");
            let _ = socket.send_to(&busy, from);
        };
        let (Some(held), Ok(reply)) = (slot(gateway), socket.try_clone()) else {
            refuse();
            continue;
        };
        let message = buffer[..n].to_vec();
        let spawned = spawn(move || {
            if let Ok(query) = parse_query(&message) {
                let resolved = held.0.resolver.resolve(&query.name);
                let _ = reply.send_to(&answer_a(&held.0, &query, resolved), from);
            }
            drop(held);
        });
        if spawned.is_err() {
            refuse();
        }
    }
}

fn ip_of(address: SocketAddr) -> Ipv4Addr {
    match address {
        SocketAddr::V4(v4) => *v4.ip(),
        SocketAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
    }
}

/// The answer to a guest lookup that needs no upstream (`Ok`: `None` for a message not worth
/// one), or the query of a listed name's A question, which does (`Err`).
fn answer_at_once<'a>(gateway: &Gateway, message: &'a [u8]) -> Result<Option<Vec<u8>>, Query<'a>> {
    let query = match parse_query(message) {
        Ok(query) => query,
        Err(Malformed::Unanswerable) => return Ok(None),
        Err(Malformed::Answer(id, code)) => {
            gateway
                .report
                .refused("a malformed lookup", 53, "not a lookup the gateway answers");
            return Ok(Some(bare_answer(id, code)));
        }
    };
    if !gateway.config.names(&query.name) {
        gateway
            .report
            .refused(&query.name, 53, "not on the allowlist");
        return Ok(Some(query.answer(RCODE_NXDOMAIN, None, 0)));
    }
    if !query.is_internet_class() {
        gateway
            .report
            .refused(&query.name, 53, "not an internet-class question");
        return Ok(Some(query.answer(RCODE_NXDOMAIN, None, 0)));
    }
    if query.qtype != TYPE_A {
        // Allowed, but only IPv4 goes out: an empty answer, so the guest asks for A.
        return Ok(Some(query.answer(0, None, ANSWER_TTL)));
    }
    match gateway.resolver.cached(&query.name) {
        Some(addresses) => Ok(Some(answer_a(
            gateway,
            &query,
            Resolved::Addresses(addresses),
        ))),
        None => Err(query),
    }
}

/// The answer to a listed name's A question once the name resolved: the gateway's own
/// address when it has addresses; a name without any is counted as refused, saying why, so
/// the guest's failed lookup shows in the report.
fn answer_a(gateway: &Gateway, query: &Query<'_>, resolved: Resolved) -> Vec<u8> {
    let refuse = |reason| gateway.report.refused(&query.name, 53, reason);
    match resolved {
        Resolved::Addresses(addresses) if addresses.is_empty() => {
            refuse("the name has no IPv4 address");
            query.answer(0, None, ANSWER_TTL)
        }
        Resolved::Addresses(_) => {
            gateway.report.allowed();
            query.answer(0, Some(gateway.own), ANSWER_TTL)
        }
        Resolved::NoSuchName => {
            refuse("the name does not exist");
            query.answer(RCODE_NXDOMAIN, None, 0)
        }
        Resolved::Failed(why) => {
            eprintln!("native-sandbox gateway: resolving {}: {why}", query.name);
            refuse("the name could not be resolved");
            query.answer(RCODE_SERVFAIL, None, 0)
        }
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
        let Some(held) = slot(gateway) else {
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

/// One guest connection on `port`: named, judged, then relayed or closed.
fn connection(gateway: &Gateway, port: u16, mut guest: TcpStream) {
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
        Named::Tls(_) => relay(guest, upstream, &head, started),
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

/// Both directions until each ends; an end is passed on as a half close. `false` when the
/// second direction's thread could not start (both sides are then closed, nothing relayed).
fn relay(guest: TcpStream, upstream: TcpStream, head: &[u8], started: impl FnOnce()) -> bool {
    relay_with(
        guest,
        upstream,
        started,
        AnswerEnd::HalfClose,
        |guest_reader, mut upstream_writer, _| {
            if upstream_writer.write_all(head).is_ok() {
                copy(&guest_reader, &upstream_writer);
            } else {
                let _ = guest_reader.shutdown(Shutdown::Both);
                let _ = upstream_writer.shutdown(Shutdown::Both);
            }
        },
    )
}

/// A plain HTTP connection: its one request (`http.rs`: the head as rewritten, then the body
/// as framed, from the bytes already read on) goes up, the answer comes back until the
/// upstream ends. What the guest sends after that body is read and dropped (`drain`); a
/// request cut short is passed on as a half close, a malformed body ends both ways, refused.
/// Once the answer ended nothing more goes up: an upstream that answered early and stopped
/// reading the body cannot hold the relay.
fn relay_request(
    guest: TcpStream,
    upstream: TcpStream,
    read: &[u8],
    request: &Request,
    started: impl FnOnce(),
    refuse: impl FnOnce(&'static str),
) -> bool {
    relay_with(
        guest,
        upstream,
        started,
        AnswerEnd::Close,
        |mut guest_reader, mut upstream_writer, answered| {
            let early = read.get(request.consumed..).unwrap_or_default();
            match send_request(
                &mut guest_reader,
                &mut upstream_writer,
                early,
                request,
                answered,
            ) {
                // The upstream closes after its answer (`Connection: close`); the guest's own end
                // is not passed on (a server may take a half close for the end of everything).
                // An upstream that stopped taking the body answered early (413, 401): the guest
                // still gets that answer.
                Ok(()) | Err(Cut::Upstream) => drain(&mut guest_reader, answered, LINGER),
                Err(Cut::Guest) => {
                    let _ = upstream_writer.shutdown(Shutdown::Write);
                }
                Err(Cut::Malformed(reason)) => {
                    refuse(reason);
                    let _ = upstream_writer.shutdown(Shutdown::Both);
                }
            }
        },
    )
}

/// Why a request's body did not go up whole.
enum Cut {
    /// The guest ended (or failed) first.
    Guest,
    /// The upstream stopped taking it.
    Upstream,
    /// A chunked body that is not chunked as it says.
    Malformed(&'static str),
}

/// What the end of the answer (the upstream-to-guest direction) does to the other direction.
enum AnswerEnd {
    /// Nothing: the guest may go on sending (a half-closed TLS stream).
    HalfClose,
    /// The upstream is closed for writing too, so a write blocked on it fails at once.
    Close,
}

/// Starts the upstream-to-guest direction on a thread of its own, says so (`started`), runs
/// `forward` (the other direction) here, and waits for both. `forward` is told when the
/// upstream-to-guest direction ended (its third argument).
fn relay_with(
    guest: TcpStream,
    upstream: TcpStream,
    started: impl FnOnce(),
    answer_end: AnswerEnd,
    forward: impl FnOnce(TcpStream, TcpStream, &AtomicBool),
) -> bool {
    let (Ok(guest_reader), Ok(upstream_writer)) = (guest.try_clone(), upstream.try_clone()) else {
        return false;
    };
    for socket in [&guest, &upstream] {
        let _ = socket.set_nodelay(true);
        keepalive(socket);
    }
    let answered = Arc::new(AtomicBool::new(false));
    let ended = Arc::clone(&answered);
    let back = match spawn(move || {
        copy(&upstream, &guest);
        ended.store(true, Ordering::Release);
        if let AnswerEnd::Close = answer_end {
            let _ = upstream.shutdown(Shutdown::Write);
        }
    }) {
        Ok(back) => back,
        Err(_) => {
            let _ = guest_reader.shutdown(Shutdown::Both);
            let _ = upstream_writer.shutdown(Shutdown::Both);
            return false;
        }
    };
    started();
    forward(guest_reader, upstream_writer, &answered);
    let _ = back.join();
    true
}

/// Writes the request's head, then exactly its body: first from `early` (bytes read with the
/// head), then from the guest; `Err` says why it did not. Once the answer ended (`answered`)
/// the body is given up as the upstream's (`Cut::Upstream`): a guest that stops sending its
/// body then is left to `drain`'s bounds.
fn send_request(
    guest: &mut TcpStream,
    upstream: &mut TcpStream,
    early: &[u8],
    request: &Request,
    answered: &AtomicBool,
) -> Result<(), Cut> {
    upstream
        .write_all(&request.head)
        .map_err(|_| Cut::Upstream)?;
    guest
        .set_read_timeout(Some(drain::POLL))
        .map_err(|_| Cut::Guest)?;
    let mut buffer = vec![0u8; RELAY_BYTES];
    match request.body {
        Body::Length(length) => {
            let first = usize::try_from(length).map_or(early.len(), |n| n.min(early.len()));
            upstream
                .write_all(&early[..first])
                .map_err(|_| Cut::Upstream)?;
            let mut left = length - first as u64;
            while left > 0 {
                let want = usize::try_from(left).map_or(buffer.len(), |n| n.min(buffer.len()));
                let n = read_body(guest, &mut buffer[..want], answered)?;
                upstream
                    .write_all(&buffer[..n])
                    .map_err(|_| Cut::Upstream)?;
                left -= n as u64;
            }
            Ok(())
        }
        Body::Chunked => {
            let mut chunked = Chunked::default();
            let mut judged = Vec::with_capacity(RELAY_BYTES);
            let mut done = chunked.feed(early, &mut judged).map_err(Cut::Malformed)?;
            upstream.write_all(&judged).map_err(|_| Cut::Upstream)?;
            while !done {
                let n = read_body(guest, &mut buffer, answered)?;
                judged.clear();
                done = chunked
                    .feed(&buffer[..n], &mut judged)
                    .map_err(Cut::Malformed)?;
                upstream.write_all(&judged).map_err(|_| Cut::Upstream)?;
            }
            Ok(())
        }
    }
}

/// Some bytes of the body from the guest (`guest` reads time out after `drain::POLL`).
fn read_body(
    guest: &mut TcpStream,
    buffer: &mut [u8],
    answered: &AtomicBool,
) -> Result<usize, Cut> {
    loop {
        match guest.read(buffer) {
            Ok(0) => return Err(Cut::Guest),
            Ok(n) => return Ok(n),
            Err(e) if drain::waited(&e) => {
                if answered.load(Ordering::Acquire) {
                    return Err(Cut::Upstream);
                }
            }
            Err(_) => return Err(Cut::Guest),
        }
    }
}

/// TCP keepalive: a peer that vanished without a word ends its relay within about three minutes.
fn keepalive(socket: &TcpStream) {
    use std::os::fd::AsRawFd;
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| {
        // SAFETY: setsockopt reads `value` (a c_int that outlives the call) on our own socket.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 120);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 15);
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 4);
}

/// One direction until its end (or a failure of either side), then a half close of `to`. The
/// bytes move through a pipe by splice(2), never through this process's memory; a kernel that
/// cannot splice these sockets gets a copy through a buffer instead.
fn copy(mut from: &TcpStream, mut to: &TcpStream) {
    match splice_all(from, to) {
        Spliced::Ended => {}
        Spliced::Unsupported => {
            let mut buffer = vec![0u8; RELAY_BYTES];
            loop {
                match from.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if to.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Read);
    let _ = to.shutdown(Shutdown::Write);
}

enum Spliced {
    /// The direction ended (EOF, or a failure once bytes had moved).
    Ended,
    /// Nothing moved: splice does not work here.
    Unsupported,
}

/// How much one splice moves at most, and the pipe's size asked for.
const SPLICE_BYTES: usize = 1024 * 1024;

fn splice_all(from: &TcpStream, to: &TcpStream) -> Spliced {
    use std::os::fd::AsRawFd;
    let mut pipe = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `pipe`, closed below.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Spliced::Unsupported;
    }
    let [read_end, write_end] = pipe;
    // SAFETY: only asks the kernel to resize our own pipe; a refusal leaves the default size.
    unsafe { libc::fcntl(write_end, libc::F_SETPIPE_SZ, SPLICE_BYTES as libc::c_int) };
    // Not SPLICE_F_MORE: it holds small writes back (a TLS handshake waited 200 ms a step).
    let flags = libc::SPLICE_F_MOVE;
    let mut moved_any = false;
    let outcome = 'relay: loop {
        // SAFETY: splice between descriptors this function holds open, no offsets.
        let n = unsafe {
            libc::splice(
                from.as_raw_fd(),
                std::ptr::null_mut(),
                write_end,
                std::ptr::null_mut(),
                SPLICE_BYTES,
                flags,
            )
        };
        if n == 0 {
            break Spliced::Ended;
        }
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break if moved_any {
                Spliced::Ended
            } else {
                Spliced::Unsupported
            };
        }
        moved_any = true;
        let mut left = n as usize;
        while left > 0 {
            // SAFETY: as above.
            let m = unsafe {
                libc::splice(
                    read_end,
                    std::ptr::null_mut(),
                    to.as_raw_fd(),
                    std::ptr::null_mut(),
                    left,
                    flags,
                )
            };
            if m < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if m <= 0 {
                break 'relay Spliced::Ended;
            }
            left -= m as usize;
        }
    };
    // SAFETY: both ends are ours and closed once.
    unsafe {
        libc::close(read_end);
        libc::close(write_end);
    }
    outcome
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
    use drain::tests::pair;
    use http::{parse, Parsed};
    use std::time::Instant;

    fn request(head: &[u8]) -> Request {
        match parse(head, 80) {
            Parsed::Request(request) => request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_body_the_guest_stops_sending_is_given_up_once_the_answer_ended() {
        let head = b"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 100\r\n\r\nhello";
        let request = request(head);
        let (mut from_guest, mut guest) = pair();
        let (mut to_upstream, mut upstream) = pair();
        guest.write_all(b"more").unwrap();
        let answered = AtomicBool::new(false);
        let answer_ended = std::sync::Mutex::new(None);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(600));
                *answer_ended.lock().unwrap() = Some(Instant::now());
                answered.store(true, Ordering::Release);
            });
            let early = &head[request.consumed..];
            let outcome = send_request(
                &mut from_guest,
                &mut to_upstream,
                early,
                &request,
                &answered,
            );
            let returned = Instant::now();
            assert!(matches!(outcome, Err(Cut::Upstream)));
            let ended = answer_ended
                .lock()
                .unwrap()
                .expect("returned before the answer ended");
            assert!(returned - ended < drain::POLL * 4, "{:?}", returned - ended);
        });
        drop(to_upstream);
        let mut passed = Vec::new();
        upstream.read_to_end(&mut passed).unwrap();
        assert!(
            passed.ends_with(b"Connection: close\r\n\r\nhellomore"),
            "{passed:?}"
        );
    }

    #[test]
    fn a_guest_that_ends_its_body_short_is_a_guest_cut() {
        let head =
            b"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe";
        let request = request(head);
        let (mut from_guest, guest) = pair();
        let (mut to_upstream, _upstream) = pair();
        drop(guest);
        let early = &head[request.consumed..];
        let outcome = send_request(
            &mut from_guest,
            &mut to_upstream,
            early,
            &request,
            &AtomicBool::new(false),
        );
        assert!(matches!(outcome, Err(Cut::Guest)));
    }
}
