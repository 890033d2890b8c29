//! One plain HTTP/1 request per connection. A connection's host is named by its first request's
//! `Host`, so that request is the only one the gateway passes on: its head is read strictly
//! (CRLF line ends only, token field names, no folded lines, one `Host`, a request target on
//! that host), rewritten to ask the upstream to close after its answer (`Connection: close`),
//! and its body passed on as framed (`Content-Length`, or `chunked`); nothing the guest sends
//! after that body reaches the upstream. A request the gateway could not follow to its end is
//! refused: `CONNECT` (a tunnel), a protocol upgrade (an opaque stream afterwards: use TLS), a
//! transfer coding other than `chunked`, a length that is not one plain number.

/// Where a request's body ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Exactly this many bytes (none without a length or a coding).
    Length(u64),
    Chunked,
}

/// A request head judged whole and acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The `Host` header's name: lower-case, without a port or trailing dot.
    pub host: String,
    /// The head as passed on: the guest's, its hop-by-hop connection fields replaced by
    /// `Connection: close`.
    pub head: Vec<u8>,
    /// How many of the guest's bytes the head took (the rest is body).
    pub consumed: usize,
    pub body: Body,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Incomplete,
    Request(Request),
    Refused(&'static str),
}

/// Connection fields the gateway replaces: they would keep the connection for more requests.
/// An offer to upgrade to cleartext HTTP/2 (`h2c`, which `curl --http2` makes on `http://`)
/// is dropped with them: the client then goes on in HTTP/1.1.
const HOP_BY_HOP: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "http2-settings",
];

/// Every field the gateway reads or replaces: `Host`, the body's framing, an upgrade, and the
/// connection fields.
const JUDGED: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "http2-settings",
];

/// Whether `field` (lower-case) is one of `JUDGED` written with `_` for `-`
/// (`content_length`): another field to HTTP, so the gateway would pass it on unjudged, but
/// one that servers folding `_` into `-` (CGI's `HTTP_*` variables and what is built on them)
/// read as that field.
fn stands_for_judged(field: &str) -> bool {
    field.contains('_') && JUDGED.contains(&field.replace('_', "-").as_str())
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(is_token_byte)
}

/// `METHOD SP target SP HTTP/1.x`: the method, the target.
fn request_line(line: &str) -> Option<(&str, &str)> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let printable = target.bytes().all(|b| b.is_ascii_graphic());
    (is_token(method) && printable && matches!(version, "HTTP/1.1" | "HTTP/1.0"))
        .then_some((method, target))
}

/// Whether `bytes` begin with a whole HTTP/1 request line (a token method, a printable target,
/// HTTP/1.0 or HTTP/1.1, CRLF): a client the gateway may answer in HTTP.
pub fn starts_with_request_line(bytes: &[u8]) -> bool {
    bytes
        .windows(2)
        .position(|w| w == b"\r\n")
        .and_then(|end| std::str::from_utf8(&bytes[..end]).ok())
        .and_then(request_line)
        .is_some()
}

