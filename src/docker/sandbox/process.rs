//! The sandbox's one reserved process: the process container's entry itself (through the
//! helper's `--exec-as` for a user other than root), attached before it starts (a reattachable daemon's stdin stays open across attachments, so a controller that
//! comes later can attach again). When commands or file calls came first, the container's entry
//! is already the supervisor, and the reserved process is its command.

use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use tokio::sync::MutexGuard;

use super::compute::{supervisor_capabilities, Launch, ENTRY_START_USER};
use super::supervisor::environment;
use super::DockerSandbox;
use crate::docker::attach::{fate_of, wait_exit_code};
use crate::docker::gvisor::launched_tasks_apart;
use crate::docker::output_end::ended_with_the_process;
use crate::docker::seed::HELPER_PATH;
use crate::docker::supervised_image::ensure_supervised_image;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::{output_of_chunks, ProcessChannels, ProcessExit};
use crate::lifecycle::error::OwnerError;
use crate::process::spec::SandboxProcessSpec;
use crate::process::supervised::spawn_of;

impl DockerSandbox {
    pub(super) async fn run_process(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
    ) -> Result<ProcessChannels, OwnerError> {
        let gate = self.compute_gate.lock().await;
        let compute = self.state.lock().await.compute.clone();
        if compute.is_none() {
            return Arc::clone(&self).run_direct(spec, cancel, gate).await;
        }
        drop(gate);
        if spec.reattachable {
            return Err(OwnerError::state(
                "a reattachable process is its container's entry, but this sandbox's commands or files came first and made the supervisor its entry",
            ));
        }
        let supervisor = self.supervisor(&cancel).await?;
        // A recipe that cannot run fails here, naming `executable`. A stop that removed the
        // container meanwhile is the stop's failure, not the recipe's.
        let checked = super::executable::check_executable(
            &self.settings.docker,
            &supervisor.id,
            &spec.executable,
        )
        .await;
        cancel.check()?;
        checked?;
        let spawn = spawn_of(&spec.executable, &spec.args, &spec.env, &spec.cwd, true);
        let (supervisor, spawned) = self.spawn_supervised(spawn, &cancel).await?;
        Ok(self.owned_channels(supervisor, spawned.channels, spawned.control))
    }

    /// The process as the process container's entry. `gate` is held until the container runs,
    /// so a supervisor made meanwhile runs beside it (by exec), never in a second one.
    async fn run_direct(
        self: Arc<Self>,
        spec: SandboxProcessSpec,
        cancel: Cancel,
        gate: MutexGuard<'_, Option<super::supervisor::Supervisor>>,
    ) -> Result<ProcessChannels, OwnerError> {
        let helper = self.state.lock().await.helper;
        let helper =
            helper.ok_or_else(|| OwnerError::state("the process needs a started sandbox"))?;
        // The image with the guest helper, so commands can run beside the process later.
        let image =
            ensure_supervised_image(&self.settings.docker, &self.settings.image_id, helper).await?;
        let apart = launched_tasks_apart(self.settings.runtime.as_deref());
        let (user, cap_add, entrypoint, cmd) = direct_entry(&self.settings.user, apart, &spec);
        let launch = Launch {
            image,
            user,
            cap_add,
            entrypoint,
            cmd,
            env: environment(&spec.env),
            cwd: spec.cwd.clone(),
            stdin_once: !spec.reattachable,
            entry_is_init: false,
        };
        let id = self.create_compute(launch, &cancel).await?;
        // A recipe that cannot run fails here, naming `executable`, not as init's exit 127.
        let checked =
            super::executable::check_executable(&self.settings.docker, &id, &spec.executable).await;
        cancel.check()?;
        checked?;
        let attached = self.attach_and_start(&id, &cancel).await?;
        drop(gate);
        let docker = &self.settings.docker;
        let output = ended_with_the_process(attached.output, docker.clone(), id.clone());
        let exit = Arc::clone(&self).exit_of(id);
        Ok(ProcessChannels {
            input: attached.input,
            output: output_of_chunks(output),
            exit,
        })
    }

    /// The leader's fate. A lost engine connection is not a fate: the wait is asked again (with
    /// backoff) until the engine answers or the owner stops the sandbox, so `exit` never reports
    /// a stop that did not happen. Only a stop, or a container that no longer exists, makes the
    /// receipt `Unavailable`; a stop that comes once the engine reported the exit (while its
    /// fate is read, see `fate_of`) leaves the leader's own fate.
    fn exit_of(self: Arc<Self>, id: String) -> BoxFuture<'static, ProcessExit> {
        let docker = self.settings.docker.clone();
        async move {
            let code = wait_exit_code(&docker, &id, || {
                let this = Arc::clone(&self);
                async move { this.state.lock().await.stopped_by_owner }
            })
            .await;
            if self.state.lock().await.stopped_by_owner {
                return ProcessExit::Unavailable;
            }
            match code {
                Some(code) => fate_of(&docker, &id, code).await,
                None => ProcessExit::Unavailable,
            }
        }
        .boxed()
    }
}

/// The reserved process as its container's entry: its user, capabilities, entrypoint and
/// arguments. For a sandbox user other than root it is started as the supervisor is (root with
/// only `supervisor_capabilities`) through the helper's `--exec-as`, which becomes the user in
/// every id, with no capability, and then runs the process in its place; so a supervisor started
/// later by exec beside it takes an identity of its own, out of the commands' reach, as the
/// entry supervisor does. `tasks_apart`: how far it lowers a finite task limit
/// (`gvisor::launched_tasks_apart`).
fn direct_entry(
    sandbox_user: &str,
    tasks_apart: u32,
    spec: &SandboxProcessSpec,
) -> (String, Vec<String>, Vec<String>, Vec<String>) {
    let capabilities = supervisor_capabilities(sandbox_user);
    if capabilities.is_empty() {
        return (
            sandbox_user.to_owned(),
            capabilities,
            vec![spec.executable.clone()],
            spec.args.clone(),
        );
    }
    let apart = tasks_apart.to_string();
    let launcher = [
        "--exec-as",
        sandbox_user,
        "--tasks-apart",
        apart.as_str(),
        "--",
        spec.executable.as_str(),
    ];
    (
        ENTRY_START_USER.to_owned(),
        capabilities,
        vec![HELPER_PATH.to_owned()],
        launcher
            .into_iter()
            .map(str::to_owned)
            .chain(spec.args.iter().cloned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SandboxProcessSpec {
        SandboxProcessSpec {
            executable: "/bin/sh".into(),
            args: vec!["-c".into(), "echo hi".into()],
            env: Vec::new(),
            cwd: "/sandbox/workspace".into(),
            reattachable: false,
        }
    }

    #[test]
    fn a_user_other_than_root_starts_through_the_launcher_as_root_with_two_capabilities() {
        let (user, caps, entrypoint, cmd) = direct_entry("65532:65532", 2, &spec());
        assert_eq!(user, "0:0");
        assert_eq!(caps, ["SETUID", "SETGID"]);
        assert_eq!(entrypoint, [HELPER_PATH]);
        assert_eq!(
            cmd,
            [
                "--exec-as",
                "65532:65532",
                "--tasks-apart",
                "2",
                "--",
                "/bin/sh",
                "-c",
                "echo hi"
            ]
        );
    }

    #[test]
    fn root_runs_the_process_itself() {
        let (user, caps, entrypoint, cmd) = direct_entry("0:0", 1, &spec());
        assert_eq!(user, "0:0");
        assert!(caps.is_empty());
        assert_eq!(entrypoint, ["/bin/sh"]);
        assert_eq!(cmd, ["-c", "echo hi"]);
    }
}
