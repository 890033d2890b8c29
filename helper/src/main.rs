//! The workspace helper: the entrypoint of a sandbox's workspace holder container, run for each
//! transfer through the holder. For exact files it reads workspace-relative paths from stdin,
//! each ended by a NUL byte, and writes one tar stream to stdout, one answer per path in the
//! order asked:
//! - a regular file: a ustar entry named by its path (after a PAX record when the name or size
//!   does not fit the header), mode 0644 or 0755, the size its descriptor reports, then exactly
//!   that many bytes (a file that shrinks meanwhile ends the stream short, which the host reads
//!   as a truncated archive; bytes past the size are not read);
//! - anything else at that path (a directory, a link at any component, a special file): a
//!   directory entry of that name, which the host reports as not a regular file;
//! - nothing: no entry, which the host reports as a missing path.
//!
//! A request of `/tree` (never a workspace-relative path) followed by one workspace-relative
//! path (empty for the workspace itself) asks for that whole tree instead, named as the engine's
//! archive endpoint names it (`workspace/…` or the root's last component): a directory entry for
//! every directory, every regular file with its bytes (a second name of a file already written
//! as a hard link entry), a symbolic link, device or FIFO as its own entry (which the host
//! refuses, naming it); sockets are left out. A root that does not exist without following a
//! link (a parent component that is a link or no directory) writes nothing at all. A regular
//! file of `DEFER_MIN` bytes or more is deferred: a marker entry (typeflag `N`, its body the
//! file's workspace-relative path) and the file's header, without its body, which the host
//! reads through the engine's archive endpoint (`src/docker/sandbox/deferred_bodies.rs`).
//! `/tree-inline` asks for the same archive with every body inline, none deferred, and every
//! name of a file written whole (no hard link entry): what a workspace archive beside running
//! commands asks for, since the engine would reach a deferred file by its path again, after a
//! command may have swapped a parent for a link, and the archive carries regular files only.
//!
//! A request of `/import` is followed by an import archive, which the helper extracts into the
//! workspace (`import.rs`); on stdout it only answers the archive's markers, which say that a
//! file's body comes through the engine's archive endpoint instead, and at the very end says
//! that the whole archive is extracted.
//!
//! Every component is opened relative to its parent with `O_NOFOLLOW`, starting from the
//! workspace root, so nothing outside the workspace and nothing outside the selection is ever
//! opened. Exit status 0 after the end-of-archive blocks, the last bytes an archive's answer
//! writes (the host's relay ends the export there); otherwise the stream ends short and
//! stderr says why (2: opening, reading or writing failed, 4: a request that is not a
//! workspace-relative path, or an import archive the helper does not extract, 3: told to stop
//! by SIGTERM, every mode it had widened put back: `restore.rs`).
//!
//! Three other modes, chosen by the first argument: `--gateway …` serves as an allowlist
//! sandbox's egress gateway until killed (`gateway/`), `--egress-report` prints that gateway's
//! counts, and `--stop-transfers <grace-ms>` stops the transfer runs in such a holder (both run by the
//! controller as execs in the holder, where transfers also run by exec:
//! `stop_transfers.rs`). `--supervise` runs commands for the host over one framed connection on
//! its stdin and stdout (`supervise/`, the frames of `session-frames`). `--exec-as` becomes the
//! sandbox user entirely, then runs the reserved process in its place (`exec_as.rs`). `--hold`
//! only waits, as a Kubernetes sandbox's workspace container, for the pod's end (`hold.rs`). A failing
//! mode exits 4 with its reason on stderr.

mod exec_as;
mod failure;
mod fs;
mod gateway;
mod hold;
mod identity;
mod import;
mod interface_addresses;
mod restore;
mod splice;
mod stop_transfers;
mod supervise;

use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::ExitCode;

