//! The gateway's own lookups of allowed names, upstream, with a small cache: what it resolves
//! is the only place a connection may go.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::dns::{a_query, parse_answer, Upstream};

/// How long one resolver may take to answer one attempt.
const ATTEMPT_WAIT: Duration = Duration::from_secs(2);
/// Cached answers live between these bounds, whatever TTL they carry.
const TTL_MIN: Duration = Duration::from_secs(5);
const TTL_MAX: Duration = Duration::from_secs(300);
/// At most this many names cached; the cache starts over beyond.
const CACHE_MAX: usize = 1_024;

pub struct Resolver {
    servers: Vec<Ipv4Addr>,
    cache: Mutex<HashMap<String, (Vec<Ipv4Addr>, Instant)>>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    Addresses(Vec<Ipv4Addr>),
    NoSuchName,
    Failed(String),
}

impl Resolver {
    /// Asks `servers`, else the nameservers of `/etc/resolv.conf`.
    pub fn new(servers: Vec<Ipv4Addr>) -> Result<Self, String> {
        let servers = if servers.is_empty() {
            system_resolvers()?
        } else {
            servers
        };
        Ok(Self {
            servers,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The addresses of `name` still fresh in the cache, asking no one.
    pub fn cached(&self, name: &str) -> Option<Vec<Ipv4Addr>> {
        let cache = self.lock();
        let (addresses, until) = cache.get(name)?;
        (Instant::now() < *until).then(|| addresses.clone())
    }

    pub fn resolve(&self, name: &str) -> Resolved {
        if let Some(addresses) = self.cached(name) {
            return Resolved::Addresses(addresses);
        }
        let mut failure = String::from("no resolver answered");
        for server in &self.servers {
            match ask(*server, name) {
                Ok(Upstream::Addresses(addresses, ttl)) => {
                    // An empty answer has no TTL of its own: it is asked again soon.
                    let ttl = if addresses.is_empty() {
                        TTL_MIN
                    } else {
                        Duration::from_secs(u64::from(ttl)).clamp(TTL_MIN, TTL_MAX)
                    };
                    let mut cache = self.lock();
                    if cache.len() >= CACHE_MAX {
                        cache.clear();
                    }
                    cache.insert(name.to_owned(), (addresses.clone(), Instant::now() + ttl));
                    return Resolved::Addresses(addresses);
                }
                Ok(Upstream::NoSuchName) => return Resolved::NoSuchName,
                Ok(Upstream::Failed(code)) => failure = format!("{server} answered code {code}"),
                Err(e) => failure = format!("{server}: {e}"),
            }
        }
        Resolved::Failed(failure)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Vec<Ipv4Addr>, Instant)>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn ask(server: Ipv4Addr, name: &str) -> std::io::Result<Upstream> {
    let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    socket.connect(SocketAddrV4::new(server, 53))?;
    socket.set_read_timeout(Some(ATTEMPT_WAIT))?;
    let id = query_id();
    socket.send(&a_query(id, name))?;
    let mut buffer = [0u8; 1_500];
    let deadline = Instant::now() + ATTEMPT_WAIT;
    loop {
        let n = socket.recv(&mut buffer)?;
        if let Some(answer) = parse_answer(id, &buffer[..n]) {
            return Ok(answer);
        }
        if Instant::now() >= deadline {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
    }
}

/// A random query ID: an off-path answer must guess it (and the random source port).
fn query_id() -> u16 {
    let mut bytes = [0u8; 2];
    // SAFETY: getrandom writes at most the 2 bytes of `bytes`, which outlives the call.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != 2 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        return nanos as u16;
    }
    u16::from_ne_bytes(bytes)
}

fn system_resolvers() -> Result<Vec<Ipv4Addr>, String> {
    let text = std::fs::read_to_string("/etc/resolv.conf")
        .map_err(|e| format!("reading /etc/resolv.conf: {e}"))?;
    let servers = nameservers(&text);
    if servers.is_empty() {
        return Err("/etc/resolv.conf names no IPv4 nameserver".into());
    }
    Ok(servers)
}

fn nameservers(text: &str) -> Vec<Ipv4Addr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver"))
                .then(|| words.next()?.parse().ok())
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ipv4_nameservers() {
        let text =
            "# x\nnameserver 127.0.0.11\nnameserver ::1\noptions ndots:0\nnameserver 10.0.0.2\n";
        assert_eq!(
            nameservers(text),
            vec![Ipv4Addr::new(127, 0, 0, 11), Ipv4Addr::new(10, 0, 0, 2)]
        );
    }
}
