//! File requests to the helper's `--supervise --roots` mode: nothing outside the roots is ever
//! reached, a link included; answers as the protocol says.

use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use session_frames::{
    encode, Decoder, FileAnswer, FileKind, FileOp, FileRequest, Message, Root, Stream,
};

struct Supervisor {
    _child: Child,
    input: ChildStdin,
    frames: mpsc::Receiver<(u32, Message)>,
    next: u32,
}

/// A scratch tree: `workspace/`, `home/`, `tmp/` as the roots, and `outside/secret` beside them.
fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("supervise-files-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["workspace/src", "home", "tmp", "outside"] {
        std::fs::create_dir_all(dir.join(sub)).expect("scratch");
    }
    std::fs::write(dir.join("outside/secret"), b"never read").expect("secret");
    std::fs::write(dir.join("workspace/src/main.rs"), b"fn main() {}\n").expect("file");
    dir
}

fn supervisor(dir: &Path) -> Supervisor {
    let root = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_native-sandbox-helper"))
        .args([
            "--supervise",
            "--roots",
            &root("workspace"),
            &root("home"),
            &root("tmp"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the helper starts");
    let input = child.stdin.take().expect("stdin");
    let mut output = child.stdout.take().expect("stdout");
    let (tx, frames) = mpsc::channel();
    std::thread::spawn(move || {
        let mut decoder = Decoder::new();
        let mut buf = vec![0u8; 65_536];
        while let Ok(n) = output.read(&mut buf) {
            if n == 0 {
                return;
            }
            decoder.push(&buf[..n]);
            while let Some(frame) = decoder.next_frame().expect("well-formed") {
                if tx
                    .send((frame.channel, Message::decode(&frame).expect("known")))
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    Supervisor {
        _child: child,
        input,
        frames,
        next: 1,
    }
}

impl Supervisor {
    fn send(&mut self, channel: u32, message: &Message) {
        let mut bytes = Vec::new();
        encode(channel, message, &mut bytes);
        self.input.write_all(&bytes).expect("written");
    }

    /// Every frame of one request, through its `FileDone` or `FileFailed`.
    fn ask(&mut self, op: FileOp, root: Root, path: &[&str], credit: u32) -> Vec<Message> {
        let channel = self.next;
        self.next += 1;
        let request = FileRequest {
            op,
            root,
            path: path.iter().map(|c| c.as_bytes().to_vec()).collect(),
        };
        self.send(channel, &Message::File(request));
        if credit > 0 {
            self.send(
                channel,
                &Message::Credit {
                    stream: Stream::Stdout,
                    bytes: credit,
                },
            );
        }
        let mut answers = Vec::new();
        loop {
            let (from, message) = self
                .frames
                .recv_timeout(Duration::from_secs(10))
                .expect("an answer within 10 s");
            assert_eq!(from, channel);
            let last = matches!(message, Message::FileDone(_) | Message::FileFailed { .. });
            answers.push(message);
            if last {
                return answers;
            }
        }
    }
}

fn refused(answers: &[Message]) -> String {
    match answers {
        [Message::FileFailed {
            refused: true,
            message,
            ..
        }] => String::from_utf8_lossy(message).into_owned(),
        other => panic!("a refusal, not {other:?}"),
    }
}

#[test]
fn stat_list_and_read_answer_below_the_roots() {
    let dir = scratch("plain");
    let mut s = supervisor(&dir);
    match s
        .ask(FileOp::Stat, Root::Workspace, &["src", "main.rs"], 0)
        .as_slice()
    {
        [Message::FileDone(FileAnswer::Stat {
            kind: FileKind::File,
            size: 13,
            ..
        })] => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.ask(FileOp::Stat, Root::Workspace, &["src", "absent"], 0),
        vec![Message::FileDone(FileAnswer::Absent)]
    );
    assert_eq!(
        s.ask(FileOp::Stat, Root::Workspace, &["missing", "below"], 0),
        vec![Message::FileDone(FileAnswer::Absent)]
    );
    assert_eq!(
        s.ask(FileOp::List, Root::Workspace, &[], 0),
        vec![
            Message::FileEntries(vec![(FileKind::Directory, b"src".to_vec())]),
            Message::FileDone(FileAnswer::Listed)
        ]
    );
    assert_eq!(
        s.ask(
            FileOp::Read { max: 100 },
            Root::Workspace,
            &["src", "main.rs"],
            1 << 20
        ),
        vec![
            Message::FileBytes(b"fn main() {}\n".to_vec()),
            Message::FileDone(FileAnswer::ReadEnd)
        ]
    );
    // Past `max`: a failure, never a truncated file.
    match s
        .ask(
            FileOp::Read { max: 12 },
            Root::Workspace,
            &["src", "main.rs"],
            1 << 20,
        )
        .as_slice()
    {
        [Message::FileFailed {
            errno,
            refused: false,
            ..
        }] => assert_eq!(*errno, libc_efbig()),
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_large_file_arrives_whole_on_the_credit_given() {
    let dir = scratch("large");
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("tmp/big"), &body).expect("written");
    let mut s = supervisor(&dir);
    let request = FileRequest {
        op: FileOp::Read { max: u64::MAX },
        root: Root::Tmp,
        path: vec![b"big".to_vec()],
    };
    s.send(9, &Message::File(request));
    let credit = |bytes: u32| Message::Credit {
        stream: Stream::Stdout,
        bytes,
    };
    s.send(9, &credit(64 * 1024));
    let mut received: Vec<u8> = Vec::new();
    loop {
        let (channel, message) = s
            .frames
            .recv_timeout(Duration::from_secs(10))
            .expect("a frame within 10 s");
        assert_eq!(channel, 9);
        match message {
            Message::FileBytes(bytes) => {
                // Never past the credit outstanding: 64 KiB at most at a time here.
                assert!(bytes.len() <= 64 * 1024);
                received.extend(&bytes);
                s.send(9, &credit(bytes.len() as u32));
            }
            Message::FileDone(FileAnswer::ReadEnd) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(received.len(), body.len());
    assert!(received == body);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn no_link_leads_outside_a_root_and_a_fifo_never_holds_the_supervisor() {
    let dir = scratch("hostile");
    let workspace = dir.join("workspace");
    symlink(dir.join("outside"), workspace.join("out")).expect("a directory link");
    symlink(dir.join("outside/secret"), workspace.join("secret")).expect("a file link");
    symlink("../outside/secret", workspace.join("src/relative")).expect("a relative link");
    std::fs::write(workspace.join("plain"), b"x").expect("file");
    let mut s = supervisor(&dir);
    // A link as a parent component: refused, naming it.
    let why = refused(&s.ask(
        FileOp::Read { max: 100 },
        Root::Workspace,
        &["out", "secret"],
        1 << 20,
    ));
    assert!(why.contains("out is a symbolic link"), "{why}");
    let why = refused(&s.ask(FileOp::List, Root::Workspace, &["out"], 0));
    assert!(why.contains("out is a symbolic link"), "{why}");
    // A link as the last component: read refused, stat says symlink without following it.
    let why = refused(&s.ask(
        FileOp::Read { max: 100 },
        Root::Workspace,
        &["secret"],
        1 << 20,
    ));
    assert!(why.contains("secret is a symbolic link"), "{why}");
    let why = refused(&s.ask(
        FileOp::Read { max: 100 },
        Root::Workspace,
        &["src", "relative"],
        1 << 20,
    ));
    assert!(why.contains("src/relative is a symbolic link"), "{why}");
    match s
        .ask(FileOp::Stat, Root::Workspace, &["secret"], 0)
        .as_slice()
    {
        [Message::FileDone(FileAnswer::Stat {
            kind: FileKind::Symlink,
            ..
        })] => {}
        other => panic!("{other:?}"),
    }
    // A file as a parent: refused as not a directory.
    let why = refused(&s.ask(FileOp::Stat, Root::Workspace, &["plain", "below"], 0));
    assert!(why.contains("plain is not a directory"), "{why}");
    // A FIFO: not a regular file, answered at once.
    let fifo =
        std::ffi::CString::new(workspace.join("fifo").to_string_lossy().as_bytes()).expect("path");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { mkfifo(fifo.as_ptr(), 0o600) }, 0);
    match s
        .ask(
            FileOp::Read { max: 100 },
            Root::Workspace,
            &["fifo"],
            1 << 20,
        )
        .as_slice()
    {
        [Message::FileFailed {
            refused: false,
            message,
            ..
        }] => {
            assert!(String::from_utf8_lossy(message).contains("not a regular file"))
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).ok();
}

fn libc_efbig() -> i32 {
    27
}

extern "C" {
    fn mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

fn request(op: FileOp, root: Root, path: &[&str]) -> Message {
    Message::File(FileRequest {
        op,
        root,
        path: path.iter().map(|c| c.as_bytes().to_vec()).collect(),
    })
}

impl Supervisor {
    /// The frames on `channel` through its `FileDone` or `FileFailed` (acknowledgements kept).
    fn answers(&self, channel: u32) -> Vec<Message> {
        let mut answers = Vec::new();
        loop {
            let (from, message) = self
                .frames
                .recv_timeout(Duration::from_secs(10))
                .expect("an answer");
            assert_eq!(from, channel);
            let last = matches!(message, Message::FileDone(_) | Message::FileFailed { .. });
            answers.push(message);
            if last {
                return answers;
            }
        }
    }
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("listed")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".native-sandbox-write-"))
        .collect()
}

#[test]
fn a_write_is_whole_or_nothing_and_creates_its_parents() {
    let dir = scratch("write");
    let mut s = supervisor(&dir);
    s.send(
        20,
        &request(
            FileOp::Write { mode: 0o640 },
            Root::Workspace,
            &["new", "deep", "file.txt"],
        ),
    );
    s.send(20, &Message::FileChunk(b"first half, ".to_vec()));
    assert_eq!(
        s.frames.recv_timeout(Duration::from_secs(10)).expect("ack"),
        (20, Message::StdinTaken { bytes: 12 })
    );
    // Half written: the final name does not exist yet; a reader never sees half a file.
    let target = dir.join("workspace/new/deep/file.txt");
    assert!(!target.exists());
    assert_eq!(temporaries(&dir.join("workspace/new/deep")).len(), 1);
    s.send(20, &Message::FileChunk(b"second half".to_vec()));
    s.send(20, &Message::FileCommit);
    assert_eq!(
        s.answers(20),
        vec![
            Message::StdinTaken { bytes: 11 },
            Message::FileDone(FileAnswer::Written)
        ]
    );
    assert_eq!(
        std::fs::read(&target).expect("read"),
        b"first half, second half"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert!(temporaries(&dir.join("workspace/new/deep")).is_empty());
    // Replaced whole.
    s.send(
        21,
        &request(
            FileOp::Write { mode: 0o644 },
            Root::Workspace,
            &["new", "deep", "file.txt"],
        ),
    );
    s.send(21, &Message::FileChunk(b"v2".to_vec()));
    s.send(21, &Message::FileCommit);
    assert_eq!(
        s.answers(21).last(),
        Some(&Message::FileDone(FileAnswer::Written))
    );
    assert_eq!(std::fs::read(&target).expect("read"), b"v2");
    // Abandoned: nothing is put in place, the temporary file is gone.
    s.send(
        22,
        &request(FileOp::Write { mode: 0o644 }, Root::Tmp, &["abandoned"]),
    );
    s.send(22, &Message::FileChunk(b"never".to_vec()));
    s.send(22, &Message::FileAbort);
    s.send(23, &request(FileOp::Stat, Root::Tmp, &["abandoned"]));
    assert_eq!(
        s.frames.recv_timeout(Duration::from_secs(10)).expect("ack"),
        (22, Message::StdinTaken { bytes: 5 })
    );
    assert_eq!(s.answers(23), vec![Message::FileDone(FileAnswer::Absent)]);
    assert!(temporaries(&dir.join("tmp")).is_empty());
    // The host gone mid-write: the temporary file goes with it.
    s.send(
        24,
        &request(FileOp::Write { mode: 0o644 }, Root::Tmp, &["cut"]),
    );
    s.send(24, &Message::FileChunk(b"partial".to_vec()));
    assert_eq!(
        s.frames.recv_timeout(Duration::from_secs(10)).expect("ack"),
        (24, Message::StdinTaken { bytes: 7 })
    );
    let Supervisor {
        mut _child, input, ..
    } = s;
    drop(input);
    _child.wait().expect("ended");
    assert!(temporaries(&dir.join("tmp")).is_empty());
    assert!(!dir.join("tmp/cut").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn writes_mkdir_and_remove_never_reach_through_a_link() {
    let dir = scratch("hostile-write");
    let workspace = dir.join("workspace");
    symlink(dir.join("outside"), workspace.join("out")).expect("a directory link");
    symlink(dir.join("outside/secret"), workspace.join("secret")).expect("a file link");
    let mut s = supervisor(&dir);
    let why = refused(&s.ask(
        FileOp::Mkdir { recursive: true },
        Root::Workspace,
        &["out", "made"],
        0,
    ));
    assert!(why.contains("out is a symbolic link"), "{why}");
    s.send(
        30,
        &request(
            FileOp::Write { mode: 0o644 },
            Root::Workspace,
            &["out", "planted"],
        ),
    );
    let why = refused(&s.answers(30));
    assert!(why.contains("out is a symbolic link"), "{why}");
    s.send(
        31,
        &request(FileOp::Write { mode: 0o644 }, Root::Workspace, &["secret"]),
    );
    let why = refused(&s.answers(31));
    assert!(why.contains("secret is a symbolic link"), "{why}");
    assert!(!dir.join("outside/made").exists() && !dir.join("outside/planted").exists());
    assert_eq!(
        std::fs::read(dir.join("outside/secret")).expect("read"),
        b"never read"
    );
    // Removing a link removes the link, never what it points to; a tree holding a link to the
    // outside is removed without touching the outside.
    assert_eq!(
        s.ask(
            FileOp::Remove { recursive: false },
            Root::Workspace,
            &["secret"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Removed(true))]
    );
    std::fs::create_dir_all(workspace.join("tree/inner")).expect("tree");
    symlink(dir.join("outside"), workspace.join("tree/inner/escape")).expect("link");
    std::fs::write(workspace.join("tree/inner/file"), b"x").expect("file");
    match s
        .ask(
            FileOp::Remove { recursive: false },
            Root::Workspace,
            &["tree"],
            0,
        )
        .as_slice()
    {
        [Message::FileFailed { errno, .. }] => assert_eq!(*errno, 39, "ENOTEMPTY"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.ask(
            FileOp::Remove { recursive: true },
            Root::Workspace,
            &["tree"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Removed(true))]
    );
    assert!(!workspace.join("tree").exists());
    assert_eq!(
        std::fs::read(dir.join("outside/secret")).expect("read"),
        b"never read"
    );
    assert_eq!(
        s.ask(
            FileOp::Remove { recursive: true },
            Root::Workspace,
            &["tree"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Removed(false))]
    );
    assert_eq!(
        s.ask(
            FileOp::Remove { recursive: true },
            Root::Workspace,
            &["no", "parent"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Removed(false))]
    );
    let why = refused(&s.ask(FileOp::Remove { recursive: true }, Root::Workspace, &[], 0));
    assert!(why.contains("never removed"), "{why}");
    // mkdir: recursive makes parents and accepts an existing directory; plain does neither.
    assert_eq!(
        s.ask(
            FileOp::Mkdir { recursive: true },
            Root::Home,
            &["a", "b", "c"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Done)]
    );
    assert_eq!(
        s.ask(
            FileOp::Mkdir { recursive: true },
            Root::Home,
            &["a", "b", "c"],
            0
        ),
        vec![Message::FileDone(FileAnswer::Done)]
    );
    match s
        .ask(
            FileOp::Mkdir { recursive: false },
            Root::Home,
            &["a", "b", "c"],
            0,
        )
        .as_slice()
    {
        [Message::FileFailed { errno: 17, .. }] => {}
        other => panic!("EEXIST, not {other:?}"),
    }
    match s
        .ask(
            FileOp::Mkdir { recursive: false },
            Root::Home,
            &["x", "y"],
            0,
        )
        .as_slice()
    {
        [Message::FileFailed { errno: 2, .. }] => {}
        other => panic!("ENOENT, not {other:?}"),
    }
    assert!(dir.join("home/a/b/c").is_dir());
    std::fs::remove_dir_all(&dir).ok();
}
