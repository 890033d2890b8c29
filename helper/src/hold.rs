//! `--hold`: the entry of a Kubernetes sandbox's workspace container, which keeps the pod and
//! its workspace there after the sandbox container's supervisor ended (a stopped sandbox is
//! still exported), and in which the host runs the workspace helper by exec for each transfer.
//! It does nothing but wait: SIGTERM or SIGINT (the pod's deletion) ends it with status 0, and
//! SIGCHLD reaps whatever was reparented to it, so no exited orphan stays a zombie. As its
//! container's PID 1 it has no default action for those signals, so it waits for them blocked,
//! with `sigwait`, instead of handling them.

pub fn run(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("--hold takes no argument".into());
    }
    // SAFETY: `set` is a plain C value the libc calls fill in before it is read; blocking
    // signals for this (single-threaded) process and waiting for them touches no Rust state.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGCHLD] {
            libc::sigaddset(&mut set, signal);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err("blocking the signals it waits for failed".into());
        }
        loop {
            let mut signal: libc::c_int = 0;
            if libc::sigwait(&set, &mut signal) != 0 {
                continue;
            }
            if signal != libc::SIGCHLD {
                return Ok(());
            }
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
        }
    }
}
