//! The helper's `--supervise` mode driven over its stdin and stdout, as the host drives it.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use session_frames::{encode, Decoder, Exit, Message, Signal, Spawn, Stream};

/// A running supervisor: frames go in through `input`; frames out arrive on `frames`.
struct Supervisor {
    child: Child,
    input: Option<ChildStdin>,
    frames: mpsc::Receiver<(u32, Message)>,
}

fn supervisor() -> Supervisor {
    supervisor_as(None)
}

/// The supervisor run as `user` (through `setpriv`, when this test runs as root), as the
/// sandbox's user runs it: no capability reaches past what a plain user may do.
fn supervisor_as(user: Option<u32>) -> Supervisor {
    let helper = env!("CARGO_BIN_EXE_native-sandbox-helper");
    let mut command = match user {
        Some(uid) => {
            let mut command = Command::new("setpriv");
            command.args([
                format!("--reuid={uid}"),
                format!("--regid={uid}"),
                "--clear-groups".into(),
                "--".into(),
                helper.into(),
            ]);
            command
        }
        None => Command::new(helper),
    };
    let mut child = command
        .arg("--supervise")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the helper starts");
    let input = child.stdin.take();
    let output: ChildStdout = child.stdout.take().expect("stdout");
    let (tx, frames) = mpsc::channel();
    std::thread::spawn(move || {
        let mut output = output;
        let mut decoder = Decoder::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            let n = match output.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            decoder.push(&buf[..n]);
            while let Some(frame) = decoder.next_frame().expect("well-formed frames") {
                let message = Message::decode(&frame).expect("a known message");
                if tx.send((frame.channel, message)).is_err() {
                    return;
                }
            }
        }
    });
    Supervisor {
        child,
        input,
        frames,
    }
}

impl Supervisor {
    fn send(&mut self, channel: u32, message: Message) {
        let mut bytes = Vec::new();
        encode(channel, &message, &mut bytes);
        let input = self.input.as_mut().expect("open");
        input.write_all(&bytes).expect("the supervisor reads");
        input.flush().expect("flushed");
    }

    fn spawn(&mut self, channel: u32, script: &str, stdin: bool) {
        self.send(
            channel,
            Message::Spawn(Spawn {
                argv: vec![
                    b"/bin/sh".to_vec(),
                    b"-c".to_vec(),
                    script.as_bytes().to_vec(),
                ],
                env: vec![(b"PATH".to_vec(), b"/usr/bin:/bin".to_vec())],
                cwd: b"/".to_vec(),
                stdin,
            }),
        );
        for stream in [Stream::Stdout, Stream::Stderr] {
            self.send(
                channel,
                Message::Credit {
                    stream,
                    bytes: 1 << 20,
                },
            );
        }
    }

    /// The next frame, within 10 s (a hang fails the test).
    fn next(&self) -> (u32, Message) {
        self.frames
            .recv_timeout(Duration::from_secs(10))
            .expect("a frame within 10 s")
    }
}

/// What one command sent until its exit and both output ends.
#[derive(Default, Debug)]
struct Seen {
    pid: Option<u32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    ends: usize,
    exit: Option<Exit>,
    taken: u32,
    /// The frames in the order they came, by kind name.
    order: Vec<&'static str>,
}

fn until_done(supervisor: &Supervisor, channel: u32) -> Seen {
    let mut seen = Seen::default();
    while seen.ends < 2 || seen.exit.is_none() {
        let (from, message) = supervisor.next();
        assert_eq!(from, channel);
        match message {
            Message::Spawned { pid } => seen.pid = Some(pid),
            Message::Output {
                stream: Stream::Stdout,
                bytes,
            } => seen.stdout.extend(bytes),
            Message::Output {
                stream: Stream::Stderr,
                bytes,
            } => seen.stderr.extend(bytes),
            Message::OutputEnd { .. } => {
                seen.ends += 1;
                seen.order.push("end");
            }
            Message::Exit(exit) => {
                seen.exit = Some(exit);
                seen.order.push("exit");
            }
            Message::StdinTaken { bytes } => seen.taken += bytes,
            other => panic!("unexpected {other:?}"),
        }
    }
    seen
}

#[test]
fn a_command_gets_its_stdin_its_own_streams_and_its_exit() {
    let mut s = supervisor();
    s.spawn(1, "cat; echo err >&2; exit 3", true);
    s.send(1, Message::Stdin(b"through the supervisor\n".to_vec()));
    s.send(1, Message::StdinEnd);
    let seen = until_done(&s, 1);
    assert!(seen.pid.is_some());
    assert_eq!(seen.stdout, b"through the supervisor\n");
    assert_eq!(seen.stderr, b"err\n");
    assert_eq!(seen.taken, 23);
    assert_eq!(seen.exit, Some(Exit::Exited(3)));
}

