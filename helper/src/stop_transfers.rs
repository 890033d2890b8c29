//! `--stop-transfers`: stops the workspace helpers that run transfers by exec in a holder whose
//! entrypoint is the egress gateway (the host cannot signal an exec's process through the
//! engine, and killing the holder would end the gateway). A transfer run is the helper started
//! with no argument at all, so its command line is exactly this program's path: the gateway,
//! the report and this mode always have arguments and are never matched. Each is sent SIGTERM
//! (it puts back the modes it widened and exits: `restore.rs`), and SIGKILL if it still runs
//! `GRACE` later; this mode exits 0 once none is left, or 4 when one outlives its SIGKILL by
//! another `GRACE`. It runs as the sandbox user, as the transfers do, so it can signal them and
//! nothing else.

use std::time::{Duration, Instant};

/// How long a transfer helper told to stop may take to exit before SIGKILL, and how long its
/// SIGKILL may take.
const GRACE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);

pub fn run() -> Result<(), String> {
    let path = std::env::args_os()
        .next()
        .ok_or("no program path to match transfer runs by")?;
    let mut wanted = path.into_encoded_bytes();
    wanted.push(0);
    let own = std::process::id();
    let running = || transfer_runs(&wanted, own);
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGKILL, "SIGKILL")] {
        let targets = running();
        if targets.is_empty() {
            return Ok(());
        }
        for pid in &targets {
            // SAFETY: kill(2) only sends a signal; a process gone meanwhile is ESRCH, ignored.
            unsafe { libc::kill(*pid, signal) };
        }
        let deadline = Instant::now() + GRACE;
        while !running().is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        if running().is_empty() {
            return Ok(());
        }
        if signal == libc::SIGKILL {
            return Err(format!(
                "{} transfer helper(s) still run {} s after {name}",
                running().len(),
                GRACE.as_secs()
            ));
        }
    }
    Ok(())
}

/// The processes whose whole command line is `wanted` (the program path, NUL-ended), but `own`.
/// An exited process whose parent has not reaped it yet has an empty command line: not counted.
fn transfer_runs(wanted: &[u8], own: u32) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (pid != own && is_transfer_run(&cmdline, wanted)).then_some(pid as libc::pid_t)
        })
        .collect()
}

fn is_transfer_run(cmdline: &[u8], wanted: &[u8]) -> bool {
    cmdline == wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bare_helper_is_a_transfer_run() {
        let wanted = b"/native-sandbox-helper\0";
        assert!(is_transfer_run(b"/native-sandbox-helper\0", wanted));
        assert!(!is_transfer_run(
            b"/native-sandbox-helper\0--gateway\0--subnet\0",
            wanted
        ));
        assert!(!is_transfer_run(
            b"/native-sandbox-helper\0--stop-transfers\0",
            wanted
        ));
        assert!(!is_transfer_run(
            b"/sbin/docker-init\0--\0/native-sandbox-helper\0",
            wanted
        ));
        assert!(!is_transfer_run(b"", wanted));
    }

    #[test]
    fn a_process_that_is_not_a_transfer_is_never_listed() {
        // This test's own process runs with arguments of the test harness, never matched, and
        // `own` is left out whatever its command line.
        let own = std::process::id();
        let mut wanted = std::fs::read(format!("/proc/{own}/cmdline")).unwrap();
        assert!(transfer_runs(&wanted, own).is_empty());
        wanted.extend_from_slice(b"never\0");
        assert!(transfer_runs(&wanted, own).is_empty());
    }
}
