//! What happens to a plain HTTP guest after its one request went up (or after the upstream
//! stopped taking its body): whatever it sends next is read and dropped, never passed on, until
//! it closes, or, once the answer ended, until it has acknowledged all of the answer and stopped
//! sending. Closing a socket with unread bytes resets it, and a reset can cost the guest an
//! answer it has not read yet (a client still writing an upload fails on the reset before it
//! reads the early 413); so the gateway goes on reading, within bounds, instead of closing.

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the drain waits, once the answer ended, on a guest that leaves it unacknowledged.
#[derive(Debug, Clone, Copy)]
pub struct Linger {
    /// Without any progress: no byte from the guest and no further acknowledgement (where the
    /// kernel cannot say what is unacknowledged, no byte from the guest).
    pub idle: Duration,
    /// In all: a guest acknowledging a segment now and then holds its slot no longer.
    pub total: Duration,
}

pub const LINGER: Linger = Linger {
    idle: Duration::from_secs(2),
    total: Duration::from_secs(30),
};

/// How often a wait on the guest looks whether the answer ended or was acknowledged: the
/// drain's reads, and the body reads of `send_request` once the answer may have ended.
pub const POLL: Duration = Duration::from_millis(250);

/// Reads and drops what the guest sends until it closes (or fails), or, once `answered`, until
/// the guest acknowledged the whole answer and sent nothing for a poll, or `linger` ran out.
pub fn drain(guest: &mut TcpStream, answered: &AtomicBool, linger: Linger) {
    drain_with(guest, answered, linger, unacknowledged)
}

/// `drain`, with what tells the bytes written to the guest that it has not acknowledged yet
/// (`None`: unknown).
fn drain_with(
    guest: &mut TcpStream,
    answered: &AtomicBool,
    linger: Linger,
    queued: impl Fn(&TcpStream) -> Option<i32>,
) {
    if guest.set_read_timeout(Some(POLL.min(linger.idle))).is_err() {
        return;
    }
    let mut buffer = vec![0u8; 16 * 1_024];
    // An answer that already ended starts the clock now, not after the first read's wait.
    let mut answer_ended: Option<Instant> = answered.load(Ordering::Acquire).then(Instant::now);
    // The unacknowledged count when the guest last made progress, and when that was.
    let mut progress: Option<(Option<i32>, Instant)> = None;
    loop {
        let sent = match guest.read(&mut buffer) {
            Ok(0) => return,
            Ok(_) => true,
            Err(e) if waited(&e) => false,
            Err(_) => return,
        };
        if !answered.load(Ordering::Acquire) {
            continue;
        }
        if answer_ended.get_or_insert_with(Instant::now).elapsed() >= linger.total {
            return;
        }
        let now = queued(guest);
        if !sent && now == Some(0) {
            return;
        }
        match progress {
            Some((before, since)) if !sent && before == now => {
                if since.elapsed() >= linger.idle {
                    return;
                }
            }
            _ => progress = Some((now, Instant::now())),
        }
    }
}

/// A read that ended without bytes or an end: its timeout ran out, or a signal came.
pub fn waited(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::Interrupted
    )
}