#[test]
fn an_exit_comes_from_the_wait_status_while_a_background_child_holds_the_output() {
    let mut s = supervisor();
    // The background child keeps stdout open for 30 s; its pid comes out first.
    s.spawn(1, "sleep 30 & echo $!", false);
    let seen = until_done(&s, 1);
    assert_eq!(seen.exit, Some(Exit::Exited(0)));
    assert_eq!(
        seen.order.first(),
        Some(&"exit"),
        "the exit before the output's end"
    );
    let background: i32 = String::from_utf8_lossy(&seen.stdout)
        .trim()
        .parse()
        .expect("a pid");
    // The host goes away: every command's process group is killed, the background child too.
    drop(s.input.take());
    let status = s.child.wait().expect("the supervisor ends");
    assert!(status.success(), "{status:?}");
    let mut gone = false;
    for _ in 0..100 {
        // SAFETY: kill with signal 0 only asks whether the process exists.
        if unsafe { libc_kill(background, 0) } != 0 {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        gone,
        "the background child {background} outlived the supervisor"
    );
}

#[test]
fn a_signal_reaches_the_commands_process_group_and_output_waits_for_credit() {
    let mut s = supervisor();
    s.send(
        2,
        Message::Spawn(Spawn {
            argv: vec![
                b"/bin/sh".to_vec(),
                b"-c".to_vec(),
                b"echo ready; exec sleep 30".to_vec(),
            ],
            env: Vec::new(),
            cwd: b"/".to_vec(),
            stdin: false,
        }),
    );
    assert!(matches!(s.next(), (2, Message::Spawned { .. })));
    // No credit yet: nothing is sent.
    assert!(s.frames.recv_timeout(Duration::from_millis(300)).is_err());
    s.send(
        2,
        Message::Credit {
            stream: Stream::Stdout,
            bytes: 3,
        },
    );
    assert_eq!(
        s.next(),
        (
            2,
            Message::Output {
                stream: Stream::Stdout,
                bytes: b"rea".to_vec()
            }
        )
    );
    s.send(
        2,
        Message::Credit {
            stream: Stream::Stdout,
            bytes: 100,
        },
    );
    s.send(
        2,
        Message::Credit {
            stream: Stream::Stderr,
            bytes: 100,
        },
    );
    assert_eq!(
        s.next(),
        (
            2,
            Message::Output {
                stream: Stream::Stdout,
                bytes: b"dy\n".to_vec()
            }
        )
    );
    s.send(2, Message::Signal(Signal::Term));
    let seen = until_done(&s, 2);
    assert_eq!(seen.exit, Some(Exit::Signaled(15)));
}

#[test]
fn a_missing_working_directory_is_made_and_one_that_cannot_be_is_named_as_cwd() {
    let dir = std::env::temp_dir().join(format!("supervise-cwd-{}", std::process::id()));
    let made = dir.join("made/below");
    let mut s = supervisor();
    s.send(
        1,
        Message::Spawn(Spawn {
            argv: vec![b"/bin/pwd".to_vec()],
            env: Vec::new(),
            cwd: made.to_string_lossy().as_bytes().to_vec(),
            stdin: false,
        }),
    );
    for stream in [Stream::Stdout, Stream::Stderr] {
        s.send(
            1,
            Message::Credit {
                stream,
                bytes: 1 << 20,
            },
        );
    }
    let seen = until_done(&s, 1);
    assert_eq!(seen.exit, Some(Exit::Exited(0)));
    assert_eq!(
        String::from_utf8_lossy(&seen.stdout).trim(),
        made.to_string_lossy()
    );
    std::fs::write(dir.join("file"), b"").expect("a file");
    s.send(
        2,
        Message::Spawn(Spawn {
            argv: vec![b"/bin/true".to_vec()],
            env: Vec::new(),
            cwd: dir.join("file/below").to_string_lossy().as_bytes().to_vec(),
            stdin: false,
        }),
    );
    match s.next() {
        (2, Message::SpawnFailed { message, .. }) => {
            let message = String::from_utf8_lossy(&message).into_owned();
            assert!(
                message.starts_with(session_frames::SPAWN_FAILED_CWD),
                "{message}"
            );
            assert!(message.contains("file/below"), "{message}");
        }
        other => panic!("a failed spawn, not {other:?}"),
    }
    std::fs::remove_dir_all(&dir).expect("removed");
}

#[test]
fn a_command_that_cannot_start_says_why_and_a_busy_channel_is_refused() {
    let mut s = supervisor();
    s.send(
        1,
        Message::Spawn(Spawn {
            argv: vec![b"/nonexistent/program".to_vec()],
            env: Vec::new(),
            cwd: b"/".to_vec(),
            stdin: false,
        }),
    );
    match s.next() {
        (1, Message::SpawnFailed { errno, .. }) => assert_eq!(errno, 2),
        other => panic!("a failed spawn, not {other:?}"),
    }
    s.spawn(3, "sleep 30", false);
    assert!(matches!(s.next(), (3, Message::Spawned { .. })));
    s.spawn(3, "true", false);
    assert!(matches!(s.next(), (3, Message::Refused { .. })));
    s.send(3, Message::Signal(Signal::Kill));
    assert_eq!(until_done(&s, 3).exit, Some(Exit::Signaled(9)));
}

#[test]
fn no_command_reaches_the_supervisors_channel() {
    // As a plain user (nobody), when this runs as root: root would pass every check below.
    // SAFETY: geteuid has no preconditions.
    let user = (unsafe { geteuid() } == 0).then_some(65_534);
    let mut s = supervisor_as(user);
    // The supervisor's descriptors (its connection among them) are out of every command's
    // reach, and frame-shaped bytes a command writes to all of its own go to its own streams.
    let script = "ls /proc/$PPID/fd >/dev/null 2>&1 && echo reachable; \
        for fd in /proc/self/fd/*; do printf '\\201\\001\\000\\000\\000\\000\\000\\001\\000\\000\\000\\000' > \"$fd\" 2>/dev/null; done; \
        echo done";
    s.spawn(1, script, true);
    s.send(1, Message::StdinEnd);
    let seen = until_done(&s, 1);
    assert_eq!(seen.exit, Some(Exit::Exited(0)));
    let out = String::from_utf8_lossy(&seen.stdout).into_owned();
    assert!(
        !out.contains("reachable"),
        "a command listed the supervisor's descriptors: {out:?}"
    );
    assert!(out.ends_with("done\n"), "{out:?}");
    // The connection is intact: the next command runs as usual.
    s.spawn(2, "echo next", false);
    assert_eq!(until_done(&s, 2).stdout, b"next\n");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
    fn geteuid() -> u32;
}
