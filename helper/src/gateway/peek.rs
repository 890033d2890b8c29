//! The name a connection asks for, read from its first bytes before anything goes upstream: a
//! TLS ClientHello's server name (SNI), or a plain HTTP request's `Host` header (`http.rs`).

use super::http::{self, Parsed, Request};

/// At most this much of a connection is read before it names its host: a ClientHello of up to
/// 16 KiB in whole records (each with its 5-byte header), or an HTTP head.
pub const PEEK_MAX: usize = 16 * 1_024 + 64;

#[derive(Debug, PartialEq, Eq)]
pub enum Peeked {
    /// More bytes are needed.
    Incomplete,
    /// The host name a TLS connection asks for (lower-case, without a port or trailing dot).
    Name(String),
    /// A plain HTTP request, its host named by its `Host` header.
    Request(Request),
    /// The connection names no host it may be judged by: the reason.
    Unnamed(&'static str),
}

/// What the first bytes of a connection on `port` name.
pub fn peek(bytes: &[u8], port: u16) -> Peeked {
    match bytes.first() {
        None => Peeked::Incomplete,
        Some(0x16) => client_hello_name(bytes),
        Some(_) => match http::parse(bytes, port) {
            Parsed::Incomplete if bytes.len() >= PEEK_MAX => {
                Peeked::Unnamed("a request head too long")
            }
            Parsed::Incomplete => Peeked::Incomplete,
            Parsed::Request(request) => Peeked::Request(request),
            Parsed::Refused(reason) => Peeked::Unnamed(reason),
        },
    }
}

fn u16_at(bytes: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes([
        *bytes.get(at)?,
        *bytes.get(at + 1)?,
    ])))
}

/// The SNI of a ClientHello, in one handshake record or spread over several (RFC 8446 5.1).
fn client_hello_name(bytes: &[u8]) -> Peeked {
    let mut handshake = Vec::new();
    let mut at = 0;
    // The whole handshake message: its type and 3-byte length, then that many bytes.
    let whole = |h: &[u8]| {
        h.len() >= 4
            && h.len() >= 4 + (usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]))
    };
    while !whole(&handshake) {
        let Some(length) = u16_at(bytes, at + 3) else {
            return Peeked::Incomplete;
        };
        if bytes[at] != 0x16 || length == 0 {
            return Peeked::Unnamed("a malformed TLS ClientHello");
        }
        let Some(fragment) = bytes.get(at + 5..at + 5 + length) else {
            return Peeked::Incomplete;
        };
        handshake.extend_from_slice(fragment);
        at += 5 + length;
    }
    match sni(&handshake) {
        Some(Some(name)) => {
            host_name(&name).map_or(Peeked::Unnamed("a malformed server name"), Peeked::Name)
        }
        Some(None) => Peeked::Unnamed("TLS without a server name (SNI)"),
        None => Peeked::Unnamed("a malformed TLS ClientHello"),
    }
}

/// `Some(None)`: a well-formed ClientHello without a server name.
fn sni(handshake: &[u8]) -> Option<Option<String>> {
    if *handshake.first()? != 1 {
        return None;
    }
    // Type, length (3), version (2), random (32).
    let mut at = 4 + 2 + 32;
    at += 1 + usize::from(*handshake.get(at)?);
    at += 2 + u16_at(handshake, at)?;
    at += 1 + usize::from(*handshake.get(at)?);
    let Some(extensions_length) = u16_at(handshake, at) else {
        return Some(None);
    };
    at += 2;
    let end = (at + extensions_length).min(handshake.len());
    while at + 4 <= end {
        let kind = u16_at(handshake, at)?;
        let length = u16_at(handshake, at + 2)?;
        let data = handshake.get(at + 4..at + 4 + length)?;
        if kind == 0 {
            // server_name_list: length (2), then entries of type (1), length (2), name.
            let mut inner = 2;
            while inner + 3 <= data.len() {
                let name_type = data[inner];
                let name_length = u16_at(data, inner + 1)?;
                let name = data.get(inner + 3..inner + 3 + name_length)?;
                if name_type == 0 {
                    return Some(Some(String::from_utf8_lossy(name).into_owned()));
                }
                inner += 3 + name_length;
            }
            return None;
        }
        at += 4 + length;
    }
    Some(None)
}

