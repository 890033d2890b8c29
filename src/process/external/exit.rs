//! The fate of an external process as its driver reports it. A receipt the driver lost (never
//! reported, or reported as no fate) is `Unavailable` once the sandbox stopped, as a lost wait
//! is for the Docker backend: `RECEIPT_AFTER_STOP` after the driver's stop settled, or the
//! cleanup bound after the stop began, whichever comes first. Never before a stop: `exit`
//! never fabricates a fate.

use std::sync::Mutex;
use std::time::Duration;

use futures::Future;
use tokio::sync::{oneshot, watch};

use super::lock;
use crate::input::Value;
use crate::lifecycle::cancel::Cancel;
use crate::lifecycle::driver::ProcessExit;

/// How long after its stop settled a driver may still report its process's fate.
pub const RECEIPT_AFTER_STOP: Duration = Duration::from_secs(1);

pub(super) struct Receipt {
    report: Mutex<Option<oneshot::Sender<Option<ProcessExit>>>>,
    stop_settled: watch::Sender<bool>,
}

impl Receipt {
    /// The first report counts.
    pub(super) fn report(&self, exit: Option<ProcessExit>) {
        if let Some(report) = lock(&self.report).take() {
            let _ = report.send(exit);
        }
    }

    pub(super) fn stop_settled(&self) {
        self.stop_settled.send_replace(true);
    }
}

/// The receipt's two sides: the report, and the fate `ProcessIo` awaits.
pub(super) fn receipt(
    execution: Cancel,
    cleanup: Duration,
) -> (Receipt, impl Future<Output = ProcessExit> + Send + 'static) {
    let (report, reported) = oneshot::channel();
    let (stop_settled, settled) = watch::channel(false);
    let fate = async move {
        let lost = lost_after_stop(execution, cleanup, settled);
        tokio::pin!(lost);
        tokio::select! {
            reported = reported => {
                if let Ok(Some(exit)) = reported {
                    return exit;
                }
            }
            () = &mut lost => return ProcessExit::Unavailable,
        }
        lost.await;
        ProcessExit::Unavailable
    };
    let receipt = Receipt {
        report: Mutex::new(Some(report)),
        stop_settled,
    };
    (receipt, fate)
}

/// Resolves when a lost receipt counts as `Unavailable` (see the module's rule).
async fn lost_after_stop(execution: Cancel, cleanup: Duration, mut settled: watch::Receiver<bool>) {
    execution.cancelled().await;
    let after_settled = async {
        if settled.wait_for(|settled| *settled).await.is_err() {
            // Nobody will say the stop settled: the cleanup bound decides.
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(RECEIPT_AFTER_STOP).await;
    };
    tokio::select! {
        () = tokio::time::sleep(cleanup) => {}
        () = after_settled => {}
    }
}

/// A driver's reported fate (`SandboxProcessExit`), or `None` when it is none.
pub fn reported_exit(value: &Value) -> Option<ProcessExit> {
    let text = |key| match value.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
        _ => None,
    };
    match text("kind")? {
        "exited" => match value.get("code") {
            Some(Value::Number(code)) if is_safe_integer(*code) => {
                Some(ProcessExit::Exited(*code as i64))
            }
            _ => None,
        },
        "signaled" => {
            let signal = text("signal")?;
            if signal == "SIGKILL" && text("reason") == Some("out_of_memory") {
                Some(ProcessExit::OutOfMemory)
            } else {
                Some(ProcessExit::Signaled(signal.to_owned()))
            }
        }
        "unavailable" if text("reason") == Some("sandbox_stopped") => {
            Some(ProcessExit::Unavailable)
        }
        _ => None,
    }
}

fn is_safe_integer(n: f64) -> bool {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    n.fract() == 0.0 && n.abs() <= MAX_SAFE
}
