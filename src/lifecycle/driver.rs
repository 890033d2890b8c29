//! The backend seam as Rust traits: what one owner asks of one driver reservation. The Docker
//! driver implements it in Rust; `binding` implements it over a JavaScript driver.

use std::sync::Arc;

use std::pin::Pin;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio::io::AsyncWrite;

use super::cancel::Cancel;
use super::error::OwnerError;
use super::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::process::spec::SandboxProcessSpec;
pub use crate::process::supervised::GuestRoots;
use crate::recovery::record::SandboxRecoveryRecord;

/// What a started driver reports: the observed policy and the guest workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadyFacts {
    pub effective: SandboxEffectivePolicy,
    pub workspace: String,
}

/// Handed to `start`: cancellation of the startup, and the journal every resource effect must
/// checkpoint through (`journal.checkpoint(record).await?` before the effect).
#[derive(Clone)]
pub struct StartContext {
    pub cancel: Cancel,
    pub journal: Arc<Journal>,
}

/// Which output stream a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    pub fn name(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }
}

/// How the process leader ended, as far as anyone can know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessExit {
    Exited(i64),
    Signaled(String),
    /// Killed by the kernel for memory (the cgroup's limit): `SIGKILL` with reason `out_of_memory`.
    OutOfMemory,
    /// Compute was removed by a stop; the leader's own fate is unknown and never invented.
    Unavailable,
}

/// What a process's output brings, in the order it happened.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputEvent {
    /// Bytes the guest wrote to one stream.
    Bytes(OutputStream, Bytes),
    /// One stream ended on its own (the other goes on): a driver whose streams end apart.
    End(OutputStream),
    /// One stream failed (the other goes on).
    Failed(OutputStream, OwnerError),
}

impl From<(OutputStream, Bytes)> for OutputEvent {
    fn from((stream, bytes): (OutputStream, Bytes)) -> Self {
        OutputEvent::Bytes(stream, bytes)
    }
}

/// A process's output: its events in order; an `Err` fails both streams (a lost connection).
/// Ends when the process's streams close.
pub type ProcessOutput = BoxStream<'static, Result<OutputEvent, OwnerError>>;

/// A connection's chunks (both streams over one connection, ending together) as a process's
/// output.
pub fn output_of_chunks(
    chunks: BoxStream<'static, Result<(OutputStream, Bytes), OwnerError>>,
) -> ProcessOutput {
    use futures::StreamExt;
    chunks.map(|item| item.map(OutputEvent::from)).boxed()
}

/// The raw channels of a started process, before the owner applies stream limits.
pub struct ProcessChannels {
    /// Shutting it down delivers EOF to the guest.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
    /// The output's events in the order the guest wrote them; ends when its streams close.
    pub output: ProcessOutput,
    pub exit: BoxFuture<'static, ProcessExit>,
}

/// A command started beside the sandbox's process: its channels and its signals.
pub struct StartedCommand {
    pub pid: u32,
    pub channels: ProcessChannels,
    pub control: crate::process::supervised::CommandControl,
}

/// A streaming archive upload into the workspace: send tar bytes into `sink` (bounded, so a
/// slow engine holds the producer back), drop it at the end, then await `done`. Dropping `done`
/// unfinished abandons the upload: the driver ends its request.
pub struct ArchiveUpload {
    pub sink: tokio::sync::mpsc::Sender<Bytes>,
    pub done: BoxFuture<'static, Result<(), OwnerError>>,
}

/// A streaming archive download of one workspace path.
pub type ArchiveDownload = BoxStream<'static, Result<Bytes, String>>;

/// Driver facts transfers need.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferSettings {
    pub uid: u64,
    pub gid: u64,
    pub spill_directory: Option<std::path::PathBuf>,
}