use failure::Failure;
use fs::{last_error, names_in, open_as_owner, os_failure, read_link_at, stat_at, Widened};
use splice::{Sink, Spliced, SPLICE_MIN};
use tar_framing::padding;
use tar_framing::write::{marker, pax_header, Meta, END, ZEROS};

const ROOT: &str = "/sandbox/workspace";
/// The request that asks for a tree.
const TREE_REQUEST: &[u8] = b"/tree";
/// The request that asks for a tree with every body inline (none deferred).
const TREE_INLINE_REQUEST: &[u8] = b"/tree-inline";
/// The request that asks the helper to extract the import archive that follows it.
const IMPORT_REQUEST: &[u8] = b"/import";
/// How much of the import archive is read at once.
const IMPORT_READ_BYTES: usize = 256 * 1_024;
/// Directories below the tree's root, at most (the host refuses deeper paths anyway).
const TREE_DEPTH_MAX: usize = 64;

enum Answer {
    File {
        descriptor: File,
        size: u64,
        executable: bool,
    },
    NotRegular,
    Missing,
}

/// Where a workspace-relative path's parent components lead, opened one by one from the root
/// without following a link.
enum Parent<'a> {
    /// The parent directory (`None`: the root itself), the last component, and the
    /// directories on the way whose owner bits were widened to pass (`restore_all` when done).
    Found(Option<OwnedFd>, &'a [u8], Vec<Widened>),
    /// A parent component could not be opened as a directory: its errno.
    Stopped(i32),
}

fn parent_of<'a>(root: &OwnedFd, path: &'a [u8]) -> Result<Parent<'a>, Failure> {
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == b"." || *p == b"..")
    {
        return Err(Failure::Refused(format!(
            "{} is not a workspace-relative path",
            String::from_utf8_lossy(path)
        )));
    }
    let mut parent: Option<OwnedFd> = None;
    let mut widened = Vec::new();
    for part in &parts[..parts.len() - 1] {
        let directory = parent.as_ref().unwrap_or(root);
        match open_as_owner(directory, part, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok((fd, guard)) => {
                parent = Some(fd);
                widened.extend(guard);
            }
            Err(code @ (libc::ENOENT | libc::ELOOP | libc::ENOTDIR)) => {
                return Ok(Parent::Stopped(code))
            }
            Err(code) => return Err(os_failure(path, code)),
        }
    }
    Ok(Parent::Found(
        parent,
        parts.last().copied().unwrap_or_default(),
        widened,
    ))
}

/// Puts back the modes of `widened`, innermost first.
fn restore_all(widened: Vec<Widened>) -> Result<(), Failure> {
    for guard in widened.into_iter().rev() {
        guard.restore()?;
    }
    Ok(())
}

fn answer(root: &OwnedFd, path: &[u8]) -> Result<Answer, Failure> {
    let (parent, last, mut widened) = match parent_of(root, path)? {
        Parent::Found(parent, last, widened) => (parent, last, widened),
        Parent::Stopped(libc::ENOENT) => return Ok(Answer::Missing),
        Parent::Stopped(_) => return Ok(Answer::NotRegular),
    };
    let directory = parent.as_ref().unwrap_or(root);
    // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (and is then refused).
    let fd = match open_as_owner(directory, last, libc::O_RDONLY | libc::O_NONBLOCK)? {
        Ok((fd, guard)) => {
            // Open: every mode widened on the way goes back now.
            widened.extend(guard);
            restore_all(widened)?;
            fd
        }
        Err(libc::ENOENT) => return Ok(Answer::Missing),
        Err(libc::ELOOP | libc::ENOTDIR | libc::ENXIO) => return Ok(Answer::NotRegular),
        Err(code) => return Err(os_failure(path, code)),
    };
    let descriptor = File::from(fd);
    let meta = descriptor
        .metadata()
        .map_err(|e| Failure::Io(format!("{}: {e}", String::from_utf8_lossy(path))))?;
    if !meta.file_type().is_file() {
        return Ok(Answer::NotRegular);
    }
    use std::os::unix::fs::PermissionsExt;
    Ok(Answer::File {
        descriptor,
        size: meta.len(),
        executable: meta.permissions().mode() & 0o100 != 0,
    })
}

