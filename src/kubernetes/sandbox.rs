//! One Kubernetes sandbox as the lifecycle owner's driver.
//!
//! Start: the scope's deny-all NetworkPolicy first (`isolated`), then the pod, each announced
//! (`Creating`) before it is made and identified by its UID after; the helper written through
//! the init container's attached stdin; the sandbox container's supervisor attached once, as
//! the `Link` every process, command and file call goes through; the pod read back as the
//! effective policy. Stop: the link ends from the host's side, so the supervisor kills every
//! command's process group and exits, and its container ends; the pod stays, held by its
//! workspace container, for exports. If the sandbox container still runs after the bound, the
//! pod is deleted (at once when no supervisor was ever attached: nothing of the guest's ran).
//! Transfers: `transfers.rs`, in the workspace container, once the pod is proven the sandbox's.
//! Destroy: every object deleted by its UID (a precondition, so never another object of the
//! same name) and waited for until it is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, AttachParams, AttachedProcess, PostParams};
use session_frames::Spawn;
use tokio::io::AsyncWriteExt;

use super::client::{Cluster, REQUEST_TIMEOUT};
use super::layout::{HELPER_CONTAINER, SANDBOX_CONTAINER, WORKSPACE_CONTAINER};
use super::objects::{fingerprint_of, located_in, Located, Objects, POLL};
use super::pod::{deny_all, effective, pod, PodPlan};
use super::requests::{idempotent, requested, Retry};
use super::transfers::{transfer_permits, Workspace};
use crate::guest_layout::{with_fixed_environment, GUEST_ROOTS, WORKSPACE};
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{
    ArchiveDownload, ArchiveUpload, DriverReservation, GuestRoots, OutputStream, ProcessChannels,
    ProcessExit, ReadyFacts, StartContext, StartedCommand, TransferSettings,
};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::journal::Journal;
use crate::policy::network::NetworkKind;
use crate::policy::request::SandboxRequest;
use crate::process::spec::SandboxProcessSpec;
use crate::process::supervised::{frames_of, spawn_of, Chunks, Link};
use crate::recovery::record::{Authority, Identity, Phase, Role, SandboxRecoveryRecord};

/// How objects are created: plainly (no dry run, no field manager of its own).
const CREATE: PostParams = PostParams {
    dry_run: false,
    field_manager: None,
};
/// How long a stop waits for the supervisor's container to end before deleting the pod.
const STOP_BOUND: Duration = Duration::from_secs(15);
/// The attach streams' buffers: a connection's batches go as messages this large (kube-rs takes
/// 1 KiB otherwise).
const ATTACH_BUFFER: usize = 256 * 1024;

/// What every sandbox of one backend shares.
pub struct Settings {
    pub cluster: Cluster,
    pub namespace: String,
    pub scope: String,
    pub image: String,
    pub image_pull_policy: &'static str,
    pub user: String,
    pub runtime_class_name: Option<String>,
    pub architecture: &'static str,
    pub pod_pids_limit: Option<u64>,
    pub configuration_digest: String,
}

impl Settings {
    /// The cluster and namespace a record's objects live in: a record written against another
    /// is never adopted.
    pub fn backend_identity(&self) -> String {
        format!(
            "kubernetes:{}/namespaces/{}",
            self.cluster.server.trim_end_matches('/'),
            self.namespace
        )
    }
}

pub struct KubernetesSandbox {
    settings: Arc<Settings>,
    request: SandboxRequest,
    /// The pod and NetworkPolicy, under the one name they share.
    objects: Objects,
    name: String,
    state: Mutex<State>,
    /// Set as a stop begins: no supervisor is made after it.
    stop_begun: AtomicBool,
    /// The supervisor's connection once started; held by a gate so one start makes it.
    link: tokio::sync::Mutex<Option<Live>>,
    /// One transfer at a time (`transfers.rs`).
    transfer_permits: Arc<tokio::sync::Semaphore>,
}

