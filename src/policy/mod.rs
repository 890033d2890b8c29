//! Sandbox policy: requests, backend support, observed effective policy, identifiers.

pub mod effective;
pub mod egress;
pub mod ids;
pub mod network;
pub mod request;
pub mod resources;
pub mod support;
