use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use session_frames::{encode, Decoder, Exit, Message, Spawn, Stream, STDIN_WINDOW};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};

use super::*;
use crate::lifecycle::driver::{OutputEvent, OutputStream, ProcessExit};
use crate::lifecycle::error::{OperationCode, OwnerError};
use crate::test_support::settles;

/// The supervisor's end of a link, played by the test.
struct Peer {
    read: ReadHalf<DuplexStream>,
    write: WriteHalf<DuplexStream>,
    decoder: Decoder,
}

impl Peer {
    async fn next(&mut self) -> (u32, Message) {
        loop {
            if let Some(frame) = self.decoder.next_frame().expect("well-formed") {
                return (frame.channel, Message::decode(&frame).expect("known"));
            }
            let mut buf = vec![0u8; 65_536];
            let n = settles("a frame from the host", self.read.read(&mut buf))
                .await
                .expect("read");
            assert!(n > 0, "the host's side ended");
            self.decoder.push(&buf[..n]);
        }
    }

    async fn send(&mut self, channel: u32, message: Message) {
        let mut bytes = Vec::new();
        encode(channel, &message, &mut bytes);
        self.write.write_all(&bytes).await.expect("written");
    }
}

fn linked() -> (Link, Peer) {
    let (host, supervisor) = tokio::io::duplex(1 << 20);
    let (host_read, host_write) = tokio::io::split(host);
    let output = futures::stream::unfold(host_read, |mut read| async move {
        let mut buf = vec![0u8; 65_536];
        match read.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), read))
            }
        }
    })
    .boxed();
    let (read, write) = tokio::io::split(supervisor);
    let link = Link::new(Box::pin(host_write), output);
    (
        link,
        Peer {
            read,
            write,
            decoder: Decoder::new(),
        },
    )
}

fn spawn_of(script: &str) -> Spawn {
    Spawn {
        argv: vec![
            b"/bin/sh".to_vec(),
            b"-c".to_vec(),
            script.as_bytes().to_vec(),
        ],
        env: Vec::new(),
        cwd: b"/".to_vec(),
        stdin: true,
    }
}

/// `script` started on `link`, the peer taking its spawn and two credits and answering `pid`.
async fn started(link: &Link, peer: &mut Peer, script: &str, pid: u32) -> (u32, Spawned) {
    let spawning = tokio::spawn({
        let link = link.clone();
        let spawn = spawn_of(script);
        async move { link.spawn(spawn).await }
    });
    let (channel, _) = peer.next().await;
    peer.next().await;
    peer.next().await;
    peer.send(channel, Message::Spawned { pid }).await;
    let spawned = settles("the spawn", spawning)
        .await
        .expect("joined")
        .expect("started");
    (channel, spawned)
}

