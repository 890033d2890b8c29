//! One Docker sandbox: what it holds and what its parts share. Startup under checkpoints is
//! `startup.rs`, stop and destroy `cleanup.rs`, and the lifecycle owner's driver interface
//! `driver.rs`. The process container is made in `compute.rs`; its supervisor (commands and file
//! calls) is `supervisor.rs`, the reserved process `process.rs`. Archive transfers go through the
//! workspace holder in `archive.rs`, which runs the holder's workspace helper (`helper_run.rs`)
//! for exports (`export_helper.rs`) and imports (`import_helper.rs`); an allowlist sandbox's
//! holder is its egress gateway (`gateway.rs`).

mod abort_on_drop;
mod archive;
mod cleanup;
mod compute;
mod deferred_bodies;
mod driver;
mod executable;
mod export_helper;
mod gateway;
mod gateway_watch;
mod helper_run;
mod import_bodies;
mod import_helper;
mod pending;
mod process;
mod read_back;
mod startup;
mod supervisor;

pub use pending::PendingDockerSandbox;

use std::collections::HashMap;
use std::sync::Arc;

use bollard::Docker;
use tokio::sync::Mutex;

use super::layout::labels;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::OwnerError;
use crate::lifecycle::journal::Journal;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::request::SandboxRequest;
use crate::recovery::record::{Role, SandboxRecoveryRecord};

/// The bridge driver's option that leaves the host without an address on the network.
const INHIBIT_HOST_ADDRESS: &str = "com.docker.network.bridge.inhibit_ipv4";

/// What a reservation needs from its backend, fixed at reservation time.
#[derive(Clone)]
pub struct Settings {
    pub docker: Docker,
    /// Where the engine is, for messages (`engine.url tcp://…`, the default socket).
    pub engine_label: String,
    /// Attach connections to the same engine.
    pub dialer: crate::docker::dialer::Dialer,
    /// Caller-owned directory for transfer metadata spill files.
    pub spill_directory: std::path::PathBuf,
    pub image_id: String,
    pub user: String,
    pub runtime: Option<String>,
    pub configuration_digest: String,
    /// The reaper every record of an `in_process` sandbox goes to (before its effect), and
    /// which forgets it once destroyed.
    pub reaper: Option<crate::docker::reaper::link::ReaperEntry>,
    /// Where an allowlist sandbox's gateway reaches upstream.
    pub egress: crate::docker::options::EgressUpstream,
}

pub struct DockerSandbox {
    settings: Settings,
    request: SandboxRequest,
    state: Mutex<Progress>,
    /// The runtime the engine reports for the holder once it was read back and found exactly
    /// as asked (the process container is held to the same).
    runtime: std::sync::OnceLock<String>,
    /// One run of the workspace helper at a time (`helper_run.rs`).
    helper_permit: Arc<tokio::sync::Semaphore>,
    /// Set once the sandbox's first container (the process container, or the supervisor's) is
    /// about to be made: from then on a guest command may run, and imports write no body by
    /// path through the engine (`import_helper::Split`).
    guest_started: Arc<std::sync::atomic::AtomicBool>,
    /// The last run by exec beside an egress gateway (`helper_run.rs`).
    exec_history: helper_run::SharedExecHistory,
    /// An allowlist sandbox's gateway: its last stderr, the task that reads it, and its last
    /// report (`gateway.rs`, `gateway_watch.rs`).
    gateway_words: Arc<crate::process::supervised::LastWords>,
    gateway_listener: std::sync::Mutex<Option<abort_on_drop::AbortOnDrop>>,
    last_report: std::sync::Mutex<Option<crate::lifecycle::egress_report::EgressReport>>,
    /// The process container's gate and its live supervisor (`supervisor.rs`). Held while the
    /// process container is chosen and created, by the reserved process (its entry) or by the
    /// supervisor (its entry, or an exec beside the process), so there is never a second one;
    /// every wait under it is an engine request bounded by the engine's request timeout or the
    /// caller's cancellation. Only a live supervisor is kept: a failure answers its own call.
    compute_gate: tokio::sync::Mutex<Option<supervisor::Supervisor>>,
    /// Set as a stop begins, before it kills compute: the supervisor's connection then ends
    /// because of the stop, and a command's output simply ends (the owner says why).
    stop_begun: Arc<std::sync::atomic::AtomicBool>,
}

/// What startup has established; read by stop, destroy and the process port.
struct Progress {
    record: SandboxRecoveryRecord,
    journal: Option<Arc<Journal>>,
    effective: Option<SandboxEffectivePolicy>,
    compute: Option<String>,
    /// What the process container was created with, to read it again at a pool's claim.
    compute_reading: Option<read_back::ComputeReading>,
    /// Set when a stop removed compute: the leader's exit is then unknowable.
    stopped_by_owner: bool,
    /// An allowlist sandbox's gateway address on its internal network: the guest's resolver.
    gateway: Option<String>,
    /// The guest helper for the engine's architecture, known once startup read the engine.
    helper: Option<&'static crate::docker::seed::GuestHelper>,
}

impl DockerSandbox {
    pub fn new(
        settings: Settings,
        request: SandboxRequest,
        record: SandboxRecoveryRecord,
    ) -> Arc<Self> {
        Arc::new(Self {
            settings,
            request,
            state: Mutex::new(Progress {
                record,
                journal: None,
                effective: None,
                compute: None,
                compute_reading: None,
                stopped_by_owner: false,
                gateway: None,
                helper: None,
            }),
            runtime: std::sync::OnceLock::new(),
            helper_permit: helper_run::helper_permits(),
            guest_started: Default::default(),
            exec_history: Default::default(),
            gateway_words: Default::default(),
            gateway_listener: std::sync::Mutex::new(None),
            last_report: std::sync::Mutex::new(None),
            compute_gate: tokio::sync::Mutex::new(None),
            stop_begun: Arc::default(),
        })
    }

    fn labels(&self, record: &SandboxRecoveryRecord, role: Role) -> HashMap<String, String> {
        labels(
            &record.namespace,
            &record.sandbox_id,
            &record.operation_id,
            &self.settings.configuration_digest,
            role.as_str(),
        )
    }

    /// Persists `next` through the journal (before the effect it announces) and keeps it.
    async fn checkpoint(
        &self,
        journal: &Journal,
        cancel: &Cancel,
        next: SandboxRecoveryRecord,
    ) -> Result<(), OwnerError> {
        journal.checkpoint(next.clone()).await?;
        if let Some(reaper) = &self.settings.reaper {
            // Cancellable: a stop never waits on a reaper that is slow to take the record.
            tokio::select! {
                taken = reaper.register(&next) => taken?,
                reason = cancel.cancelled() => return Err(reason),
            }
        }
        self.state.lock().await.record = next;
        Ok(())
    }

    async fn record(&self) -> SandboxRecoveryRecord {
        self.state.lock().await.record.clone()
    }
}
