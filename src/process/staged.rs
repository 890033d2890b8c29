//! One output stream's staging between the output pump and its reader: pieces in order, and a
//! wait the reader bounds by a byte count, so a reader gathering a batch is woken once per
//! batch instead of once per piece.
//!
//! Invariants:
//! - pieces and failures arrive in the order they were sent; nothing sent is lost while the
//!   receiver lives;
//! - `wait_for(bytes, deadline)` resolves no later than the first of: `bytes` more than the
//!   receiver took so far are staged, a failure is staged, the sender is gone, `deadline`; once
//!   a failure is staged or the sender is gone, every wait resolves at once;
//! - a sender never waits: a piece is sent, counted, and the reader woken only when it waits
//!   and its count is reached (a failure and the sender's end always wake it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::lifecycle::error::OwnerError;

/// A piece of one stream's output, or its failure.
pub type Received = Result<Bytes, OwnerError>;

struct Shared {
    /// Bytes sent so far, every piece counted once it is in the channel.
    sent: AtomicU64,
    /// The `sent` count a waiting reader wants to be woken at; 0 when no wait asked for one.
    wake_at: AtomicU64,
    /// A failure is staged, or the sender is gone (set once its channel is closed): no wait
    /// needs to wait any more.
    ended: AtomicBool,
    /// Wakes a waiting reader (a stored permit if it is not waiting yet: the wait re-checks).
    wake: Notify,
}

/// The pump's side. There is one: dropping it ends the stream.
pub struct StagedSender {
    tx: mpsc::UnboundedSender<Received>,
    /// Declared after `tx`, so dropped after it: the channel is closed when the reader is told.
    shared: EndsOnDrop,
}

/// The sender's hold on the shared state: once dropped, the stream has ended.
struct EndsOnDrop(Arc<Shared>);

impl Drop for EndsOnDrop {
    fn drop(&mut self) {
        // A wait that sees `ended` finds the channel closed (`try_recv` says `Disconnected`
        // once it is drained).
        self.0.ended.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }
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
        ended: AtomicBool::new(false),
        wake: Notify::new(),
    });
    (
        StagedSender {
            tx,
            shared: EndsOnDrop(Arc::clone(&shared)),
        },
        StagedReceiver {
            rx,
            shared,
            taken: 0,
        },
    )
}

impl StagedSender {
    /// The receiver takes nothing more (it closed, or is gone): a piece for it need not wait
    /// for staging space.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Stages `item`; gives it back when the receiver is gone or a failure was staged (a
    /// failure is the last thing a lane takes, so `ended` stays true only with nothing after).
    pub fn send(&self, item: Received) -> Result<(), Received> {
        if self.shared.0.ended.load(Ordering::SeqCst) {
            return Err(item);
        }
        let bytes = item
            .as_ref()
            .map(|bytes| bytes.len() as u64)
            .map_err(|_| ());
        self.tx.send(item).map_err(|refused| refused.0)?;
        let shared = &self.shared.0;
        let wake = match bytes {
            // Counted after the piece is in the channel, and compared with a wait registered
            // before the reader read the count: one of the two sees the other.
            Ok(bytes) => {
                let sent = shared.sent.fetch_add(bytes, Ordering::SeqCst) + bytes;
                let at = shared.wake_at.load(Ordering::SeqCst);
                at != 0 && sent >= at
            }
            Err(_) => {
                shared.ended.store(true, Ordering::SeqCst);
                true
            }
        };
        if wake {
            shared.wake.notify_one();
        }
        Ok(())
    }
}

/// Unsets a wait's `wake_at` however the wait ends (also when its future is dropped).
struct WakeAt<'a>(&'a AtomicU64);

impl Drop for WakeAt<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::SeqCst);
    }
}

impl StagedReceiver {
    fn took(&mut self, item: &Received) {
        if let Ok(bytes) = item {
            self.taken += bytes.len() as u64;
        }
    }

    /// The next piece or failure; `None` once the sender is gone and nothing is staged.
    pub async fn recv(&mut self) -> Option<Received> {
        let item = self.rx.recv().await?;
        self.took(&item);
        Some(item)
    }

    /// Bytes staged and not taken yet.
    pub fn unread(&self) -> u64 {
        self.shared
            .sent
            .load(Ordering::SeqCst)
            .saturating_sub(self.taken)
    }

    /// Takes nothing more: the sender's next `send` gives its item back. What is staged
    /// already can still be taken (`try_recv`).
    pub fn close(&mut self) {
        self.rx.close();
    }

    /// The next piece or failure staged now, without waiting.
    pub fn try_recv(&mut self) -> Result<Received, TryRecvError> {
        let item = self.rx.try_recv()?;
        self.took(&item);
        Ok(item)
    }

