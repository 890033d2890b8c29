//! A reservation of a backend whose image reference is still being resolved: inert until its
//! start, which waits for the resolution (cancellably), completes the initial record with the
//! image ID, and from then on is exactly a [`DockerSandbox`].

use std::sync::{Arc, OnceLock};

use futures::future::{BoxFuture, FutureExt};

use super::{DockerSandbox, Settings};
use crate::docker::image::Resolver;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    ArchiveDownload, ArchiveUpload, DriverReservation, ProcessChannels, ReadyFacts, StartContext,
    TransferSettings,
};
use crate::lifecycle::error::OwnerError;
use crate::policy::request::SandboxRequest;
use crate::process::spec::SandboxProcessSpec;
use crate::recovery::record::SandboxRecoveryRecord;

pub struct PendingDockerSandbox {
    image: Arc<Resolver>,
    /// Everything but the image and configuration digests, which the resolution supplies.
    settings: Settings,
    request: SandboxRequest,
    provisional: SandboxRecoveryRecord,
    resolved: OnceLock<Arc<DockerSandbox>>,
}

impl PendingDockerSandbox {
    pub fn new(
        image: Arc<Resolver>,
        settings: Settings,
        request: SandboxRequest,
        provisional: SandboxRecoveryRecord,
    ) -> Arc<Self> {
        Arc::new(Self {
            image,
            settings,
            request,
            provisional,
            resolved: OnceLock::new(),
        })
    }

    fn resolved(&self) -> Result<Arc<DockerSandbox>, OwnerError> {
        self.resolved
            .get()
            .cloned()
            .ok_or_else(|| OwnerError::state("the sandbox has not started"))
    }
}

impl DriverReservation for PendingDockerSandbox {
    fn prepare(
        self: Arc<Self>,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<Option<SandboxRecoveryRecord>, OwnerError>> {
        async move {
            let pinned = tokio::select! {
                pinned = self.image.pinned() => pinned?,
                reason = cancel.cancelled() => return Err(reason),
            };
            let mut record = self.provisional.clone();
            record.image_digest = pinned.image_id.clone();
            record.configuration_digest = pinned.configuration_digest.clone();
            let settings = Settings {
                image_id: pinned.image_id,
                configuration_digest: pinned.configuration_digest,
                ..self.settings.clone()
            };
            let reservation = DockerSandbox::new(settings, self.request.clone(), record.clone());
            if self.resolved.set(reservation).is_err() {
                return Err(OwnerError::state("a sandbox is prepared once"));
            }
            Ok(Some(record))
        }
        .boxed()
    }

    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        async move { self.resolved()?.start(context).await }.boxed()
    }

    /// Before the resolution nothing was acquired: there is nothing to stop or destroy.
    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            match self.resolved.get().cloned() {
                Some(reservation) => reservation.stop().await,
                None => Ok(()),
            }
        }
        .boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            match self.resolved.get().cloned() {
                Some(reservation) => reservation.destroy().await,
                None => Ok(()),
            }
        }
        .boxed()
    }

    fn open_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.resolved()?.open_import().await }.boxed()
    }

    fn open_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.resolved()?.open_export(relative).await }.boxed()
    }

    fn open_live_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.resolved()?.open_live_import().await }.boxed()
    }

    fn open_live_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.resolved()?.open_live_export(relative).await }.boxed()
    }

    fn open_export_files(
        self: Arc<Self>,
        paths: Vec<String>,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.resolved()?.open_export_files(paths).await }.boxed()
    }

    fn applied_runtime(&self) -> Option<String> {
        self.resolved.get()?.applied_runtime()
    }

    fn read_back(
        self: Arc<Self>,
    ) -> BoxFuture<
        'static,
        Result<Option<crate::policy::effective::SandboxEffectivePolicy>, OwnerError>,
    > {
        async move { self.resolved()?.read_back().await }.boxed()
    }

    fn egress(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<crate::lifecycle::egress_report::EgressReport>, OwnerError>>
    {
        async move {
            match self.resolved.get().cloned() {
                Some(reservation) => reservation.egress().await,
                None => Ok(None),
            }
        }
        .boxed()
    }

    fn transfer_settings(&self) -> TransferSettings {
        self.resolved
            .get()
            .map(|reservation| reservation.transfer_settings())
            .unwrap_or_default()
    }

    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        async move { self.resolved()?.start_process(spec, cancel).await }.boxed()
    }

    fn guest_roots(&self) -> Option<crate::lifecycle::driver::GuestRoots> {
        Some(crate::docker::layout::GUEST_ROOTS)
    }

    fn start_command(
        self: Arc<Self>,
        spawn: session_frames::Spawn,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<crate::lifecycle::driver::StartedCommand, OwnerError>> {
        async move { self.resolved()?.start_command(spawn, cancel).await }.boxed()
    }

    fn file_link(
        self: Arc<Self>,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<crate::process::supervised::Link, OwnerError>> {
        async move { self.resolved()?.file_link(cancel).await }.boxed()
    }

    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.resolved()?.pause().await }.boxed()
    }

    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.resolved()?.resume().await }.boxed()
    }
}
