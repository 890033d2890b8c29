//! The gateway's configuration, from its command line (written by the controller, never by the
//! guest): `--subnet A.B.C.D/N` (the sandbox's internal network; the gateway serves only on its
//! own address there), `--resolver IP` (upstream resolvers; default: `/etc/resolv.conf`'s),
//! `--deny IP` (the host's own addresses, refused like private ones) and one `--host` per
//! allowlist entry: `name[:port][!private]`, the name lower-case ASCII, `*.` for a wildcard.

use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Lower-case ASCII; a wildcard keeps its leading `*.`.
    pub name: String,
    /// `None`: 443 and 80.
    pub port: Option<u16>,
    /// Whether the name may resolve to link-local, private or host addresses.
    pub allow_private: bool,
}

impl Entry {
    /// Whether `name` (lower-case, no trailing dot) is this entry's name or, for a wildcard, a
    /// name one or more labels below it.
    pub fn matches_name(&self, name: &str) -> bool {
        match self.name.strip_prefix("*.") {
            Some(base) => {
                name.len() > base.len() + 1 && name.ends_with(base) && {
                    name.as_bytes()[name.len() - base.len() - 1] == b'.'
                }
            }
            None => self.name == name,
        }
    }

    pub fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(own) => own == port,
            None => port == 443 || port == 80,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub subnet: (Ipv4Addr, u8),
    pub resolvers: Vec<Ipv4Addr>,
    pub denied: Vec<Ipv4Addr>,
    pub hosts: Vec<Entry>,
    /// At most this many connections served at once (from `--pids`, the gateway's own PID
    /// budget: a relay runs two threads).
    pub connections: usize,
    /// At most this many lookups waiting on the upstream at once: their own slots, so a guest
    /// whose connections take every connection slot still gets its names answered.
    pub lookups: usize,
    /// A relayed stream (TLS, or anything the gateway passes as it comes) with no byte either
    /// way for this long is closed (`--relay-idle-secs`): a client's pooled idle connections
    /// do not hold their slots for ever.
    pub relay_idle: Duration,
}

/// Without `--pids`.
const CONNECTIONS_DEFAULT: usize = 64;
/// The lookups served at once, kept apart from the connections' budget.
pub const LOOKUP_SLOTS: usize = 16;
/// Without `--relay-idle-secs`.
const RELAY_IDLE_DEFAULT: Duration = Duration::from_secs(120);

impl Config {
    /// Whether `name` is admitted on `port` (`None`: it is not), and if so whether it may go
    /// to a private address: when any entry admitting it says so, whatever the list's order.
    pub fn allows_private(&self, name: &str, port: u16) -> Option<bool> {
        let mut admitting = self
            .hosts
            .iter()
            .filter(|e| e.matches_name(name) && e.allows_port(port))
            .peekable();
        admitting.peek()?;
        Some(admitting.any(|e| e.allow_private))
    }

    /// Whether any entry names `name`, on any port (what a lookup asks).
    pub fn names(&self, name: &str) -> bool {
        self.hosts.iter().any(|e| e.matches_name(name))
    }

    /// Every port some entry allows, ascending.
    pub fn ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .hosts
            .iter()
            .flat_map(|e| match e.port {
                Some(port) => vec![port],
                None => vec![80, 443],
            })
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Whether `address` is in the internal subnet.
    pub fn internal(&self, address: Ipv4Addr) -> bool {
        in_subnet(address, self.subnet)
    }
}

pub fn in_subnet(address: Ipv4Addr, (base, bits): (Ipv4Addr, u8)) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(bits))
    };
    u32::from(address) & mask == u32::from(base) & mask
}

pub fn parse(args: &[String]) -> Result<Config, String> {
    let mut subnet = None;
    let mut resolvers = Vec::new();
    let mut denied = Vec::new();
    let mut hosts = Vec::new();
    let mut pids = None;
    let mut relay_idle = RELAY_IDLE_DEFAULT;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--subnet" => subnet = Some(parse_subnet(value)?),
            "--resolver" => resolvers.push(parse_address(value)?),
            "--deny" => denied.push(parse_address(value)?),
            "--host" => hosts.push(parse_entry(value)?),
            "--pids" => {
                pids = Some(
                    value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("--pids {value} is not a positive count"))?,
                )
            }
            "--relay-idle-secs" => {
                relay_idle = value
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(Duration::from_secs)
                    .ok_or_else(|| format!("--relay-idle-secs {value} is not a positive count"))?
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let subnet = subnet.ok_or("--subnet is required")?;
    if hosts.is_empty() {
        return Err("at least one --host is required".into());
    }
    let mut config = Config {
        subnet,
        resolvers,
        denied,
        hosts,
        connections: CONNECTIONS_DEFAULT,
        lookups: LOOKUP_SLOTS,
        relay_idle,
    };
    if let Some(pids) = pids {
        config.connections = connections(pids, config.ports().len());
    }
    Ok(config)
}

/// PIDs of the holder kept from the relays: the init process, the main thread and the execs
/// beside the gateway (a transfer's helper, its stop, a report, each also briefly the engine's
/// runtime setting it up).
const EXEC_RESERVE: usize = 16;

/// How many connections the gateway serves at once within `pids`: a relay runs two threads,
/// one thread listens on each of the `ports`, the lookups keep `LOOKUP_SLOTS` threads (and one
/// that reads them), and `EXEC_RESERVE` stay.
fn connections(pids: usize, ports: usize) -> usize {
    (pids.saturating_sub(EXEC_RESERVE + ports + LOOKUP_SLOTS + 1) / 2).clamp(1, 256)
}