/// Copies exactly `size` bytes of `descriptor` (named `path` in errors), then the padding. A
/// large body is spliced into the archive when it can be.
fn copy_body(
    out: &mut impl Sink,
    descriptor: &mut File,
    size: u64,
    path: &[u8],
    buffer: &mut [u8],
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    let shrank = || {
        Failure::Io(format!(
            "{} shrank while it was read",
            String::from_utf8_lossy(path)
        ))
    };
    let mut left = size;
    let mut splicing = size >= SPLICE_MIN;
    while left > 0 {
        if splicing {
            match out.splice_from(descriptor, left).map_err(io)? {
                Spliced::Moved(0) => return Err(shrank()),
                Spliced::Moved(n) => {
                    left -= n.min(left);
                    continue;
                }
                Spliced::Buffered | Spliced::Unsupported => splicing = false,
            }
        }
        let want = buffer
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = descriptor
            .read(&mut buffer[..want])
            .map_err(|e| Failure::Io(format!("reading {}: {e}", String::from_utf8_lossy(path))))?;
        if n == 0 {
            return Err(shrank());
        }
        out.write_all(&buffer[..n]).map_err(io)?;
        left -= n as u64;
    }
    out.write_all(&ZEROS[..padding(size)]).map_err(io)
}

/// One entry's header (owner 0:0 and time 0: the host takes neither from them), after a PAX
/// record set when its name, its link target or its size does not fit the header.
fn linked_entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u32,
    typeflag: u8,
    link: &[u8],
) -> std::io::Result<()> {
    let meta = Meta {
        typeflag,
        size,
        mode,
        ..Meta::default()
    };
    pax_header(out, name, link, &meta)
}

/// `linked_entry` without a link target.
fn entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u32,
    typeflag: u8,
) -> std::io::Result<()> {
    linked_entry(out, name, size, mode, typeflag, b"")
}

/// Hard links already written in this tree: (device, inode) → the first name.
type SeenLinks = std::collections::HashMap<(u64, u64), Vec<u8>>;

/// Regular files of a tree from this size on are deferred: the archive carries a marker entry
/// (typeflag `N`, its body the file's workspace-relative path) and then the file's header with
/// no body; the host reads that body through the engine's archive endpoint instead, which moves
/// large bodies faster than this helper's stdout (`export_helper.rs`). Exports run with compute
/// stopped, so the file the walk found (through no link) is the file the engine reads.
const DEFER_MIN: u64 = 16 * 1_024 * 1_024;
/// The longest path deferred (the host's workspace paths are at most this long).
const DEFER_PATH_MAX: usize = 1_024;

/// One tree walk's state: the hard links seen, the copy buffer, and how an entry's name maps
/// back to its workspace-relative path (`strip` removed from its front, `prefix` put there).
struct Walk<'a> {
    seen: SeenLinks,
    /// `/tree`: large bodies deferred to the engine and a file's later names written as hard
    /// link entries; `/tree-inline` (false): every body inline, every name whole.
    defer: bool,
    buffer: &'a mut [u8],
    strip: Vec<u8>,
    prefix: Vec<u8>,
}

impl Walk<'_> {
    fn workspace_path(&self, name: &[u8]) -> Vec<u8> {
        let mut path = self.prefix.clone();
        path.extend_from_slice(name.strip_prefix(&self.strip[..]).unwrap_or(name));
        path
    }
}

