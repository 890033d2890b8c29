//! One output stream's staging between the output pump and its reader: pieces in order, and a
//! wait the reader bounds by a byte count, so a reader gathering a batch is woken once per
//! batch instead of once per piece.
//!
//! Invariants:
//! - pieces and failures arrive in the order they were sent; nothing sent is lost while the
//!   receiver lives;
//! - `wait_for(bytes, deadline)` resolves no later than the first of: `bytes` more than the
//!   receiver took so far are staged, a failure is staged, every sender is gone, `deadline`;
//! - a sender never waits: sending is an atomic count, and a wake only when a waiting reader's
//!   count is reached.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use super::output_pump::Received;

struct Shared {
    /// Bytes sent so far, every piece counted once sent.
    sent: AtomicU64,
    /// The `sent` count a waiting reader wants to be woken at; 0 while nobody waits.
    wake_at: AtomicU64,
    /// Wakes a waiting reader (a stored permit if it is not waiting yet: the wait re-checks).
    wake: Notify,
}

/// The pump's side.
pub struct StagedSender {
    /// `None` only while dropping: the channel closes before the reader is woken.
    tx: Option<mpsc::UnboundedSender<Received>>,
    shared: Arc<Shared>,
}

/// The reader's side.
pub struct StagedReceiver {
    rx: mpsc::UnboundedReceiver<Received>,
    shared: Arc<Shared>,
    /// Bytes taken so far.
    taken: u64,
}

/// A staging lane for one stream.
pub fn lane() -> (StagedSender, StagedReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        sent: AtomicU64::new(0),
        wake_at: AtomicU64::new(0),
        wake: Notify::new(),
    });
    (
        StagedSender {
            tx: Some(tx),
            shared: Arc::clone(&shared),
        },
        StagedReceiver {
            rx,
            shared,
            taken: 0,
        },
    )
}

impl StagedSender {
    /// Stages `item`; gives it back when the receiver is gone.
    pub fn send(&self, item: Received) -> Result<(), Received> {
        let Some(tx) = &self.tx else {
            return Err(item);
        };
        let bytes = match &item {
            Ok(bytes) => Some(bytes.len() as u64),
            Err(_) => None,
        };
        tx.send(item).map_err(|refused| refused.0)?;
        let wake = match bytes {
            // Counted after the piece is in the channel, and compared with a wait registered
            // before the reader looked at the count: one of the two sees the other.
            Some(bytes) => {
                let sent = self.shared.sent.fetch_add(bytes, Ordering::SeqCst) + bytes;
                let at = self.shared.wake_at.load(Ordering::SeqCst);
                at != 0 && sent >= at
            }
            // A failure ends any wait.
            None => true,
        };
        if wake {
            self.shared.wake.notify_one();
        }
        Ok(())
    }
}

impl Drop for StagedSender {
    fn drop(&mut self) {
        // The channel closes first, so the woken reader finds it closed.
        drop(self.tx.take());
        self.shared.wake.notify_one();
    }
}

impl StagedReceiver {
    fn took(&mut self, item: &Received) {
        if let Ok(bytes) = item {
            self.taken += bytes.len() as u64;
        }
    }

    /// The next piece or failure; `None` once every sender is gone and nothing is staged.
    pub async fn recv(&mut self) -> Option<Received> {
        let item = self.rx.recv().await?;
        self.took(&item);
        Some(item)
    }

    /// The next piece or failure staged now, without waiting.
    pub fn try_recv(&mut self) -> Result<Received, TryRecvError> {
        let item = self.rx.try_recv()?;
        self.took(&item);
        Ok(item)
    }

    /// Waits until `bytes` more than taken so far are staged, a failure is staged, every
    /// sender is gone, or `deadline`; `false` when the deadline ended it.
    pub async fn wait_for(&mut self, bytes: u64, deadline: Instant) -> bool {
        let at = self.taken.saturating_add(bytes.max(1));
        let woken = self.shared.wake.notified();
        tokio::pin!(woken);
        // Registered before the count is read, so a send in between wakes it.
        woken.as_mut().enable();
        self.shared.wake_at.store(at, Ordering::SeqCst);
        let done = if self.shared.sent.load(Ordering::SeqCst) >= at || self.rx.is_closed() {
            true
        } else {
            tokio::select! {
                () = &mut woken => true,
                () = tokio::time::sleep_until(deadline) => false,
            }
        };
        self.shared.wake_at.store(0, Ordering::SeqCst);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::error::{OperationCode, OwnerError};
    use bytes::Bytes;
    use std::time::Duration;

    fn piece(n: usize) -> Received {
        Ok(Bytes::from(vec![7u8; n]))
    }

    fn later(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_once_its_bytes_are_staged_not_before() {
        let (tx, mut rx) = lane();
        tx.send(piece(10)).expect("sent");
        assert_eq!(rx.try_recv().expect("a piece").expect("bytes").len(), 10);
        let waiting = tokio::spawn(async move {
            let woken = rx.wait_for(100, later(60_000)).await;
            (woken, rx)
        });
        for _ in 0..9 {
            tx.send(piece(10)).expect("sent");
        }
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "90 of 100 bytes must not wake it");
        tx.send(piece(10)).expect("sent");
        let (woken, mut rx) = waiting.await.expect("joined");
        assert!(woken, "the 100th byte wakes it before the deadline");
        let mut staged = 0;
        while let Ok(item) = rx.try_recv() {
            staged += item.expect("bytes").len();
        }
        assert_eq!(staged, 100, "every piece is there, in the channel");
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_staged_before_the_wait_count() {
        let (tx, mut rx) = lane();
        tx.send(piece(64)).expect("sent");
        assert!(rx.wait_for(64, later(60_000)).await);
        assert!(!rx.wait_for(65, later(10)).await, "the deadline ends it");
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_ends_a_wait_short_of_its_bytes() {
        let (tx, mut rx) = lane();
        tx.send(piece(5)).expect("sent");
        let t0 = Instant::now();
        assert!(!rx.wait_for(10, later(2)).await);
        assert_eq!(Instant::now() - t0, Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_or_a_gone_sender_ends_a_wait() {
        let (tx, mut rx) = lane();
        let waiting = tokio::spawn(async move {
            let woken = rx.wait_for(1_000, later(60_000)).await;
            (woken, rx)
        });
        tokio::task::yield_now().await;
        tx.send(Err(OwnerError::operation(OperationCode::Cancelled, "gone")))
            .expect("sent");
        let (woken, mut rx) = waiting.await.expect("joined");
        assert!(woken, "a failure wakes it");
        assert!(rx.try_recv().expect("the failure").is_err());

        let waiting = tokio::spawn(async move {
            let woken = rx.wait_for(1_000, later(60_000)).await;
            (woken, rx)
        });
        tokio::task::yield_now().await;
        drop(tx);
        let (woken, mut rx) = waiting.await.expect("joined");
        assert!(woken, "a gone sender wakes it");
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
        assert!(rx.wait_for(1, later(60_000)).await, "and any later wait");
    }

    #[tokio::test]
    async fn a_send_to_a_gone_receiver_gives_the_piece_back() {
        let (tx, rx) = lane();
        drop(rx);
        assert!(tx.send(piece(3)).is_err());
    }
}
