//! The supervisor's identity apart from its commands'. Started as root with only CAP_SETUID and
//! CAP_SETGID (`--as-user uid:gid`), it becomes real and saved uid/gid `SUPERVISOR_ID` with the
//! sandbox user as its effective (and so file-system) identity, and drops every capability. Its
//! files are then made and checked as the sandbox user's, while no command (the sandbox user
//! through and through) passes the kernel's checks for signalling it or opening its `/proc`
//! entries: both ask for the target's real (and saved) uid, which is not the command's. This
//! holds under gVisor too, whose kernel neither spares PID 1 from SIGKILL nor honours
//! non-dumpable for `/proc/<pid>/fd`. Each command drops the rest (`become_user`, after fork).
//! A finite task limit (RLIMIT_NPROC, per user) is lowered by one for the supervisor itself.
//!
//! The reserved process, started the same way (`--exec-as`, so that a supervisor started later
//! by exec beside it is root with those two capabilities too), becomes the sandbox user in every
//! id with no capability before it runs (`become_sandbox_user`): what the engine gives a process
//! it starts as that user.

/// The supervisor's real and saved uid and gid when the user namespace maps it (`pick`).
const SUPERVISOR_ID: u32 = 2_147_483_646;

/// `uid:gid`, numeric, as the host passes it; never root's uid, never -1 (which the kernel
/// reads as "unchanged").
pub fn parse(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(uid, gid)| Some((uid.parse().ok()?, gid.parse().ok()?)));
    match parsed {
        Some((0, _)) => Err(format!("user {text}: root needs no other identity")),
        Some((uid, gid)) if uid == u32::MAX || gid == u32::MAX => {
            Err(format!("user {text}: -1 is no id"))
        }
        Some(pair) => Ok(pair),
        None => Err(format!("user {text}: expected a numeric uid:gid")),
    }
}

/// An id of the supervisor's own: mapped by the user namespace (`map`, the text of
/// `/proc/self/uid_map` or `gid_map`: `inside outside count` lines), never `theirs`, never 0
/// or -1. `SUPERVISOR_ID` when mapped (a whole-range map, the engine's default), else the
/// highest mapped id (a rootless or remapped engine maps 65,536 or so). `None`: none is left.
fn pick(theirs: u32, map: &str) -> Option<u32> {
    let extents: Vec<(u64, u64)> = map
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().map(|f| f.parse::<u64>().ok());
            let inside = fields.next()??;
            let _outside = fields.next()??;
            let count = fields.next()??;
            Some((inside, inside.saturating_add(count)))
        })
        .collect();
    let usable = |id: u64| {
        id != u64::from(theirs)
            && id != 0
            && id < u64::from(u32::MAX)
            && extents.iter().any(|&(start, end)| start <= id && id < end)
    };
    if usable(u64::from(SUPERVISOR_ID)) {
        return Some(SUPERVISOR_ID);
    }
    let mut ends: Vec<u64> = extents.iter().map(|&(_, end)| end).collect();
    ends.sort_unstable_by(|a, b| b.cmp(a));
    // The two highest ids of each extent: one of them is not `theirs`.
    ends.iter()
        .flat_map(|&end| [end.checked_sub(1), end.checked_sub(2)])
        .flatten()
        .find(|&id| usable(id))
        .and_then(|id| u32::try_from(id).ok())
}

/// The ids of the supervisor's own, from this process's user namespace maps.
fn own_ids(uid: u32, gid: u32) -> Result<(u32, u32), String> {
    let read =
        |file: &str| std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"));
    let own_uid = pick(uid, &read("/proc/self/uid_map")?)
        .ok_or("the user namespace maps no uid the supervisor could take")?;
    let own_gid = pick(gid, &read("/proc/self/gid_map")?)
        .ok_or("the user namespace maps no gid the supervisor could take")?;
    Ok((own_uid, own_gid))
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn capabilities() -> Result<[CapData; 2], String> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget fills the two data structs version 3 asks for, for this process.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(format!("capget: {}", std::io::Error::last_os_error()));
    }
    Ok(data)
}

/// Becomes the supervisor's identity (see the module); fails closed when any step is refused
/// or any capability is left.
pub fn become_supervisor(uid: u32, gid: u32) -> Result<(), String> {
    let (own_uid, own_gid) = own_ids(uid, gid)?;
    take((own_uid, uid, own_uid), (own_gid, gid, own_gid))?;
    count_tasks_apart(1)
}

/// Becomes the sandbox user in every id, with the user's gid as the only group and no
/// capability (what the engine gives a process it starts as `uid:gid`); fails closed.
pub fn become_sandbox_user(uid: u32, gid: u32) -> Result<(), String> {
    take((uid, uid, uid), (gid, gid, gid))
}