#[tokio::test]
async fn a_command_streams_in_order_gives_credit_back_as_read_and_exits_apart_from_its_output() {
    let (link, mut peer) = linked();
    let spawning = tokio::spawn({
        let link = link.clone();
        async move { link.spawn(spawn_of("echo hi")).await }
    });
    let (channel, message) = peer.next().await;
    assert!(matches!(message, Message::Spawn(_)));
    for stream in [Stream::Stdout, Stream::Stderr] {
        assert_eq!(
            peer.next().await,
            (
                channel,
                Message::Credit {
                    stream,
                    bytes: CREDIT
                }
            )
        );
    }
    peer.send(channel, Message::Spawned { pid: 7 }).await;
    let mut spawned = settles("the spawn", spawning)
        .await
        .expect("joined")
        .expect("started");
    assert_eq!(spawned.pid, 7);
    // The exit comes first: the output goes on after it.
    peer.send(channel, Message::Exit(Exit::Signaled(15))).await;
    assert_eq!(
        settles("the exit", &mut spawned.channels.exit).await,
        ProcessExit::Signaled("SIGTERM".into())
    );
    let out = |bytes: &[u8]| Message::Output {
        stream: Stream::Stdout,
        bytes: bytes.to_vec(),
    };
    peer.send(channel, out(b"hi\n")).await;
    let output = &mut spawned.channels.output;
    assert_eq!(
        settles("the bytes", output.next()).await,
        Some(Ok(OutputEvent::Bytes(
            OutputStream::Stdout,
            Bytes::from_static(b"hi\n")
        )))
    );
    // Credit goes back once the pieces read reach the batch: these 3 bytes and the rest of it.
    let rest = vec![b'x'; super::credit::RETURN_AT as usize - 3];
    peer.send(channel, out(&rest)).await;
    assert_eq!(
        settles("the rest", output.next()).await,
        Some(Ok(OutputEvent::Bytes(
            OutputStream::Stdout,
            Bytes::from(rest)
        )))
    );
    let credit = Message::Credit {
        stream: Stream::Stdout,
        bytes: super::credit::RETURN_AT,
    };
    assert_eq!(peer.next().await, (channel, credit));
    peer.send(
        channel,
        Message::OutputEnd {
            stream: Stream::Stderr,
        },
    )
    .await;
    peer.send(
        channel,
        Message::OutputEnd {
            stream: Stream::Stdout,
        },
    )
    .await;
    let events: Vec<_> = settles("the output's ends", output.collect()).await;
    assert_eq!(
        events,
        vec![
            Ok(OutputEvent::End(OutputStream::Stderr)),
            Ok(OutputEvent::End(OutputStream::Stdout))
        ]
    );
}