/// Reads a request head from the first bytes of a connection on `port` (`PEEK_MAX` at most:
/// the caller bounds them). What cannot start a request is refused at once, before its head
/// is whole (a client speaking another protocol first: SSH, a database's binary hello); a
/// protocol whose server speaks first sends nothing, so it waits out the deadline.
pub fn parse(bytes: &[u8], port: u16) -> Parsed {
    const NOT_HTTP: Parsed = Parsed::Refused("neither TLS nor HTTP/1");
    match bytes.windows(2).position(|w| w == b"\r\n") {
        Some(line_end) => {
            let first = std::str::from_utf8(&bytes[..line_end]).ok();
            if first.and_then(request_line).is_none() {
                return NOT_HTTP;
            }
        }
        None => {
            let started = bytes
                .iter()
                .take_while(|b| **b != b' ')
                .all(|b| is_token_byte(*b));
            if !started || bytes.iter().any(|b| b.is_ascii_control() && *b != b'\r') {
                return NOT_HTTP;
            }
        }
    }
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Parsed::Incomplete;
    };
    // Lines as bytes: a field value may hold obs-text (bytes from 0x80, Latin-1 say), passed on
    // as it is; the request line, field names and the fields the gateway reads are ASCII.
    let lines = crlf_lines(&bytes[..end]);
    let Some((&request_line_text, fields)) = lines.split_first() else {
        return NOT_HTTP;
    };
    let Some((method, target)) = std::str::from_utf8(request_line_text)
        .ok()
        .and_then(request_line)
    else {
        return NOT_HTTP;
    };
    // A line end is CRLF only: a lone CR or LF, or any other control byte but a tab, inside a
    // line is refused.
    if lines.iter().any(|line| {
        line.iter()
            .any(|b| (b.is_ascii_control() && *b != b'\t') || *b == 0x7f)
    }) {
        return Parsed::Refused("a malformed request head");
    }
    if lines.iter().any(|line| breaks_beyond_ascii(line)) {
        return Parsed::Refused("a line break beyond ASCII in the request head");
    }
    let mut host = None;
    let mut hosts = 0;
    let mut length = None;
    let mut lengths = 0;
    let mut coding = None;
    let mut codings = 0;
    let mut kept = Vec::new();
    for line in fields {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return Parsed::Refused("a malformed request head");
        };
        let Some(name) = std::str::from_utf8(&line[..colon])
            .ok()
            .filter(|n| is_token(n))
        else {
            return Parsed::Refused("a malformed request head");
        };
        // Not ASCII: no value the gateway reads (an empty one is refused for each of them).
        let value = std::str::from_utf8(&line[colon + 1..])
            .ok()
            .filter(|v| v.is_ascii())
            .map_or("", |v| v.trim_matches([' ', '\t']));
        // Case is no difference in a field name: `HOST` is `Host`, counted as one.
        let field = name.to_ascii_lowercase();
        if stands_for_judged(&field) {
            return Parsed::Refused("a field name with '_' for '-' in a field the gateway reads");
        }
        match field.as_str() {
            "host" => {
                hosts += 1;
                host = Some(value);
            }
            "content-length" => {
                lengths += 1;
                length = Some(value);
            }
            "transfer-encoding" => {
                codings += 1;
                coding = Some(value);
            }
            "upgrade" if !value.eq_ignore_ascii_case("h2c") => {
                return Parsed::Refused("a protocol upgrade over plain HTTP (use TLS)")
            }
            _ => {}
        }
        if !HOP_BY_HOP.contains(&field.as_str()) {
            kept.push(*line);
        }
    }
    let host = match (hosts, host) {
        (1, Some(value)) => match host_of(value, port) {
            Some(name) => name,
            None => return Parsed::Refused("a malformed Host header"),
        },
        (0, _) => return Parsed::Refused("HTTP without a Host header"),
        _ => return Parsed::Refused("HTTP with two Host headers"),
    };
    if method == "CONNECT" {
        return Parsed::Refused("CONNECT (a tunnel) over plain HTTP");
    }
    if !target_on(target, method, &host, port) {
        return Parsed::Refused("a request target naming another host");
    }
    let http_1_1 = request_line_text.ends_with(b"HTTP/1.1");
    let body = match (coding, length, lengths) {
        (Some(coding), None, 0)
            if codings == 1 && http_1_1 && coding.eq_ignore_ascii_case("chunked") =>
        {
            Body::Chunked
        }
        (Some(_), _, _) => return Parsed::Refused("a transfer coding the gateway cannot follow"),
        (None, None, 0) => Body::Length(0),
        (None, Some(value), 1)
            if !value.is_empty()
                && value.len() <= 18
                && value.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Body::Length(value.parse().unwrap_or(0))
        }
        _ => return Parsed::Refused("a malformed Content-Length"),
    };
    let mut rewritten = request_line_text.to_vec();
    for line in kept {
        rewritten.extend_from_slice(b"\r\n");
        rewritten.extend_from_slice(line);
    }
    rewritten.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    Parsed::Request(Request {
        host,
        head: rewritten,
        consumed: end + 4,
        body,
    })
}

/// Whether `line` holds bytes an upstream may read as a line break, so that it would see
/// fields (a length, a second request) the gateway did not: NEL (any byte 0x85, as a Latin-1
/// reader takes it) and U+2028 or U+2029 in UTF-8.
fn breaks_beyond_ascii(line: &[u8]) -> bool {
    line.contains(&0x85)
        || line
            .windows(3)
            .any(|w| w == [0xe2, 0x80, 0xa8] || w == [0xe2, 0x80, 0xa9])
}

