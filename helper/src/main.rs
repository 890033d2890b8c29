//! The export helper: the entrypoint of a sandbox's workspace holder container, run for exports.
//! For exact files it reads workspace-relative paths from stdin, each ended by a NUL byte, and
//! writes one tar stream to stdout, one answer per path in the order asked:
//! - a regular file: a ustar entry named by its path (after a PAX record when the name or size
//!   does not fit the header), mode 0644 or 0755, the size its descriptor reports, then exactly
//!   that many bytes (a file that shrinks meanwhile ends the stream short, which the host reads
//!   as a truncated archive; bytes past the size are not read);
//! - anything else at that path (a directory, a link at any component, a special file): a
//!   directory entry of that name, which the host reports as not a regular file;
//! - nothing: no entry, which the host reports as a missing path.
//!
//!
//! A request of `/tree` (never a workspace-relative path) followed by one workspace-relative
//! path (empty for the workspace itself) asks for that whole tree instead, named as the engine's
//! archive endpoint names it (`workspace/…` or the root's last component): a directory entry for
//! every directory, every regular file with its bytes (a second name of a file already written
//! as a hard link entry), a symbolic link, device or FIFO as its own entry (which the host
//! refuses, naming it); sockets are left out. A root that does not exist without following a
//! link (a parent component that is a link or no directory) writes nothing at all.
//!
//! Every component is opened relative to its parent with `O_NOFOLLOW`, starting from the
//! workspace root, so nothing outside the workspace and nothing outside the selection is ever
//! opened. Exit status 0 after the end-of-archive blocks; otherwise the stream ends short and
//! stderr says why (2: opening, reading or writing failed, 4: a request that is not a
//! workspace-relative path).

use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufWriter, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::ExitCode;

const ROOT: &str = "/sandbox/workspace";
const BLOCK: usize = 512;
/// The largest size the ustar size field holds (eleven octal digits).
const USTAR_SIZE_MAX: u64 = 0o77_777_777_777;
/// The request that asks for a tree.
const TREE_REQUEST: &[u8] = b"/tree";
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

enum Failure {
    Io(String),
    Refused(String),
}

/// `errno` `code` of an operation on `name`.
fn os_failure(name: &[u8], code: i32) -> Failure {
    Failure::Io(format!(
        "{}: {}",
        String::from_utf8_lossy(name),
        std::io::Error::from_raw_os_error(code)
    ))
}