/// One non-directory entry of the tree, named `name`, found as `name_in_parent` in `parent`.
fn tree_leaf(
    out: &mut impl Sink,
    parent: &OwnedFd,
    name_in_parent: &[u8],
    name: &[u8],
    stat: &libc::stat,
    walk: &mut Walk,
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    let mode = stat.st_mode & 0o7777;
    match stat.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let key = (stat.st_dev, stat.st_ino);
            if walk.defer && stat.st_nlink > 1 {
                if let Some(first) = walk.seen.get(&key) {
                    return linked_entry(out, name, 0, mode, b'1', first).map_err(io);
                }
                walk.seen.insert(key, name.to_vec());
            }
            // O_NONBLOCK: a file swapped for a FIFO meanwhile opens at once (and is refused).
            let fd = match open_as_owner(parent, name_in_parent, libc::O_RDONLY | libc::O_NONBLOCK)?
            {
                Ok((fd, widened)) => {
                    // Open: a mode widened to open it goes back at once.
                    widened.map(Widened::restore).transpose()?;
                    fd
                }
                Err(code) => return Err(os_failure(name, code)),
            };
            let mut descriptor = File::from(fd);
            let meta = descriptor
                .metadata()
                .map_err(|e| Failure::Io(format!("{}: {e}", String::from_utf8_lossy(name))))?;
            if !meta.file_type().is_file() {
                return Err(Failure::Io(format!(
                    "{} changed while it was read",
                    String::from_utf8_lossy(name)
                )));
            }
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o7777;
            let path = walk.workspace_path(name);
            // Only a path the host takes as a workspace path is deferred; any other goes inline
            // (and the host refuses it by name as before).
            if walk.defer
                && meta.len() >= DEFER_MIN
                && path.len() <= DEFER_PATH_MAX
                && std::str::from_utf8(&path).is_ok()
            {
                out.write_all(marker(path.len() as u64).as_bytes())
                    .map_err(io)?;
                out.write_all(&path).map_err(io)?;
                out.write_all(&ZEROS[..padding(path.len() as u64)])
                    .map_err(io)?;
                return linked_entry(out, name, meta.len(), mode, b'0', b"").map_err(io);
            }
            linked_entry(out, name, meta.len(), mode, b'0', b"").map_err(io)?;
            copy_body(out, &mut descriptor, meta.len(), name, walk.buffer)
        }
        libc::S_IFLNK => {
            let target = read_link_at(parent, name_in_parent).unwrap_or_default();
            linked_entry(out, name, 0, 0o777, b'2', &target).map_err(io)
        }
        libc::S_IFCHR => entry(out, name, 0, mode, b'3').map_err(io),
        libc::S_IFBLK => entry(out, name, 0, mode, b'4').map_err(io),
        libc::S_IFIFO => entry(out, name, 0, mode, b'6').map_err(io),
        // Sockets are left out, as the engine leaves them out.
        _ => Ok(()),
    }
}

/// Writes `directory` (already written as `name/`) and everything below it.
fn tree_walk(
    out: &mut impl Sink,
    directory: &OwnedFd,
    name: &[u8],
    depth: usize,
    walk: &mut Walk,
) -> Result<(), Failure> {
    if depth > TREE_DEPTH_MAX {
        return Err(Failure::Io(format!(
            "{} is more than {TREE_DEPTH_MAX} directories deep",
            String::from_utf8_lossy(name)
        )));
    }
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    for child in names_in(directory, name)? {
        let mut child_name = name.to_vec();
        child_name.push(b'/');
        child_name.extend_from_slice(&child);
        let stat = match stat_at(directory, &child)? {
            Ok(stat) => stat,
            // Removed since the listing: it is simply not there any more.
            Err(libc::ENOENT) => continue,
            Err(code) => return Err(os_failure(&child_name, code)),
        };
        if stat.st_mode & libc::S_IFMT == libc::S_IFDIR {
            let (fd, widened) =
                match open_as_owner(directory, &child, libc::O_RDONLY | libc::O_DIRECTORY)? {
                    Ok(opened) => opened,
                    Err(libc::ENOENT) => continue,
                    Err(code) => return Err(os_failure(&child_name, code)),
                };
            let mut shown = child_name.clone();
            shown.push(b'/');
            entry(out, &shown, 0, stat.st_mode & 0o7777, b'5').map_err(io)?;
            tree_walk(out, &fd, &child_name, depth + 1, walk)?;
            // Walked: a mode widened to look inside goes back now.
            widened.map(Widened::restore).transpose()?;
        } else {
            tree_leaf(out, directory, &child, &child_name, &stat, walk)?;
        }
    }
    Ok(())
}

