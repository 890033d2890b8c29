//! Which upstream addresses a connection may go to: never an unusable one (unspecified,
//! loopback: the gateway's own, never the host's or the guest's; multicast, broadcast,
//! reserved); a private one (link-local such as cloud metadata,
//! RFC 1918, shared address space, IETF protocol assignments, documentation ranges, or the
//! host's own) only for an entry that opts in. The benchmarking range 198.18.0.0/15 counts as
//! public: it is routed nowhere on the internet, so only a network of the host's own can answer
//! there (this package's tests build theirs in it, on this machine).

use std::net::Ipv4Addr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Public,
    Private,
    Unusable,
}

pub fn class(address: Ipv4Addr, host_addresses: &[Ipv4Addr]) -> Class {
    let [a, b, c, _] = address.octets();
    if address.is_unspecified()
        || a == 0
        || address.is_loopback()
        || address.is_multicast()
        || address.is_broadcast()
        || a >= 240
    {
        return Class::Unusable;
    }
    let shared = a == 100 && (64..128).contains(&b);
    // All of 192.0.0/24, its two anycast addresses (.9, .10) too: refusing more is safe.
    let protocol_assignments = (a, b, c) == (192, 0, 0);
    let documentation = matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113));
    if address.is_link_local()
        || address.is_private()
        || shared
        || protocol_assignments
        || documentation
        || host_addresses.contains(&address)
    {
        return Class::Private;
    }
    Class::Public
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Class {
        class(text.parse().unwrap(), &["198.18.0.1".parse().unwrap()])
    }

    #[test]
    fn classes() {
        for private in [
            "169.254.169.254",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "100.64.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.255",
            "198.18.0.1",
        ] {
            assert_eq!(of(private), Class::Private, "{private}");
        }
        for unusable in [
            "0.0.0.0",
            "127.0.0.1",
            "127.255.0.9",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert_eq!(of(unusable), Class::Unusable, "{unusable}");
        }
        for public in [
            "198.18.0.2",
            "198.19.255.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "192.0.1.1",
            "192.0.3.1",
            "203.0.114.1",
        ] {
            assert_eq!(of(public), Class::Public, "{public}");
        }
    }
}
