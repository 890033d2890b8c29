//! The Docker sandbox as the lifecycle owner's driver: each `DriverReservation` call runs the
//! sandbox's own work as a boxed future.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};

use crate::docker::freezer::{set_frozen, Freeze};
use crate::docker::layout::GUEST_ROOTS;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    ArchiveDownload, ArchiveUpload, DriverReservation, GuestRoots, ProcessChannels, ReadyFacts,
    StartContext, StartedCommand, TransferSettings,
};
use crate::lifecycle::error::OwnerError;
use crate::policy::effective::SandboxEffectivePolicy;
use crate::policy::network::NetworkKind;
use crate::process::spec::SandboxProcessSpec;

use super::DockerSandbox;

impl DriverReservation for DockerSandbox {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        async move { self.run_start(&context).await }.boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.run_stop().await }.boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { self.run_destroy().await }.boxed()
    }

    fn open_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.run_open_import().await }.boxed()
    }

    fn open_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.run_open_export(relative).await }.boxed()
    }

    fn open_live_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.run_open_live_import().await }.boxed()
    }

    fn open_live_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.run_open_live_export(relative).await }.boxed()
    }

    fn open_export_files(
        self: Arc<Self>,
        paths: Vec<String>,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.run_open_export_files(paths).await }.boxed()
    }

    fn read_back(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<SandboxEffectivePolicy>, OwnerError>> {
        async move { self.run_read_back().await.map(Some) }.boxed()
    }

    fn applied_runtime(&self) -> Option<String> {
        self.runtime.get().cloned()
    }

    fn egress(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<Option<crate::lifecycle::egress_report::EgressReport>, OwnerError>>
    {
        async move {
            if self.request.policy.network.kind != NetworkKind::Allowlist {
                return Ok(None);
            }
            let holder = self.holder().await?;
            self.egress_report(&holder).await
        }
        .boxed()
    }

    fn transfer_settings(&self) -> TransferSettings {
        let (uid, gid) =
            crate::docker::seed::numeric_user(&self.settings.user).unwrap_or((65532, 65532));
        TransferSettings {
            uid,
            gid,
            spill_directory: Some(self.settings.spill_directory.clone()),
        }
    }

    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        self.run_process(spec, cancel).boxed()
    }

    fn guest_roots(&self) -> Option<GuestRoots> {
        Some(GUEST_ROOTS)
    }

    fn start_command(
        self: Arc<Self>,
        spawn: session_frames::Spawn,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<StartedCommand, OwnerError>> {
        async move {
            let (supervisor, spawned) = self.spawn_supervised(spawn, &cancel).await?;
            Ok(StartedCommand {
                pid: spawned.pid,
                channels: self.owned_channels(
                    supervisor,
                    spawned.channels,
                    spawned.control.clone(),
                ),
                control: spawned.control,
            })
        }
        .boxed()
    }

    fn file_link(
        self: Arc<Self>,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<crate::process::supervised::Link, OwnerError>> {
        async move { Ok(self.supervisor(&cancel).await?.link) }.boxed()
    }

    fn pause(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let record = self.record().await;
            set_frozen(&self.settings.docker, &record, Freeze::Pause).await
        }
        .boxed()
    }

    fn resume(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let record = self.record().await;
            set_frozen(&self.settings.docker, &record, Freeze::Resume).await
        }
        .boxed()
    }
}
