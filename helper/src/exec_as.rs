//! `--exec-as uid:gid -- executable [args…]`: the reserved process's start when the sandbox's
//! user is not root. The process container is started as root with only CAP_SETUID and
//! CAP_SETGID (the supervisor's start, so a supervisor made later by exec beside the process
//! takes an identity of its own there too); this becomes the sandbox user in every id, with no
//! capability, and then replaces itself with the process (same PID, environment and working
//! directory), which so runs exactly as the engine would have started it as that user (a finite
//! task limit lowered by `--tasks-apart`, the tasks of the guest it no longer counts as that
//! user's: `gvisor::launched_tasks_apart` on the host).

use std::ffi::CString;

use crate::identity;

/// Becomes the user, then runs the executable in this process's place; returns only on failure.
pub fn run(args: &[String]) -> Result<(), String> {
    let (user, apart, argv) = match args {
        [user, flag, apart, separator, argv @ ..]
            if flag == "--tasks-apart" && separator == "--" && !argv.is_empty() =>
        {
            (user, apart, argv)
        }
        _ => return Err("expected uid:gid --tasks-apart n -- executable [args…]".into()),
    };
    let apart: u64 = apart
        .parse()
        .map_err(|_| format!("--tasks-apart {apart}: expected a count"))?;
    let argv = argv
        .iter()
        .map(|arg| CString::new(arg.as_str()).map_err(|_| format!("{arg:?} holds a NUL byte")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|arg| arg.as_ptr()).collect();
    pointers.push(std::ptr::null());
    let (uid, gid) = identity::parse(user)?;
    identity::become_sandbox_user(uid, gid)?;
    // Tasks of the guest a finite task limit no longer counts as the user's (the host says how
    // many: the engine's init, which runs as root, and under gVisor this process itself).
    identity::count_tasks_apart(apart)?;
    // SAFETY: `signal` only sets SIGPIPE's disposition back to the default (the Rust runtime
    // ignores it, and an ignored signal stays ignored across exec); `execv` gets NUL-terminated
    // strings `argv` owns and a null-terminated array of them, and runs the executable with this
    // process's environment, without a search or a shell (as the engine's start does).
    let error = unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execv(pointers[0], pointers.as_ptr());
        std::io::Error::last_os_error()
    };
    Err(format!("running {}: {error}", argv[0].to_string_lossy()))
}