/// The archive of the tree at `relative` (empty: the workspace). Writes nothing when it is
/// missing.
fn tree(
    out: &mut impl Sink,
    root: &OwnedFd,
    relative: &[u8],
    buffer: &mut [u8],
    defer: bool,
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    // Entries are named `workspace/…` for the workspace, and from the root's last component
    // for a subtree (`c/…` for `a/b/c`), as the engine's endpoint names them.
    let (strip, prefix) = match relative.iter().rposition(|&b| b == b'/') {
        _ if relative.is_empty() => (b"workspace/".to_vec(), Vec::new()),
        Some(at) => (Vec::new(), relative[..=at].to_vec()),
        None => (Vec::new(), Vec::new()),
    };
    let mut walk = Walk {
        seen: SeenLinks::new(),
        defer,
        buffer,
        strip,
        prefix,
    };
    if relative.is_empty() {
        // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        use std::os::fd::AsRawFd;
        // SAFETY: `root` is open for the call and `stat` is a valid place to write.
        if unsafe { libc::fstat(root.as_raw_fd(), &mut stat) } < 0 {
            return Err(last_error(ROOT));
        }
        entry(out, b"workspace/", 0, stat.st_mode & 0o7777, b'5').map_err(io)?;
        tree_walk(out, root, b"workspace", 0, &mut walk)?;
        return out.write_all(&END).map_err(io);
    }
    let (parent, last, mut widened) = match parent_of(root, relative)? {
        Parent::Found(parent, last, widened) => (parent, last, widened),
        // Not there without following a link: a missing tree.
        Parent::Stopped(_) => return Ok(()),
    };
    let parent = parent.as_ref().unwrap_or(root);
    let stat = match stat_at(parent, last)? {
        Ok(stat) => stat,
        Err(libc::ENOENT | libc::ENOTDIR) => return Ok(()),
        Err(code) => return Err(os_failure(relative, code)),
    };
    if stat.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let fd = match open_as_owner(parent, last, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok((fd, guard)) => {
                widened.extend(guard);
                fd
            }
            Err(libc::ENOENT) => return Ok(()),
            Err(code) => return Err(os_failure(relative, code)),
        };
        let mut shown = last.to_vec();
        shown.push(b'/');
        entry(out, &shown, 0, stat.st_mode & 0o7777, b'5').map_err(io)?;
        tree_walk(out, &fd, last, 0, &mut walk)?;
    } else {
        tree_leaf(out, parent, last, last, &stat, &mut walk)?;
    }
    restore_all(widened)?;
    out.write_all(&END).map_err(io)
}

/// The pipe size asked for stdin and stdout (the kernel's default limit for an unprivileged
/// process): fewer, larger hand-overs with the engine's side of the pipes.
const PIPE_BYTES: i32 = 1_024 * 1_024;

/// Asks for larger pipe buffers on stdin and stdout; a descriptor that is no pipe, or a kernel
/// that refuses, keeps its own.
fn widen_pipes() {
    for fd in [0, 1] {
        // SAFETY: F_SETPIPE_SZ only resizes the buffer of an open pipe; on anything else it fails
        // with an error that is ignored here.
        unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_BYTES) };
    }
}

