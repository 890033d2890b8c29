//! The export helper: the entrypoint of a sandbox's workspace holder container, run for exports
//! of exact files. It reads workspace-relative paths from stdin, each ended by a NUL byte, and
//! writes one tar stream to stdout, one answer per path in the order asked:
//! - a regular file: a ustar entry named by its path (after a PAX record when the name or size
//!   does not fit the header), mode 0644 or 0755, the size its descriptor reports, then exactly
//!   that many bytes (a file that shrinks meanwhile ends the stream short, which the host reads
//!   as a truncated archive; bytes past the size are not read);
//! - anything else at that path (a directory, a link at any component, a special file): a
//!   directory entry of that name, which the host reports as not a regular file;
//! - nothing: no entry, which the host reports as a missing path.
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

fn answer(root: &OwnedFd, path: &[u8]) -> Result<Answer, Failure> {
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
    let mut parents: Vec<OwnedFd> = Vec::new();
    for part in &parts[..parts.len() - 1] {
        let directory = parents.last().unwrap_or(root);
        match open_at(directory, part, libc::O_RDONLY | libc::O_DIRECTORY)? {
            Ok(fd) => parents.push(fd),
            Err(libc::ENOENT) => return Ok(Answer::Missing),
            Err(libc::ELOOP | libc::ENOTDIR) => return Ok(Answer::NotRegular),
            Err(code) => {
                return Err(Failure::Io(format!(
                    "{}: {}",
                    String::from_utf8_lossy(path),
                    std::io::Error::from_raw_os_error(code)
                )))
            }
        }
    }
    let directory = parents.last().unwrap_or(root);
    let last = parts.last().copied().unwrap_or_default();
    // O_NONBLOCK: a FIFO opens at once instead of waiting for a writer (and is then refused).
    let fd = match open_at(directory, last, libc::O_RDONLY | libc::O_NONBLOCK)? {
        Ok(fd) => fd,
        Err(libc::ENOENT) => return Ok(Answer::Missing),
        Err(libc::ELOOP | libc::ENOTDIR | libc::ENXIO) => return Ok(Answer::NotRegular),
        Err(code) => {
            return Err(Failure::Io(format!(
                "{}: {}",
                String::from_utf8_lossy(path),
                std::io::Error::from_raw_os_error(code)
            )))
        }
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

fn header(name: &[u8], size: u64, mode: u64, typeflag: u8) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    let shown = &name[..name.len().min(100)];
    block[..shown.len()].copy_from_slice(shown);
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
    let mut pax = Vec::new();
    if name.len() > 100 {
        pax.extend(pax_record("path", name));
    }
    if size > USTAR_SIZE_MAX {
        pax.extend(pax_record("size", size.to_string().as_bytes()));
    }
    if !pax.is_empty() {
        out.write_all(&header(b"././@PaxHeader", pax.len() as u64, 0o644, b'x'))?;
        out.write_all(&pax)?;
        out.write_all(&[0u8; BLOCK][..padding(pax.len() as u64)])?;
    }
    out.write_all(&header(name, size, mode, typeflag))
}

fn run() -> Result<(), Failure> {
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
    // stdout as a plain file: std's stdout flushes at every newline, which binary data is full of.
    // SAFETY: descriptor 1 is this process's stdout, open for its whole life; only this owns it.
    let stdout = unsafe { File::from_raw_fd(1) };
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
                let mut left = size;
                while left > 0 {
                    let want = buffer
                        .len()
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    let n = descriptor.read(&mut buffer[..want]).map_err(|e| {
                        Failure::Io(format!("reading {}: {e}", String::from_utf8_lossy(&path)))
                    })?;
                    if n == 0 {
                        return Err(Failure::Io(format!(
                            "{} shrank while it was read",
                            String::from_utf8_lossy(&path)
                        )));
                    }
                    out.write_all(&buffer[..n]).map_err(io)?;
                    left -= n as u64;
                }
                out.write_all(&[0u8; BLOCK][..padding(size)]).map_err(io)?;
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
