//! Import and export sessions of a native owner, driven step by step from JavaScript.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use tokio::sync::Mutex;

use super::errors::{describe, failed, outcome};
use super::export_batch::ExportBatchValue;
use super::js_value::{Captured, JsData};
use super::owner::NativeOwner;
use crate::input::{ToValue, Value};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::owner::TransferTicket;
use crate::transfer::export::{ExportSession, Selection};
use crate::transfer::host_tree::{import_host_directory, StagingWriter};
use crate::transfer::import::ImportSession;
use crate::transfer::options::parse_transfer_options;
use crate::transfer::progress::Progress;
use crate::transfer::selection::parse_export_selection;

/// The sessions of one owner: at most one transfer at a time (the owner admits it). Each open
/// session keeps the ticket of its admission: whoever takes the session out of its slot
/// (finish or abort, whichever comes first) releases the transfer, exactly once.
#[derive(Default)]
pub struct TransferSlots {
    import: Mutex<Option<(TransferTicket, ImportSession)>>,
    export: Mutex<Option<(TransferTicket, ExportSession)>>,
    /// The last native admission, until `importBegin`/`exportBegin` opens it (an export with
    /// the selection parsed at admission).
    admitted: std::sync::Mutex<Option<(TransferTicket, Option<Selection>)>>,
    /// The running counts of the last transfer opened, for `transferProgress`.
    progress: std::sync::Mutex<Option<Arc<Progress>>>,
}

impl TransferSlots {
    fn progress(&self) -> std::sync::MutexGuard<'_, Option<Arc<Progress>>> {
        self.progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn admitted(&self) -> std::sync::MutexGuard<'_, Option<(TransferTicket, Option<Selection>)>> {
        self.admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A ticket number from JavaScript: a positive integer, or nothing this owner issued.
fn ticket_of(ticket: f64) -> Option<TransferTicket> {
    (ticket.fract() == 0.0 && (1.0..=9_007_199_254_740_991.0).contains(&ticket))
        .then_some(TransferTicket(ticket as u64))
}

fn ticket_value(ticket: TransferTicket) -> Value {
    // Tickets count admissions of one owner; f64 holds them exactly far beyond any lifetime.
    Value::Number(ticket.0 as f64)
}

pub type SharedSlots = Arc<TransferSlots>;

fn parse_selection(value: &Value) -> std::result::Result<Selection, OwnerError> {
    parse_export_selection(value).map_err(OwnerError::Validation)
}

/// At most this many entries cross in one export batch (their paths bound its metadata).
const EXPORT_BATCH_ENTRIES: usize = 256;

fn done(result: std::result::Result<Value, OwnerError>) -> JsData {
    JsData(outcome(result))
}

#[napi]
impl NativeOwner {
    /// Admits a transfer (`import` or `export`) synchronously, so concurrent calls are admitted
    /// in call order. Resolves the transfer's ticket: `endTransfer(ticket, …)` releases it (a
    /// JavaScript driver's transfers); a native import opens it with `importBegin`.
    #[napi(js_name = "admitTransfer")]
    pub fn admit_transfer(&self, kind: String) -> JsData {
        let owner = self.owner();
        let admitted = if kind == "import" {
            owner.begin_import()
        } else {
            owner.begin_export()
        };
        if let Ok(ticket) = admitted {
            *self.slots().admitted() = Some((ticket, None));
        }
        JsData(outcome(admitted.map(ticket_value)))
    }

    /// Resolves when the transfer `ticket` ends: with the error that cancelled it (a stop, a
    /// destroy, its caller), or `null` once it was released.
    #[napi(js_name = "transferEnded")]
    pub async fn transfer_ended(&self, ticket: f64) -> JsData {
        let owner = self.owner();
        let Some(ticket) = ticket_of(ticket) else {
            return JsData(Value::Null);
        };
        let Some(cancel) = owner.transfer_cancel(ticket) else {
            return JsData(Value::Null);
        };
        tokio::select! {
            biased;
            reason = cancel.cancelled() => JsData(describe(&reason)),
            () = owner.transfer_released(ticket) => JsData(Value::Null),
        }
    }

    /// Interrupts the transfer `ticket` (its caller's signal or deadline): every pending and
    /// later step fails with `code` (`cancelled` or `deadline_exceeded`) and `message`.
    #[napi(js_name = "cancelTransfer")]
    pub fn cancel_transfer(&self, ticket: f64, deadline: bool, message: String) {
        let Some(ticket) = ticket_of(ticket) else {
            return;
        };
        if let Some(cancel) = self.owner().transfer_cancel(ticket) {
            cancel.cancel(if deadline {
                OwnerError::operation(OperationCode::DeadlineExceeded, message)
            } else {
                OwnerError::cancelled(message)
            });
        }
    }