/// `head` split at each CRLF (one line at least).
fn crlf_lines(mut head: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    while let Some(at) = head.windows(2).position(|w| w == b"\r\n") {
        lines.push(&head[..at]);
        head = &head[at + 2..];
    }
    lines.push(head);
    lines
}

/// The name of a `Host` value (or an absolute target's authority) on a connection to `port`:
/// without its port, which may only be that one; `None` when it is no host name.
fn host_of(value: &str, port: u16) -> Option<String> {
    let name = match value.rsplit_once(':') {
        Some((name, "")) => name,
        Some((name, given)) if given.bytes().all(|b| b.is_ascii_digit()) => {
            if given.len() > 5 || given.parse::<u16>().ok() != Some(port) {
                return None;
            }
            name
        }
        _ => value,
    };
    super::peek::host_name(name)
}

/// Whether a request target stays on `host`: a path, `*` for OPTIONS, or an absolute URI
/// whose authority names `host` (servers take the host from such a target, not from `Host`).
fn target_on(target: &str, method: &str, host: &str, port: u16) -> bool {
    if target.starts_with('/') {
        return true;
    }
    if target == "*" {
        return method == "OPTIONS";
    }
    let Some((scheme, rest)) = target.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    host_of(authority, port).as_deref() == Some(host)
}

/// Follows a chunked body as its bytes pass: how many of them still belong to it, and which
/// may go on now (a size or trailer line only once it is whole and judged).
#[derive(Debug, Default)]
pub struct Chunked {
    state: State,
    /// The current size or trailer line, bounded.
    line: Vec<u8>,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// The longest size or trailer line followed.
const LINE_MAX: usize = 8 * 1_024;

impl Chunked {
    /// Whether the body ends within `bytes` (what follows its end is not the body's and is
    /// left alone); what may be passed on now is appended to `out` (a line held back until it
    /// is whole). `Err` for a body that is not chunked as it says.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<bool, &'static str> {
        let mut at = 0;
        while at < bytes.len() && self.state != State::Done {
            match self.state {
                State::Data(left) => {
                    let take = left.min((bytes.len() - at) as u64);
                    out.extend_from_slice(&bytes[at..at + take as usize]);
                    at += take as usize;
                    self.state = if take == left {
                        State::DataEnd
                    } else {
                        State::Data(left - take)
                    };
                }
                State::Size | State::DataEnd | State::Trailer => {
                    let byte = bytes[at];
                    at += 1;
                    self.line.push(byte);
                    if self.line.len() > LINE_MAX {
                        return Err("a chunked body with a line too long");
                    }
                    if byte == b'\n' {
                        let line = std::mem::take(&mut self.line);
                        self.line_done(&line)?;
                        out.extend_from_slice(&line);
                    }
                }
                State::Done => {}
            }
        }
        Ok(self.state == State::Done)
    }