fn last_error(what: &str) -> Failure {
    Failure::Io(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Opens `name` relative to `directory` without following a link; `Ok(None)` when absent or
/// when a component is a link or not a directory (the caller answers for the whole path).
fn open_at(directory: &OwnedFd, name: &[u8], flags: i32) -> Result<Result<OwnedFd, i32>, Failure> {
    let name =
        CString::new(name).map_err(|_| Failure::Refused("a path holds a NUL byte".into()))?;
    use std::os::fd::AsRawFd;
    // SAFETY: `directory` is an open descriptor owned by the caller for the whole call, and
    // `name` is a NUL-terminated string that outlives it.
    let fd = unsafe {
        libc::openat(
            directory.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Ok(Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(0)));
    }
    // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
    Ok(Ok(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Where a workspace-relative path's parent components lead, opened one by one from the root
/// without following a link.
enum Parent<'a> {
    /// The parent directory (`None`: the root itself) and the last component.
    Found(Option<OwnedFd>, &'a [u8]),
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
    for part in &parts[..parts.len() - 1] {
        let directory = parent.as_ref().unwrap_or(root);
        match open_at(directory, part, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok(fd) => parent = Some(fd),
            Err(code @ (libc::ENOENT | libc::ELOOP | libc::ENOTDIR)) => {
                return Ok(Parent::Stopped(code))
            }
            Err(code) => return Err(os_failure(path, code)),
        }
    }
    Ok(Parent::Found(
        parent,
        parts.last().copied().unwrap_or_default(),
    ))
}

fn answer(root: &OwnedFd, path: &[u8]) -> Result<Answer, Failure> {
    let (parent, last) = match parent_of(root, path)? {
        Parent::Found(parent, last) => (parent, last),
        Parent::Stopped(libc::ENOENT) => return Ok(Answer::Missing),
        Parent::Stopped(_) => return Ok(Answer::NotRegular),
    };
    let directory = parent.as_ref().unwrap_or(root);
    // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (and is then refused).
    let fd = match open_at(directory, last, libc::O_RDONLY | libc::O_NONBLOCK)? {
        Ok(fd) => fd,
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

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

fn header(name: &[u8], size: u64, mode: u64, typeflag: u8, link: &[u8]) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    let shown = &name[..name.len().min(100)];
    block[..shown.len()].copy_from_slice(shown);
    let link = &link[..link.len().min(100)];
    block[157..157 + link.len()].copy_from_slice(link);
    octal(&mut block[100..108], mode);
    octal(&mut block[108..116], 0);
    octal(&mut block[116..124], 0);
    octal(&mut block[124..136], size.min(USTAR_SIZE_MAX));
    octal(&mut block[136..148], 0);
    block[156] = typeflag;
    block[257..263].copy_from_slice(b"ustar\0");
    block[263..265].copy_from_slice(b"00");
    block[148..156].fill(b' ');
    let sum: u64 = block.iter().map(|&b| u64::from(b)).sum();
    octal(&mut block[148..155], sum);
    block[155] = b' ';
    block
}

/// One PAX record: its length counts itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut length = body + 1;
    while format!("{length}").len() + body != length {
        length += 1;
    }
    let mut record = format!("{length} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

fn padding(size: u64) -> usize {
    (BLOCK - (size % BLOCK as u64) as usize) % BLOCK
}

fn entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u64,
    typeflag: u8,
) -> std::io::Result<()> {
    linked_entry(out, name, size, mode, typeflag, b"")
}

fn linked_entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u64,
    typeflag: u8,
    link: &[u8],
) -> std::io::Result<()> {
    let mut pax = Vec::new();
    if name.len() > 100 {
        pax.extend(pax_record("path", name));
    }
    if link.len() > 100 {
        pax.extend(pax_record("linkpath", link));
    }
    if size > USTAR_SIZE_MAX {
        pax.extend(pax_record("size", size.to_string().as_bytes()));
    }
    if !pax.is_empty() {
        out.write_all(&header(
            b"././@PaxHeader",
            pax.len() as u64,
            0o644,
            b'x',
            b"",
        ))?;
        out.write_all(&pax)?;
        out.write_all(&[0u8; BLOCK][..padding(pax.len() as u64)])?;
    }
    out.write_all(&header(name, size, mode, typeflag, link))
}

/// Copies exactly `size` bytes of `descriptor` (named `path` in errors), then the padding.
fn copy_body(
    out: &mut impl Write,
    descriptor: &mut File,
    size: u64,
    path: &[u8],
    buffer: &mut [u8],
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    let mut left = size;
    while left > 0 {
        let want = buffer
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = descriptor
            .read(&mut buffer[..want])
            .map_err(|e| Failure::Io(format!("reading {}: {e}", String::from_utf8_lossy(path))))?;
        if n == 0 {
            return Err(Failure::Io(format!(
                "{} shrank while it was read",
                String::from_utf8_lossy(path)
            )));
        }
        out.write_all(&buffer[..n]).map_err(io)?;
        left -= n as u64;
    }
    out.write_all(&[0u8; BLOCK][..padding(size)]).map_err(io)
}

/// What `fstatat` without following says of `name` in `directory`; `Err(errno)` when it fails.
fn stat_at(directory: &OwnedFd, name: &[u8]) -> Result<Result<libc::stat, i32>, Failure> {
    let name =
        CString::new(name).map_err(|_| Failure::Refused("a path holds a NUL byte".into()))?;
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `directory` is open for the whole call, `name` is NUL-terminated and outlives it,
    // and `stat` is a valid place for the kernel to write.
    let done = unsafe {
        libc::fstatat(
            directory.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if done < 0 {
        return Ok(Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(0)));
    }
    Ok(Ok(stat))
}

/// The names in `directory` (not `.` and `..`), sorted, as the engine walks them.
fn names_in(directory: &OwnedFd, path: &[u8]) -> Result<Vec<Vec<u8>>, Failure> {
    use std::os::fd::AsRawFd;
    // SAFETY: duplicating a descriptor this function borrows; the duplicate is owned below.
    let duplicate = unsafe { libc::fcntl(directory.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if duplicate < 0 {
        return Err(last_error(&String::from_utf8_lossy(path)));
    }
    // SAFETY: `duplicate` is an open directory descriptor nothing else owns; `fdopendir` takes it
    // over, and `closedir` below releases both.
    let stream = unsafe { libc::fdopendir(duplicate) };
    if stream.is_null() {
        let failure = last_error(&String::from_utf8_lossy(path));
        // SAFETY: `fdopendir` failed, so the duplicate is still ours to close.
        unsafe { libc::close(duplicate) };
        return Err(failure);
    }
    let mut names = Vec::new();
    loop {
        // `readdir` says "end" and "failed" both with NULL: only errno tells them apart.
        // SAFETY: `__errno_location` gives this thread's errno, always valid to write.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `stream` is a valid directory stream until `closedir`.
        let next = unsafe { libc::readdir(stream) };
        if next.is_null() {
            let code = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if code != 0 {
                // SAFETY: `stream` came from `fdopendir` and is closed exactly once.
                unsafe { libc::closedir(stream) };
                return Err(Failure::Io(format!(
                    "listing {}: {}",
                    String::from_utf8_lossy(path),
                    std::io::Error::from_raw_os_error(code)
                )));
            }
            break;
        }
        // SAFETY: `readdir` returned a valid entry whose `d_name` is NUL-terminated and stays
        // valid until the next `readdir` on this stream; it is copied at once.
        let name = unsafe { std::ffi::CStr::from_ptr((*next).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    // SAFETY: `stream` came from `fdopendir` and is closed exactly once.
    unsafe { libc::closedir(stream) };
    names.sort();
    Ok(names)
}

/// Hard links already written in this tree: (device, inode) → the first name.
type SeenLinks = std::collections::HashMap<(u64, u64), Vec<u8>>;

/// One non-directory entry of the tree, named `name`, found as `name_in_parent` in `parent`.
fn tree_leaf(
    out: &mut impl Write,
    parent: &OwnedFd,
    name_in_parent: &[u8],
    name: &[u8],
    stat: &libc::stat,
    seen: &mut SeenLinks,
    buffer: &mut [u8],
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    let mode = u64::from(stat.st_mode & 0o7777);
    match stat.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let key = (stat.st_dev, stat.st_ino);
            if stat.st_nlink > 1 {
                if let Some(first) = seen.get(&key) {
                    return linked_entry(out, name, 0, mode, b'1', first).map_err(io);
                }
                seen.insert(key, name.to_vec());
            }
            // O_NONBLOCK: a file swapped for a FIFO meanwhile opens at once (and is refused).
            let fd = match open_at(parent, name_in_parent, libc::O_RDONLY | libc::O_NONBLOCK)? {
                Ok(fd) => fd,
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
            let mode = u64::from(meta.permissions().mode() & 0o7777);
            linked_entry(out, name, meta.len(), mode, b'0', b"").map_err(io)?;
            copy_body(out, &mut descriptor, meta.len(), name, buffer)
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

/// Where a symbolic link points, as written (it is never followed).
fn read_link_at(directory: &OwnedFd, name: &[u8]) -> Option<Vec<u8>> {
    let name = CString::new(name).ok()?;
    use std::os::fd::AsRawFd;
    let mut target = vec![0u8; 4096];
    // SAFETY: `directory` is open for the call, `name` is NUL-terminated, and `target` has room
    // for the length given.
    let n = unsafe {
        libc::readlinkat(
            directory.as_raw_fd(),
            name.as_ptr(),
            target.as_mut_ptr().cast(),
            target.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    target.truncate(n);
    Some(target)
}

/// Writes `directory` (already written as `name/`) and everything below it.
fn tree_walk(
    out: &mut impl Write,
    directory: &OwnedFd,
    name: &[u8],
    depth: usize,
    seen: &mut SeenLinks,
    buffer: &mut [u8],
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
            let fd = match open_at(directory, &child, libc::O_RDONLY | libc::O_DIRECTORY)? {
                Ok(fd) => fd,
                Err(libc::ENOENT) => continue,
                Err(code) => return Err(os_failure(&child_name, code)),
            };
            let mut shown = child_name.clone();
            shown.push(b'/');
            entry(out, &shown, 0, u64::from(stat.st_mode & 0o7777), b'5').map_err(io)?;
            tree_walk(out, &fd, &child_name, depth + 1, seen, buffer)?;
        } else {
            tree_leaf(out, directory, &child, &child_name, &stat, seen, buffer)?;
        }
    }
    Ok(())
}

/// The archive of the tree at `relative` (empty: the workspace). Writes nothing when it is
/// missing.
fn tree(
    out: &mut impl Write,
    root: &OwnedFd,
    relative: &[u8],
    buffer: &mut [u8],
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("writing the archive: {e}"));
    let mut seen = SeenLinks::new();
    if relative.is_empty() {
        // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        use std::os::fd::AsRawFd;
        // SAFETY: `root` is open for the call and `stat` is a valid place to write.
        if unsafe { libc::fstat(root.as_raw_fd(), &mut stat) } < 0 {
            return Err(last_error(ROOT));
        }
        entry(
            out,
            b"workspace/",
            0,
            u64::from(stat.st_mode & 0o7777),
            b'5',
        )
        .map_err(io)?;
        tree_walk(out, root, b"workspace", 0, &mut seen, buffer)?;
        return out.write_all(&[0u8; 2 * BLOCK]).map_err(io);
    }
    let (parent, last) = match parent_of(root, relative)? {
        Parent::Found(parent, last) => (parent, last),
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
        let fd = match open_at(parent, last, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok(fd) => fd,
            Err(libc::ENOENT) => return Ok(()),
            Err(code) => return Err(os_failure(relative, code)),
        };
        let mut shown = last.to_vec();
        shown.push(b'/');
        entry(out, &shown, 0, u64::from(stat.st_mode & 0o7777), b'5').map_err(io)?;
        tree_walk(out, &fd, last, 0, &mut seen, buffer)?;
    } else {
        tree_leaf(out, parent, last, last, &stat, &mut seen, buffer)?;
    }
    out.write_all(&[0u8; 2 * BLOCK]).map_err(io)
}

fn run() -> Result<(), Failure> {
    // stdout as a plain file: std's stdout flushes at every newline, which binary data is full of.
    // SAFETY: descriptor 1 is this process's stdout, open for its whole life; only this owns it.
    let stdout = unsafe { File::from_raw_fd(1) };
    let root = CString::new(ROOT).map_err(|_| Failure::Refused("root".into()))?;
    // SAFETY: `root` is a NUL-terminated string that outlives the call.
    let fd = unsafe {
        libc::open(
            root.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_error(ROOT));
    }
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    let root = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    let stdin = std::io::stdin();
    let mut requests = stdin.lock();
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
        if path == TREE_REQUEST {
            let mut relative = Vec::new();
            requests
                .read_until(0, &mut relative)
                .map_err(|e| Failure::Io(format!("reading the paths: {e}")))?;
            if relative.pop() != Some(0) {
                return Err(Failure::Refused(
                    "the tree's root is not NUL-terminated".into(),
                ));
            }
            tree(&mut out, &root, &relative, &mut buffer)?;
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
    out.write_all(&[0u8; 2 * BLOCK]).map_err(io)?;
    out.flush().map_err(io)
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Io(message)) => {
            eprintln!("native-sandbox export helper: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Refused(message)) => {
            eprintln!("native-sandbox export helper: {message}");
            ExitCode::from(4)
        }
    }
}