struct State {
    record: SandboxRecoveryRecord,
    pod_uid: Option<String>,
    policy_uid: Option<String>,
}

/// The supervisor's connection and the task watching the attach stream that carries it.
struct Live {
    link: Link,
    /// Ends when the attach does (`watch`).
    watcher: tokio::task::JoinHandle<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn stopped() -> OwnerError {
    OwnerError::cancelled("the sandbox stopped: its session supervisor was ended")
}

impl KubernetesSandbox {
    pub fn new(
        settings: Arc<Settings>,
        request: SandboxRequest,
        record: SandboxRecoveryRecord,
    ) -> Arc<Self> {
        let objects = Objects::new(
            settings.cluster.client.clone(),
            &settings.namespace,
            &settings.scope,
            &record.sandbox_id,
        );
        Arc::new(Self {
            name: objects.name.clone(),
            objects,
            settings,
            request,
            state: Mutex::new(State {
                record,
                pod_uid: None,
                policy_uid: None,
            }),
            stop_begun: AtomicBool::new(false),
            link: tokio::sync::Mutex::new(None),
            transfer_permits: transfer_permits(),
        })
    }

    fn pods(&self) -> Api<Pod> {
        self.objects.pods.clone()
    }

    fn record(&self) -> SandboxRecoveryRecord {
        lock(&self.state).record.clone()
    }

    async fn checkpoint(
        &self,
        journal: &Journal,
        next: SandboxRecoveryRecord,
    ) -> Result<(), OwnerError> {
        journal.checkpoint(next.clone()).await?;
        lock(&self.state).record = next;
        Ok(())
    }

    async fn announce(
        &self,
        journal: &Journal,
        role: Role,
        identity: Identity,
    ) -> Result<(), OwnerError> {
        let mut next = self.record();
        for resource in &mut next.resources {
            if resource.role == role {
                resource.identity = identity.clone();
            }
        }
        self.checkpoint(journal, next).await
    }

    async fn run_start(self: Arc<Self>, context: StartContext) -> Result<ReadyFacts, OwnerError> {
        let journal = &context.journal;
        let cancel = &context.cancel;
        let pids = self.settings.pod_pids_limit.ok_or_else(|| {
            OwnerError::Unsupported(
                "the cluster's per-pod PID limit is not known: set podPidsLimit to the kubelet's \
                 podPidsLimit, which bounds every sandbox's processes"
                    .into(),
            )
        })?;
        let helper = crate::guest_helper::helper_for(Some(self.settings.architecture))?;
        let mut next = self.record();
        next.authority = Authority::Verified {
            backend_identity: self.settings.backend_identity(),
        };
        next.phase = Phase::Starting;
        self.checkpoint(journal, next).await?;
        cancel.check()?;

        let record = self.record();
        let plan = PodPlan {
            name: &self.name,
            scope: &self.settings.scope,
            sandbox_id: &record.sandbox_id,
            operation_id: &record.operation_id,
            configuration: &self.settings.configuration_digest,
            image: &self.settings.image,
            image_pull_policy: self.settings.image_pull_policy,
            user: &self.settings.user,
            runtime_class_name: self.settings.runtime_class_name.as_deref(),
            architecture: self.settings.architecture,
        };
        let network = self.request.policy.network.kind;
        if network == NetworkKind::Isolated {
            let policy = deny_all(&plan)?;
            self.announce(journal, Role::Network, Identity::Creating)
                .await?;
            cancel.check()?;
            let made = requested(
                "creating the sandbox's NetworkPolicy",
                Retry::NeverSent,
                || self.objects.policies.create(&CREATE, &policy),
            )
            .await?;
            let uid = made.metadata.uid.clone().ok_or_else(|| {
                OwnerError::driver("the API server gave the sandbox's NetworkPolicy no UID")
            })?;
            lock(&self.state).policy_uid = Some(uid.clone());
            self.announce(
                journal,
                Role::Network,
                Identity::Identified {
                    fingerprint: fingerprint_of(&uid),
                    id: uid,
                },
            )
            .await?;
        }
        let manifest = pod(&plan, &self.request)?;
        self.announce(journal, Role::Compute, Identity::Creating)
            .await?;
        cancel.check()?;
        let made = requested("creating the sandbox's pod", Retry::NeverSent, || {
            self.objects.pods.create(&CREATE, &manifest)
        })
        .await?;
        let uid =
            made.metadata.uid.clone().ok_or_else(|| {
                OwnerError::driver("the API server gave the sandbox's pod no UID")
            })?;
        lock(&self.state).pod_uid = Some(uid.clone());
        self.announce(
            journal,
            Role::Compute,
            Identity::Identified {
                id: uid.clone(),
                fingerprint: fingerprint_of(&uid),
            },
        )
        .await?;

        self.wait_running(HELPER_CONTAINER, true, cancel).await?;
        self.write_helper(helper.bytes(), cancel).await?;
        self.wait_running(SANDBOX_CONTAINER, false, cancel).await?;
        // Transfers run in the workspace container: a sandbox is ready only once it runs too.
        self.wait_running(WORKSPACE_CONTAINER, false, cancel)
            .await?;
        let stored = idempotent("reading the sandbox's pod back", || {
            self.objects.pods.get(&self.name)
        })
        .await?;
        self.check_uid(&stored)?;
        let effective = effective(&stored, pids, network)?;
        self.connect(cancel).await?;

        let mut ready = self.record();
        ready.phase = Phase::Ready;
        self.checkpoint(journal, ready).await?;
        Ok(ReadyFacts {
            effective,
            workspace: WORKSPACE.to_owned(),
        })
    }