    fn line_done(&mut self, line: &[u8]) -> Result<(), &'static str> {
        let Some(line) = line.strip_suffix(b"\r\n") else {
            return Err("a chunked body with a bare line feed");
        };
        self.state = match self.state {
            State::Size => {
                // Hex digits, then perhaps extensions (`;name[=value]`), no control bytes.
                let (digits, extensions) =
                    line.split_at(line.iter().position(|b| *b == b';').unwrap_or(line.len()));
                // Spaces or tabs may come before extensions (RFC 9112 7.1.1), nowhere else.
                let digits = if extensions.is_empty() {
                    digits
                } else {
                    digits
                        .iter()
                        .rposition(|b| *b != b' ' && *b != b'\t')
                        .map_or(&digits[..0], |last| &digits[..=last])
                };
                // ASCII only: no byte an upstream may read as a line break.
                let clean = extensions
                    .iter()
                    .all(|b| b.is_ascii() && (!b.is_ascii_control() || *b == b'\t'));
                let size = std::str::from_utf8(digits)
                    .ok()
                    .filter(|d| {
                        clean
                            && !d.is_empty()
                            && d.len() <= 15
                            && d.bytes().all(|b| b.is_ascii_hexdigit())
                    })
                    .and_then(|d| u64::from_str_radix(d, 16).ok())
                    .ok_or("a chunked body with a malformed size")?;
                if size == 0 {
                    State::Trailer
                } else {
                    State::Data(size)
                }
            }
            State::DataEnd if line.is_empty() => State::Size,
            State::DataEnd => return Err("a chunk longer than its size"),
            State::Trailer if line.is_empty() => State::Done,
            // A trailer field: `name: value`, no control bytes but a tab.
            State::Trailer => {
                let field = std::str::from_utf8(line)
                    .ok()
                    .and_then(|l| l.split_once(':'))
                    .filter(|(name, value)| {
                        is_token(name) && value.bytes().all(|b| !b.is_ascii_control() || b == b'\t')
                    });
                if field.is_none() || breaks_beyond_ascii(line) {
                    return Err("a chunked body with a malformed trailer");
                }
                // A field the gateway judges in the head (or one spelled with `_` for `-`)
                // arriving as a trailer would be judged by nobody: a server merging trailers
                // into the head could read a second Host or framing there.
                let name = field.map(|(name, _)| name.to_ascii_lowercase());
                if name
                    .is_some_and(|name| JUDGED.contains(&name.as_str()) || stands_for_judged(&name))
                {
                    return Err("a trailer naming a field the gateway reads in the head");
                }
                State::Trailer
            }
            State::Data(_) | State::Done => return Err("a chunked body out of step"),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Request {
        match parse(text.as_bytes(), 80) {
            Parsed::Request(r) => r,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn refused(text: &str) -> &'static str {
        match parse(text.as_bytes(), 80) {
            Parsed::Refused(why) => why,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn one_request_is_passed_on_asking_the_upstream_to_close() {
        let r = request(
            "GET /a HTTP/1.1\r\nHost: API.example:80\r\nConnection: keep-alive\r\nKeep-Alive: 5\r\nAccept: */*\r\n\r\nGET /next",
        );
        assert_eq!(r.host, "api.example");
        assert_eq!(
            String::from_utf8(r.head).unwrap(),
            "GET /a HTTP/1.1\r\nHost: API.example:80\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(r.consumed, 93, "up to the next request");
        assert_eq!(r.body, Body::Length(0));
        let post = request("POST / HTTP/1.1\r\nhost:a.example\r\nContent-Length: 12\r\n\r\n");
        assert_eq!(post.body, Body::Length(12));
        let chunked =
            request("POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(chunked.body, Body::Chunked);
        assert_eq!(
            request("GET http://a.example:80/x HTTP/1.1\r\nHost: a.example\r\n\r\n").host,
            "a.example"
        );
        assert_eq!(
            request("OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n").host,
            "a.example"
        );
        // An offer of cleartext HTTP/2 is dropped, not refused.
        let h2c = request("GET / HTTP/1.1\r\nHost: a.example\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nUser-Agent: curl\r\n\r\n");
        assert_eq!(
            String::from_utf8(h2c.head).unwrap(),
            "GET / HTTP/1.1\r\nHost: a.example\r\nUser-Agent: curl\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a.example\r\n", 80),
            Parsed::Incomplete
        );
    }

    #[test]
    fn a_field_value_may_hold_bytes_beyond_ascii_passed_on_as_they_are() {
        let head = b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Name: caf\xe9\r\n\r\n";
        let Parsed::Request(r) = parse(head, 80) else {
            panic!("refused");
        };
        assert_eq!(r.host, "a.example");
        assert_eq!(
            r.head,
            b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Name: caf\xe9\r\nConnection: close\r\n\r\n"
        );
        // Not where the gateway reads: the request line, a field name, a field it judges.
        for (bad, why) in [
            (
                &b"GET /caf\xe9 HTTP/1.1\r\nHost: a.example\r\n\r\n"[..],
                "neither TLS nor HTTP/1",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a.example\r\nX-N\xe4me: x\r\n\r\n",
                "a malformed request head",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: caf\xe9.example\r\n\r\n",
                "a malformed Host header",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\xa0\r\n\r\n",
                "a malformed Content-Length",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\xa0\r\n\r\n",
                "a transfer coding the gateway cannot follow",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a.example\r\nUpgrade: h2c\xa0\r\n\r\n",
                "a protocol upgrade over plain HTTP (use TLS)",
            ),
            // What an upstream may take for a line break, hiding a field from the gateway.
            (
                b"POST / HTTP/1.1\r\nHost: a.example\r\nX: a\x85Content-Length: 0\r\nContent-Length: 5\r\n\r\n",
                "a line break beyond ASCII in the request head",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\xc2\x85b\r\n\r\n",
                "a line break beyond ASCII in the request head",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\xe2\x80\xa8b\r\n\r\n",
                "a line break beyond ASCII in the request head",
            ),
            (
                b"GET / HTTP/1.1\r\nHost: a.example\r\nX: a\xe2\x80\xa9b\r\n\r\n",
                "a line break beyond ASCII in the request head",
            ),
        ] {
            assert_eq!(parse(bad, 80), Parsed::Refused(why), "{bad:?}");
        }
    }

    #[test]
    fn what_the_gateway_could_not_follow_or_that_names_another_host_is_refused() {
        let another = "a request target naming another host";
        assert_eq!(
            refused("GET http://b.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("GET http://a.example@b.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("GET https://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("GET a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("GET * HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("CONNECT b.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            "CONNECT (a tunnel) over plain HTTP"
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
            "a protocol upgrade over plain HTTP (use TLS)"
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nUpgrade: h2c, websocket\r\n\r\n"),
            "a protocol upgrade over plain HTTP (use TLS)"
        );
        let malformed = "a malformed request head";
        assert_eq!(
            refused("GET / HTTP/1.1\nHost: b.example\nX: HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            "neither TLS nor HTTP/1"
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nX: a\nHost: b.example\r\n\r\n"),
            malformed
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost : b.example\r\nHost: a.example\r\n\r\n"),
            malformed
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\n folded\r\n\r\n"),
            malformed
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nX-\u{e9}: y\r\nHost: a.example\r\n\r\n"),
            malformed
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n"),
            "HTTP with two Host headers"
        );
        assert_eq!(
            refused("GET / HTTP/1.0\r\n\r\n"),
            "HTTP without a Host header"
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n"),
            "a malformed Host header"
        );
        // A port other than the connection's, in Host or in the target.
        let host = "a malformed Host header";
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example:8443\r\n\r\n"),
            host
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example:99999999\r\n\r\n"),
            host
        );
        assert_eq!(
            request("GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n").host,
            "a.example"
        );
        assert_eq!(
            refused("GET http://a.example:9999/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            another
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nX: a\x01b\r\n\r\n"),
            malformed
        );
        let coding = "a transfer coding the gateway cannot follow";
        assert_eq!(
            refused("POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n"),
            coding
        );
        assert_eq!(
            refused("POST / HTTP/1.0\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n"),
            coding
        );
        assert_eq!(
            refused(
                "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            ),
            coding
        );
        assert_eq!(
            refused("POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            coding
        );
        let length = "a malformed Content-Length";
        assert_eq!(refused("POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"), length);
        assert_eq!(
            refused("POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: -1\r\n\r\n"),
            length
        );
        assert_eq!(
            refused("POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 1,1\r\n\r\n"),
            length
        );
        assert_eq!(refused("SSH-2.0-x\r\n\r\n"), "neither TLS nor HTTP/1");
        // Refused before the head is whole: a first line that is no request line, a first
        // byte no method starts with (a database's binary hello), a control byte.
        assert_eq!(refused("SSH-2.0-OpenSSH_9.6\r\n"), "neither TLS nor HTTP/1");
        assert_eq!(
            parse(b"\x00\x00\x00\x08\x04\xd2\x16\x2f", 80),
            Parsed::Refused("neither TLS nor HTTP/1")
        );
        assert_eq!(
            parse(b"GET /\x01", 80),
            Parsed::Refused("neither TLS nor HTTP/1")
        );
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: a", 80), Parsed::Incomplete);
        assert_eq!(parse(b"GE", 80), Parsed::Incomplete);
        assert_eq!(
            refused("GET / HTTP/2.0\r\nHost: a.example\r\n\r\n"),
            "neither TLS nor HTTP/1"
        );
    }

    #[test]
    fn a_field_the_gateway_reads_written_with_underscores_is_refused() {
        let underscore = "a field name with '_' for '-' in a field the gateway reads";
        for head in [
            "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer_Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a.example\r\nContent_Length: 3\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a.example\r\nCONTENT_LENGTH: 3\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a.example\r\nProxy_Connection: keep-alive\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a.example\r\nKeep_Alive: 5\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a.example\r\nHTTP2_Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
        ] {
            assert_eq!(refused(head), underscore, "{head:?}");
        }
        // Case alone makes no other field: these are the fields themselves, judged as such.
        let shouted = request("POST / HTTP/1.1\r\nHOST: A.example\r\nCONTENT-LENGTH: 3\r\n\r\n");
        assert_eq!(
            (shouted.host.as_str(), shouted.body),
            ("a.example", Body::Length(3))
        );
        assert_eq!(
            refused("GET / HTTP/1.1\r\nHost: a.example\r\nHOST: b.example\r\n\r\n"),
            "HTTP with two Host headers"
        );
        assert_eq!(
            refused("POST / HTTP/1.1\r\nHost: a.example\r\nTRANSFER-ENCODING: chunked\r\nContent-Length: 3\r\n\r\n"),
            "a transfer coding the gateway cannot follow"
        );
        // Any other name with `_` is passed on as it is.
        let other = request(
            "GET / HTTP/1.1\r\nHost: a.example\r\nX_Trace_Id: 7\r\nContent_Type_: x\r\n\r\n",
        );
        assert_eq!(
            String::from_utf8(other.head).unwrap(),
            "GET / HTTP/1.1\r\nHost: a.example\r\nX_Trace_Id: 7\r\nContent_Type_: x\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_chunked_body_is_followed_to_its_end_in_any_pieces() {
        let body = b"5 ;ext=1\r\nhello\r\n3\t;e\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        let whole = body.len() - 4;
        let mut once = Chunked::default();
        let mut out = Vec::new();
        assert_eq!(once.feed(body, &mut out), Ok(true));
        // All of the body and nothing after it.
        assert_eq!(out, &body[..whole]);
        for split in 1..whole {
            let mut pieces = Chunked::default();
            let mut out = Vec::new();
            assert_eq!(pieces.feed(&body[..split], &mut out), Ok(false), "{split}");
            // Only whole lines and data so far: what is held back is one unfinished line.
            let passed = out.len();
            assert!(passed <= split && out == body[..passed], "{split}");
            assert!(!body[passed..split].contains(&b'\n'), "{split}");
            assert_eq!(pieces.feed(&body[split..], &mut out), Ok(true), "{split}");
            assert_eq!(out, &body[..whole], "{split}");
        }
        // A size line's first part is held until the line is judged.
        let mut held = Chunked::default();
        let mut out = Vec::new();
        assert_eq!(held.feed(b"5;ext", &mut out), Ok(false));
        assert!(out.is_empty());
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloX\r\n",
            b"5\nhello",
            b"1234567890abcdef0\r\n",
            b"+5\r\nhello\r\n",
            b"5;a\rb\r\nhello\r\n",
            b"0\r\nGET /x HTTP/1.1\r\n\r\n",
            b"0\r\nX: \x01\r\n\r\n",
            b"5 \r\nhello\r\n",
            b"5\t\r\nhello\r\n",
            b" 5\r\nhello\r\n",
            b" ;e\r\n",
            // What an upstream may read as a line break, ending the body early.
            b"0;\x85\x85GET /x HTTP/1.1\r\n",
            b"0;e=\xc3\xa9\r\n",
            b"0\r\nX: a\xc2\x85\xc2\x85GET /x HTTP/1.1\r\n\r\n",
            b"0\r\nX: a\xe2\x80\xa8b\r\n\r\n",
            // A field the head's judge reads, as a trailer, in any spelling.
            b"0\r\nHost: other.example\r\n\r\n",
            b"0\r\ncontent-length: 5\r\n\r\n",
            b"0\r\nTransfer_Encoding: chunked\r\n\r\n",
            b"0\r\nCONNECTION: close\r\n\r\n",
        ] {
            assert!(
                Chunked::default().feed(bad, &mut Vec::new()).is_err(),
                "{bad:?}"
            );
        }
    }
}
