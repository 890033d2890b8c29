//! The few DNS messages the gateway reads and writes (RFC 1035): a guest's one-question query
//! and its answer (the gateway's own address, nothing, or NXDOMAIN), and the gateway's own
//! upstream A query and the addresses its answer holds.

use std::net::Ipv4Addr;

pub const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
pub const RCODE_FORMERR: u8 = 1;
pub const RCODE_SERVFAIL: u8 = 2;
pub const RCODE_NXDOMAIN: u8 = 3;
const HEADER: usize = 12;

/// A guest's query: its ID, flags, the question's bytes as sent, the name (lower-case, no
/// trailing dot) and type.
#[derive(Debug, PartialEq, Eq)]
pub struct Query<'a> {
    pub id: u16,
    recursion_desired: bool,
    question: &'a [u8],
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
}

/// Why a message is not a query the gateway answers.
#[derive(Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Too short to answer at all: dropped.
    Unanswerable,
    /// Answerable with this code (its ID is known).
    Answer(u16, u8),
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

pub fn parse_query(message: &[u8]) -> Result<Query<'_>, Malformed> {
    let id = u16_at(message, 0).ok_or(Malformed::Unanswerable)?;
    if message.len() < HEADER {
        return Err(Malformed::Unanswerable);
    }
    let flags = message[2];
    if flags & 0x80 != 0 {
        // A response sent to the gateway: never answered.
        return Err(Malformed::Unanswerable);
    }
    let opcode = (flags >> 3) & 0x0f;
    let questions = u16_at(message, 4).unwrap_or(0);
    if opcode != 0 || questions != 1 {
        return Err(Malformed::Answer(id, RCODE_FORMERR));
    }
    let (name, end) = read_name(message, HEADER).ok_or(Malformed::Answer(id, RCODE_FORMERR))?;
    let qtype = u16_at(message, end).ok_or(Malformed::Answer(id, RCODE_FORMERR))?;
    let qclass = u16_at(message, end + 2).ok_or(Malformed::Answer(id, RCODE_FORMERR))?;
    Ok(Query {
        id,
        recursion_desired: flags & 0x01 != 0,
        question: &message[HEADER..end + 4],
        name,
        qtype,
        qclass,
    })
}

/// An uncompressed name at `at` (a question's): lower-cased labels joined by dots, and where it
/// ends. Labels hold only what a host name may.
fn read_name(message: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    loop {
        let length = usize::from(*message.get(at)?);
        at += 1;
        if length == 0 {
            break;
        }
        if length > 63 {
            return None;
        }
        let label = message.get(at..at + length)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        if name.len() > 253 {
            return None;
        }
        at += length;
    }
    Some((name, at))
}

impl Query<'_> {
    pub fn is_internet_class(&self) -> bool {
        self.qclass == CLASS_IN
    }

    /// The answer: `address` as the one A record when given, else none, with `rcode`.
    pub fn answer(&self, rcode: u8, address: Option<Ipv4Addr>, ttl: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.question.len() + 16);
        out.extend_from_slice(&self.id.to_be_bytes());
        // QR, the query's RD; RA; the code.
        out.push(0x80 | u8::from(self.recursion_desired));
        out.push(0x80 | (rcode & 0x0f));
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&u16::from(address.is_some()).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(self.question);
        if let Some(address) = address {
            // The name by pointer to the question's, at offset 12.
            out.extend_from_slice(&[0xc0, 0x0c]);
            out.extend_from_slice(&TYPE_A.to_be_bytes());
            out.extend_from_slice(&CLASS_IN.to_be_bytes());
            out.extend_from_slice(&ttl.to_be_bytes());
            out.extend_from_slice(&4u16.to_be_bytes());
            out.extend_from_slice(&address.octets());
        }
        out
    }
}

/// A bare answer with `rcode` to a message whose only known part is its ID.
pub fn bare_answer(id: u16, rcode: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER);
    out.extend_from_slice(&id.to_be_bytes());
    out.push(0x80);
    out.push(0x80 | (rcode & 0x0f));
    out.extend_from_slice(&[0; 8]);
    out
}

/// The gateway's own query for the A records of `name`.
pub fn a_query(id: u16, name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + name.len() + 6);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&TYPE_A.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out
}

/// What an upstream answer said.
#[derive(Debug, PartialEq, Eq)]
pub enum Upstream {
    /// The A records (perhaps none) and their least TTL.
    Addresses(Vec<Ipv4Addr>, u32),
    NoSuchName,
    Failed(u8),
}

