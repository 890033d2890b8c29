//! This network namespace's IPv4 interface addresses (getifaddrs), each once. Shared by file
//! with the controller's crate (`src/docker/host_addresses.rs` includes it by path): the
//! gateway finds its own address with it, the controller its host's. std and libc only.

use std::net::Ipv4Addr;

/// Every IPv4 address of every interface, loopback included, in the kernel's order.
pub fn ipv4() -> std::io::Result<Vec<Ipv4Addr>> {
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
                if !found.contains(&ip) {
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
    #[test]
    fn loopback_is_among_them_once() {
        let addresses = super::ipv4().expect("getifaddrs");
        let loopback = std::net::Ipv4Addr::LOCALHOST;
        assert_eq!(addresses.iter().filter(|ip| **ip == loopback).count(), 1);
    }
}
