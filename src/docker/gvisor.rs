//! What `pids` means under gVisor (`runtime: 'runsc'`). On runc the engine's pids limit is the
//! container's pids cgroup, which counts the guest's tasks (processes and threads, its init
//! included). Under gVisor that cgroup counts the host tasks of gVisor itself: measured here
//! (Debian's runsc, ptrace platform) about 35 plus 7.5 per guest process (threads of one guest
//! process add far less), so a request that forks fine on runc could not fork on runsc. The
//! request therefore means the same on both: under gVisor the guest's count is held by gVisor's
//! own kernel, through `RLIMIT_NPROC` set to `pids` (gVisor counts the sandbox user's tasks,
//! threads and the init included, exactly where runc's cgroup stops them: measured with the
//! same fork and thread tests), and the engine's limit is raised to gVisor's measured need for
//! that many guest tasks, a bound on the whole sandbox all the same.

use bollard::models::ResourcesUlimits;

/// gVisor's runtime name as `scripts/ensure-runsc.sh` registers it.
pub const RUNTIME: &str = "runsc";

/// Host tasks gVisor needs besides its guest's (measured: about 35).
const HOST_TASKS_BASE: u64 = 64;
/// Host tasks gVisor needs per guest task, at most (measured: about 7.5 per process).
const HOST_TASKS_PER_GUEST_TASK: u64 = 10;

/// How many of the guest's tasks a finite `RLIMIT_NPROC` misses once the reserved process is
/// started through the helper's `--exec-as` (root, then the sandbox user): the engine's init,
/// which stays root, everywhere; under gVisor the process itself too, since gVisor (measured with
/// Debian's 2022 `runsc`) keeps a task counted under the uid that cloned it across `setresuid`,
/// where Linux moves it to the new uid. The launcher lowers the limit by this many, so the same
/// fork test stops at the same count as a process the engine starts as the user (tested on both).
/// A gVisor that moved the count would stop one task earlier than asked, never later.
pub fn launched_tasks_apart(runtime: Option<&str>) -> u32 {
    if is_gvisor(runtime) {
        2
    } else {
        1
    }
}

/// Whether `runtime` is gVisor's.
pub fn is_gvisor(runtime: Option<&str>) -> bool {
    runtime == Some(RUNTIME)
}

/// The engine-level pids limit for a gVisor sandbox whose guest may have `pids` tasks.
pub fn engine_pids_limit(pids: u64) -> i64 {
    let need = pids
        .saturating_mul(HOST_TASKS_PER_GUEST_TASK)
        .saturating_add(HOST_TASKS_BASE);
    i64::try_from(need).unwrap_or(i64::MAX)
}

/// The guest's task limit, held by gVisor's kernel: `RLIMIT_NPROC` of `pids`, soft and hard.
pub fn guest_task_limit(pids: u64) -> ResourcesUlimits {
    let pids = i64::try_from(pids).unwrap_or(i64::MAX);
    ResourcesUlimits {
        name: Some("nproc".to_owned()),
        soft: Some(pids),
        hard: Some(pids),
    }
}

/// The guest's task limit read back from `ulimits`: `Some` only for exactly one `nproc` entry
/// whose soft and hard limits agree and are positive.
pub fn read_guest_task_limit(ulimits: Option<&[ResourcesUlimits]>) -> Option<u64> {
    let mut nproc = ulimits?
        .iter()
        .filter(|limit| limit.name.as_deref() == Some("nproc"));
    let only = nproc.next()?;
    if nproc.next().is_some() || only.soft != only.hard {
        return None;
    }
    u64::try_from(only.soft?).ok().filter(|&pids| pids > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_limit_covers_the_measured_need_and_saturates() {
        // Measured: 49 guest tasks took 402 host tasks.
        assert!(engine_pids_limit(49) >= 402);
        assert_eq!(engine_pids_limit(48), 544);
        assert_eq!(engine_pids_limit(u64::MAX), i64::MAX);
    }

    #[test]
    fn the_guest_limit_reads_back_only_when_unambiguous() {
        let limit = guest_task_limit(48);
        assert_eq!(
            read_guest_task_limit(Some(std::slice::from_ref(&limit))),
            Some(48)
        );
        assert_eq!(read_guest_task_limit(None), None);
        assert_eq!(read_guest_task_limit(Some(&[])), None);
        assert_eq!(
            read_guest_task_limit(Some(&[limit.clone(), limit.clone()])),
            None
        );
        let loose = ResourcesUlimits {
            hard: Some(96),
            ..limit
        };
        assert_eq!(read_guest_task_limit(Some(&[loose])), None);
    }
}