/// One reserved sandbox of a driver. Stop and destroy must work in any state, also before or
/// during start, and also after persistence failed.
pub trait DriverReservation: Send + Sync + 'static {
    /// Called once at the start of startup, before the initial record is persisted: a driver
    /// that learns part of its identity only then (the Docker backend's image ID for an image
    /// given by reference) returns the completed initial record. It may only fill in the image
    /// and configuration digests; everything else must stay as reserved.
    fn prepare(
        self: Arc<Self>,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<Option<SandboxRecoveryRecord>, OwnerError>> {
        let _ = cancel;
        Box::pin(async { Ok(None) })
    }

    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>>;
    /// Terminates the complete workload and unblocks its streams; storage stays.
    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
    /// Releases storage (called after a successful stop).
    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
    /// Opens an archive upload into the workspace (imports).
    fn open_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        Box::pin(async {
            Err(OwnerError::Unsupported(
                "this driver has no import port in this version of native-sandbox".into(),
            ))
        })
    }

    /// `open_import` for a transfer beside running commands (a workspace archive's hydrate):
    /// nothing may reach the workspace by path after a command could have changed it, so a
    /// driver that writes some bodies by path (the Docker driver's large bodies through the
    /// engine) writes every one through the descriptors it opened instead. The default is
    /// `open_import`, for a driver with no such split.
    fn open_live_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        self.open_import()
    }

    /// `open_export` beside running commands (a workspace archive's persist), as
    /// `open_live_import` is to `open_import`.
    fn open_live_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        self.open_export(relative)
    }

    /// Streams one archive of exactly the workspace files `paths` (validated, relative), in that
    /// order, read without following any link: a regular file is an entry named by its path, a
    /// path holding anything else a directory entry of that name, a missing path no entry.
    /// `Ok(None)` when the driver cannot (the caller then exports the files one by one through
    /// `open_export`).
    fn open_export_files(
        self: Arc<Self>,
        paths: Vec<String>,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        let _ = paths;
        Box::pin(async { Ok(None) })
    }

    /// Streams the archive of `relative` (a workspace path; empty for the workspace itself).
    /// A missing path is `Ok(None)`.
    fn open_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        let _ = relative;
        Box::pin(async {
            Err(OwnerError::Unsupported(
                "this driver has no export port in this version of native-sandbox".into(),
            ))
        })
    }

    /// The OCI runtime the engine applied to this sandbox, as read back after creation (a
    /// container driver's); `None` before that, or for a driver without one.
    fn applied_runtime(&self) -> Option<String> {
        None
    }

    /// What the sandbox's egress gateway counted (an allowlist sandbox once started); `None`
    /// for a sandbox without one.
    fn egress(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<crate::lifecycle::egress_report::EgressReport>, OwnerError>>
    {
        Box::pin(async { Ok(None) })
    }

    /// Who imported files belong to, and where metadata may spill.
    fn transfer_settings(&self) -> TransferSettings {
        TransferSettings::default()
    }

    /// Starts the one process, attached before it runs. `cancel` fires when compute stops.
    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        let _ = (spec, cancel);
        Box::pin(async {
            Err(OwnerError::Unsupported(
                "this driver has no process port in this version of native-sandbox".into(),
            ))
        })
    }

    /// Where the guest's file roots are when the driver runs commands and file calls beside
    /// its process (sessions); `None` when it does not.
    fn guest_roots(&self) -> Option<GuestRoots> {
        None
    }

    /// Starts one more command (sessions), attached before it runs. `cancel` fires when compute
    /// stops.
    fn start_command(
        self: Arc<Self>,
        spawn: session_frames::Spawn,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<StartedCommand, OwnerError>> {
        let _ = (spawn, cancel);
        unsupported("running commands beside the sandbox's process")
    }

    /// The supervisor's connection file calls go through (sessions), made if need be.
    fn file_link(
        self: Arc<Self>,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<crate::process::supervised::Link, OwnerError>> {
        let _ = cancel;
        unsupported("reading and writing the sandbox's files while it runs")
    }

    /// Reads the started sandbox back from its engine once more (a pool's claim): the effective
    /// policy it applies now, or why it no longer matches what startup read. `None` for a
    /// driver that reads nothing again (startup's reading stands).
    fn read_back(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<SandboxEffectivePolicy>, OwnerError>> {
        Box::pin(async { Ok(None) })
    }

    /// Freezes the running process where it stands (storage and streams stay); idempotent.
    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        unsupported("pausing a sandbox")
    }

    /// Thaws what `pause` froze; idempotent.
    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        unsupported("resuming a sandbox")
    }
}

fn unsupported<T: Send + 'static>(what: &str) -> BoxFuture<'static, Result<T, OwnerError>> {
    let message = format!("{what} is not supported by this driver");
    Box::pin(async move { Err(OwnerError::Unsupported(message)) })
}

/// The caller's persistence of recovery records (`{ kind: 'persisted', persist }`).
pub trait Persist: Send + Sync + 'static {
    fn persist(&self, record: SandboxRecoveryRecord) -> BoxFuture<'static, Result<(), OwnerError>>;
}

/// Cleanup-only ownership a driver hands back from reconciliation.
pub trait RecoveredDriver: Send + Sync + 'static {
    /// The driver's current view of the record; the owner checks it against the reconciled identity.
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>>;
    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;
    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>>;

    /// As `DriverReservation::pause`, for the reconciled sandbox's process.
    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        unsupported("pausing a recovered sandbox")
    }

    /// As `DriverReservation::resume`.
    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        unsupported("resuming a recovered sandbox")
    }

    /// Attaches again to a process started reattachable, still running: its streams from now
    /// on (what it wrote while nobody was attached is gone) and its leader's fate.
    fn attach_process(self: Arc<Self>) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        unsupported("attaching to a recovered sandbox's process")
    }
}
