//! The helper's file system calls: every name opened or examined relative to an open directory,
//! never following a link, and every failure as a message that names the path.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::failure::Failure;

/// `errno` `code` of an operation on `name`.
pub fn os_failure(name: &[u8], code: i32) -> Failure {
    Failure::Io(format!(
        "{}: {}",
        String::from_utf8_lossy(name),
        std::io::Error::from_raw_os_error(code)
    ))
}

pub fn last_error(what: &str) -> Failure {
    Failure::Io(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Opens `name` relative to `directory` without following a link; `Ok(Err(errno))` when the
/// kernel refuses (`ELOOP`: a link, `ENOTDIR`, `ENOENT`, …), for the caller to answer.
pub fn open_at(
    directory: &OwnedFd,
    name: &[u8],
    flags: i32,
) -> Result<Result<OwnedFd, i32>, Failure> {
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
    let opened = unsafe { OwnedFd::from_raw_fd(fd) };
    // gVisor's kernel (the 2022 `runsc` here) follows a link named with `O_NOFOLLOW |
    // O_DIRECTORY`. What was opened must be what the name is now, not a link: the same device
    // and inode as `fstatat` of the name without following. A link swapped in either way meanwhile
    // fails the comparison, and a directory cannot be hard-linked, so nothing outside can match.
    let named = stat_at(directory, name.as_bytes())?;
    let same = match (named, fstat(&opened)) {
        (Ok(named), Some(held)) => {
            named.st_mode & libc::S_IFMT != libc::S_IFLNK
                && named.st_dev == held.st_dev
                && named.st_ino == held.st_ino
        }
        _ => false,
    };
    if !same {
        return Ok(Err(libc::ELOOP));
    }
    Ok(Ok(opened))
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the whole call and `stat` is a valid place to write.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } == 0).then_some(stat)
}

