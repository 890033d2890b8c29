//! native-sandbox: the Rust core of an owned, policy-checked sandbox library for Node.js, and
//! its Node-API binding. Everything outside `binding` is plain Rust and knows nothing of JS.

pub mod debug;
pub mod digest;
pub mod docker;
pub mod guest_helper;
pub mod guest_layout;
pub mod input;
pub mod json;
#[cfg(target_os = "linux")]
pub mod kubernetes;
pub mod lifecycle;
pub mod limits;
pub mod paths;
pub mod policy;
pub mod process;
pub mod recovery;
#[cfg(test)]
mod test_support;
pub mod transfer;

// napi registers the binding's exports only outside test builds, so there they look unused; the
// binding's own unit tests (its runtime's sizing and lifecycle) still run.
#[cfg_attr(test, allow(dead_code))]
mod binding;
