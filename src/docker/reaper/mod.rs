//! The reaper: a host process of this package, one per controller process, that removes the
//! `in_process` sandboxes a controller leaves behind when it dies without destroying them
//! (SIGKILL, a Ctrl-C it had no handler for, an exit that skipped `destroy`).
//!
//! `link.rs` is the controller's side (started at the first registration, told each record
//! before the effect it announces, and each destroyed sandbox); `wire.rs` the messages;
//! `serve.rs` the reaper's side. What it removes is exactly what was registered, by ID and
//! proof as reconciliation does, never by a name pattern; persisted sandboxes (a caller means
//! to reconnect to them) are never registered.

pub mod link;
pub mod serve;
pub mod wire;