    /// Where the next transfer runs, once the pod under the sandbox's name is proven its own
    /// (by UID: never another pod that took the name).
    async fn workspace(&self) -> Result<Workspace, OwnerError> {
        let Some(uid) = lock(&self.state).pod_uid.clone() else {
            return Err(OwnerError::state("a transfer needs a started sandbox"));
        };
        let found = idempotent("reading the sandbox's pod for a transfer", || {
            self.objects.pods.get_opt(&self.name)
        })
        .await?;
        match found {
            Some(found) => self.check_uid(&found)?,
            None => {
                return Err(OwnerError::driver(format!(
                    "the sandbox's pod {} is gone (deleted, or evicted)",
                    self.name
                )))
            }
        }
        Ok(Workspace {
            pods: self.pods(),
            name: self.name.clone(),
            uid,
            permits: Arc::clone(&self.transfer_permits),
        })
    }

    fn check_uid(&self, pod: &Pod) -> Result<(), OwnerError> {
        let expected = lock(&self.state).pod_uid.clone();
        if pod.metadata.uid.is_some() && pod.metadata.uid == expected {
            return Ok(());
        }
        Err(OwnerError::driver(format!(
            "the pod {} is no longer the sandbox's (its UID changed): it was deleted or evicted",
            self.name
        )))
    }

