//! The Kubernetes backend (`native-sandbox/kubernetes`): a sandbox is a pod whose entry is the
//! guest supervisor (the static helper's `--supervise` mode, injected by an init container), the
//! host speaks to it over one attach stream exactly as on Docker (`process::supervised::Link`),
//! and every object it makes carries the scope's labels and is proven by its UID. Transfers run the
//! workspace helper by exec in the pod's workspace container (`transfers.rs`).

pub mod backend;
pub mod client;
pub mod layout;
pub mod objects;
pub mod options;
pub mod pod;
pub mod quantity;
pub mod recovered;
pub mod requests;
pub mod sandbox;
pub mod transfers;