/// The workspace root, opened from its parent without following a link. A root whose owner took
/// away its own read or search bits is widened for the run (the guard puts its mode back).
fn open_root() -> Result<(OwnedFd, Option<Widened>), Failure> {
    let (parent, name) = ROOT.rsplit_once('/').unwrap_or(("/", ROOT));
    let parent = CString::new(parent).map_err(|_| Failure::Refused("root".into()))?;
    // SAFETY: `parent` is a NUL-terminated string that outlives the call.
    let fd = unsafe {
        libc::open(
            parent.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_error(ROOT));
    }
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    let parent = unsafe { OwnedFd::from_raw_fd(fd) };
    match open_as_owner(&parent, name.as_bytes(), libc::O_RDONLY | libc::O_DIRECTORY)? {
        Ok(opened) => Ok(opened),
        Err(code) => Err(os_failure(ROOT.as_bytes(), code)),
    }
}

fn run() -> Result<(), Failure> {
    restore::install();
    widen_pipes();
    // stdout as a plain file: std's stdout flushes at every newline, which binary data is full of.
    // SAFETY: descriptor 1 is this process's stdout, open for its whole life; only this owns it.
    let stdout = unsafe { File::from_raw_fd(1) };
    let (root, _root_widened) = open_root()?;
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    // stdin as a plain file behind one buffer: an import splices past it when it is empty.
    // SAFETY: descriptor 0 is this process's stdin, open for its whole life; only this owns it.
    let stdin = unsafe { File::from_raw_fd(0) };
    let mut requests = BufReader::with_capacity(IMPORT_READ_BYTES, stdin);
    let mut path = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    loop {
        path.clear();
        let read = requests
            .read_until(0, &mut path)
            .map_err(|e| Failure::Io(format!("reading the paths: {e}")))?;
        if read == 0 {
            break;
        }
        if path.last() != Some(&0) {
            return Err(Failure::Refused(
                "the last path is not NUL-terminated".into(),
            ));
        }
        path.pop();
        if path == IMPORT_REQUEST {
            return import::import(&mut requests, &root, &mut out);
        }
        if path == TREE_REQUEST || path == TREE_INLINE_REQUEST {
            let mut relative = Vec::new();
            requests
                .read_until(0, &mut relative)
                .map_err(|e| Failure::Io(format!("reading the paths: {e}")))?;
            if relative.pop() != Some(0) {
                return Err(Failure::Refused(
                    "the tree's root is not NUL-terminated".into(),
                ));
            }
            tree(
                &mut out,
                &root,
                &relative,
                &mut buffer,
                path == TREE_REQUEST,
            )?;
            return out.flush().map_err(io);
        }
        match answer(&root, &path)? {
            Answer::Missing => {}
            Answer::NotRegular => entry(&mut out, &path, 0, 0o755, b'5').map_err(io)?,
            Answer::File {
                mut descriptor,
                size,
                executable,
            } => {
                entry(
                    &mut out,
                    &path,
                    size,
                    if executable { 0o755 } else { 0o644 },
                    b'0',
                )
                .map_err(io)?;
                copy_body(&mut out, &mut descriptor, size, &path, &mut buffer)?;
            }
        }
    }
    out.write_all(&END).map_err(io)?;
    out.flush().map_err(io)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let other_mode = match args.first().map(String::as_str) {
        Some("--gateway") => Some(("gateway", gateway::run(&args[1..]))),
        Some("--egress-report") => Some(("gateway", gateway::print_report())),
        Some("--stop-transfers") => Some(("workspace helper", stop_transfers::run(&args[1..]))),
        Some("--supervise") => Some(("supervisor", supervise::run(&args[1..]))),
        Some("--exec-as") => Some(("process launcher", exec_as::run(&args[1..]))),
        Some("--hold") => Some(("workspace holder", hold::run(&args[1..]))),
        Some(other) => Some(("workspace helper", Err(format!("unknown mode {other}")))),
        None => None,
    };
    if let Some((name, outcome)) = other_mode {
        return match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("native-sandbox {name}: {message}");
                ExitCode::from(4)
            }
        };
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Io(message)) => {
            eprintln!("native-sandbox workspace helper: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Refused(message)) => {
            eprintln!("native-sandbox workspace helper: {message}");
            ExitCode::from(4)
        }
    }
}