fn parse_address(value: &str) -> Result<Ipv4Addr, String> {
    value
        .parse()
        .map_err(|_| format!("{value} is not an IPv4 address"))
}

fn parse_subnet(value: &str) -> Result<(Ipv4Addr, u8), String> {
    let (base, bits) = value
        .split_once('/')
        .ok_or_else(|| format!("{value} is not an IPv4 subnet"))?;
    let bits: u8 = bits
        .parse()
        .ok()
        .filter(|b| *b <= 32)
        .ok_or_else(|| format!("{value} is not an IPv4 subnet"))?;
    Ok((parse_address(base)?, bits))
}

fn parse_entry(value: &str) -> Result<Entry, String> {
    let (rest, allow_private) = match value.strip_suffix("!private") {
        Some(rest) => (rest, true),
        None => (value, false),
    };
    let (name, port) = match rest.rsplit_once(':') {
        Some((name, port)) => (
            name,
            Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("{value}: {port} is not a port"))?,
            ),
        ),
        None => (rest, None),
    };
    let bare = name.strip_prefix("*.").unwrap_or(name);
    let well_formed = super::name::well_formed(bare, |b| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
    });
    if !well_formed {
        return Err(format!("{value} is not a lower-case host name"));
    }
    Ok(Entry {
        name: name.to_owned(),
        port,
        allow_private,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn reads_every_option_and_matches_names_and_ports() {
        let config = parse(&args(&[
            "--subnet",
            "10.9.0.0/16",
            "--resolver",
            "10.1.0.2",
            "--deny",
            "10.9.0.1",
            "--host",
            "api.example.com",
            "--host",
            "*.example.org:8443",
            "--host",
            "db.internal:5432!private",
        ]))
        .unwrap();
        assert_eq!(config.ports(), vec![80, 443, 5432, 8443]);
        assert!(config.internal("10.9.200.3".parse().unwrap()));
        assert!(!config.internal("10.8.0.3".parse().unwrap()));
        assert_eq!(config.allows_private("api.example.com", 443), Some(false));
        assert_eq!(config.allows_private("api.example.com", 80), Some(false));
        assert_eq!(config.allows_private("api.example.com", 8443), None);
        assert_eq!(config.allows_private("a.b.example.org", 8443), Some(false));
        assert_eq!(config.allows_private("example.org", 8443), None);
        assert_eq!(config.allows_private("badexample.org", 8443), None);
        assert_eq!(config.allows_private("x.example.org", 443), None);
        assert_eq!(config.allows_private("db.internal", 5432), Some(true));
        assert_eq!(config.connections, 64);
        assert_eq!(config.lookups, LOOKUP_SLOTS);
        assert_eq!(config.relay_idle, RELAY_IDLE_DEFAULT);
        assert!(config.names("api.example.com"));
        assert!(!config.names("api.example.com.evil"));
    }

    #[test]
    fn an_opt_in_holds_whatever_the_order_of_the_entries() {
        let config = parse(&args(&[
            "--subnet",
            "10.9.0.0/16",
            "--pids",
            "75",
            "--relay-idle-secs",
            "5",
            "--host",
            "*.example.com",
            "--host",
            "db.example.com!private",
        ]))
        .unwrap();
        assert_eq!(config.allows_private("db.example.com", 443), Some(true));
        assert_eq!(config.allows_private("www.example.com", 443), Some(false));
        // 75 PIDs, less the reserve, two ports (80 and 443) and the lookups' 17 threads, two
        // threads a relay.
        assert_eq!(config.connections, 20);
        assert_eq!(config.relay_idle, Duration::from_secs(5));
    }

    #[test]
    fn connections_leave_the_reserve_the_lookups_and_a_pid_per_port_within_one_and_256() {
        assert_eq!(
            connections(128, 2),
            (128 - EXEC_RESERVE - 2 - LOOKUP_SLOTS - 1) / 2
        );
        assert_eq!(connections(EXEC_RESERVE + LOOKUP_SLOTS + 4, 1), 1);
        assert_eq!(connections(4, 2), 1);
        assert_eq!(connections(1_000_000, 1), 256);
    }

    #[test]
    fn refuses_what_the_controller_never_writes() {
        for bad in [
            &["--host", "a.example"][..],
            &["--subnet", "10.0.0.0/33", "--host", "a.example"],
            &["--subnet", "10.0.0.0/8"],
            &["--subnet", "10.0.0.0/8", "--host", "A.example"],
            &["--subnet", "10.0.0.0/8", "--host", "a..example"],
            &["--subnet", "10.0.0.0/8", "--host", "a.example:0"],
            &[
                "--subnet",
                "10.0.0.0/8",
                "--resolver",
                "::1",
                "--host",
                "a.example",
            ],
            &[
                "--subnet",
                "10.0.0.0/8",
                "--other",
                "x",
                "--host",
                "a.example",
            ],
            &["--subnet"],
            &[
                "--subnet",
                "10.0.0.0/8",
                "--relay-idle-secs",
                "0",
                "--host",
                "a.example",
            ],
            &[
                "--subnet",
                "10.0.0.0/8",
                "--pids",
                "0",
                "--host",
                "a.example",
            ],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
    }
}
