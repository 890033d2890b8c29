//! The options of `sandbox.exec` and `sandbox.run`, parsed strictly: every unknown option and
//! every bad value is an issue naming its field. `signal` (an `AbortSignal`) and `run`'s `input`
//! (a string or bytes) are JavaScript values the JavaScript face checks; here they are only
//! known names.

use crate::input::read::{boolean, integer_in, object};
use crate::input::{Issue, Issues, Value};

/// How long a command may run at most, when a deadline is given.
pub const DEADLINE_MS_MAX: u64 = 2_147_483_647;
/// How long a command may take between SIGTERM and SIGKILL, at most.
pub const KILL_GRACE_MS_MAX: u64 = 600_000;
pub const KILL_GRACE_MS_DEFAULT: u64 = 2_000;
/// `run`'s bound on each collected stream: its default, and the most it may be given.
pub const RUN_OUTPUT_BYTES_DEFAULT: u64 = 16 * 1024 * 1024;
pub const RUN_OUTPUT_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Which call the options are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandCall {
    Exec,
    Run,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOptions {
    pub deadline_ms: Option<u64>,
    pub kill_grace_ms: u64,
    /// `exec`: whether the command gets a stdin pipe (else `/dev/null`); `run` always has one.
    pub stdin: bool,
    /// `run`: the bound on each collected stream.
    pub max_output_bytes: Option<u64>,
}

pub fn parse_command_options(
    input: &Value,
    call: CommandCall,
) -> Result<CommandOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let mut options = CommandOptions {
        deadline_ms: None,
        kill_grace_ms: KILL_GRACE_MS_DEFAULT,
        stdin: true,
        max_output_bytes: (call == CommandCall::Run).then_some(RUN_OUTPUT_BYTES_DEFAULT),
    };
    if matches!(input, Value::Undefined) {
        return Ok(options);
    }
    let Some(mut f) = object(input, &[], &mut issues) else {
        return Err(issues.into_vec());
    };
    let _ = f.optional("signal");
    if let Some(v) = f.optional("deadlineMs") {
        options.deadline_ms = integer_in(v, &f.at("deadlineMs"), 1, DEADLINE_MS_MAX, &mut issues);
    }
    if let Some(v) = f.optional("killGraceMs") {
        if let Some(grace) = integer_in(v, &f.at("killGraceMs"), 0, KILL_GRACE_MS_MAX, &mut issues)
        {
            options.kill_grace_ms = grace;
        }
    }
    match call {
        CommandCall::Exec => {
            if let Some(v) = f.optional("stdin") {
                if let Some(stdin) = boolean(v, &f.at("stdin"), &mut issues) {
                    options.stdin = stdin;
                }
            }
        }
        CommandCall::Run => {
            let _ = f.optional("input");
            if let Some(v) = f.optional("maxOutputBytes") {
                options.max_output_bytes = integer_in(
                    v,
                    &f.at("maxOutputBytes"),
                    1,
                    RUN_OUTPUT_BYTES_MAX,
                    &mut issues,
                )
                .or(options.max_output_bytes);
            }
        }
    }
    f.finish(&mut issues);
    issues.finish(Some(options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::from_json;
    use serde_json::json;

    fn issues(input: serde_json::Value, call: CommandCall) -> Vec<(String, String)> {
        parse_command_options(&from_json(input), call)
            .expect_err("issues")
            .into_iter()
            .map(|issue| {
                (
                    issue.code.as_str().to_owned(),
                    crate::input::render_path(&issue.path),
                )
            })
            .collect()
    }

    #[test]
    fn defaults_and_given_values() {
        let exec = parse_command_options(&Value::Undefined, CommandCall::Exec).expect("ok");
        assert_eq!(
            exec,
            CommandOptions {
                deadline_ms: None,
                kill_grace_ms: 2_000,
                stdin: true,
                max_output_bytes: None
            }
        );
        let run = parse_command_options(
            &from_json(
                json!({ "deadlineMs": 50, "killGraceMs": 0, "maxOutputBytes": 10, "input": "x" }),
            ),
            CommandCall::Run,
        )
        .expect("ok");
        assert_eq!(run.deadline_ms, Some(50));
        assert_eq!(run.kill_grace_ms, 0);
        assert_eq!(run.max_output_bytes, Some(10));
        let exec = parse_command_options(&from_json(json!({ "stdin": false })), CommandCall::Exec)
            .expect("ok");
        assert!(!exec.stdin);
    }

    #[test]
    fn each_bad_option_is_named() {
        assert_eq!(
            issues(json!({ "deadlineMs": -1 }), CommandCall::Exec),
            vec![("too_small".to_owned(), "deadlineMs".to_owned())]
        );
        assert_eq!(
            issues(
                json!({ "killGraceMs": 1.5, "stdin": "no" }),
                CommandCall::Exec
            ),
            vec![
                ("not_integer".to_owned(), "killGraceMs".to_owned()),
                ("invalid_type".to_owned(), "stdin".to_owned())
            ]
        );
        // `stdin` is exec's, `maxOutputBytes` run's.
        assert_eq!(
            issues(json!({ "stdin": true }), CommandCall::Run),
            vec![("unknown_field".to_owned(), "stdin".to_owned())]
        );
        assert_eq!(
            issues(
                json!({ "maxOutputBytes": 1, "timeout": 5 }),
                CommandCall::Exec
            ),
            vec![
                ("unknown_field".to_owned(), "maxOutputBytes".to_owned()),
                ("unknown_field".to_owned(), "timeout".to_owned())
            ]
        );
        assert_eq!(
            issues(json!({ "maxOutputBytes": 0 }), CommandCall::Run),
            vec![("too_small".to_owned(), "maxOutputBytes".to_owned())]
        );
        assert_eq!(
            issues(json!("fast"), CommandCall::Run),
            vec![("invalid_type".to_owned(), "(input)".to_owned())]
        );
    }
}