/// Reads the answer to `a_query(id, …)`: `None` when it is not that answer.
pub fn parse_answer(id: u16, message: &[u8]) -> Option<Upstream> {
    if message.len() < HEADER || u16_at(message, 0)? != id || message[2] & 0x80 == 0 {
        return None;
    }
    let rcode = message[3] & 0x0f;
    if rcode == RCODE_NXDOMAIN {
        return Some(Upstream::NoSuchName);
    }
    if rcode != 0 {
        return Some(Upstream::Failed(rcode));
    }
    // A truncated answer (TC) keeps the whole records it holds; one with none fails.
    let truncated = message[2] & 0x02 != 0;
    let questions = u16_at(message, 4)?;
    let answers = u16_at(message, 6)?;
    let mut at = HEADER;
    for _ in 0..questions {
        at = skip_name(message, at)? + 4;
    }
    let mut addresses = Vec::new();
    let mut ttl = u32::MAX;
    for _ in 0..answers {
        let Some((record, next)) = answer_record(message, at) else {
            if truncated {
                break;
            }
            return None;
        };
        if let Some((address, record_ttl)) = record {
            addresses.push(address);
            ttl = ttl.min(record_ttl);
        }
        at = next;
    }
    if truncated && addresses.is_empty() {
        return Some(Upstream::Failed(RCODE_SERVFAIL));
    }
    Some(Upstream::Addresses(addresses, ttl))
}

/// The answer record at `at`: its address and TTL when it is an IN A record, and where the
/// next one starts.
fn answer_record(message: &[u8], at: usize) -> Option<(Option<(Ipv4Addr, u32)>, usize)> {
    let at = skip_name(message, at)?;
    let rtype = u16_at(message, at)?;
    let rclass = u16_at(message, at + 2)?;
    let ttl = u32::from_be_bytes(message.get(at + 4..at + 8)?.try_into().ok()?);
    let length = usize::from(u16_at(message, at + 8)?);
    let data = message.get(at + 10..at + 10 + length)?;
    let record = (rtype == TYPE_A && rclass == CLASS_IN && length == 4)
        .then(|| (Ipv4Addr::new(data[0], data[1], data[2], data[3]), ttl));
    Some((record, at + 10 + length))
}

/// Past a possibly compressed name at `at`.
fn skip_name(message: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let length = *message.get(at)?;
        if length == 0 {
            return Some(at + 1);
        }
        if length & 0xc0 == 0xc0 {
            message.get(at + 1)?;
            return Some(at + 2);
        }
        if length > 63 {
            return None;
        }
        at += 1 + usize::from(length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_reads_back_as_a_query_and_answers_with_one_record() {
        let message = a_query(0x1234, "Api.Example.com".to_ascii_lowercase().as_str());
        let query = parse_query(&message).unwrap();
        assert_eq!(query.id, 0x1234);
        assert_eq!(query.name, "api.example.com");
        assert_eq!(query.qtype, TYPE_A);
        assert!(query.is_internet_class());
        let answer = query.answer(0, Some(Ipv4Addr::new(10, 0, 0, 2)), 30);
        assert_eq!(
            parse_answer(0x1234, &answer),
            Some(Upstream::Addresses(vec![Ipv4Addr::new(10, 0, 0, 2)], 30))
        );
        let refused = query.answer(RCODE_NXDOMAIN, None, 0);
        assert_eq!(parse_answer(0x1234, &refused), Some(Upstream::NoSuchName));
        assert_eq!(parse_answer(0x4321, &refused), None);
    }

    #[test]
    fn malformed_queries_are_refused_or_dropped() {
        assert_eq!(parse_query(&[1]), Err(Malformed::Unanswerable));
        let mut message = a_query(7, "a.example");
        message[2] |= 0x80;
        assert_eq!(parse_query(&message), Err(Malformed::Unanswerable));
        let mut two = a_query(7, "a.example");
        two[5] = 2;
        assert_eq!(parse_query(&two), Err(Malformed::Answer(7, RCODE_FORMERR)));
        let mut odd = a_query(7, "a.example");
        odd[13] = b'\xff';
        assert_eq!(parse_query(&odd), Err(Malformed::Answer(7, RCODE_FORMERR)));
        let short = &a_query(7, "a.example")[..20];
        assert_eq!(parse_query(short), Err(Malformed::Answer(7, RCODE_FORMERR)));
    }

    #[test]
    fn answers_with_compressed_names_and_cnames_yield_their_a_records() {
        let mut message = a_query(9, "w.example");
        message[2] = 0x81;
        message[3] = 0x80;
        message[7] = 2;
        // CNAME w.example -> (pointer) then the A record.
        message.extend_from_slice(&[0xc0, 0x0c, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 0x0c]);
        message.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 20, 0, 4, 198, 51, 100, 7]);
        assert_eq!(
            parse_answer(9, &message),
            Some(Upstream::Addresses(
                vec![Ipv4Addr::new(198, 51, 100, 7)],
                20
            ))
        );
        assert_eq!(parse_answer(9, &message[..message.len() - 2]), None);
        // Truncated (TC): the whole records it holds count; without any, it failed.
        let mut truncated = message.clone();
        truncated[2] |= 0x02;
        truncated[7] = 3;
        assert_eq!(
            parse_answer(9, &truncated),
            Some(Upstream::Addresses(
                vec![Ipv4Addr::new(198, 51, 100, 7)],
                20
            ))
        );
        let cut = &truncated[..truncated.len() - 16];
        assert_eq!(parse_answer(9, cut), Some(Upstream::Failed(RCODE_SERVFAIL)));
    }
}