    /// Waits until `container` runs (an init container when `init`), failing at once when the
    /// pod or the container cannot get there (an image that cannot be had, a container that
    /// ended), or the pod is no longer the sandbox's.
    async fn wait_running(
        &self,
        container: &str,
        init: bool,
        cancel: &Cancel,
    ) -> Result<(), OwnerError> {
        loop {
            cancel.check()?;
            let found = idempotent("reading the sandbox's pod", || {
                self.objects.pods.get(&self.name)
            })
            .await?;
            self.check_uid(&found)?;
            let status = found.status.as_ref();
            let statuses = status.and_then(|s| {
                if init {
                    s.init_container_statuses.as_ref()
                } else {
                    s.container_statuses.as_ref()
                }
            });
            let mine: Option<&ContainerStatus> =
                statuses.and_then(|all| all.iter().find(|c| c.name == container));
            if let Some(state) = mine.and_then(|c| c.state.as_ref()) {
                if state.running.is_some() {
                    return Ok(());
                }
                if let Some(waiting) = &state.waiting {
                    let reason = waiting.reason.as_deref().unwrap_or_default();
                    if matches!(
                        reason,
                        "ErrImagePull"
                            | "ImagePullBackOff"
                            | "ErrImageNeverPull"
                            | "InvalidImageName"
                            | "CreateContainerConfigError"
                            | "CreateContainerError"
                            | "RunContainerError"
                    ) {
                        return Err(OwnerError::driver(format!(
                            "the sandbox's pod {} cannot start its {container} container: {reason}: {}",
                            self.name,
                            waiting.message.as_deref().unwrap_or_default()
                        )));
                    }
                }
                if let Some(ended) = &state.terminated {
                    return Err(OwnerError::driver(format!(
                        "the sandbox's {container} container ended before it served (exit {}, {}): {}",
                        ended.exit_code,
                        ended.reason.as_deref().unwrap_or("no reason"),
                        ended.message.as_deref().unwrap_or_default()
                    )));
                }
            }
            if let Some(phase @ ("Failed" | "Succeeded")) = status.and_then(|s| s.phase.as_deref())
            {
                return Err(OwnerError::driver(format!(
                    "the sandbox's pod {} is {phase}: {}",
                    self.name,
                    status
                        .and_then(|s| s.message.as_deref())
                        .unwrap_or_default()
                )));
            }
            tokio::select! {
                reason = cancel.cancelled() => return Err(reason),
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Writes the helper into the init container's stdin and ends it: the container puts it in
    /// place and exits.
    async fn write_helper(&self, bytes: &'static [u8], cancel: &Cancel) -> Result<(), OwnerError> {
        let params = AttachParams::default()
            .container(HELPER_CONTAINER)
            .stdin(true)
            .stdout(false)
            .stderr(false)
            .max_stdin_buf_size(ATTACH_BUFFER);
        let written = async {
            let pods = self.pods();
            let mut attached = requested(
                "attaching to the sandbox's helper container",
                Retry::NeverSent,
                || pods.attach(&self.name, &params),
            )
            .await?;
            // Taken first: the attach's task hands the server's closing status to it (and fails
            // when nobody holds it).
            let status = attached.take_status();
            let mut stdin = attached
                .stdin()
                .ok_or_else(|| OwnerError::driver("the helper container's attach has no stdin"))?;
            let failed = |why: String| {
                OwnerError::driver(format!("writing the helper into the sandbox's pod: {why}"))
            };
            stdin
                .write_all(bytes)
                .await
                .map_err(|e| failed(e.to_string()))?;
            stdin.shutdown().await.map_err(|e| failed(e.to_string()))?;
            drop(stdin);
            let closing = match status {
                Some(status) => status.await,
                None => None,
            };
            attached.join().await.map_err(|e| failed(e.to_string()))?;
            match closing {
                Some(status) if status.status.as_deref() == Some("Failure") => Err(failed(
                    status.message.unwrap_or_else(|| "the attach failed".into()),
                )),
                _ => Ok(()),
            }
        };
        tokio::select! {
            reason = cancel.cancelled() => Err(reason),
            done = tokio::time::timeout(REQUEST_TIMEOUT, written) => done.map_err(|_| {
                OwnerError::driver("writing the helper into the sandbox's pod took too long")
            })?,
        }
    }

    /// Attaches to the supervisor, once: its stdin closes when this attach ends (`stdinOnce`),
    /// which ends every command.
    async fn connect(&self, cancel: &Cancel) -> Result<(), OwnerError> {
        let mut gate = self.link.lock().await;
        if gate.is_some() {
            return Ok(());
        }
        let params = AttachParams::default()
            .container(SANDBOX_CONTAINER)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .max_stdin_buf_size(ATTACH_BUFFER)
            .max_stdout_buf_size(ATTACH_BUFFER)
            .max_stderr_buf_size(ATTACH_BUFFER);
        let pods = self.pods();
        let attaching = requested(
            "attaching to the sandbox's supervisor",
            Retry::NeverSent,
            || pods.attach(&self.name, &params),
        );
        let mut attached = tokio::select! {
            reason = cancel.cancelled() => return Err(reason),
            attached = attaching => attached?,
        };
        let missing = || OwnerError::driver("the supervisor's attach lacks a stream");
        let input = attached.stdin().ok_or_else(missing)?;
        let stdout = attached.stdout().ok_or_else(missing)?;
        let stderr = attached.stderr().ok_or_else(missing)?;
        let (sender, received) = tokio::sync::mpsc::channel(16);
        let ended = Cancel::new();
        tokio::spawn(forward(
            stdout,
            OutputStream::Stdout,
            sender.clone(),
            ended.clone(),
        ));
        tokio::spawn(forward(
            stderr,
            OutputStream::Stderr,
            sender.clone(),
            ended.clone(),
        ));
        let watcher = tokio::spawn(watch(attached, sender, ended));
        let chunks: Chunks = chunks_of(received);
        let link = Link::new(Box::pin(ClosedOnDrop(input)), frames_of(chunks));
        if self.stop_begun.load(Ordering::SeqCst) {
            link.close(stopped());
            return Err(stopped());
        }
        *gate = Some(Live { link, watcher });
        Ok(())
    }

    async fn link(&self) -> Result<Link, OwnerError> {
        let gate = self.link.lock().await;
        match gate.as_ref() {
            Some(live) => match live.link.gone() {
                None => Ok(live.link.clone()),
                Some(why) => Err(why),
            },
            None if self.stop_begun.load(Ordering::SeqCst) => Err(stopped()),
            None => Err(OwnerError::state("the process needs a started sandbox")),
        }
    }

    /// A supervised command's channels as the owner runs them: once a stop began, its output
    /// ends rather than fails, and its exit is `Unavailable` (the stop ended it, whatever the
    /// supervisor could still say).
    fn owned(self: &Arc<Self>, channels: ProcessChannels) -> ProcessChannels {
        let watching = Arc::clone(self);
        let output = channels
            .output
            .take_while(move |event| {
                futures::future::ready(event.is_ok() || !watching.stop_begun.load(Ordering::SeqCst))
            })
            .boxed();
        let this = Arc::clone(self);
        let exit = channels.exit;
        ProcessChannels {
            input: channels.input,
            output,
            exit: async move {
                let fate = exit.await;
                if this.stop_begun.load(Ordering::SeqCst) {
                    return ProcessExit::Unavailable;
                }
                fate
            }
            .boxed(),
        }
    }

    async fn spawn(
        self: &Arc<Self>,
        spawn: Spawn,
        cancel: &Cancel,
    ) -> Result<StartedCommand, OwnerError> {
        let link = self.link().await?;
        cancel.check()?;
        let spawned = match link.spawn(with_fixed_environment(spawn)).await {
            Ok(spawned) => spawned,
            Err(_) if cancel.is_cancelled() || self.stop_begun.load(Ordering::SeqCst) => {
                return Err(OwnerError::cancelled(
                    "the sandbox stopped before the command started",
                ))
            }
            Err(error) => return Err(error),
        };
        Ok(StartedCommand {
            pid: spawned.pid,
            channels: self.owned(spawned.channels),
            control: spawned.control,
        })
    }

    async fn run_stop(self: Arc<Self>) -> Result<(), OwnerError> {
        self.stop_begun.store(true, Ordering::SeqCst);
        let live = self.link.lock().await.take();
        let uid = match self.located(Role::Compute) {
            Located::Identified(uid) => uid,
            // A start stopped while it made the pod: found by its name and labels, if made.
            Located::Announced => match self.objects.labelled_uid(Role::Compute).await? {
                Some(uid) => uid,
                None => return Ok(()),
            },
            Located::None => return Ok(()),
        };
        let Some(live) = live else {
            // No supervisor attached now (a start that failed or was cancelled, or a stop
            // again after one that failed): nothing of the guest's runs through it, and an
            // unattached supervisor's stdin would stay open for ever; the pod goes now.
            return self.objects.delete(Role::Compute, &uid).await;
        };
        // Closing the link drops its end of the supervisor's stdin: the attach sends the stream's
        // close, the supervisor kills every command and exits, and the attach ends with it.
        live.link.close(stopped());
        let deadline = tokio::time::Instant::now() + STOP_BOUND;
        let _ = tokio::time::timeout_at(deadline, live.watcher).await;
        self.objects.guest_ended_by(&uid, deadline).await
    }

    async fn run_destroy(self: Arc<Self>) -> Result<(), OwnerError> {
        let (pod, policy) = (self.located(Role::Compute), self.located(Role::Network));
        self.objects
            .destroy([(Role::Compute, pod), (Role::Network, policy)])
            .await
    }

    /// What the sandbox knows of its object of `role`.
    fn located(&self, role: Role) -> Located {
        let state = lock(&self.state);
        let uid = match role {
            Role::Network => state.policy_uid.clone(),
            _ => state.pod_uid.clone(),
        };
        match uid {
            Some(uid) => Located::Identified(uid),
            None => located_in(&state.record, role),
        }
    }
}

/// The supervisor's stdin as the link writes it: dropped (the link closed, its writer task
/// ended), it closes the attach's stdin pipe, so the attach sends the stream's close and the
/// supervisor sees its end. A split half dropped alone would leave the pipe open for ever.
struct ClosedOnDrop(tokio::io::WriteHalf<tokio::io::SimplexStream>);

impl tokio::io::AsyncWrite for ClosedOnDrop {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(context, bytes)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(context)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(context)
    }
}

impl Drop for ClosedOnDrop {
    fn drop(&mut self) {
        use tokio::io::AsyncWrite;
        // A simplex pipe's shutdown only marks it closed and wakes its reader: it is ready at
        // once and never needs the waker.
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let _ = std::pin::Pin::new(&mut self.0).poll_shutdown(&mut context);
    }
}

/// Hands one attach stream's chunks to the link; once the link is gone, reads them on and drops
/// them, so the attach never fails on an output nobody reads and still delivers the stdin close
/// it was given. Ends with its stream, or when the attach ended (`ended`: its task may end
/// without closing the pipes this reads).
async fn forward(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    stream: OutputStream,
    sender: tokio::sync::mpsc::Sender<Result<(OutputStream, bytes::Bytes), OwnerError>>,
    ended: Cancel,
) {
    use tokio::io::AsyncReadExt;
    let mut open = true;
    let mut buffer = bytes::BytesMut::new();
    loop {
        buffer.reserve(ATTACH_BUFFER);
        let read = tokio::select! {
            _ = ended.cancelled() => return,
            read = reader.read_buf(&mut buffer) => read,
        };
        match read {
            Ok(0) => return,
            Ok(_) if open => {
                let chunk = buffer.split().freeze();
                open = sender.send(Ok((stream, chunk))).await.is_ok();
            }
            Ok(_) => buffer.clear(),
            Err(error) => {
                let lost = OwnerError::operation(
                    OperationCode::StreamFailure,
                    format!("the supervisor's attach stream failed: {error}"),
                );
                let _ = sender.send(Err(lost)).await;
                return;
            }
        }
    }
}

/// Waits for the supervisor's attach to end. Ended cleanly (the stop's stdin close, the
/// supervisor gone), its task closed the output pipes: the forwarders read them to their end and
/// the link sees the connection end. Failed (a broken connection), its task may leave them open:
/// the forwarders stop, and the link is told the connection failed, so no call waits on it. The
/// server's closing status is held until then (the attach's task fails when nobody holds it).
async fn watch(
    mut attached: AttachedProcess,
    sender: tokio::sync::mpsc::Sender<Result<(OutputStream, bytes::Bytes), OwnerError>>,
    ended: Cancel,
) {
    let _status = attached.take_status();
    if let Err(error) = attached.join().await {
        let why = format!("the supervisor's attach failed: {error}");
        ended.cancel(OwnerError::operation(
            OperationCode::StreamFailure,
            why.clone(),
        ));
        let _ = sender
            .send(Err(OwnerError::operation(
                OperationCode::StreamFailure,
                why,
            )))
            .await;
    }
}

/// The chunks `forward` hands on, as the link reads them.
fn chunks_of(
    mut received: tokio::sync::mpsc::Receiver<Result<(OutputStream, bytes::Bytes), OwnerError>>,
) -> Chunks {
    futures::stream::poll_fn(move |context| received.poll_recv(context)).boxed()
}

impl DriverReservation for KubernetesSandbox {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        self.run_start(context).boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        self.run_stop().boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        self.run_destroy().boxed()
    }

    fn open_import(self: Arc<Self>) -> BoxFuture<'static, Result<ArchiveUpload, OwnerError>> {
        async move { self.workspace().await?.open_import().await }.boxed()
    }

