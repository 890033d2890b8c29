//! The public IPv4 addresses of the engine's own host, when that host is this one: the engine
//! reached over a unix socket, or over TCP at a loopback or unspecified address or one of this
//! host's own. An allowlist sandbox's gateway refuses them like private ones, whatever
//! interface carries them (a public address on the host's uplink reaches the host's own
//! services, not the internet); private ones it refuses anyway, so they are left out. They are
//! this process's network namespace's: a controller in a container of its own, with the engine's
//! socket mounted, sees its container's addresses, not the host's. The host of an engine
//! elsewhere cannot be read from here: only its addresses on the gateway's own networks are
//! known then (`reservation/gateway.rs`).

use std::net::{IpAddr, Ipv4Addr};

use super::dialer::Dialer;
use crate::lifecycle::error::OwnerError;

/// Every public IPv4 address of this host when the engine runs here; none when it runs
/// elsewhere.
pub async fn of_local_engine(dialer: &Dialer) -> Result<Vec<Ipv4Addr>, OwnerError> {
    let failed = |e: String| OwnerError::driver(format!("reading this host's addresses: {e}"));
    // getifaddrs asks the kernel over netlink: a blocking call, kept off the async runtime.
    let own = tokio::task::spawn_blocking(interface::ipv4)
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    if !engine_is_local(dialer, &own) {
        return Ok(Vec::new());
    }
    Ok(own
        .into_iter()
        .filter(|ip| address::class(*ip, &[]) == address::Class::Public)
        .collect())
}

/// Whether the engine runs on this host: a unix socket, or TCP to a loopback or unspecified
/// address, `localhost`, or one of `own` (this host's addresses).
fn engine_is_local(dialer: &Dialer, own: &[Ipv4Addr]) -> bool {
    match dialer {
        Dialer::Unix(_) => true,
        Dialer::Tcp(authority) | Dialer::Tls { authority, .. } => {
            let host = authority
                .rsplit_once(':')
                .map_or(authority.as_str(), |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host.parse::<IpAddr>().is_ok_and(|ip| match ip {
                    IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || own.contains(&v4),
                    IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified(),
                })
        }
    }
}

/// The one getifaddrs walk, shared with the gateway (which finds its own address with it).
#[path = "../../helper/src/interface_addresses.rs"]
mod interface;

/// The one rule of which addresses are private, shared with the gateway that applies it.
#[path = "../../helper/src/gateway/address.rs"]
mod address;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_is_local_over_a_socket_or_an_address_of_this_host() {
        let own: [Ipv4Addr; 1] = [Ipv4Addr::new(192, 0, 2, 2)];
        assert!(engine_is_local(
            &Dialer::Unix("/var/run/docker.sock".into()),
            &own
        ));
        for local in [
            "127.0.0.1:2375",
            "localhost:2375",
            "LOCALHOST:1",
            "[::1]:2376",
            "0.0.0.0:2375",
            "[::]:2375",
            "192.0.2.2:2376",
        ] {
            assert!(engine_is_local(&Dialer::Tcp(local.into()), &own), "{local}");
        }
        for remote in [
            "10.0.0.5:2375",
            "192.0.2.3:2375",
            "engine.example:2376",
            "[2001:db8::1]:2375",
        ] {
            assert!(
                !engine_is_local(&Dialer::Tcp(remote.into()), &own),
                "{remote}"
            );
        }
    }

    #[tokio::test]
    async fn only_public_addresses_of_a_local_engine_each_once() {
        let local = of_local_engine(&Dialer::Unix("/var/run/docker.sock".into()))
            .await
            .expect("read");
        assert!(local
            .iter()
            .all(|ip| address::class(*ip, &[]) == address::Class::Public));
        let unique: std::collections::HashSet<_> = local.iter().collect();
        assert_eq!(unique.len(), local.len());
        let remote = of_local_engine(&Dialer::Tcp("engine.example:2376".into()))
            .await
            .expect("read");
        assert!(remote.is_empty());
    }
}