    /// Releases the transfer `ticket` admitted, once; a failed import fences execution.
    #[napi(js_name = "endTransfer")]
    pub fn end_transfer(&self, ticket: f64, fence_import: bool) -> bool {
        // Any value that is not a ticket this owner issued releases nothing.
        ticket_of(ticket).is_some_and(|ticket| self.owner().end_transfer(ticket, fence_import))
    }

    /// Admits a native export synchronously, so concurrent calls are admitted in call order; the
    /// selection is validated first, so a bad one is a validation error in any state.
    #[napi(js_name = "admitExport")]
    pub fn admit_export(&self, selection: Captured) -> JsData {
        let admitted = parse_selection(&selection.0).and_then(|selection| {
            let ticket = self.owner().begin_export()?;
            *self.slots().admitted() = Some((ticket, Some(selection)));
            Ok(ticket)
        });
        JsData(outcome(admitted.map(ticket_value)))
    }

    /// Runs one transfer step under the current transfer's cancellation: stop, destroy or an
    /// interrupted caller end whatever it waits on (the engine, the slot of a pending step).
    async fn step<T>(
        &self,
        work: impl std::future::Future<Output = std::result::Result<T, OwnerError>>,
    ) -> std::result::Result<T, OwnerError> {
        match self.owner().current_transfer_cancel() {
            Some(cancel) => tokio::select! {
                biased;
                reason = cancel.cancelled() => Err(reason),
                result = work => result,
            },
            None => work.await,
        }
    }

    /// Whether the transfer `ticket` was cancelled. A cancellation that raced an open (its
    /// caller may already have aborted an empty slot) means what the open stored is abandoned
    /// right there, so nothing holds the sandbox.
    fn cancelled(&self, ticket: TransferTicket) -> bool {
        self.owner()
            .transfer_cancel(ticket)
            .is_some_and(|cancel| cancel.is_cancelled())
    }