    fn open_export(
        self: Arc<Self>,
        relative: String,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move { self.workspace().await?.open_export(relative).await }.boxed()
    }

    fn open_export_files(
        self: Arc<Self>,
        paths: Vec<String>,
    ) -> BoxFuture<'static, Result<Option<ArchiveDownload>, OwnerError>> {
        async move {
            let workspace = self.workspace().await?;
            workspace.open_export_files(paths).await.map(Some)
        }
        .boxed()
    }

    fn transfer_settings(&self) -> TransferSettings {
        let (uid, gid) = self
            .settings
            .user
            .split_once(':')
            .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)))
            .unwrap_or((65532, 65532));
        TransferSettings {
            uid,
            gid,
            spill_directory: None,
        }
    }

    fn start_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
        async move {
            if spec.reattachable {
                return Err(OwnerError::Unsupported(
                    "a reattachable process is not supported by the Kubernetes backend".into(),
                ));
            }
            let spawn = spawn_of(&spec.executable, &spec.args, &spec.env, &spec.cwd, true);
            Ok(self.spawn(spawn, &cancel).await?.channels)
        }
        .boxed()
    }

    fn guest_roots(&self) -> Option<GuestRoots> {
        Some(GUEST_ROOTS)
    }

    fn start_command(
        self: Arc<Self>,
        spawn: Spawn,
        cancel: Cancel,
    ) -> BoxFuture<'static, Result<StartedCommand, OwnerError>> {
        async move { self.spawn(spawn, &cancel).await }.boxed()
    }

    fn file_link(self: Arc<Self>, cancel: Cancel) -> BoxFuture<'static, Result<Link, OwnerError>> {
        async move {
            cancel.check()?;
            self.link().await
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn dropping_the_link_end_of_stdin_closes_the_pipe() {
        // The pipe the attach makes: halves of one simplex stream, where dropping the write half
        // alone would not end the reader.
        let (mut reader, writer) = tokio::io::simplex(1024);
        let mut input = ClosedOnDrop(writer);
        input.write_all(b"frames").await.expect("written");
        drop(input);
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), reader.read_to_end(&mut got))
            .await
            .expect("the reader sees the end")
            .expect("read");
        assert_eq!(got, b"frames");
    }

    #[tokio::test]
    async fn a_forwarder_hands_chunks_on_then_stops_when_the_attach_ended() {
        let (reader, mut writer) = tokio::io::simplex(1024);
        let (sender, mut received) = tokio::sync::mpsc::channel(4);
        let ended = Cancel::new();
        let task = tokio::spawn(forward(reader, OutputStream::Stdout, sender, ended.clone()));
        writer.write_all(b"abc").await.expect("written");
        let first = received.recv().await.expect("a chunk").expect("ok");
        assert_eq!(
            first,
            (OutputStream::Stdout, bytes::Bytes::from_static(b"abc"))
        );
        // The pipe stays open (its writer is never shut down), as after a failed attach.
        ended.cancel(OwnerError::driver("gone"));
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the forwarder ends")
            .expect("joined");
        drop(writer);
    }
}
