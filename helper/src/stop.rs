//! `--stop-transfers`: run by the controller (an exec in a gateway holder) to stop a transfer it
//! abandoned. Every other workspace helper process run for a transfer (its command line the
//! helper alone) is told SIGTERM, which puts back the modes it widened and exits
//! (`restore.rs`); one still there after `STOP_GRACE` gets SIGKILL. The gateway (its command
//! line longer) is left alone.

use std::time::{Duration, Instant};

const STOP_GRACE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);

pub fn stop_transfers(helper_path: &str) -> Result<(), String> {
    let running = transfers(helper_path)?;
    signal(&running, libc::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    loop {
        let left: Vec<i32> = transfers(helper_path)?
            .into_iter()
            .filter(|pid| running.contains(pid))
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            signal(&left, libc::SIGKILL);
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

fn signal(pids: &[i32], signal: i32) {
    for pid in pids {
        // SAFETY: kill only sends a signal; a pid gone meanwhile fails with ESRCH, ignored.
        unsafe {
            libc::kill(*pid, signal);
        }
    }
}

/// The pids of this container's transfer runs of the helper, this process excepted.
fn transfers(helper_path: &str) -> Result<Vec<i32>, String> {
    let own = std::process::id() as i32;
    let wanted = format!("{helper_path}\0");
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("reading /proc: {e}"))?;
    Ok(entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line == wanted.as_bytes())
        })
        .collect())
}