    /// Waits until `bytes` more than taken so far are staged, a failure is staged, the sender
    /// is gone, or `deadline`; `false` when the deadline ended it.
    pub async fn wait_for(&mut self, bytes: u64, deadline: Instant) -> bool {
        let at = self.taken.saturating_add(bytes.max(1));
        let woken = self.shared.wake.notified();
        tokio::pin!(woken);
        // Registered before the count is read, so a send in between wakes it.
        woken.as_mut().enable();
        self.shared.wake_at.store(at, Ordering::SeqCst);
        let _unset = WakeAt(&self.shared.wake_at);
        loop {
            if self.shared.sent.load(Ordering::SeqCst) >= at
                || self.shared.ended.load(Ordering::SeqCst)
            {
                return true;
            }
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep_until(deadline) => return false,
            }
            // A permit stored by an earlier send or failure may wake it early: look again.
            woken.set(self.shared.wake.notified());
            woken.as_mut().enable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::error::OperationCode;
    use std::future::Future;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn piece(n: usize) -> Received {
        Ok(Bytes::from(vec![7u8; n]))
    }

    fn later(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    /// `future`, counting how often it is polled (once, plus once per wake).
    fn counted<F: Future>(future: F, polls: Arc<AtomicUsize>) -> impl Future<Output = F::Output> {
        let mut future = Box::pin(future);
        std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            future.as_mut().poll(cx)
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_woken_once_its_bytes_are_staged_not_once_per_piece() {
        let (tx, mut rx) = lane();
        tx.send(piece(10)).expect("sent");
        assert_eq!(rx.try_recv().expect("a piece").expect("bytes").len(), 10);
        let polls = Arc::new(AtomicUsize::new(0));
        let waiting = tokio::spawn(counted(
            async move {
                let woken = rx.wait_for(100, later(60_000)).await;
                (woken, rx)
            },
            Arc::clone(&polls),
        ));
        tokio::task::yield_now().await;
        assert_eq!(polls.load(Ordering::SeqCst), 1, "it waits");
        for _ in 0..9 {
            tx.send(piece(10)).expect("sent");
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished(), "short of 100 bytes it waits on");
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1, "no piece woke it");
        tx.send(piece(10)).expect("sent");
        let (woken, mut rx) = waiting.await.expect("joined");
        assert!(woken, "the 100th byte wakes it before the deadline");
        assert_eq!(polls.load(Ordering::SeqCst), 2, "one wake for the batch");
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
    async fn a_stored_wake_does_not_end_a_wait_short_of_its_bytes() {
        let (tx, mut rx) = lane();
        tx.send(piece(5)).expect("sent");
        // As a send that saw an earlier wait's count would leave it.
        tx.shared.0.wake.notify_one();
        let t0 = Instant::now();
        assert!(
            !rx.wait_for(10, later(3)).await,
            "only the deadline ends it"
        );
        assert_eq!(Instant::now() - t0, Duration::from_millis(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_or_a_gone_sender_ends_every_wait() {
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
        assert!(
            rx.wait_for(1_000, later(60_000)).await,
            "a staged failure ends a later wait at once"
        );
        assert!(rx.try_recv().expect("the failure").is_err());

        let (tx, mut rx) = lane();
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

    /// A sender on one worker, the reader on another: every wait whose bytes were sent is
    /// woken (none runs into its far deadline), and every byte arrives once, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn across_threads_no_wake_is_lost_and_nothing_is_reordered() {
        const PIECES: u32 = 20_000;
        let (tx, mut rx) = lane();
        let sender = tokio::spawn(async move {
            for i in 0..PIECES {
                tx.send(Ok(Bytes::copy_from_slice(&i.to_be_bytes())))
                    .expect("sent");
                if i % 7 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut next = 0u32;
        loop {
            let sent_all = rx.wait_for(4 * 16, later(10_000)).await;
            assert!(sent_all, "a wait ran into its deadline: a wake was lost");
            loop {
                match rx.try_recv() {
                    Ok(item) => {
                        let bytes = item.expect("bytes");
                        assert_eq!(&bytes[..], &next.to_be_bytes()[..], "in order");
                        next += 1;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        assert_eq!(next, PIECES, "every piece arrived");
                        sender.await.expect("joined");
                        return;
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn nothing_is_staged_after_a_failure() {
        let (tx, mut rx) = lane();
        tx.send(Err(OwnerError::operation(OperationCode::Cancelled, "gone")))
            .expect("sent");
        assert!(
            tx.send(piece(3)).is_err(),
            "a piece after the failure is refused"
        );
        assert!(rx.try_recv().expect("the failure").is_err());
        assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    }

    #[tokio::test]
    async fn a_send_to_a_gone_receiver_gives_the_piece_back() {
        let (tx, rx) = lane();
        drop(rx);
        assert!(tx.send(piece(3)).is_err());
    }
}