#[tokio::test]
async fn stdin_stays_within_the_window_the_supervisor_acknowledges() {
    let (link, mut peer) = linked();
    let (channel, spawned) = started(&link, &mut peer, "cat", 8).await;
    let mut input = spawned.channels.input;
    let total = STDIN_WINDOW as usize + 10;
    let writing = tokio::spawn(async move {
        input.write_all(&vec![1u8; total]).await.expect("written");
        input.shutdown().await.expect("ended");
        input
    });
    let mut received = 0usize;
    while received < STDIN_WINDOW as usize {
        match peer.next().await {
            (c, Message::Stdin(bytes)) if c == channel => received += bytes.len(),
            other => panic!("stdin, not {other:?}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!writing.is_finished(), "past the window, the write waits");
    peer.send(channel, Message::StdinTaken { bytes: 10 }).await;
    match peer.next().await {
        (c, Message::Stdin(bytes)) if c == channel => assert_eq!(bytes.len(), 10),
        other => panic!("the rest of stdin, not {other:?}"),
    }
    assert_eq!(peer.next().await, (channel, Message::StdinEnd));
    settles("the write", writing).await.expect("joined");
}

#[tokio::test]
async fn a_write_waiting_for_window_fails_once_the_command_is_over_and_forgotten() {
    // A command that exits without reading its stdin: once its exit and both ends came, the
    // link forgets it and no `StdinTaken` will come; the waiting write must not wait for ever.
    let (link, mut peer) = linked();
    let (channel, spawned) = started(&link, &mut peer, "sleep 1", 12).await;
    let mut input = spawned.channels.input;
    let writing = tokio::spawn(async move {
        input
            .write_all(&vec![1u8; STDIN_WINDOW as usize + 10])
            .await
    });
    let mut received = 0usize;
    while received < STDIN_WINDOW as usize {
        match peer.next().await {
            (c, Message::Stdin(bytes)) if c == channel => received += bytes.len(),
            other => panic!("stdin, not {other:?}"),
        }
    }
    peer.send(channel, Message::Exit(Exit::Exited(0))).await;
    for stream in [Stream::Stdout, Stream::Stderr] {
        peer.send(channel, Message::OutputEnd { stream }).await;
    }
    let written = settles("the waiting write", writing).await.expect("joined");
    assert_eq!(
        written.expect_err("refused").kind(),
        std::io::ErrorKind::BrokenPipe
    );
}

#[tokio::test]
async fn a_supervisor_gone_fails_every_command_and_every_later_spawn() {
    let (link, mut peer) = linked();
    let (_, spawned) = started(&link, &mut peer, "sleep 60", 9).await;
    let failed = tokio::spawn({
        let link = link.clone();
        async move { link.spawn(spawn_of("true")).await }
    });
    peer.next().await;
    drop(peer);
    let error = settles("the pending spawn", failed)
        .await
        .expect("joined")
        .err()
        .expect("failed");
    assert_eq!(error.code(), Some(OperationCode::StreamFailure));
    assert!(error.to_string().contains("supervisor is gone"), "{error}");
    let events: Vec<_> = settles("the output", spawned.channels.output.collect()).await;
    assert!(
        matches!(events.as_slice(), [Err(e)] if e.code() == Some(OperationCode::StreamFailure))
    );
    assert_eq!(
        settles("the exit", spawned.channels.exit).await,
        ProcessExit::Unavailable
    );
    assert!(link.gone().is_some());
    assert!(link.spawn(spawn_of("true")).await.is_err());
}

#[tokio::test]
async fn a_streamed_read_given_up_tells_the_supervisor_and_its_late_frames_are_dropped() {
    let (link, mut peer) = linked();
    let opening = tokio::spawn({
        let link = link.clone();
        async move {
            link.read_stream(
                session_frames::Root::Workspace,
                vec![b"f".to_vec()],
                1 << 20,
            )
            .await
        }
    });
    let (channel, request) = peer.next().await;
    assert!(matches!(request, Message::File(_)));
    assert!(matches!(peer.next().await.1, Message::Credit { .. }));
    peer.send(channel, Message::FileBytes(b"first".to_vec()))
        .await;
    let mut stream = settles("the open", opening)
        .await
        .expect("joined")
        .expect("opened")
        .expect("present");
    let first = settles("the first bytes", stream.next()).await;
    assert_eq!(
        first.expect("bytes").expect("ok"),
        Bytes::from_static(b"first")
    );
    // Five bytes read owe their credit until more are: the next frame is the abort.
    drop(stream);
    assert_eq!(peer.next().await, (channel, Message::FileAbort));
    // Frames already on their way for the call are dropped; the link goes on.
    peer.send(channel, Message::FileBytes(b"late".to_vec()))
        .await;
    peer.send(
        channel,
        Message::FileDone(session_frames::FileAnswer::ReadEnd),
    )
    .await;
    let statting = tokio::spawn({
        let link = link.clone();
        async move {
            link.stat(session_frames::Root::Workspace, vec![b"g".to_vec()])
                .await
        }
    });
    let (next, _) = peer.next().await;
    peer.send(next, Message::FileDone(session_frames::FileAnswer::Absent))
        .await;
    assert_eq!(
        settles("the stat", statting)
            .await
            .expect("joined")
            .expect("answered"),
        None
    );
    assert!(link.gone().is_none());
}

#[tokio::test]
async fn a_write_waiting_for_room_ends_with_the_supervisors_failure() {
    let (link, mut peer) = linked();
    let data =
        futures::stream::iter((0..4).map(|_| Ok(Bytes::from(vec![7u8; STDIN_WINDOW as usize]))))
            .boxed();
    let writing = tokio::spawn({
        let link = link.clone();
        async move {
            link.write(
                session_frames::Root::Workspace,
                vec![b"w".to_vec()],
                0o644,
                data,
            )
            .await
        }
    });
    let (channel, request) = peer.next().await;
    assert!(matches!(request, Message::File(_)));
    // The first window's chunks arrive; the supervisor then fails the write, acknowledging none.
    let mut received = 0usize;
    while received < STDIN_WINDOW as usize {
        match peer.next().await.1 {
            Message::FileChunk(bytes) => received += bytes.len(),
            other => panic!("a chunk, not {other:?}"),
        }
    }
    peer.send(
        channel,
        Message::FileFailed {
            errno: 28,
            refused: false,
            message: b"No space left on device".to_vec(),
        },
    )
    .await;
    let error = settles("the write", writing)
        .await
        .expect("joined")
        .expect_err("failed");
    assert!(error.to_string().contains("No space left"), "{error}");
}

#[tokio::test]
async fn a_link_closed_by_the_host_settles_its_commands_while_the_peer_stays_silent() {
    let (link, mut peer) = linked();
    let (_, spawned) = started(&link, &mut peer, "sleep 60", 9).await;
    // The peer never ends its side (an engine that keeps the connection open).
    link.close(OwnerError::cancelled("the sandbox stopped"));
    assert_eq!(
        settles("the exit", spawned.channels.exit).await,
        ProcessExit::Unavailable
    );
    let events: Vec<_> = settles("the output", spawned.channels.output.collect()).await;
    assert!(matches!(events.as_slice(), [Err(_)]), "{events:?}");
    assert!(link.spawn(spawn_of("true")).await.is_err());
    // The writer task ended: the peer reads the end of the host's side.
    let mut buf = [0u8; 64];
    let n = settles("the host's side ending", peer.read.read(&mut buf))
        .await
        .expect("read");
    assert_eq!(n, 0);
}

#[tokio::test]
async fn output_past_the_credit_given_breaks_the_link_instead_of_growing() {
    let (link, mut peer) = linked();
    let (channel, spawned) = started(&link, &mut peer, "yes", 10).await;
    // Nobody reads: the whole credit, then one byte more.
    let flood = vec![b'y'; CREDIT as usize + 1];
    peer.send(
        channel,
        Message::Output {
            stream: Stream::Stdout,
            bytes: flood,
        },
    )
    .await;
    let events: Vec<_> = settles("the output", spawned.channels.output.collect()).await;
    match events.as_slice() {
        [Err(error)] => assert!(
            error
                .to_string()
                .contains("more output than it was given credit for"),
            "{error}"
        ),
        other => panic!("one failure, not {other:?}"),
    }
    assert!(
        link.gone().is_some(),
        "the link is broken for every command"
    );
}

#[tokio::test]
async fn a_command_that_cannot_start_says_why() {
    let (link, mut peer) = linked();
    let spawning = tokio::spawn({
        let link = link.clone();
        async move { link.spawn(spawn_of("x")).await }
    });
    let (channel, _) = peer.next().await;
    peer.send(
        channel,
        Message::SpawnFailed {
            errno: 2,
            message: b"/bin/nope: No such file".to_vec(),
        },
    )
    .await;
    let error = settles("the spawn", spawning)
        .await
        .expect("joined")
        .err()
        .expect("failed");
    let OwnerError::Validation(issues) = &error else {
        panic!("a validation error, not {error}");
    };
    assert_eq!(issues[0].path, vec![crate::input::Seg::from("executable")]);
    assert!(
        issues[0].message.contains("/bin/nope: No such file"),
        "{error}"
    );
}

#[tokio::test]
async fn a_working_directory_that_cannot_be_made_is_named_as_cwd_and_other_failures_as_the_supervisors(
) {
    let (link, mut peer) = linked();
    for (errno, message, expected) in [
        (
            2,
            "cwd: /etc/passwd/x: Not a directory (os error 20)",
            Some("cwd"),
        ),
        (11, "Resource temporarily unavailable", None),
        (12, "Cannot allocate memory", None),
    ] {
        let spawning = tokio::spawn({
            let link = link.clone();
            async move { link.spawn(spawn_of("x")).await }
        });
        let channel = loop {
            // Past the credit frames of the spawn before.
            if let (channel, Message::Spawn(_)) = peer.next().await {
                break channel;
            }
        };
        peer.send(
            channel,
            Message::SpawnFailed {
                errno,
                message: message.as_bytes().to_vec(),
            },
        )
        .await;
        let error = settles("the spawn", spawning)
            .await
            .expect("joined")
            .err()
            .expect("failed");
        match (expected, &error) {
            (Some(field), OwnerError::Validation(issues)) => {
                assert_eq!(issues[0].path, vec![crate::input::Seg::from(field)]);
                assert!(issues[0].message.contains("/etc/passwd/x"), "{error}");
            }
            // fork's EAGAIN names the policy's pids; anything else gives its errno.
            (None, OwnerError::Driver(_)) if errno == 11 => {
                assert!(error.to_string().contains("resources.pids"), "{error}")
            }
            (None, OwnerError::Driver(_)) => {
                assert!(error.to_string().contains("(errno 12)"), "{error}")
            }
            _ => panic!("unexpected {error:?}"),
        }
    }
}

/// The link to the real helper (the static binary built for this machine's architecture),
/// run here as a plain child: the supervisor and the host's side of it, end to end.
#[cfg(all(feature = "guest-helper", target_os = "linux", target_arch = "x86_64"))]
mod with_the_helper {
    use super::*;
    use std::process::Stdio;

    fn helper_link() -> (Link, tokio::process::Child) {
        helper_link_with(&[])
    }

    fn helper_link_with(args: &[&str]) -> (Link, tokio::process::Child) {
        let mut child = tokio::process::Command::new(env!("NATIVE_SANDBOX_HELPER_AMD64"))
            .arg("--supervise")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the helper runs here");
        let input = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let output = futures::stream::unfold(stdout, |mut read| async move {
            let mut buf = vec![0u8; 65_536];
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), read))
                }
            }
        })
        .boxed();
        (Link::new(Box::pin(input), output), child)
    }

    fn command(script: &str, stdin: bool) -> Spawn {
        Spawn {
            argv: vec![
                b"/bin/sh".to_vec(),
                b"-c".to_vec(),
                script.as_bytes().to_vec(),
            ],
            env: vec![(b"PATH".to_vec(), b"/usr/bin:/bin".to_vec())],
            cwd: b"/".to_vec(),
            stdin,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_commands_at_once_each_with_its_own_streams_and_exit() {
        let (link, _helper) = helper_link();
        let mut running = Vec::new();
        for i in 0..64u32 {
            let spawned = settles(
                "a spawn",
                link.spawn(command("cat; echo \"err $0\" >&2; exit 3", true)),
            )
            .await
            .expect("started");
            running.push((i, spawned));
        }
        let mut checks = Vec::new();
        for (i, spawned) in running {
            checks.push(tokio::spawn(async move {
                let mut input = spawned.channels.input;
                let line = format!("command {i}\n");
                input.write_all(line.as_bytes()).await.expect("stdin");
                input.shutdown().await.expect("eof");
                let events: Vec<_> = spawned.channels.output.collect().await;
                let mut out = Vec::new();
                let mut err = Vec::new();
                for event in events {
                    match event.expect("no failure") {
                        OutputEvent::Bytes(OutputStream::Stdout, b) => out.extend_from_slice(&b),
                        OutputEvent::Bytes(OutputStream::Stderr, b) => err.extend_from_slice(&b),
                        OutputEvent::End(_) => {}
                        other => panic!("{other:?}"),
                    }
                }
                assert_eq!(out, line.as_bytes());
                assert_eq!(err, b"err /bin/sh\n");
                assert_eq!(spawned.channels.exit.await, ProcessExit::Exited(3));
                drop(input);
            }));
        }
        for check in checks {
            settles("a command", check).await.expect("checked");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_background_child_holding_stdout_does_not_hold_the_exit_or_the_output_end() {
        let (link, _helper) = helper_link();
        let spawned = settles(
            "a spawn",
            link.spawn(command("sleep 60 & echo started", false)),
        )
        .await
        .expect("started");
        assert_eq!(
            settles("the exit", spawned.channels.exit).await,
            ProcessExit::Exited(0)
        );
        let events: Vec<_> = settles("the output's end", spawned.channels.output.collect()).await;
        assert_eq!(
            events.first(),
            Some(&Ok(OutputEvent::Bytes(
                OutputStream::Stdout,
                Bytes::from_static(b"started\n")
            )))
        );
        assert_eq!(events.len(), 3, "the bytes and both ends: {events:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signal_ends_the_commands_group_and_more_output_than_the_credit_arrives_whole() {
        let (link, _helper) = helper_link();
        let spawned = settles(
            "a spawn",
            link.spawn(command("head -c 3000000 /dev/zero; exec sleep 60", false)),
        )
        .await
        .expect("started");
        let mut output = spawned.channels.output;
        let mut received = 0usize;
        while received < 3_000_000 {
            match settles("output", output.next()).await {
                Some(Ok(OutputEvent::Bytes(_, bytes))) => received += bytes.len(),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(received, 3_000_000);
        spawned.control.signal(session_frames::Signal::Term);
        assert_eq!(
            settles("the exit", spawned.channels.exit).await,
            ProcessExit::Signaled("SIGTERM".into())
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_round_trip_below_the_roots_and_a_link_out_is_the_callers_error() {
        use session_frames::{FileKind, Root};
        let dir = crate::test_support::scratch("supervised-files");
        for sub in ["workspace", "home", "tmp", "outside"] {
            std::fs::create_dir_all(dir.join(sub)).expect("scratch");
        }
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("workspace/out")).expect("link");
        let root = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let (workspace, home, tmp) = (root("workspace"), root("home"), root("tmp"));
        let (link, _helper) = helper_link_with(&["--roots", &workspace, &home, &tmp]);
        let path = |p: &str| {
            p.split('/')
                .map(|c| c.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        let body: Vec<u8> = (0..700_000u32).map(|i| (i % 253) as u8).collect();
        let pieces: Vec<Result<Bytes, OwnerError>> = body
            .chunks(100_000)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        settles(
            "the write",
            link.write(
                Root::Workspace,
                path("a/b/data.bin"),
                0o600,
                futures::stream::iter(pieces).boxed(),
            ),
        )
        .await
        .expect("written");
        let read = settles(
            "the read",
            link.read(Root::Workspace, path("a/b/data.bin"), 1 << 20),
        )
        .await;
        assert!(read.expect("read").expect("present") == body);
        let stat = link
            .stat(Root::Workspace, path("a/b/data.bin"))
            .await
            .expect("stat")
            .expect("present");
        assert_eq!(
            (stat.kind, stat.size, stat.mode),
            (FileKind::File, 700_000, 0o600)
        );
        assert_eq!(
            link.read(Root::Workspace, path("a/none"), 10)
                .await
                .expect("read"),
            None
        );
        let entries = link
            .list(Root::Workspace, path("a"))
            .await
            .expect("listed")
            .expect("present");
        assert_eq!(entries, vec![(FileKind::Directory, b"b".to_vec())]);
        link.mkdir(Root::Tmp, path("x/y"), true)
            .await
            .expect("made");
        assert!(link
            .remove(Root::Tmp, path("x"), true)
            .await
            .expect("removed"));
        assert!(!link
            .remove(Root::Tmp, path("x"), true)
            .await
            .expect("nothing"));
        // Past `max`: a failure, never a truncated file.
        let error = link
            .read(Root::Workspace, path("a/b/data.bin"), 10)
            .await
            .expect_err("too large");
        assert!(
            error.to_string().contains("past the 10 asked for"),
            "{error}"
        );
        // Through a link: the caller's input, naming the component.
        let error = link
            .stat(Root::Workspace, path("out/anything"))
            .await
            .expect_err("refused");
        match &error {
            OwnerError::Validation(issues) => {
                assert!(
                    issues[0].message.contains("out is a symbolic link"),
                    "{issues:?}"
                )
            }
            other => panic!("a validation error, not {other:?}"),
        }
        let pieces: Vec<Result<Bytes, OwnerError>> = vec![Ok(Bytes::from_static(b"planted"))];
        let error = link
            .write(
                Root::Workspace,
                path("out/planted"),
                0o644,
                futures::stream::iter(pieces).boxed(),
            )
            .await
            .expect_err("refused");
        assert!(matches!(error, OwnerError::Validation(_)), "{error:?}");
        assert!(!dir.join("outside/planted").exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}
