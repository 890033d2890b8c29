//! Lookups: the guest's DNS questions, answered on the gateway's port 53. A listed name's A
//! question is resolved upstream (`resolve.rs`) and answered with the gateway's own address;
//! every other question is answered at once (NXDOMAIN, an empty answer, or the busy gateway's
//! SERVFAIL), and each refusal is counted (`report.rs`).

use std::net::UdpSocket;
use std::sync::Arc;

use super::dns::{
    bare_answer, parse_query, Malformed, Query, RCODE_NXDOMAIN, RCODE_SERVFAIL, TYPE_A,
};
use super::resolve::Resolved;
use super::{ip_of, slot, spawn, Gateway, Pool, FAILURE_PAUSE};

/// The TTL of the gateway's answers: short, so a changed upstream is asked again soon.
const ANSWER_TTL: u32 = 30;

pub fn serve_lookups(gateway: &Arc<Gateway>, socket: &UdpSocket) {
    let mut buffer = [0u8; 1_500];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buffer) else {
            std::thread::sleep(FAILURE_PAUSE);
            continue;
        };
        if !gateway.config.internal(ip_of(from)) {
            continue;
        }
        // Only a listed name's A question waits on the upstream, on a thread of its own; every
        // other answer, and a busy gateway's, is sent at once.
        let query = match answer_at_once(gateway, &buffer[..n]) {
            Ok(Some(answer)) => {
                let _ = socket.send_to(&answer, from);
                continue;
            }
            Ok(None) => continue,
            Err(query) => query,
        };
        let busy = query.answer(RCODE_SERVFAIL, None, 0);
        let refuse = || {
            gateway
                .report
                .refused(&query.name, 53, "the gateway is busy");
            let _ = socket.send_to(&busy, from);
        };
        let (Some(held), Ok(reply)) = (slot(gateway, Pool::Lookup), socket.try_clone()) else {
            refuse();
            continue;
        };
        let message = buffer[..n].to_vec();
        let spawned = spawn(move || {
            if let Ok(query) = parse_query(&message) {
                let resolved = held.0.resolver.resolve(&query.name);
                let _ = reply.send_to(&answer_a(&held.0, &query, resolved), from);
            }
            drop(held);
        });
        if spawned.is_err() {
            refuse();
        }
    }
}

/// The answer to a guest lookup that needs no upstream (`Ok`: `None` for a message not worth
/// one), or the query of a listed name's A question, which does (`Err`).
fn answer_at_once<'a>(gateway: &Gateway, message: &'a [u8]) -> Result<Option<Vec<u8>>, Query<'a>> {
    let query = match parse_query(message) {
        Ok(query) => query,
        Err(Malformed::Unanswerable) => return Ok(None),
        Err(Malformed::Answer(id, code)) => {
            gateway
                .report
                .refused("a malformed lookup", 53, "not a lookup the gateway answers");
            return Ok(Some(bare_answer(id, code)));
        }
    };
    if !gateway.config.names(&query.name) {
        gateway
            .report
            .refused(&query.name, 53, "not on the allowlist");
        return Ok(Some(query.answer(RCODE_NXDOMAIN, None, 0)));
    }
    if !query.is_internet_class() {
        gateway
            .report
            .refused(&query.name, 53, "not an internet-class question");
        return Ok(Some(query.answer(RCODE_NXDOMAIN, None, 0)));
    }
    if query.qtype != TYPE_A {
        // Allowed, but only IPv4 goes out: an empty answer, so the guest asks for A.
        return Ok(Some(query.answer(0, None, ANSWER_TTL)));
    }
    match gateway.resolver.cached(&query.name) {
        Some(addresses) => Ok(Some(answer_a(
            gateway,
            &query,
            Resolved::Addresses(addresses),
        ))),
        None => Err(query),
    }
}

/// The answer to a listed name's A question once the name resolved: the gateway's own
/// address when it has addresses; a name without any is counted as refused, saying why, so
/// the guest's failed lookup shows in the report.
fn answer_a(gateway: &Gateway, query: &Query<'_>, resolved: Resolved) -> Vec<u8> {
    let refuse = |reason| gateway.report.refused(&query.name, 53, reason);
    match resolved {
        Resolved::Addresses(addresses) if addresses.is_empty() => {
            refuse("the name has no IPv4 address");
            query.answer(0, None, ANSWER_TTL)
        }
        Resolved::Addresses(_) => {
            gateway.report.allowed();
            query.answer(0, Some(gateway.own), ANSWER_TTL)
        }
        Resolved::NoSuchName => {
            refuse("the name does not exist");
            query.answer(RCODE_NXDOMAIN, None, 0)
        }
        Resolved::Failed(why) => {
            eprintln!("native-sandbox gateway: resolving {}: {why}", query.name);
            refuse("the name could not be resolved");
            query.answer(RCODE_SERVFAIL, None, 0)
        }
    }
}