    /// Abandons the import session `ticket` opened, if it is still the open one (the slot may
    /// since belong to a later transfer), and releases the ticket, fencing execution.
    async fn abandon_import(&self, ticket: TransferTicket) {
        let session = {
            let mut slot = self.slots().import.lock().await;
            match slot.take() {
                Some((held, session)) if held == ticket => Some(session),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if let Some(session) = session {
            session.abort().await;
        }
        self.owner().end_transfer(ticket, true);
    }

    /// Abandons the export session `ticket` opened, if it is still the open one, and releases
    /// the ticket.
    async fn abandon_export(&self, ticket: TransferTicket) {
        {
            let mut slot = self.slots().export.lock().await;
            if slot.as_ref().is_some_and(|(held, _)| *held == ticket) {
                slot.take();
            }
        }
        self.owner().end_transfer(ticket, false);
    }

    /// The ticket of the admission `importBegin`/`exportBegin` opens: the last one, while it
    /// still holds the transfer slot.
    fn take_admitted(&self) -> Option<(TransferTicket, Option<Selection>)> {
        let admitted = self.slots().admitted().take()?;
        self.owner().holds_transfer(admitted.0).then_some(admitted)
    }

    /// The running counts of the transfer opened last, `{ files, bytes }` (bigints), or `null`
    /// before any: never waits (the counts are atomics the transfer's steps add to).
    #[napi(js_name = "transferProgress")]
    pub fn transfer_progress(&self) -> JsData {
        JsData(match self.slots().progress().as_ref() {
            None => Value::Null,
            Some(progress) => {
                let (files, bytes) = progress.read();
                Value::object([
                    ("files", Value::BigInt(Some(i128::from(files)))),
                    ("bytes", Value::BigInt(Some(i128::from(bytes)))),
                ])
            }
        })
    }

    /// Opens the import admitted by `admitTransfer('import')`; `options` are the parsed transfer
    /// options (quotas). Any failure here releases the admission.
    #[napi(js_name = "importBegin")]
    pub async fn import_begin(&self, options: Captured) -> JsData {
        let owner = self.owner();
        let Some((ticket, None)) = self.take_admitted() else {
            return done(Err(OwnerError::state(
                "importBegin needs an admitted import",
            )));
        };
        let opened = async {
            let options = parse_transfer_options(&options.0).map_err(OwnerError::Validation)?;
            let driver = owner.driver();
            let settings = driver.transfer_settings();
            let upload = Arc::clone(&driver).open_import().await?;
            let session = ImportSession::new(
                upload,
                &settings,
                owner.request().policy.transfers,
                options.quotas,
            );
            *self.slots().progress() = Some(session.progress());
            *self.slots().import.lock().await = Some((ticket, session));
            Ok(Value::Null)
        };
        let result = self.step(opened).await;
        if result.is_err() {
            owner.end_transfer(ticket, true);
        }
        if self.cancelled(ticket) {
            self.abandon_import(ticket).await;
        }
        done(result)
    }

    /// Runs one import step that never waits on the open import, on the JavaScript thread:
    /// `true` when the import must `importDrain` before its next step, `false` when not, or
    /// the step's error (the same a waiting step would give, at the same step).
    fn import_now(
        &self,
        step: impl FnOnce(&mut ImportSession) -> std::result::Result<(), OwnerError>,
    ) -> JsData {
        let taken = || {
            if let Some(cancel) = self.owner().current_transfer_cancel() {
                cancel.check()?;
            }
            // Free unless a drain, a finish or an abort runs: the caller awaits each of those
            // before its next step, so a busy slot means the import is being abandoned.
            let mut slot = self
                .slots()
                .import
                .try_lock()
                .map_err(|_| OwnerError::state("the import is busy"))?;
            let Some((_, session)) = slot.as_mut() else {
                return Err(OwnerError::state("no import is open"));
            };
            step(session)?;
            Ok(Value::Bool(session.drain_due()))
        };
        done(taken())
    }

    /// A directory of the open import, taken at once: see `import_now`.
    #[napi(js_name = "importDirectoryNow")]
    pub fn import_directory_now(&self, index: u32, path: String) -> JsData {
        self.import_now(|session| session.directory_now(index, path))
    }

    /// A file's header, taken at once: see `import_now`.
    #[napi(js_name = "importFileNow")]
    pub fn import_file_now(
        &self,
        index: u32,
        path: String,
        byte_length: BigInt,
        executable: bool,
    ) -> JsData {
        let (negative, length, lossless) = byte_length.get_u64();
        self.import_now(|session| {
            if negative || !lossless {
                return Err(OwnerError::state(
                    "byteLength must be a nonnegative 64-bit amount",
                ));
            }
            session.begin_file_now(index, path, length, executable)
        })
    }

    /// One chunk of the open file's body, taken at once (copied once admitted): see
    /// `import_now`.
    #[napi(js_name = "importChunkNow")]
    pub fn import_chunk_now(&self, chunk: Buffer) -> JsData {
        self.import_now(|session| session.chunk_now_copied(&chunk))
    }

    /// The end of the open file's body, taken at once: see `import_now`.
    #[napi(js_name = "importFileEndNow")]
    pub fn import_file_end_now(&self) -> JsData {
        self.import_now(ImportSession::end_file_now)
    }

    /// Delivers what the open import's steps took to the engine; resolves once the engine
    /// took it (backpressure).
    #[napi(js_name = "importDrain")]
    pub async fn import_drain(&self) -> JsData {
        done(
            self.step(async {
                let mut slot = self.slots().import.lock().await;
                match slot.as_mut() {
                    Some((_, session)) => session.drain().await.map(|()| Value::Null),
                    None => Err(OwnerError::state("no import is open")),
                }
            })
            .await,
        )
    }

    /// Validates the tree, ends the archive, waits for extraction; releases the transfer.
    #[napi(js_name = "importFinish")]
    pub async fn import_finish(&self) -> JsData {
        let session = self.slots().import.lock().await.take();
        let Some((ticket, session)) = session else {
            return done(Err(OwnerError::state("no import is open")));
        };
        let result = self.step(session.finish()).await;
        self.owner().end_transfer(ticket, result.is_err());
        done(result.map(|summary| summary.to_value()))
    }

    /// Abandons the import `ticket` admitted; an admitted import that fails fences execution
    /// (never replayed).
    #[napi(js_name = "importAbort")]
    pub async fn import_abort(&self, ticket: f64) -> JsData {
        // Admitted and abandoned: whatever it reached, execution is fenced for good. A ticket
        // released already (by its finish, or a failed open) releases nothing here.
        if let Some(ticket) = ticket_of(ticket) {
            self.abandon_import(ticket).await;
        }
        done(Ok(Value::Null))
    }

    /// Imports the whole host directory `directory` (absolute, checked by the caller to be a
    /// directory) into the open import: the walk, the checks and the reads all run in Rust, in
    /// chunks of `chunk_bytes` (the import session refuses chunks above the policy's bound).
    #[napi(js_name = "importHostDirectory")]
    pub async fn import_host_directory(&self, directory: String, chunk_bytes: u32) -> JsData {
        done(
            self.step(async {
                let mut slot = self.slots().import.lock().await;
                match slot.as_mut() {
                    Some((_, session)) => import_host_directory(
                        session,
                        std::path::PathBuf::from(directory),
                        u64::from(chunk_bytes),
                    )
                    .await
                    .map(|()| Value::Null),
                    None => Err(OwnerError::state("no import is open")),
                }
            })
            .await,
        )
    }

    /// Writes every entry of the open export into `staging` (an existing private directory),
    /// recording its directories in `identities` (another): see `transfer::staging_tree`.
    /// Resolves once everything queued is written or refused, even when the transfer was
    /// cancelled meanwhile.
    #[napi(js_name = "exportHostDirectory")]
    pub async fn export_host_directory(&self, staging: String, identities: String) -> JsData {
        let chunk_bytes = self.owner().request().policy.transfers.chunk_bytes;
        let mut writer = StagingWriter::start(
            std::path::PathBuf::from(staging),
            std::path::PathBuf::from(identities),
            chunk_bytes,
        );
        let fed = self
            .step(async {
                let mut slot = self.slots().export.lock().await;
                match slot.as_mut() {
                    Some((_, session)) => writer.feed(session).await,
                    None => Err(OwnerError::state("no export is open")),
                }
            })
            .await;
        done(writer.finish(fed).await.map(|()| Value::Null))
    }

    /// Opens the export admitted by `admitExport`, with its selection. Any failure here releases
    /// the admission.
    #[napi(js_name = "exportBegin")]
    pub async fn export_begin(&self, options: Captured) -> JsData {
        let owner = self.owner();
        let Some((ticket, Some(selection))) = self.take_admitted() else {
            return done(Err(OwnerError::state(
                "exportBegin needs an admitted export",
            )));
        };
        let result = async {
            let options = parse_transfer_options(&options.0).map_err(OwnerError::Validation)?;
            let driver = owner.driver();
            let spill = driver.transfer_settings().spill_directory;
            let session = ExportSession::new(
                driver,
                selection,
                spill.as_deref(),
                owner.request().policy.transfers,
                options.quotas,
            )
            .await?;
            *self.slots().progress() = Some(session.progress());
            *self.slots().export.lock().await = Some((ticket, session));
            Ok(Value::Null)
        };
        let result = self.step(result).await;
        if result.is_err() {
            owner.end_transfer(ticket, false);
        }
        if self.cancelled(ticket) {
            self.abandon_export(ticket).await;
        }
        done(result)
    }

    /// The next entries of the open export with their bodies, in one crossing: at most
    /// `EXPORT_BATCH_ENTRIES` entries and about `chunkBytes` of bodies (see `export_batch`).
    /// A body the batch stopped in continues through `exportRead`.
    #[napi(js_name = "exportNextBatch")]
    pub async fn export_next_batch(&self) -> Either<ExportBatchValue, JsData> {
        let max_bytes = usize::try_from(self.owner().request().policy.transfers.chunk_bytes)
            .unwrap_or(usize::MAX);
        let result = self
            .step(async {
                let mut slot = self.slots().export.lock().await;
                match slot.as_mut() {
                    Some((_, session)) => {
                        Ok(session.next_batch(EXPORT_BATCH_ENTRIES, max_bytes).await)
                    }
                    None => Err(OwnerError::state("no export is open")),
                }
            })
            .await;
        match result {
            Ok(batch) => Either::A(ExportBatchValue::from(batch)),
            Err(error) => Either::B(JsData(failed(&error))),
        }
    }

    /// The next chunk of the current file: a Buffer, `null` at its end, or an error.
    #[napi(js_name = "exportRead")]
    pub async fn export_read(&self) -> Either3<Buffer, Null, JsData> {
        let result = self
            .step(async {
                let mut slot = self.slots().export.lock().await;
                match slot.as_mut() {
                    Some((_, session)) => session.read().await,
                    None => Err(OwnerError::state("no export is open")),
                }
            })
            .await;
        match result {
            Ok(Some(bytes)) => Either3::A(Buffer::from(bytes.to_vec())),
            Ok(None) => Either3::B(Null),
            Err(error) => Either3::C(JsData(failed(&error))),
        }
    }

    #[napi(js_name = "exportFinish")]
    pub async fn export_finish(&self) -> JsData {
        let session = self.slots().export.lock().await.take();
        let Some((ticket, session)) = session else {
            return done(Err(OwnerError::state("no export is open")));
        };
        let result = self.step(session.finish()).await;
        self.owner().end_transfer(ticket, false);
        done(result.map(|summary| summary.to_value()))
    }

    #[napi(js_name = "exportAbort")]
    /// Abandons the export `ticket` admitted (only its own session, never a later one's).
    pub async fn export_abort(&self, ticket: f64) -> JsData {
        if let Some(ticket) = ticket_of(ticket) {
            self.abandon_export(ticket).await;
        }
        done(Ok(Value::Null))
    }
}