/// The bytes written to `socket` that its peer has not acknowledged yet.
fn unacknowledged(socket: &TcpStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one c_int, `queued`, for our own socket.
    let asked = unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (asked == 0).then_some(queued)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::atomic::AtomicI32;
    use std::sync::Mutex;

    /// Bounds far above `POLL`, so a late timer or a busy machine cannot end a drain early or
    /// late by a whole step.
    const SHORT: Linger = Linger {
        idle: Duration::from_secs(1),
        total: Duration::from_secs(3),
    };
    /// How late after its cause a drain may end: a poll, and room for a loaded machine.
    const LATE: Duration = Duration::from_millis(POLL.as_millis() as u64 + 500);

    /// A connected pair on loopback: (the gateway's end, the peer's end).
    pub(in crate::gateway) fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let guest = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (gateway, _) = listener.accept().unwrap();
        (gateway, guest)
    }

    fn timed(work: impl FnOnce()) -> Duration {
        let started = Instant::now();
        work();
        started.elapsed()
    }

    #[test]
    fn a_guest_that_closes_ends_the_drain_at_once_answered_or_not() {
        for answered in [false, true] {
            let (mut gateway, mut guest) = pair();
            guest.write_all(b"GET /next HTTP/1.1\r\n\r\n").unwrap();
            drop(guest);
            let flag = AtomicBool::new(answered);
            let took = timed(|| drain_with(&mut gateway, &flag, SHORT, |_| Some(5)));
            assert!(took < LATE, "{answered}: {took:?}");
        }
    }

    #[test]
    fn an_acknowledged_answer_ends_the_drain_and_nothing_ends_it_before_the_answer() {
        let (mut gateway, _guest) = pair();
        let flag = AtomicBool::new(false);
        let answer_ended = Mutex::new(None);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Longer than the whole linger: only the answer's end counts.
                std::thread::sleep(SHORT.total + SHORT.idle);
                *answer_ended.lock().unwrap() = Some(Instant::now());
                flag.store(true, Ordering::Release);
            });
            drain_with(&mut gateway, &flag, SHORT, |_| Some(0));
            let returned = Instant::now();
            let ended = answer_ended
                .lock()
                .unwrap()
                .expect("ended before the answer");
            assert!(returned - ended < LATE, "{:?}", returned - ended);
        });
        // The real count: all of nothing written is acknowledged.
        let (mut gateway, _guest) = pair();
        let took = timed(|| drain(&mut gateway, &AtomicBool::new(true), SHORT));
        assert!(took < LATE, "{took:?}");
    }

    #[test]
    fn an_answer_left_unacknowledged_is_waited_on_for_the_idle_linger() {
        let (mut gateway, _guest) = pair();
        let took = timed(|| drain_with(&mut gateway, &AtomicBool::new(true), SHORT, |_| Some(7)));
        assert!(took >= SHORT.idle && took < SHORT.idle + LATE, "{took:?}");
    }

    #[test]
    fn a_guest_still_sending_after_acknowledging_the_answer_is_read_until_it_stops() {
        let (mut gateway, mut guest) = pair();
        let sending = Duration::from_millis(1_500);
        let last_sent = Mutex::new(None);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let started = Instant::now();
                while started.elapsed() < sending {
                    let _ = guest.write_all(&[b'x'; 1_000]);
                    *last_sent.lock().unwrap() = Some(Instant::now());
                    std::thread::sleep(Duration::from_millis(50));
                }
                // Still open, quiet: the drain ends a poll later.
                std::thread::sleep(SHORT.total);
            });
            let took =
                timed(|| drain_with(&mut gateway, &AtomicBool::new(true), SHORT, |_| Some(0)));
            let returned = Instant::now();
            let last = last_sent.lock().unwrap().expect("nothing sent");
            assert!(took >= sending, "{took:?}");
            assert!(returned - last < LATE, "{:?}", returned - last);
        });
    }

    #[test]
    fn a_kernel_that_cannot_say_gets_the_idle_linger_not_an_end_at_once() {
        let (mut gateway, _guest) = pair();
        let took = timed(|| drain_with(&mut gateway, &AtomicBool::new(true), SHORT, |_| None));
        assert!(took >= SHORT.idle && took < SHORT.idle + LATE, "{took:?}");
    }

    #[test]
    fn a_guest_acknowledging_a_little_now_and_then_is_held_no_longer_than_the_total() {
        let (mut gateway, mut guest) = pair();
        // A segment acknowledged before each idle linger runs out, and the guest keeps
        // sending: only the total ends it.
        let left = AtomicI32::new(1_000_000);
        let stop = AtomicBool::new(false);
        let took = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    let _ = guest.write_all(b"x");
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            let took = timed(|| {
                drain_with(&mut gateway, &AtomicBool::new(true), SHORT, |_| {
                    Some(left.fetch_sub(1, Ordering::Relaxed) - 1)
                })
            });
            stop.store(true, Ordering::Release);
            took
        });
        assert!(took >= SHORT.total && took < SHORT.total + LATE, "{took:?}");
    }
}
