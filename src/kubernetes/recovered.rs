//! A reconciled Kubernetes sandbox: cleanup-only ownership of what a record names, every object
//! proven by its UID (or, announced but never identified, by its name and the sandbox's labels)
//! before anything is deleted. A controller that died left the supervisor without its attach:
//! its stdin closed with the connection (`stdinOnce`), so it killed every command and ended.
//! One that died before attaching left it waiting; the stop attaches once and closes its stdin.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use kube::api::AttachParams;
use tokio::io::AsyncWriteExt;

use super::client::REQUEST_TIMEOUT;
use super::layout::SANDBOX_CONTAINER;
use super::objects::{located_in, Guest, Located, Objects};
use super::requests::{requested, Retry};
use crate::lifecycle::driver::RecoveredDriver;
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Role, SandboxRecoveryRecord};

/// How long a recovered stop waits for the guest to end before deleting the pod.
const STOP_BOUND: Duration = Duration::from_secs(15);

pub struct KubernetesRecovered {
    pub objects: Objects,
    pub record: SandboxRecoveryRecord,
}

impl KubernetesRecovered {
    async fn run_stop(self: Arc<Self>) -> Result<(), OwnerError> {
        let uid = match located_in(&self.record, Role::Compute) {
            Located::Identified(uid) => uid,
            Located::Announced => match self.objects.labelled_uid(Role::Compute).await? {
                Some(uid) => uid,
                None => return Ok(()),
            },
            Located::None => return Ok(()),
        };
        if self.objects.guest(&uid).await? != Guest::Running {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + STOP_BOUND;
        // A supervisor never attached waits on its stdin: one attach that closes it ends it.
        // Refused (its container does not run yet: the start died before it served), nothing
        // of the guest's can have run, and the pod goes at once.
        match self.close_supervisor_stdin().await {
            Ok(()) => self.objects.guest_ended_by(&uid, deadline).await,
            Err(_) => self.objects.delete(Role::Compute, &uid).await,
        }
    }

    async fn close_supervisor_stdin(&self) -> Result<(), OwnerError> {
        let params = AttachParams::default()
            .container(SANDBOX_CONTAINER)
            .stdin(true)
            .stdout(false)
            .stderr(false);
        let mut attached = requested(
            "attaching to the recovered sandbox's supervisor",
            Retry::NeverSent,
            || self.objects.pods.attach(&self.objects.name, &params),
        )
        .await?;
        let status = attached.take_status();
        if let Some(mut stdin) = attached.stdin() {
            let _ = stdin.shutdown().await;
        }
        // The server's last word ends the attach; without it within the bound, dropping the
        // attach ends its task (a `join` given up on would leave it running).
        if let Some(status) = status {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, status).await;
        }
        drop(attached);
        Ok(())
    }
}

impl RecoveredDriver for KubernetesRecovered {
    fn recovery_record(
        self: Arc<Self>,
    ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>> {
        let record = self.record.clone();
        async move { Ok(record) }.boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        self.run_stop().boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move {
            let objects =
                [Role::Compute, Role::Network].map(|role| (role, located_in(&self.record, role)));
            self.objects.destroy(objects).await
        }
        .boxed()
    }
}
