//! TCP keepalive on attach connections to TCP and TLS engines: a connection whose peer vanished
//! without closing it (a host gone, a NAT entry dropped) fails within `DEAD_AFTER` instead of
//! leaving a process's reads waiting for ever. Unix sockets need none.

use std::os::fd::AsRawFd;
use std::time::Duration;

/// Idle time before the first probe.
pub const IDLE: Duration = Duration::from_secs(30);
/// Time between unanswered probes.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes after which the connection fails.
pub const PROBES: u32 = 3;
/// The bound the settings give: a dead peer is noticed at most this long after the last byte.
pub const DEAD_AFTER: Duration = Duration::from_secs(30 + 10 * 3);

/// Turns keepalive on for `socket` with `IDLE`, `INTERVAL` and `PROBES`.
pub fn enable(socket: &impl AsRawFd) -> std::io::Result<()> {
    let fd = socket.as_raw_fd();
    set(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(fd, libc::IPPROTO_TCP, IDLE_OPTION, seconds(IDLE))?;
    set(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPINTVL,
        seconds(INTERVAL),
    )?;
    set(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPCNT,
        PROBES as libc::c_int,
    )
}

/// The option for the idle time: Linux's name, and macOS's for the same thing.
#[cfg(any(target_os = "linux", target_os = "android"))]
const IDLE_OPTION: libc::c_int = libc::TCP_KEEPIDLE;
#[cfg(target_vendor = "apple")]
const IDLE_OPTION: libc::c_int = libc::TCP_KEEPALIVE;

fn seconds(duration: Duration) -> libc::c_int {
    libc::c_int::try_from(duration.as_secs()).unwrap_or(libc::c_int::MAX)
}

fn set(fd: i32, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> std::io::Result<()> {
    // SAFETY: `fd` is an open socket for the call; `value` lives across it and its size is
    // passed exactly.
    let done = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if done < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(fd: i32, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = 0;
        let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `fd` is open; `value` and `size` are valid for the writes `getsockopt` makes.
        let done = unsafe {
            libc::getsockopt(
                fd,
                level,
                name,
                std::ptr::addr_of_mut!(value).cast(),
                &mut size,
            )
        };
        assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
        value
    }

    #[tokio::test]
    async fn an_attach_connection_probes_a_silent_peer_within_the_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let address = listener.local_addr().expect("address");
        let stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        enable(&stream).expect("keepalive");
        let fd = stream.as_raw_fd();
        assert_ne!(get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0);
        let idle = get(fd, libc::IPPROTO_TCP, IDLE_OPTION);
        let interval = get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL);
        let probes = get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT);
        assert_eq!((idle, interval, probes), (30, 10, 3));
        let bound = Duration::from_secs((idle + interval * probes) as u64);
        assert_eq!(bound, DEAD_AFTER);
    }
}