/// What `fstatat` without following says of `name` in `directory`; `Err(errno)` when it fails.
pub fn stat_at(directory: &OwnedFd, name: &[u8]) -> Result<Result<libc::stat, i32>, Failure> {
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
pub fn names_in(directory: &OwnedFd, path: &[u8]) -> Result<Vec<Vec<u8>>, Failure> {
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
    // The duplicate shares the directory's offset with `directory`, which a long-held root's
    // earlier listing left at its end: read from the start.
    // SAFETY: `stream` is a valid directory stream until `closedir`.
    unsafe { libc::rewinddir(stream) };
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

/// Where a symbolic link points, as written (it is never followed).
pub fn read_link_at(directory: &OwnedFd, name: &[u8]) -> Option<Vec<u8>> {
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

/// An entry whose owner bits this helper widened to open it (see `open_as_owner`): `restore`
/// puts its mode back; a guard dropped on an early return puts it back too, and a stop request
/// (SIGTERM) while it is held puts it back through `restore.rs`.
pub struct Widened {
    /// The entry itself (`O_PATH`), kept open so its link names the very inode widened.
    _entry: OwnedFd,
    /// `/proc/self/fd/<entry>`: `fchmod` refuses an `O_PATH` descriptor, `chmod` of its link
    /// does not (and the signal handler can use it as it is).
    link: CString,
    mode: libc::mode_t,
    slot: Option<usize>,
    restored: bool,
}

impl Widened {
    /// Puts the entry's mode back as it was.
    pub fn restore(mut self) -> Result<(), Failure> {
        self.restored = true;
        let done = chmod(&self.link, self.mode);
        if let Some(slot) = self.slot.take() {
            crate::restore::unregister(slot);
        }
        done
    }
}

impl Drop for Widened {
    fn drop(&mut self) {
        if !self.restored {
            let _ = chmod(&self.link, self.mode);
        }
        if let Some(slot) = self.slot.take() {
            crate::restore::unregister(slot);
        }
    }
}

/// What `fstat` says of the open `fd` (named `name` in errors).
fn stat_of(fd: &OwnedFd, name: &[u8]) -> Result<libc::stat, Failure> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the call and `stat` is a valid place to write.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } < 0 {
        return Err(os_failure(
            name,
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(stat)
}

/// Whether this helper's user owns the entry `stat` describes.
fn owned_by_us(stat: &libc::stat) -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    stat.st_uid == unsafe { libc::geteuid() }
}

/// The `/proc/self/fd` link of `entry`, which names that very inode whatever its path is now.
fn link_of(entry: &OwnedFd) -> Result<CString, Failure> {
    use std::os::fd::AsRawFd;
    CString::new(format!("/proc/self/fd/{}", entry.as_raw_fd()))
        .map_err(|_| Failure::Io("a descriptor link holds a NUL byte".into()))
}

/// Sets the mode of the inode `link` names.
fn chmod(link: &CString, mode: libc::mode_t) -> Result<(), Failure> {
    // SAFETY: `link` is a NUL-terminated string that outlives the call.
    if unsafe { libc::chmod(link.as_ptr(), mode) } < 0 {
        return Err(last_error(&format!(
            "setting mode {mode:o} on an entry its owner had closed"
        )));
    }
    Ok(())
}

/// Opens the entry `link` (its `/proc/self/fd` link) names again with `flags`: the same inode,
/// whatever its name points to now.
fn reopen(link: &CString, flags: i32) -> Result<Result<OwnedFd, i32>, Failure> {
    // SAFETY: `link` is a NUL-terminated string that outlives the call. The link is a magic
    // link to `entry`'s inode (never a path lookup), so following it opens nothing else.
    let fd = unsafe { libc::open(link.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Ok(Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(0)));
    }
    // SAFETY: `open` just returned this descriptor, and nothing else owns it.
    Ok(Ok(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Opens `name` in `directory` like `open_at`. When the kernel refuses it (`EACCES`) and it is a
/// regular file or directory this helper's user owns (its owner took away its own read or
/// search bits, as `chmod 000` does), the owner's bits are widened (read, and search for a
/// directory) just to open it: the guard returned puts the mode back. The original exported
/// such entries (the engine's archive endpoint reads as root); an owner may always change its
/// own entry's mode, so this reads the same and grants nothing the guest could not do itself.
/// A file's guard is restored as soon as it is open; a directory's once its walk is over (its
/// children are looked up through it meanwhile).
pub fn open_as_owner(
    directory: &OwnedFd,
    name: &[u8],
    flags: i32,
) -> Result<Result<(OwnedFd, Option<Widened>), i32>, Failure> {
    match open_at(directory, name, flags)? {
        Ok(fd) if flags & libc::O_DIRECTORY == 0 => return Ok(Ok((fd, None))),
        Ok(fd) => {
            // A directory its owner may read but not search (or the reverse) opens, but nothing
            // in it could be looked up: it is widened too.
            let stat = stat_of(&fd, name)?;
            let both = libc::S_IRUSR | libc::S_IXUSR;
            if !owned_by_us(&stat) || stat.st_mode & both == both {
                return Ok(Ok((fd, None)));
            }
        }
        Err(libc::EACCES) => {}
        Err(code) => return Ok(Err(code)),
    }
    let entry = match open_at(directory, name, libc::O_PATH)? {
        Ok(entry) => entry,
        Err(code) => return Ok(Err(code)),
    };
    let stat = stat_of(&entry, name)?;
    let owned = owned_by_us(&stat);
    let widen = match stat.st_mode & libc::S_IFMT {
        libc::S_IFDIR => libc::S_IRUSR | libc::S_IXUSR,
        libc::S_IFREG => libc::S_IRUSR,
        _ => 0,
    };
    let mode = stat.st_mode & 0o7777;
    if !owned || widen == 0 || mode & widen == widen {
        return Ok(Err(libc::EACCES));
    }
    let link = link_of(&entry)?;
    // Registered before it is widened: a stop request from here on puts the mode back.
    let slot = crate::restore::register(&link, mode);
    let widened = Widened {
        _entry: entry,
        link,
        mode,
        slot,
        restored: false,
    };
    chmod(&widened.link, mode | widen)?;
    match reopen(&widened.link, flags & !libc::O_NOFOLLOW)? {
        Ok(fd) => Ok(Ok((fd, Some(widened)))),
        Err(code) => {
            widened.restore()?;
            Ok(Err(code))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_listed_again_through_one_descriptor_lists_whole() {
        let dir = std::env::temp_dir().join(format!("names-in-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("b"), b"").expect("b");
        std::fs::write(dir.join("a"), b"").expect("a");
        let held = OwnedFd::from(std::fs::File::open(&dir).expect("open"));
        let first = names_in(&held, b"dir").ok().expect("first");
        let again = names_in(&held, b"dir").ok().expect("again");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(first, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            again, first,
            "the second listing starts from the first entry"
        );
    }
}
