//! The relay: moving bytes between an admitted guest connection and its upstream, both ways,
//! until each direction ends. A TLS stream is relayed as it comes (splice(2) through a pipe, a
//! buffered copy where that does not work); a plain HTTP request goes up as rewritten and framed
//! (`http.rs`), and what the guest sends after it is drained within bounds (`drain.rs`). TCP
//! keepalive bounds a relay whose peer vanished; a stream relayed as it comes that moves no
//! byte either way for the configured idle time is closed (`Activity`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::drain::{self, drain, LINGER};
use super::http::{Body, Chunked, Request};
use super::spawn;

const RELAY_BYTES: usize = 64 * 1_024;
/// How often a blocked read of an idle-bounded relay wakes to ask whether the whole relay has
/// been idle for its bound (the bound is met within one poll).
const IDLE_POLL: Duration = Duration::from_secs(1);

/// When a relay last moved a byte, either way: its two directions share it, so a stream that
/// only downloads is not idle.
pub struct Activity {
    start: Instant,
    /// Milliseconds since `start` at the last move.
    last: AtomicU64,
    limit: Duration,
}

impl Activity {
    fn new(limit: Duration) -> Self {
        Self {
            start: Instant::now(),
            last: AtomicU64::new(0),
            limit,
        }
    }

    fn moved(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.fetch_max(now, Ordering::AcqRel);
    }

    /// Whether nothing moved either way for the whole bound.
    fn exhausted(&self) -> bool {
        let last = Duration::from_millis(self.last.load(Ordering::Acquire));
        self.start.elapsed().saturating_sub(last) >= self.limit
    }

    /// How long a read may block before the bound is asked again.
    fn poll(&self) -> Duration {
        IDLE_POLL.min(self.limit).max(Duration::from_millis(10))
    }
}

