//! A command of `sandbox.exec` / `sandbox.run` as JavaScript holds it: `start` once, then the
//! same stream calls a process answers (`js/process.js` reads either), `kill`, `abort` (the
//! caller's signal), and for `run` the collected outcome.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::errors::{failed, outcome};
use super::js_value::{Captured, JsData};
use super::process_streams::{self, exit_value, IoSlot};
use crate::input::Value;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::lifecycle::owner::sessions::{Command, Ending};
use crate::lifecycle::owner::SandboxOwner;
use crate::process::command_options::{parse_command_options, CommandCall, CommandOptions};
use crate::process::spec::parse_sandbox_process_spec;

#[napi]
pub struct NativeCommand {
    owner: SandboxOwner,
    io: IoSlot,
    command: Mutex<Option<Command>>,
    options: Mutex<Option<CommandOptions>>,
    /// The caller's signal: cancels the start, then ends the command (SIGTERM, then SIGKILL).
    abort: Cancel,
    ended: Mutex<Option<Arc<Mutex<Option<Ending>>>>>,
    claimed: std::sync::atomic::AtomicBool,
}

impl NativeCommand {
    pub fn new(owner: SandboxOwner) -> Self {
        Self {
            owner,
            io: Arc::new(Mutex::new(None)),
            command: Mutex::new(None),
            options: Mutex::new(None),
            abort: Cancel::new(),
            ended: Mutex::new(None),
            claimed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn command(&self) -> std::result::Result<Command, OwnerError> {
        self.command
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| OwnerError::state("the command has not started"))
    }

    fn ended_by(&self) -> Option<Ending> {
        let cell = self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let ending = *cell.lock().unwrap_or_else(PoisonError::into_inner);
        ending
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Parses what `start` is given, every issue at once: the recipe's under `spec`, the options'
/// under `options`.
pub fn parse_command(
    spec: &Value,
    options: &Value,
    call: CommandCall,
) -> std::result::Result<(crate::process::spec::SandboxProcessSpec, CommandOptions), OwnerError> {
    let spec = parse_sandbox_process_spec(spec);
    let options = parse_command_options(options, call);
    match (spec, options) {
        (Ok(spec), Ok(options)) => Ok((spec, options)),
        (spec, options) => {
            let mut issues = Vec::new();
            for (field, found) in [("spec", spec.err()), ("options", options.err())] {
                for mut issue in found.unwrap_or_default() {
                    issue.path.insert(0, field.into());
                    issues.push(issue);
                }
            }
            Err(OwnerError::Validation(issues))
        }
    }
}

#[napi]
impl NativeCommand {
    /// Parses and starts the command (`call`: `exec` or `run`), once. Resolves with `{ pid }`.
    #[napi]
    pub async fn start(&self, spec: Captured, options: Captured, call: String) -> JsData {
        let result = async {
            let call = if call == "run" {
                CommandCall::Run
            } else {
                CommandCall::Exec
            };
            let (spec, options) = parse_command(&spec.0, &options.0, call)?;
            if self.claimed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(OwnerError::state("a command starts once"));
            }
            let stdin = call == CommandCall::Run || options.stdin;
            let spawn = crate::process::supervised::spawn_of(
                &spec.executable,
                &spec.args,
                &spec.env,
                &spec.cwd,
                stdin,
            );
            let limits = self.owner.request().policy.streams;
            let command = self
                .owner
                .start_command(spawn, limits, Some(self.abort.clone()))
                .await
                .map_err(under_spec)?;
            let ended = command.watch(
                options.deadline_ms.map(Duration::from_millis),
                Duration::from_millis(options.kill_grace_ms),
                self.abort.clone(),
            );
            let pid = command.pid;
            *lock(&self.io) = Some(Arc::clone(&command.io));
            *lock(&self.command) = Some(command);
            *lock(&self.ended) = Some(ended);
            *lock(&self.options) = Some(options);
            Ok(Value::object([("pid", Value::Number(f64::from(pid)))]))
        }
        .await;
        JsData(outcome(result))
    }

    /// The caller's signal fired: a start in flight is cancelled; a started command is ended.
    #[napi]
    pub fn abort(&self) {
        self.abort.cancel(OwnerError::cancelled(
            "the command was aborted through its signal",
        ));
    }

    /// Sends `signal` to the command's process group (a name `kill` accepts).
    #[napi]
    pub fn kill(&self, signal: String) -> JsData {
        let result = signal_of(&signal).and_then(|signal| {
            self.command()?.control.signal(signal);
            Ok(Value::Null)
        });
        JsData(outcome(result))
    }

    /// `run`: writes `input` then EOF and collects both streams until the exit. Resolves with
    /// `{ ok, exit, stdout, stderr }` or `{ ok: false, error }`; a deadline that ended the
    /// command is `deadline_exceeded`, the caller's signal `cancelled`.
    #[napi]
    pub async fn collect(&self, input: Option<Buffer>) -> Either<RunOutcome, JsData> {
        let result = async {
            let command = self.command()?;
            let max = lock(&self.options)
                .as_ref()
                .and_then(|options| options.max_output_bytes)
                .unwrap_or(crate::process::command_options::RUN_OUTPUT_BYTES_DEFAULT);
            let input = input.map(|buffer| buffer.to_vec()).unwrap_or_default();
            let collected = command.collect(input, max).await?;
            match self.ended_by() {
                Some(Ending::Deadline) => Err(OwnerError::operation(
                    OperationCode::DeadlineExceeded,
                    "the command passed its deadlineMs and was ended",
                )),
                Some(Ending::Aborted) => Err(OwnerError::cancelled(
                    "the command was aborted through its signal",
                )),
                None => Ok(collected),
            }
        }
        .await;
        match result {
            Ok(collected) => Either::A(RunOutcome {
                exit: JsData(exit_value(&collected.exit, None)),
                stdout: collected.stdout.into(),
                stderr: collected.stderr.into(),
            }),
            Err(error) => Either::B(JsData(failed(&error))),
        }
    }

    /// What ended the command from the host's side: `deadline`, `aborted`, or `null`.
    #[napi]
    pub fn ending(&self) -> Option<String> {
        self.ended_by().map(|ending| {
            match ending {
                Ending::Deadline => "deadline",
                Ending::Aborted => "aborted",
            }
            .to_owned()
        })
    }

    #[napi(js_name = "processWrite")]
    pub async fn process_write(&self, chunk: Buffer) -> JsData {
        process_streams::write(&self.io, chunk).await
    }

    #[napi(js_name = "processTryWrite")]
    pub fn process_try_write(&self, chunk: Buffer) -> JsData {
        process_streams::try_write(&self.io, &chunk)
    }

    #[napi(js_name = "processEnd")]
    pub async fn process_end(&self) -> JsData {
        process_streams::end(&self.io).await
    }

    #[napi(js_name = "processRead")]
    pub async fn process_read(&self, stream: String, max: u32) -> Either3<Buffer, Null, JsData> {
        process_streams::read(&self.io, &stream, max).await
    }

    #[napi(js_name = "processDiscard")]
    pub async fn process_discard(&self, stream: String) {
        process_streams::discard(&self.io, &stream).await;
    }

    #[napi(js_name = "processStalls")]
    pub fn process_stalls(&self) -> Option<Vec<String>> {
        process_streams::stalls(&self.io)
    }

    #[napi(js_name = "processExit")]
    pub async fn process_exit(&self) -> JsData {
        let owner = self.owner.clone();
        process_streams::exit(&self.io, move || owner.stop_cause()).await
    }

    /// A queue past `maxBufferedInputBytes` on the Node stream ends this command only.
    #[napi(js_name = "stopForInputLimit")]
    pub fn stop_for_input_limit(&self, _message: String) {
        if let Ok(command) = self.command() {
            command.control.signal(session_frames::Signal::Kill);
        }
    }
}

/// A spawn's refusal of the recipe, named as its parse errors are: under `spec`.
fn under_spec(error: OwnerError) -> OwnerError {
    match error {
        OwnerError::Validation(issues) => OwnerError::Validation(
            issues
                .into_iter()
                .map(|mut issue| {
                    issue.path.insert(0, "spec".into());
                    issue
                })
                .collect(),
        ),
        other => other,
    }
}

#[napi(object, object_from_js = false)]
pub struct RunOutcome {
    pub exit: JsData,
    pub stdout: Buffer,
    pub stderr: Buffer,
}

fn signal_of(name: &str) -> std::result::Result<session_frames::Signal, OwnerError> {
    use session_frames::Signal;
    Ok(match name {
        "SIGTERM" => Signal::Term,
        "SIGKILL" => Signal::Kill,
        "SIGINT" => Signal::Int,
        "SIGHUP" => Signal::Hup,
        "SIGQUIT" => Signal::Quit,
        "SIGUSR1" => Signal::Usr1,
        "SIGUSR2" => Signal::Usr2,
        other => {
            return Err(OwnerError::Validation(vec![crate::input::Issue {
                code: crate::input::IssueCode::InvalidValue,
                path: vec!["signal".into()],
                message: format!(
                    "{other:?} is not a signal kill sends: give SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2"
                ),
            }]))
        }
    })
}
