//! Telling a refused guest why, in the protocol it spoke, before the connection closes: plain
//! HTTP gets an answer whose status says whose doing it was (403 the allowlist, 502 the
//! upstream, 400 a request the gateway does not pass as it is) and whose body names the host
//! and port judged (the gateway's own address when no host was) and the reason, so `curl`
//! prints it instead of "Empty reply from server"; TLS gets a fatal alert (`access_denied`, or
//! `internal_error` when the upstream failed), so the client reports an alert instead of a
//! reset. Anything else (another protocol, a head not read whole) gets nothing. The answer is
//! small enough for any socket's send buffer, so the write never waits on the guest; the
//! connection then closes gently (`drain`: 2 s, and the one 250 ms read under way, at most), so
//! the answer is not lost to a reset.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::drain::{drain, Linger};
use super::http::starts_with_request_line;

/// Whose refusal it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The allowlist's: the name, its port or its addresses are not allowed.
    Policy,
    /// The upstream's: the name does not resolve, or no address accepted.
    Upstream,
    /// The request's: one the gateway does not pass as it is (no host it can judge, an
    /// upgrade, a tunnel, a target naming another host).
    Malformed,
}

/// How long a refused guest may keep its connection (and its slot) after the answer, besides
/// the one `drain::POLL` read under way when time runs out: it usually closes at once (the
/// answer says `Connection: close`).
const LINGER: Linger = Linger {
    idle: Duration::from_secs(1),
    total: Duration::from_secs(2),
};

const TLS_ALERT_ACCESS_DENIED: u8 = 49;
const TLS_ALERT_INTERNAL_ERROR: u8 = 80;

/// The bytes that tell a guest whose first bytes were `head` why it was refused (`None`: no
/// protocol to say it in). `what` names the host and port, or the address asked at.
pub fn answer(head: &[u8], cause: Cause, what: &str, reason: &str) -> Option<Vec<u8>> {
    match head.first()? {
        // A TLS handshake record: a fatal alert, in a record of the TLS 1.2 form every
        // version reads.
        0x16 => {
            let description = match cause {
                Cause::Upstream => TLS_ALERT_INTERNAL_ERROR,
                Cause::Policy | Cause::Malformed => TLS_ALERT_ACCESS_DENIED,
            };
            Some(vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, description])
        }
        _ if starts_with_request_line(head) => {
            let status = match cause {
                Cause::Policy => "403 Forbidden",
                Cause::Upstream => "502 Bad Gateway",
                Cause::Malformed => "400 Bad Request",
            };
            let body = format!("native-sandbox egress gateway: {what} refused: {reason}\n");
            Some(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes(),
            )
        }
        _ => None,
    }
}

/// Sends `answer`'s bytes, if any, then closes gently: our end first, then what the guest still
/// sends is read and dropped until it closes or `LINGER` runs out.
pub fn tell(guest: &mut TcpStream, head: &[u8], cause: Cause, what: &str, reason: &str) {
    let Some(bytes) = answer(head, cause, what, reason) else {
        return;
    };
    // The send buffer is empty and the answer small, so the write does not wait; bounded anyway.
    if guest.set_write_timeout(Some(LINGER.idle)).is_err() || guest.write_all(&bytes).is_err() {
        return;
    }
    let _ = guest.shutdown(Shutdown::Write);
    drain(guest, &AtomicBool::new(true), LINGER);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::drain::tests::pair;
    use std::io::Read;

    #[test]
    fn http_gets_a_status_and_the_reason() {
        let bytes = answer(
            b"GET / HTTP/1.1\r\n",
            Cause::Policy,
            "other.test:80",
            "not on the allowlist",
        )
        .expect("an answer");
        let text = String::from_utf8(bytes).expect("text");
        let body = "native-sandbox egress gateway: other.test:80 refused: not on the allowlist\n";
        assert_eq!(
            text,
            format!("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
        );
        let upstream =
            answer(b"POST / HTTP/1.0\r\n", Cause::Upstream, "a.test:80", "x").expect("an answer");
        assert!(upstream.starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"));
        let malformed = answer(
            b"M-SEARCH * HTTP/1.1\r\n",
            Cause::Malformed,
            "10.0.0.2:80",
            "x",
        )
        .expect("an answer");
        assert!(malformed.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
    }

    #[test]
    fn tls_gets_a_fatal_alert_and_anything_else_nothing() {
        assert_eq!(
            answer(&[0x16, 3, 1], Cause::Policy, "a.test:443", "x"),
            Some(vec![0x15, 3, 3, 0, 2, 2, 49])
        );
        assert_eq!(
            answer(&[0x16], Cause::Upstream, "a.test:443", "x"),
            Some(vec![0x15, 3, 3, 0, 2, 2, 80])
        );
        assert_eq!(answer(b"SSH-2.0-x\r\n", Cause::Policy, "a", "x"), None);
        assert_eq!(answer(b"PRI * HTTP/2.0\r\n", Cause::Policy, "a", "x"), None);
        assert_eq!(answer(b"GET / HTTP/1.1", Cause::Policy, "a", "x"), None);
        assert_eq!(
            answer(b" GET / HTTP/1.1\r\n", Cause::Policy, "a", "x"),
            None
        );
        assert_eq!(answer(&[0x00, 0x01], Cause::Policy, "a", "x"), None);
        assert_eq!(answer(&[], Cause::Policy, "a", "x"), None);
    }

    #[test]
    fn the_guest_reads_the_whole_answer_then_the_end() {
        let (mut gateway, mut guest) = pair();
        // Bytes the guest sent that the gateway never read: a plain close would reset them.
        guest.write_all(b"a body nobody reads").expect("write");
        std::thread::scope(|scope| {
            scope.spawn(|| {
                tell(
                    &mut gateway,
                    b"GET / HTTP/1.1\r\n",
                    Cause::Policy,
                    "other.test:80",
                    "not on the allowlist",
                )
            });
            let mut got = String::new();
            guest.read_to_string(&mut got).expect("read to the end");
            assert!(got.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{got}");
            assert!(
                got.ends_with("other.test:80 refused: not on the allowlist\n"),
                "{got}"
            );
            drop(guest);
        });
    }
}
