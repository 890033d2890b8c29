//! Transfers of workspace trees: per-call options and the bounded-memory metadata ledger.

pub mod ledger;
pub mod options;