/// Both directions until each ends; an end is passed on as a half close; both are closed once
/// no byte moved either way for `idle`. `false` when the second direction's thread could not
/// start (both sides are then closed, nothing relayed).
pub fn relay(
    guest: TcpStream,
    upstream: TcpStream,
    head: &[u8],
    idle: Duration,
    started: impl FnOnce(),
) -> bool {
    let activity = Arc::new(Activity::new(idle));
    for socket in [&guest, &upstream] {
        // Every blocked read or write wakes once a poll to ask the relay's idle bound (the
        // clones made below share the socket, and this): a direction blocked on a peer that
        // never reads is as idle as one that never sends.
        let _ = socket.set_read_timeout(Some(activity.poll()));
        let _ = socket.set_write_timeout(Some(activity.poll()));
    }
    let forward = Arc::clone(&activity);
    relay_with(
        guest,
        upstream,
        started,
        AnswerEnd::HalfClose,
        Some(activity),
        move |guest_reader, mut upstream_writer, _| {
            if upstream_writer.write_all(head).is_ok() {
                copy(&guest_reader, &upstream_writer, Some(&forward));
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
pub fn relay_request(
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
        None,
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
/// upstream-to-guest direction ended (its third argument). With `activity`, the answer's
/// direction counts its moves there and ends the relay once it is idle for its bound.
fn relay_with(
    guest: TcpStream,
    upstream: TcpStream,
    started: impl FnOnce(),
    answer_end: AnswerEnd,
    activity: Option<Arc<Activity>>,
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
        copy(&upstream, &guest, activity.as_deref());
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
/// cannot splice these sockets gets a copy through a buffer instead. With `activity` (reads
/// then time out once a poll), every move is counted there, and a read that timed out while
/// the whole relay was idle for its bound closes both sockets both ways (the other direction
/// ends with it).
fn copy(mut from: &TcpStream, to: &TcpStream, activity: Option<&Activity>) {
    match splice_all(from, to, activity) {
        Spliced::Ended => {}
        Spliced::Idle => {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        Spliced::Unsupported => {
            let mut buffer = vec![0u8; RELAY_BYTES];
            loop {
                match from.read(&mut buffer) {
                    Ok(0) => break,
                    Err(e) => match after_failure(&e, activity) {
                        Then::Again => continue,
                        Then::Idle => {
                            let _ = from.shutdown(Shutdown::Both);
                            let _ = to.shutdown(Shutdown::Both);
                            return;
                        }
                        Then::Stop => break,
                    },
                    Ok(n) => {
                        if let Some(activity) = activity {
                            activity.moved();
                        }
                        match write_all_idle(to, &buffer[..n], activity) {
                            Written::All => {}
                            Written::Failed => break,
                            Written::Idle => {
                                let _ = from.shutdown(Shutdown::Both);
                                let _ = to.shutdown(Shutdown::Both);
                                return;
                            }
                        }
                    }
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Read);
    let _ = to.shutdown(Shutdown::Write);
}

/// How a write of a whole buffer ended.
enum Written {
    All,
    Failed,
    /// The whole relay was idle for its bound while the write waited.
    Idle,
}

/// Writes all of `bytes`, counting each part that moves; a write that timed out
/// (`SO_SNDTIMEO`) is taken again unless the relay has been idle for its bound.
fn write_all_idle(mut to: &TcpStream, mut bytes: &[u8], activity: Option<&Activity>) -> Written {
    while !bytes.is_empty() {
        match to.write(bytes) {
            Ok(0) => return Written::Failed,
            Ok(n) => {
                bytes = &bytes[n..];
                if let Some(activity) = activity {
                    activity.moved();
                }
            }
            Err(e) => match after_failure(&e, activity) {
                Then::Again => {}
                Then::Idle => return Written::Idle,
                Then::Stop => return Written::Failed,
            },
        }
    }
    Written::All
}

/// What a failed read, write or splice of a relay leads to.
enum Then {
    /// Taken again: interrupted, or at its timeout while the relay is within its idle bound.
    Again,
    /// At its timeout, the whole relay idle for its bound.
    Idle,
    /// The direction's end.
    Stop,
}

fn after_failure(error: &std::io::Error, activity: Option<&Activity>) -> Then {
    if error.kind() == std::io::ErrorKind::Interrupted {
        return Then::Again;
    }
    match activity {
        Some(activity) if timed_out(error) && activity.exhausted() => Then::Idle,
        Some(_) if timed_out(error) => Then::Again,
        _ => Then::Stop,
    }
}

/// A read or write that ended at its timeout (`SO_RCVTIMEO`, `SO_SNDTIMEO`), not a failure.
fn timed_out(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

enum Spliced {
    /// The direction ended (EOF, or a failure once bytes had moved).
    Ended,
    /// The whole relay was idle for its bound.
    Idle,
    /// Nothing moved: splice does not work here.
    Unsupported,
}

/// How much one splice moves at most, and the pipe's size asked for.
const SPLICE_BYTES: usize = 1024 * 1024;

fn splice_all(from: &TcpStream, to: &TcpStream, activity: Option<&Activity>) -> Spliced {
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
            // A splice from a socket keeps its SO_RCVTIMEO.
            match after_failure(&std::io::Error::last_os_error(), activity) {
                Then::Again => continue,
                Then::Idle => break Spliced::Idle,
                Then::Stop => {}
            }
            break if moved_any {
                Spliced::Ended
            } else {
                Spliced::Unsupported
            };
        }
        moved_any = true;
        if let Some(activity) = activity {
            activity.moved();
        }
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
            if m < 0 {
                // A splice to a socket keeps its SO_SNDTIMEO: a peer that reads nothing leaves
                // the relay idle as much as one that sends nothing.
                match after_failure(&std::io::Error::last_os_error(), activity) {
                    Then::Again => continue,
                    Then::Idle => break 'relay Spliced::Idle,
                    Then::Stop => {}
                }
            }
            if m <= 0 {
                break 'relay Spliced::Ended;
            }
            if let Some(activity) = activity {
                activity.moved();
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

#[cfg(test)]
mod tests {
    use super::super::http::{parse, Parsed};
    use super::*;
    use drain::tests::pair;

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
    fn a_relay_idle_both_ways_for_its_bound_is_closed_and_a_busy_one_is_not() {
        let idle = Duration::from_millis(400);
        // Idle: nothing moves; both peers see the relay end within the bound and a poll.
        let (guest, mut guest_peer) = pair();
        let (upstream, mut upstream_peer) = pair();
        let started = Instant::now();
        let relayed = std::thread::spawn(move || relay(guest, upstream, b"", idle, || {}));
        let mut byte = [0u8; 1];
        assert_eq!(guest_peer.read(&mut byte).unwrap_or(0), 0);
        assert_eq!(upstream_peer.read(&mut byte).unwrap_or(0), 0);
        assert!(relayed.join().unwrap());
        let took = started.elapsed();
        assert!(took >= idle, "{took:?}");
        assert!(took < idle + IDLE_POLL.min(idle) * 3, "{took:?}");

        // Busy one way only (a download): never idle, whatever the other way does.
        let (guest, mut guest_peer) = pair();
        let (upstream, mut upstream_peer) = pair();
        let relayed = std::thread::spawn(move || relay(guest, upstream, b"", idle, || {}));
        for _ in 0..8 {
            upstream_peer.write_all(b"x").unwrap();
            std::thread::sleep(Duration::from_millis(150));
        }
        let mut received = [0u8; 8];
        guest_peer.read_exact(&mut received).unwrap();
        assert_eq!(&received, b"xxxxxxxx");
        drop(upstream_peer);
        drop(guest_peer);
        assert!(relayed.join().unwrap());

        // The guest ended its side and never reads: the answer's direction blocks on a full
        // send queue, idle, and the relay is closed all the same.
        let (guest, guest_peer) = pair();
        let (upstream, mut upstream_peer) = pair();
        guest_peer.shutdown(Shutdown::Write).unwrap();
        let started = Instant::now();
        let relayed = std::thread::spawn(move || relay(guest, upstream, b"", idle, || {}));
        let chunk = vec![7u8; 64 * 1_024];
        let _ = upstream_peer.set_write_timeout(Some(Duration::from_millis(200)));
        // Fill every queue on the way until the upstream's own write stalls.
        while upstream_peer.write(&chunk).is_ok() {}
        assert!(relayed.join().unwrap());
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{took:?}");
        drop(guest_peer);
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
