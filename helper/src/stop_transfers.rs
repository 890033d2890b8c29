//! `--stop-transfers <grace-ms>`: stops the workspace helpers that run transfers by exec in a
//! holder whose entrypoint is the egress gateway (the host cannot signal an exec's process
//! through the engine, and killing the holder would end the gateway). A transfer run is the
//! helper started with no argument at all, so its command line is exactly this program's path:
//! the gateway, the report and this mode always have arguments and are never matched. Each is
//! sent SIGTERM (it puts back the modes it widened and exits: `restore.rs`), and SIGKILL if it
//! still runs the grace later; this mode exits 0 once none is left, or 4 when one outlives its
//! SIGKILL by another grace (or `/proc` cannot be read). It runs as the sandbox user, as the
//! transfers do, so it can signal them and nothing of another user. A signal goes through a
//! pidfd opened before the command line is read again, so a PID reused meanwhile is never
//! signalled.

use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(20);
/// The longest grace accepted (the host's bound on the whole stop is a few of them).
const GRACE_MAX_MS: u64 = 10_000;

pub fn run(args: &[String]) -> Result<(), String> {
    let grace = match args {
        [ms] => ms
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms <= GRACE_MAX_MS)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                format!("{ms} is not a grace in milliseconds (at most {GRACE_MAX_MS})")
            })?,
        _ => return Err("--stop-transfers takes one argument: the grace in milliseconds".into()),
    };
    let path = std::env::args_os()
        .next()
        .ok_or("no program path to match transfer runs by")?;
    let mut wanted = path.into_encoded_bytes();
    wanted.push(0);
    stop(&wanted, std::process::id(), grace)
}

/// Sends SIGTERM, then SIGKILL `grace` later, to every process whose command line is `wanted`
/// but `own`; `Ok` once none is left.
fn stop(wanted: &[u8], own: u32, grace: Duration) -> Result<(), String> {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGKILL, "SIGKILL")] {
        let targets = transfer_runs(wanted, own)?;
        if targets.is_empty() {
            return Ok(());
        }
        for pid in targets {
            signal_if_still(pid, wanted, signal);
        }
        let deadline = Instant::now() + grace;
        while !transfer_runs(wanted, own)?.is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let left = transfer_runs(wanted, own)?.len();
        if left == 0 {
            return Ok(());
        }
        if signal == libc::SIGKILL {
            return Err(format!(
                "{left} transfer helper(s) still run {} ms after {name}",
                grace.as_millis()
            ));
        }
    }
    Ok(())
}

/// Signals `pid` through a pidfd, only when its command line is still `wanted` once the pidfd
/// pins it (a process gone meanwhile is left alone).
fn signal_if_still(pid: u32, wanted: &[u8], signal: libc::c_int) {
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor (or -1); no memory
    // is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return;
    }
    let fd = fd as libc::c_int;
    if command_line(pid).as_deref() == Some(wanted) {
        // SAFETY: the descriptor is ours and open; a null siginfo asks for a plain kill.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
}

fn command_line(pid: u32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{pid}/cmdline")).ok()
}

/// The processes whose whole command line is `wanted` (the program path, NUL-ended), but `own`.
/// An exited process whose parent has not reaped it yet has an empty command line: not counted.
fn transfer_runs(wanted: &[u8], own: u32) -> Result<Vec<u32>, String> {
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("reading /proc: {e}"))?;
    Ok(entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            (pid != own && command_line(pid)? == wanted).then_some(pid)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    /// A process whose whole command line is `name` (a `sleep` started under that name).
    fn run_named(name: &str) -> std::process::Child {
        Command::new("sleep")
            .arg0(name)
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep")
    }

    #[test]
    fn only_processes_named_exactly_are_stopped() {
        // `sleep` with its own argument has the command line `name\030\0`: to be matched, the
        // wanted line is built the same way; a second process differs by its argument.
        let name = format!("/stop-transfers-test-{}", std::process::id());
        let mut matched = run_named(&name);
        let mut other = Command::new("sleep")
            .arg0(&name)
            .arg("31")
            .spawn()
            .expect("sleep");
        let wanted = format!("{name}\x0030\0").into_bytes();
        let deadline = Instant::now() + Duration::from_secs(5);
        while transfer_runs(&wanted, 0).unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert_eq!(
            transfer_runs(&wanted, 0).unwrap(),
            vec![matched.id()],
            "only the exact command line"
        );
        stop(&wanted, std::process::id(), Duration::from_secs(2)).expect("stopped");
        let status = matched.wait().expect("reaped");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(
            other.try_wait().expect("asked").is_none(),
            "the other still runs"
        );
        other.kill().expect("killed");
        other.wait().expect("reaped");
    }

    #[test]
    fn a_process_that_ignores_sigterm_gets_sigkill_after_the_grace() {
        // SIGTERM is ignored before `exec` (an ignored disposition survives it), so by the time
        // the command line matches, the process already ignores it: no race with a shell's trap.
        let name = format!("/stop-transfers-stubborn-{}", std::process::id());
        let mut command = Command::new("sleep");
        command.arg0(&name).arg("30").stdin(Stdio::null());
        // SAFETY: between fork and exec only `signal`, which is async-signal-safe, is called.
        unsafe {
            command.pre_exec(|| {
                if libc::signal(libc::SIGTERM, libc::SIG_IGN) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let mut stubborn = command.spawn().expect("sleep");
        let wanted = format!("{name}\x0030\0").into_bytes();
        let deadline = Instant::now() + Duration::from_secs(5);
        while transfer_runs(&wanted, 0).unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert_eq!(transfer_runs(&wanted, 0).unwrap(), vec![stubborn.id()]);
        let grace = Duration::from_millis(300);
        let started = Instant::now();
        stop(&wanted, std::process::id(), grace).expect("stopped");
        assert!(started.elapsed() >= grace, "SIGKILL only after the grace");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            stubborn.wait().expect("reaped").signal(),
            Some(libc::SIGKILL)
        );
    }

    #[test]
    fn the_grace_is_one_bounded_number_of_milliseconds() {
        for bad in [
            vec![],
            vec!["x".to_owned()],
            vec!["10001".to_owned()],
            vec!["1".to_owned(), "2".to_owned()],
        ] {
            assert!(run(&bad).is_err(), "{bad:?}");
        }
    }
}
