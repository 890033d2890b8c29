//! The IPv4 addresses of the engine's own host, when that host is this one: the engine reached
//! over a unix socket, or over TCP at a loopback name. An allowlist sandbox's gateway refuses
//! them like private ones, whatever interface carries them (a public address on the host's
//! uplink reaches the host's own services, not the internet). The host of an engine elsewhere
//! cannot be read from here: only its addresses on the gateway's own networks are known then
//! (`reservation/gateway.rs`).

use std::net::Ipv4Addr;

use super::dialer::Dialer;
use crate::lifecycle::error::OwnerError;

/// Every IPv4 address of this host but loopback (refused anyway) when the engine runs here;
/// none when it runs elsewhere.
pub async fn of_local_engine(dialer: &Dialer) -> Result<Vec<Ipv4Addr>, OwnerError> {
    if !engine_is_local(dialer) {
        return Ok(Vec::new());
    }
    // getifaddrs asks the kernel over netlink: a blocking call, kept off the async runtime.
    tokio::task::spawn_blocking(interface_addresses)
        .await
        .map_err(|e| OwnerError::driver(format!("reading this host's addresses: {e}")))?
        .map_err(|e| OwnerError::driver(format!("reading this host's addresses: {e}")))
}

/// Whether the engine runs on this host: a unix socket, or TCP to a loopback name.
fn engine_is_local(dialer: &Dialer) -> bool {
    match dialer {
        Dialer::Unix(_) => true,
        Dialer::Tcp(authority) | Dialer::Tls { authority, .. } => loopback_authority(authority),
    }
}

/// Whether `host:port` (`[v6]:port` for IPv6) names this host by loopback.
fn loopback_authority(authority: &str) -> bool {
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn interface_addresses() -> std::io::Result<Vec<Ipv4Addr>> {
    let mut found = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list freed below by freeifaddrs; every node and
    // address read belongs to that list while it lives, and an AF_INET address is a
    // sockaddr_in.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut node = list;
        while !node.is_null() {
            let address = (*node).ifa_addr;
            if !address.is_null() && i32::from((*address).sa_family) == libc::AF_INET {
                let v4 = &*(address as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                if !ip.is_loopback() && !found.contains(&ip) {
                    found.push(ip);
                }
            }
            node = (*node).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_is_local_over_a_socket_or_a_loopback_name() {
        assert!(engine_is_local(&Dialer::Unix(
            "/var/run/docker.sock".into()
        )));
        for local in [
            "127.0.0.1:2375",
            "localhost:2375",
            "LOCALHOST:1",
            "[::1]:2376",
        ] {
            assert!(engine_is_local(&Dialer::Tcp(local.into())), "{local}");
        }
        for remote in ["10.0.0.5:2375", "engine.example:2376", "[2001:db8::1]:2375"] {
            assert!(!engine_is_local(&Dialer::Tcp(remote.into())), "{remote}");
        }
    }

    #[test]
    fn this_hosts_addresses_leave_out_loopback() {
        let addresses = interface_addresses().expect("getifaddrs");
        assert!(addresses.iter().all(|ip| !ip.is_loopback()));
        let mut unique = addresses.clone();
        unique.dedup();
        assert_eq!(unique.len(), addresses.len());
    }
}
