//! Stalls said aloud: a guest held back by an output stream nobody reads, or a guest that may
//! be waiting on a stdin the host never ends. Both are the contract's behaviour (backpressure,
//! an open stdin); nothing here changes what the streams do, it only tells, once per stream.
//!
//! Invariants:
//! - an output stream is reported once the output pump has waited `STALL_AFTER` for staging
//!   space while compute runs (the guest is then blocked on its writes), the stream holds
//!   staged bytes nobody took, and no read of it is in flight (its reader stopped taking it);
//! - stdin is reported once it has been open, with no write from the host, no output from the
//!   guest and nothing staged for it, for `STALL_AFTER` from the start or the last of those
//!   while the process runs and no output waits for staging space (the guest may be reading to
//!   EOF);
//! - nothing is reported once compute is stopping, and each stream at most once.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long a stream may stay stalled before it is reported.
pub const STALL_AFTER: Duration = Duration::from_secs(10);

/// A stream reported as stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stalled {
    /// Its staging is full and unread: the guest is blocked writing to it.
    Stdout,
    Stderr,
    /// Open, with nothing written and nothing output for a while: the guest may wait for EOF.
    Stdin,
}

impl Stalled {
    pub fn as_str(self) -> &'static str {
        match self {
            Stalled::Stdout => "stdout",
            Stalled::Stderr => "stderr",
            Stalled::Stdin => "stdin",
        }
    }

    fn index(self) -> usize {
        match self {
            Stalled::Stdout => 0,
            Stalled::Stderr => 1,
            Stalled::Stdin => 2,
        }
    }
}

/// When the process's streams last moved, and what was reported.
pub struct StallWatch {
    inner: Mutex<Watched>,
}

struct Watched {
    /// Since when the output pump waits for staging space while compute runs.
    room_wait_since: Option<Instant>,
    /// The last write the host made to stdin, the last output the guest made, or the start.
    last_activity: Instant,
    reported: [bool; 3],
}

/// What a look at the streams sees, for `StallWatch::take`.
pub struct Seen {
    pub now: Instant,
    /// Compute is stopping, or the streams are closed: nothing is a stall any more.
    pub stopping: bool,
    /// Whether each output stream (stdout, stderr) holds staged bytes that no read in flight
    /// is taking (and was not discarded): its reader stopped taking it.
    pub output_unread: [bool; 2],
    /// Whether stdin is still open, nothing written to it is still staged, and the process
    /// still runs.
    pub stdin_open: bool,
}

impl Default for StallWatch {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Watched {
                room_wait_since: None,
                last_activity: Instant::now(),
                reported: [false; 3],
            }),
        }
    }
}

impl StallWatch {
    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pump begins (`true`) or ends (`false`) a wait for staging space.
    pub fn waiting_for_room(&self, waiting: bool) {
        let mut watched = self.watched();
        watched.room_wait_since = if waiting {
            Some(watched.room_wait_since.unwrap_or_else(Instant::now))
        } else {
            None
        };
    }

    /// The host wrote to stdin, or the guest wrote output.
    pub fn moved(&self) {
        self.watched().last_activity = Instant::now();
    }

    /// The streams newly stalled (each reported once).
    pub fn take(&self, seen: &Seen) -> Vec<Stalled> {
        if seen.stopping {
            return Vec::new();
        }
        let mut watched = self.watched();
        let mut stalled = Vec::new();
        let room_stalled = watched
            .room_wait_since
            .is_some_and(|since| seen.now.saturating_duration_since(since) >= STALL_AFTER);
        if room_stalled {
            for (which, unread) in [Stalled::Stdout, Stalled::Stderr]
                .into_iter()
                .zip(seen.output_unread)
            {
                if unread {
                    stalled.push(which);
                }
            }
        }
        // Output waiting for room is the guest's writing, not a wait on stdin.
        let quiet = watched.room_wait_since.is_none()
            && seen.now.saturating_duration_since(watched.last_activity) >= STALL_AFTER;
        if seen.stdin_open && quiet {
            stalled.push(Stalled::Stdin);
        }
        stalled.retain(|which| !std::mem::replace(&mut watched.reported[which.index()], true));
        stalled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(now: Instant) -> Seen {
        Seen {
            now,
            stopping: false,
            output_unread: [false, false],
            stdin_open: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unread_stream_is_reported_once_past_the_wait() {
        let watch = StallWatch::default();
        watch.waiting_for_room(true);
        tokio::time::advance(STALL_AFTER - Duration::from_millis(1)).await;
        let unread_stderr = Seen {
            output_unread: [false, true],
            ..seen(Instant::now())
        };
        assert!(watch.take(&unread_stderr).is_empty(), "not yet");
        tokio::time::advance(Duration::from_millis(1)).await;
        let unread_stderr = Seen {
            now: Instant::now(),
            ..unread_stderr
        };
        assert_eq!(watch.take(&unread_stderr), vec![Stalled::Stderr]);
        assert!(watch.take(&unread_stderr).is_empty(), "once per stream");
        let both = Seen {
            output_unread: [true, true],
            ..seen(Instant::now())
        };
        assert_eq!(watch.take(&both), vec![Stalled::Stdout]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_ended_or_a_stop_reports_nothing() {
        let watch = StallWatch::default();
        watch.waiting_for_room(true);
        tokio::time::advance(STALL_AFTER / 2).await;
        watch.waiting_for_room(false);
        watch.waiting_for_room(true);
        tokio::time::advance(STALL_AFTER / 2).await;
        let unread = Seen {
            output_unread: [true, true],
            ..seen(Instant::now())
        };
        assert!(watch.take(&unread).is_empty(), "the wait began afresh");
        tokio::time::advance(STALL_AFTER).await;
        let stopping = Seen {
            stopping: true,
            output_unread: [true, true],
            ..seen(Instant::now())
        };
        assert!(watch.take(&stopping).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_stdin_is_reported_after_quiet_only_while_open() {
        let watch = StallWatch::default();
        tokio::time::advance(STALL_AFTER / 2).await;
        watch.moved();
        tokio::time::advance(STALL_AFTER / 2).await;
        let open = Seen {
            stdin_open: true,
            ..seen(Instant::now())
        };
        assert!(
            watch.take(&open).is_empty(),
            "a write or output restarts the wait"
        );
        tokio::time::advance(STALL_AFTER / 2).await;
        let closed = Seen {
            stdin_open: false,
            ..seen(Instant::now())
        };
        assert!(watch.take(&closed).is_empty(), "an ended stdin is no stall");
        let open = Seen {
            now: Instant::now(),
            ..open
        };
        watch.waiting_for_room(true);
        assert!(
            watch.take(&open).is_empty(),
            "output waiting for room is no wait on stdin"
        );
        watch.waiting_for_room(false);
        assert_eq!(watch.take(&open), vec![Stalled::Stdin]);
        assert!(watch.take(&open).is_empty());
    }
}
