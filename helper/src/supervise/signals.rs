//! Signals another process sends the supervisor are ignored: the kernel spares a PID namespace's
//! init from them only while it has no handler, and gVisor's kernel (the 2022 `runsc`) spares it
//! from none, so without this `kill -TERM 1` from a command would end every command of the
//! sandbox. The handler ignores what a process sent (`si_code` ≤ 0: `kill`, `sigqueue`, `tgkill`)
//! and gives what the kernel raised (a fault, a resource limit, seccomp) its default action
//! (`abort` ends the supervisor still: it raises SIGABRT again with the default restored).
//! Caught signals are reset to their defaults by `execve`, so every command starts with the
//! ordinary dispositions. SIGKILL and SIGSTOP cannot be caught (README's limits, under runsc).

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo for this delivery.
    let sent_by_a_process = info.is_null() || unsafe { (*info).si_code } <= 0;
    if !sent_by_a_process {
        // SAFETY: signal(2) and raise(3) are async-signal-safe. With the default restored, a
        // fault re-raises as the faulting instruction runs again; anything else is raised now.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}

/// The signals whose default action ends a process, which a command could send PID 1.
fn ending_signals() -> Vec<libc::c_int> {
    let mut signals = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGABRT,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGUSR1,
        libc::SIGSEGV,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGTERM,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSYS,
    ];
    signals.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    signals
}

/// Installs the handler; a signal the libc reserves for itself (refused) keeps its default.
pub fn ignore_sent_signals() {
    for signal in ending_signals() {
        // SAFETY: a zeroed sigaction is a valid starting value; the handler calls only
        // async-signal-safe functions, and SA_RESTART keeps the loop's calls from failing with
        // EINTR except poll, which the loop retries.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}
