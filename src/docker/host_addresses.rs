//! The public IPv4 addresses of the engine's own host that the controller can know. When that
//! host is this one (the engine reached over a unix socket, or over TCP at a loopback or
//! unspecified address or one of this host's own): every public address of this host's
//! interfaces. When the engine runs elsewhere: the addresses the controller reaches it at (its
//! endpoint's host, resolved). An allowlist sandbox's gateway refuses them like private ones,
//! whatever interface carries them (a public address on the host's uplink reaches the host's
//! own services, not the internet); private ones it refuses anyway, so they are left out. This
//! host's addresses are this process's network namespace's: a controller in a container of its
//! own, with the engine's socket mounted, sees its container's addresses, not the host's. Of an
//! engine elsewhere, its other addresses cannot be read from here: only its addresses on the
//! gateway's own networks are known besides (`sandbox/gateway.rs`).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::dialer::Dialer;
use crate::lifecycle::error::OwnerError;

/// How long resolving a remote engine's host may take.
const RESOLVE_WAIT: Duration = Duration::from_secs(5);

/// Every public IPv4 address of this host when the engine runs here; the public addresses of
/// the engine's endpoint when it runs elsewhere.
pub async fn of_engine_host(dialer: &Dialer) -> Result<Vec<Ipv4Addr>, OwnerError> {
    let failed = |e: String| OwnerError::driver(format!("reading this host's addresses: {e}"));
    // getifaddrs asks the kernel over netlink: a blocking call, kept off the async runtime.
    let own: Vec<Ipv4Addr> = tokio::task::spawn_blocking(interface::ipv4)
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(|e| failed(e.to_string()))?;
    let host = if engine_is_local(dialer, &own) {
        own
    } else {
        match dialer {
            Dialer::Tcp(authority) | Dialer::Tls { authority, .. } => {
                endpoint_addresses(authority).await?
            }
            Dialer::Unix(_) => Vec::new(),
        }
    };
    Ok(host
        .into_iter()
        .filter(|ip| address::class(*ip, &[]) == address::Class::Public)
        .collect())
}

/// The IPv4 addresses `authority` (`host:port`) resolves to, within `RESOLVE_WAIT`. The
/// controller has just reached the engine there, so a failure is reported, not passed over.
async fn endpoint_addresses(authority: &str) -> Result<Vec<Ipv4Addr>, OwnerError> {
    let failed =
        |why: String| OwnerError::driver(format!("resolving the engine's host {authority}: {why}"));
    let resolved = tokio::time::timeout(RESOLVE_WAIT, tokio::net::lookup_host(authority))
        .await
        .map_err(|_| failed(format!("no answer within {} s", RESOLVE_WAIT.as_secs())))?
        .map_err(|e| failed(e.to_string()))?;
    Ok(resolved
        .filter_map(|address| match address.ip() {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
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
    async fn only_public_addresses_of_a_local_engine() {
        let local = of_engine_host(&Dialer::Unix("/var/run/docker.sock".into()))
            .await
            .expect("read");
        assert!(local
            .iter()
            .all(|ip| address::class(*ip, &[]) == address::Class::Public));
    }

    #[tokio::test]
    async fn a_remote_engine_gives_its_endpoint_address_when_public() {
        // Literal addresses: nothing is asked of any resolver.
        let public = of_engine_host(&Dialer::Tcp("198.19.0.7:2376".into()))
            .await
            .expect("read");
        assert_eq!(public, vec![Ipv4Addr::new(198, 19, 0, 7)]);
        for private in ["10.0.0.5:2375", "203.0.113.9:2376", "[2001:db8::1]:2375"] {
            let none = of_engine_host(&Dialer::Tcp(private.into()))
                .await
                .expect("read");
            assert!(none.is_empty(), "{private}: {none:?}");
        }
    }
}
