//! `--exec-as uid:gid --tasks-apart n -- executable [args…]`: the reserved process's start when
//! the sandbox's user is not root. The process container is started as root with only
//! CAP_SETUID and CAP_SETGID (the supervisor's start, so a supervisor made later by exec beside
//! the process takes an identity of its own there too); this becomes the sandbox user in every
//! id, with no capability, and then replaces itself with the process (same PID, environment and
//! working directory), run as the engine's init would run it (a script with no `#!` line by
//! /bin/sh; exit 127 or 126 when it cannot be run). A finite task limit is lowered by `n`, the
//! tasks of the guest it no longer counts as that user's (`gvisor::launched_tasks_apart` on the
//! host).

use std::ffi::CString;

use crate::identity;

/// What `--exec-as` was given: the user, the tasks to take off a finite task limit, and the
/// process's argv (its executable first).
struct Launch {
    user: (u32, u32),
    apart: u64,
    argv: Vec<CString>,
}

fn parse(args: &[String]) -> Result<Launch, String> {
    let (user, apart, argv) = match args {
        [user, flag, apart, separator, argv @ ..]
            if flag == "--tasks-apart" && separator == "--" && !argv.is_empty() =>
        {
            (user, apart, argv)
        }
        _ => return Err("expected uid:gid --tasks-apart n -- executable [args…]".into()),
    };
    let apart = apart
        .parse()
        .map_err(|_| format!("--tasks-apart {apart}: expected a count"))?;
    let argv = argv
        .iter()
        .map(|arg| CString::new(arg.as_str()).map_err(|_| format!("{arg:?} holds a NUL byte")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Launch {
        user: identity::parse(user)?,
        apart,
        argv,
    })
}

/// Becomes the user, then runs the executable in this process's place. Returns only when the
/// identity could not be taken; a process that cannot be run ends this one as the engine's init
/// would end it (`exit_status_for`).
pub fn run(args: &[String]) -> Result<(), String> {
    let Launch {
        user: (uid, gid),
        apart,
        argv,
    } = parse(args)?;
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|arg| arg.as_ptr()).collect();
    pointers.push(std::ptr::null());
    identity::become_sandbox_user(uid, gid)?;
    // Tasks of the guest a finite task limit no longer counts as the user's (the host says how
    // many: the engine's init, which runs as root, and under gVisor this process itself).
    identity::count_tasks_apart(apart)?;
    // SAFETY: `signal` only sets SIGPIPE's disposition back to the default (the Rust runtime
    // ignores it, and an ignored signal stays ignored across exec); `execv` gets NUL-terminated
    // strings `argv` owns and a null-terminated array of them, and runs the executable with this
    // process's environment.
    let mut errno = unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execv(pointers[0], pointers.as_ptr());
        std::io::Error::last_os_error().raw_os_error()
    };
    if errno == Some(libc::ENOEXEC) {
        // A file the kernel cannot run (a script with no `#!` line) is run by /bin/sh, as the
        // engine's init (`execvp` of glibc) runs it.
        let shell = c"/bin/sh";
        let mut with_shell = vec![shell.as_ptr()];
        with_shell.extend_from_slice(&pointers);
        // SAFETY: as above; `with_shell` is /bin/sh, the executable, its arguments, then null.
        errno = unsafe {
            libc::execv(shell.as_ptr(), with_shell.as_ptr());
            std::io::Error::last_os_error().raw_os_error()
        };
    }
    let error = std::io::Error::from_raw_os_error(errno.unwrap_or(0));
    eprintln!(
        "native-sandbox process launcher: exec {} failed: {error}",
        argv[0].to_string_lossy()
    );
    std::process::exit(exit_status_for(errno))
}

/// The status a process that could not be run exits with, as the engine's init (tini) says it:
/// 127 when the executable is missing, 126 when it may not be run, else 1.
fn exit_status_for(errno: Option<i32>) -> i32 {
    match errno {
        Some(libc::ENOENT) => 127,
        Some(libc::EACCES) => 126,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_process_is_everything_after_the_separator_even_a_dash() {
        let launch = parse(&args(&[
            "65532:65532",
            "--tasks-apart",
            "2",
            "--",
            "/bin/sh",
            "-c",
            "--",
        ]))
        .expect("parsed");
        assert_eq!(launch.user, (65532, 65532));
        assert_eq!(launch.apart, 2);
        let argv: Vec<&str> = launch
            .argv
            .iter()
            .map(|a| a.to_str().unwrap_or(""))
            .collect();
        assert_eq!(argv, ["/bin/sh", "-c", "--"]);
    }

    #[test]
    fn a_process_that_cannot_run_exits_as_the_engines_init_says() {
        assert_eq!(exit_status_for(Some(libc::ENOENT)), 127);
        assert_eq!(exit_status_for(Some(libc::EACCES)), 126);
        assert_eq!(exit_status_for(Some(libc::ENOEXEC)), 1);
        assert_eq!(exit_status_for(None), 1);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &["65532:65532", "--tasks-apart", "2", "--"][..],
            &["65532:65532", "--", "/bin/true"],
            &["65532:65532", "--tasks-apart", "x", "--", "/bin/true"],
            &["0:0", "--tasks-apart", "1", "--", "/bin/true"],
            &["65532:65532", "--tasks-apart", "1", "/bin/true"],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
    }
}
