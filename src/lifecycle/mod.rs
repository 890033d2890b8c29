//! The sandbox lifecycle: one owner state machine for every driver, Rust or JavaScript.

pub mod admission;
pub mod cancel;
pub mod driver;
pub mod egress_report;
pub mod error;
pub mod freeze;
pub mod journal;
pub mod observe;
pub mod owner;
pub mod recovered;
pub mod state;
pub mod stop_cause;

#[cfg(test)]
mod tests;
