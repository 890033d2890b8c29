//! A running sandbox's workspace as one tar archive, both ways (what an agent framework calls
//! persisting and hydrating a workspace): read through the export path (`persist`), written
//! through the import path (`hydrate`), each admitted as a live transfer that stop and destroy
//! cancel, and bounded by the caller's archive limits.

mod hydrate;
pub mod limits;
pub mod members;
mod persist;

pub use hydrate::hydrate_workspace;
pub use persist::persist_workspace;

use std::future::Future;

use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::owner::{SandboxOwner, TransferTicket};
use crate::lifecycle::state::Operation;

/// Runs `work` as the live transfer `operation` admitted now: until it settles, stop or destroy
/// (through the transfer's cancellation) or the caller's `cancel` ends it, whichever fires
/// first; the transfer is released either way (also when this future is dropped).
async fn as_live_transfer<T>(
    owner: &SandboxOwner,
    operation: Operation,
    caller: Cancel,
    work: impl Future<Output = Result<T, OwnerError>>,
) -> Result<T, OwnerError> {
    let ticket = owner.begin_live_transfer(operation)?;
    // Released however this ends: settled, or dropped by its caller.
    let _release = Release { owner, ticket };
    match owner.transfer_cancel(ticket) {
        Some(transfer) => tokio::select! {
            biased;
            why = transfer.cancelled() => Err(why),
            why = caller.cancelled() => Err(why),
            done = work => done,
        },
        None => Err(OwnerError::cancelled(
            "the workspace archive's transfer was released",
        )),
    }
}

/// Releases a live transfer's ticket when dropped (never fencing execution).
struct Release<'a> {
    owner: &'a SandboxOwner,
    ticket: TransferTicket,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.owner.end_transfer(self.ticket, false);
    }
}