/// Takes real, effective and saved `uids` and `gids`, with `gids.1` (the effective gid) as the
/// only group, drops every capability, then checks all of it.
fn take(uids: (u32, u32, u32), gids: (u32, u32, u32)) -> Result<(), String> {
    let step = |done: libc::c_int, what: &str| {
        if done == 0 {
            Ok(())
        } else {
            Err(format!("{what}: {}", std::io::Error::last_os_error()))
        }
    };
    let group = gids.1;
    // SAFETY: setgroups, setresgid and setresuid change only this process's credentials; the
    // helper is single-threaded here (libc applies them to every thread regardless).
    unsafe {
        step(libc::setgroups(1, &group), "setgroups")?;
        step(libc::setresgid(gids.0, gids.1, gids.2), "setresgid")?;
        step(libc::setresuid(uids.0, uids.1, uids.2), "setresuid")?;
    }
    // Leaving uid 0 cleared every capability; said again, and checked.
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData::default(); 2];
    // SAFETY: capset reads the two data structs version 3 asks for and applies them to this
    // process; empty sets only ever drop.
    step(
        unsafe { libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) } as libc::c_int,
        "capset",
    )?;
    let left = capabilities()?;
    if left
        .iter()
        .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
    {
        return Err("a capability is left after the identity change".into());
    }
    let (mut r, mut e, mut s) = (0, 0, 0);
    let (mut rg, mut eg, mut sg) = (0, 0, 0);
    let mut groups = [0 as libc::gid_t; 2];
    // SAFETY: getresuid and getresgid write three ids into the locals given; getgroups writes
    // at most the two the array holds (more is an error, -1).
    let count = unsafe {
        libc::getresuid(&mut r, &mut e, &mut s);
        libc::getresgid(&mut rg, &mut eg, &mut sg);
        libc::getgroups(2, groups.as_mut_ptr())
    };
    if (r, e, s) != uids {
        return Err(format!("the identity change left uids {r}/{e}/{s}"));
    }
    if (rg, eg, sg) != gids || count != 1 || groups[0] != group {
        return Err(format!(
            "the identity change left gids {rg}/{eg}/{sg} and {count} groups"
        ));
    }
    Ok(())
}

/// A finite RLIMIT_NPROC (how gVisor holds the guest to `pids`) counts the tasks of the sandbox
/// user; tasks of the guest it no longer counts as that user's (the supervisor, started as root;
/// the engine's init beside a process started through `--exec-as`, and that process itself under
/// gVisor) are taken off it, so the guest's tasks, those included, stay within the limit as
/// before.
pub fn count_tasks_apart(apart: u64) -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the local given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut limit) } != 0 {
        return Err(format!("getrlimit: {}", std::io::Error::last_os_error()));
    }
    let lower = |value: libc::rlim_t| {
        if value == libc::RLIM_INFINITY {
            value
        } else {
            value.saturating_sub(apart).max(1)
        }
    };
    let lowered = libc::rlimit {
        rlim_cur: lower(limit.rlim_cur),
        rlim_max: lower(limit.rlim_max),
    };
    // SAFETY: setrlimit reads one rlimit; lowering a limit needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &lowered) } != 0 {
        return Err(format!("setrlimit: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// In a forked command before it runs: the sandbox user in every id, so nothing of the
/// supervisor's identity remains. Raw syscalls (one thread after fork: nothing else to change).
pub fn become_user(uid: u32, gid: u32) -> std::io::Result<()> {
    // SAFETY: setresgid/setresuid change only the calling (sole) thread's credentials; the ids
    // asked are the current effective ones, which an unprivileged process may take.
    unsafe {
        if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0
            || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_user_is_a_numeric_pair_other_than_root() {
        assert_eq!(parse("65532:65532"), Ok((65532, 65532)));
        assert_eq!(parse("1000:2000"), Ok((1000, 2000)));
        assert!(parse("0:0").is_err());
        assert_eq!(parse("1000:0"), Ok((1000, 0)));
        assert!(parse("x:1").is_err());
        assert!(parse("1").is_err());
        assert!(parse("1:2:3").is_err());
    }

    #[test]
    fn the_supervisors_id_is_mapped_and_never_the_users() {
        let whole = "         0          0 4294967295\n";
        assert_eq!(pick(65532, whole), Some(SUPERVISOR_ID));
        let other = pick(SUPERVISOR_ID, whole).expect("another id");
        assert_ne!(other, SUPERVISOR_ID);
        assert!(other != 0 && other != u32::MAX);
        // A rootless engine: root is the host user, 1..=65536 subordinate ids.
        let rootless = "0 1000 1\n1 100000 65536\n";
        assert_eq!(pick(65532, rootless), Some(65536));
        assert_eq!(pick(65536, rootless), Some(65535));
        // Nothing but root and the user's own id mapped: nothing to take.
        assert_eq!(pick(1000, "0 0 1\n1000 1000 1\n"), None);
        assert_eq!(pick(1, "garbage\n"), None);
    }

    #[test]
    fn as_user_never_takes_minus_one() {
        assert!(parse("4294967295:1").is_err());
        assert!(parse("1:4294967295").is_err());
    }
}
