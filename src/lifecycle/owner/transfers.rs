//! Transfer admission: the one transfer slot (an import while compute is ready, an export once
//! it is stopped), the ticket that alone can release it, and its cancellation, which stop,
//! destroy or its own caller fire; cleanup waits for a cancelled transfer's release.

use std::time::Duration;

use super::{Core, SandboxOwner};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::observe::bounded;
use crate::lifecycle::state::{Operation, State};

/// The identity of one admitted transfer: only it can release the transfer slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferTicket(pub u64);

/// An admitted transfer: its kind, its ticket, and the cancellation that stop, destroy or its
/// own caller fire to interrupt whatever it waits on.
#[derive(Clone)]
pub(super) struct Admitted {
    operation: Operation,
    ticket: TransferTicket,
    cancel: Cancel,
    /// A workspace archive's transfer beside running commands (`begin_live_transfer`): stop
    /// cancels it as it cancels an import.
    live: bool,
}

impl SandboxOwner {
    /// Admits one import: ready compute, no process reserved, no other transfer.
    pub fn begin_import(&self) -> Result<TransferTicket, OwnerError> {
        let mut core = self.core();
        if core.state != State::Ready || core.process.is_some() || core.transfer.is_some() {
            return Err(OwnerError::state(
                "File import requires ready compute, no entered import, and no process reservation.",
            ));
        }
        Ok(Self::admit(&mut core, Operation::Import, false))
    }

    /// Admits one workspace archive's transfer while the sandbox runs (`operation`: `Export`
    /// reads the workspace, `Import` replaces it): ready compute on a backend with sessions,
    /// whatever runs in it, and no other transfer. Its release never fences execution.
    pub fn begin_live_transfer(&self, operation: Operation) -> Result<TransferTicket, OwnerError> {
        if !self.sessions_supported() {
            return Err(OwnerError::Unsupported(
                "this backend reads and writes no workspace archive while the sandbox runs (its support.sessions is false)".into(),
            ));
        }
        let mut core = self.core();
        if core.state != State::Ready || core.transfer.is_some() {
            return Err(OwnerError::state(format!(
                "a workspace archive needs a started sandbox whose stop has not begun and no other transfer; it is {}{}",
                core.state.kind(),
                if core.transfer.is_some() { " with a transfer under way" } else { "" }
            )));
        }
        Ok(Self::admit(&mut core, operation, true))
    }

    /// Admits one export: completely stopped compute and no other transfer.
    pub fn begin_export(&self) -> Result<TransferTicket, OwnerError> {
        let mut core = self.core();
        if core.state != State::Stopped || core.transfer.is_some() {
            return Err(OwnerError::state(
                "File export requires stopped compute and no other entered transfer.",
            ));
        }
        Ok(Self::admit(&mut core, Operation::Export, false))
    }

    fn admit(core: &mut Core, operation: Operation, live: bool) -> TransferTicket {
        core.tickets += 1;
        let ticket = TransferTicket(core.tickets);
        core.transfer = Some(Admitted {
            operation,
            ticket,
            cancel: Cancel::new(),
            live,
        });
        ticket
    }

    /// Whether `ticket` still holds the transfer slot (admitted and not yet ended).
    pub fn holds_transfer(&self, ticket: TransferTicket) -> bool {
        self.core()
            .transfer
            .as_ref()
            .is_some_and(|admitted| admitted.ticket == ticket)
    }

    /// The cancellation of the transfer admitted now, if any (every native transfer step runs
    /// under it, so stop, destroy or an interrupted caller end whatever the step waits on).
    pub fn current_transfer_cancel(&self) -> Option<Cancel> {
        self.core()
            .transfer
            .as_ref()
            .map(|admitted| admitted.cancel.clone())
    }

    /// The cancellation of the transfer `ticket`, while it holds the slot.
    pub fn transfer_cancel(&self, ticket: TransferTicket) -> Option<Cancel> {
        self.core()
            .transfer
            .as_ref()
            .filter(|admitted| admitted.ticket == ticket)
            .map(|admitted| admitted.cancel.clone())
    }

    /// Waits until `ticket` no longer holds the transfer slot.
    pub async fn transfer_released(&self, ticket: TransferTicket) {
        loop {
            let released = self.inner.transfer_released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if !self.holds_transfer(ticket) {
                return;
            }
            released.await;
        }
    }

    /// Releases the transfer `ticket` admitted, once: a ticket already released (or never
    /// admitted) releases nothing, so a later transfer is never ended by an earlier one's
    /// cleanup. An import that failed after it was admitted fences execution for good: it is
    /// never replayed. Returns whether this call released it.
    pub fn end_transfer(&self, ticket: TransferTicket, fence_import: bool) -> bool {
        let operation = {
            let mut core = self.core();
            match &core.transfer {
                Some(admitted) if admitted.ticket == ticket => {
                    let operation = admitted.operation;
                    core.transfer = None;
                    Some(operation)
                }
                _ => None,
            }
        };
        if operation.is_some() {
            self.inner.transfer_released.notify_waiters();
        }
        if fence_import && operation == Some(Operation::Import) {
            self.fence(Operation::Import);
        }
        operation.is_some()
    }

    /// Cancels the admitted transfer of kind `only` (any kind when `None`; a live one whatever
    /// its kind) with `reason`, and returns its ticket so cleanup can wait for its release.
    pub(super) fn cancel_transfer_locked(
        core: &Core,
        only: Option<Operation>,
        reason: &str,
    ) -> Option<TransferTicket> {
        let admitted = core.transfer.as_ref()?;
        if !admitted.live && only.is_some_and(|operation| operation != admitted.operation) {
            return None;
        }
        admitted.cancel.cancel(OwnerError::cancelled(reason));
        Some(admitted.ticket)
    }

    /// Waits, within `limit`, until a cancelled transfer released its slot: no state reads
    /// `stopped` (or `destroyed`) while its bytes can still move.
    pub(super) async fn await_transfer_release(
        &self,
        ticket: Option<TransferTicket>,
        limit: Duration,
    ) -> Result<(), OwnerError> {
        let Some(ticket) = ticket else {
            return Ok(());
        };
        bounded(limit, "the cancelled transfer", async {
            self.transfer_released(ticket).await;
            Ok(())
        })
        .await
    }
}