/// A host name as the allowlist holds names: lower-case, no trailing dot, only the bytes a
/// name may hold (an IP literal has only digits and dots in its last label and is refused).
pub(super) fn host_name(raw: &str) -> Option<String> {
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    let valid = super::name::well_formed(&name, |b| {
        b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
    }) && !name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    valid.then_some(name)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A minimal ClientHello record naming `name` (none when empty).
    pub fn client_hello(name: &str) -> Vec<u8> {
        let mut extensions = Vec::new();
        if !name.is_empty() {
            let mut list = Vec::new();
            list.push(0u8);
            list.extend_from_slice(&(name.len() as u16).to_be_bytes());
            list.extend_from_slice(name.as_bytes());
            let mut data = (list.len() as u16).to_be_bytes().to_vec();
            data.extend_from_slice(&list);
            // An unrelated extension first (supported_groups).
            extensions.extend_from_slice(&[0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x1d]);
            extensions.extend_from_slice(&[0, 0]);
            extensions.extend_from_slice(&(data.len() as u16).to_be_bytes());
            extensions.extend_from_slice(&data);
        }
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0x13, 0x01]);
        body.extend_from_slice(&[1, 0]);
        body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
        body.extend_from_slice(&extensions);
        let mut handshake = vec![1, 0];
        handshake.extend_from_slice(&(body.len() as u16).to_be_bytes());
        handshake.extend_from_slice(&body);
        let mut record = vec![0x16, 0x03, 0x01];
        record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
        record.extend_from_slice(&handshake);
        record
    }

    #[test]
    fn tls_names_its_server() {
        let hello = client_hello("API.Example.com.");
        assert_eq!(peek(&hello, 80), Peeked::Name("api.example.com".into()));
        for cut in [1, 4, 5, hello.len() - 1] {
            assert_eq!(peek(&hello[..cut], 80), Peeked::Incomplete, "{cut}");
        }
        assert_eq!(
            peek(&client_hello(""), 80),
            Peeked::Unnamed("TLS without a server name (SNI)")
        );
        assert_eq!(
            peek(&client_hello("10.0.0.1"), 80),
            Peeked::Unnamed("a malformed server name")
        );
        let mut garbage = client_hello("a.example");
        garbage[5] = 2;
        assert_eq!(
            peek(&garbage, 80),
            Peeked::Unnamed("a malformed TLS ClientHello")
        );
    }

    #[test]
    fn a_client_hello_spread_over_records_names_its_server() {
        let hello = client_hello("api.example.com");
        let handshake = &hello[5..];
        // Split the handshake into three records of its own type.
        let mut split = Vec::new();
        for piece in [&handshake[..3], &handshake[3..50], &handshake[50..]] {
            split.extend_from_slice(&[0x16, 0x03, 0x01]);
            split.extend_from_slice(&(piece.len() as u16).to_be_bytes());
            split.extend_from_slice(piece);
        }
        assert_eq!(peek(&split, 80), Peeked::Name("api.example.com".into()));
        for cut in [6, 8, 9, 60, split.len() - 1] {
            assert_eq!(peek(&split[..cut], 80), Peeked::Incomplete, "{cut}");
        }
        // A record of another type (alert) in between, or an empty one: malformed.
        let mut alert = split.clone();
        alert[8] = 0x15;
        assert_eq!(
            peek(&alert, 80),
            Peeked::Unnamed("a malformed TLS ClientHello")
        );
        let mut empty = hello[..5].to_vec();
        empty[3] = 0;
        empty[4] = 0;
        assert_eq!(
            peek(&empty, 80),
            Peeked::Unnamed("a malformed TLS ClientHello")
        );
    }

    #[test]
    fn http_names_its_host_by_its_request() {
        let get = b"GET / HTTP/1.1\r\nUser-Agent: x\r\nhost: Files.Example:80\r\n\r\n";
        match peek(get, 80) {
            Peeked::Request(request) => assert_eq!(request.host, "files.example"),
            other => panic!("{other:?}"),
        }
        assert_eq!(peek(&get[..get.len() - 1], 80), Peeked::Incomplete);
        assert_eq!(
            peek(b"GET / HTTP/1.1\r\nX: y\r\n\r\n", 80),
            Peeked::Unnamed("HTTP without a Host header")
        );
        assert_eq!(
            peek(b"SSH-2.0-x\r\n\r\n", 80),
            Peeked::Unnamed("neither TLS nor HTTP/1")
        );
        assert_eq!(
            peek(&[b'G'; PEEK_MAX], 80),
            Peeked::Unnamed("a request head too long")
        );
    }
}
