//! Cleanup-only ownership of a reconciled sandbox: stop and destroy, never run.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use super::driver::RecoveredDriver;
use super::error::{CleanupOperation, OwnerError};
use super::freeze::{observe_freeze, FreezeTo};
use super::observe::{enter, observe, Actual, Observed};
use crate::limits::CLEANUP_MS_MAX;
use crate::policy::request::StreamLimits;
use crate::process::io::ProcessIo;
use crate::recovery::continuation::{check_continuation, Continuation};
use crate::recovery::record::SandboxRecoveryRecord;

#[derive(Clone)]
pub struct RecoveredOwner {
    inner: Arc<Inner>,
}

struct Inner {
    driver: Arc<dyn RecoveredDriver>,
    record: Mutex<SandboxRecoveryRecord>,
    stop: Mutex<Option<Actual<()>>>,
    destroy: Mutex<Option<Actual<()>>>,
    attached: Mutex<Attached>,
}

/// The last attachment's streams (not kept alive by the owner), and whether compute is
/// stopping: a stop tells the streams attached before it, an attachment after it tells itself.
struct Attached {
    io: Weak<ProcessIo>,
    stopping: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RecoveredOwner {
    pub fn new(driver: Arc<dyn RecoveredDriver>, record: SandboxRecoveryRecord) -> Self {
        Self {
            inner: Arc::new(Inner {
                driver,
                record: Mutex::new(record),
                stop: Mutex::new(None),
                destroy: Mutex::new(None),
                attached: Mutex::new(Attached {
                    io: Weak::new(),
                    stopping: false,
                }),
            }),
        }
    }

    /// The last record accepted from the driver.
    pub fn recovery_record(&self) -> SandboxRecoveryRecord {
        lock(&self.inner.record).clone()
    }

    /// Accepts the driver's current record if it only continues the reconciled identity.
    pub fn observe_record(
        &self,
        next: SandboxRecoveryRecord,
    ) -> Result<SandboxRecoveryRecord, OwnerError> {
        let mut record = lock(&self.inner.record);
        check_continuation(&record, &next, Continuation::Reconciliation)
            .map_err(OwnerError::state)?;
        *record = next.clone();
        Ok(next)
    }

    async fn refresh_record(&self) -> Result<SandboxRecoveryRecord, OwnerError> {
        let next = Arc::clone(&self.inner.driver).recovery_record().await?;
        self.observe_record(next)
    }

    pub async fn stop(&self) -> Result<(), OwnerError> {
        let actual = self.begin_stop();
        Self::observed(actual, CleanupOperation::Stop).await
    }

    pub async fn destroy(&self) -> Result<(), OwnerError> {
        let actual = {
            let mut slot = lock(&self.inner.destroy);
            match &*slot {
                Some(actual) => actual.clone(),
                None => {
                    let stopped = self.begin_stop();
                    let owner = self.clone();
                    let actual = enter(async move {
                        let result = async {
                            stopped.await?;
                            owner.refresh_record().await?;
                            Arc::clone(&owner.inner.driver).destroy().await
                        }
                        .await;
                        if result.is_err() {
                            *lock(&owner.inner.destroy) = None;
                        }
                        result
                    });
                    *slot = Some(actual.clone());
                    actual
                }
            }
        };
        Self::observed(actual, CleanupOperation::Destroy).await
    }

    /// Pauses or resumes the reconciled sandbox's process, observed within the cleanup bound.
    pub async fn freeze(&self, to: FreezeTo) -> Result<(), OwnerError> {
        let driver = Arc::clone(&self.inner.driver);
        let work = match to {
            FreezeTo::Paused => driver.pause(),
            FreezeTo::Running => driver.resume(),
        };
        observe_freeze(work, to, Duration::from_millis(CLEANUP_MS_MAX)).await
    }

    /// Attaches again to the reconciled sandbox's reattachable process, with `limits` on its
    /// streams; crossing one stops the sandbox (as a live owner's streams do). Observed within
    /// `limit`; once-only per owner is the caller's rule, not this one's.
    pub async fn attach_process(
        &self,
        limits: StreamLimits,
        limit: Duration,
    ) -> Result<Arc<ProcessIo>, OwnerError> {
        let driver = Arc::clone(&self.inner.driver);
        let attached = enter(async move {
            let channels = driver.attach_process().await?;
            Ok(Arc::new(std::sync::Mutex::new(Some(channels))))
        });
        let channels = match observe(attached, Some(limit), &[], "attaching to the process").await {
            Observed::Settled(result) => result?,
            Observed::Interrupted(reason) => return Err(reason),
        };
        let Some(channels) = lock(&channels).take() else {
            return Err(OwnerError::state("the attached streams were already taken"));
        };
        // A weak reference: the streams must not keep the owner alive.
        let owner = Arc::downgrade(&self.inner);
        let io = ProcessIo::new(
            channels,
            limits,
            Arc::new(move |_limit| {
                if let Some(inner) = owner.upgrade() {
                    // The stop runs as its own task (`enter`); nobody needs to observe it here.
                    drop(RecoveredOwner { inner }.begin_stop());
                }
            }),
        );
        let stopping = {
            let mut attached = lock(&self.inner.attached);
            attached.io = Arc::downgrade(&io);
            attached.stopping
        };
        if stopping {
            io.stopping();
        }
        Ok(io)
    }

    fn begin_stop(&self) -> Actual<()> {
        let mut slot = lock(&self.inner.stop);
        if let Some(actual) = &*slot {
            return actual.clone();
        }
        let owner = self.clone();
        let actual = enter(async move {
            let result = async {
                owner.refresh_record().await?;
                let attached = {
                    let mut attached = lock(&owner.inner.attached);
                    attached.stopping = true;
                    attached.io.upgrade()
                };
                if let Some(io) = &attached {
                    // An engine holds a killed container while its attached output is unread.
                    io.stopping();
                }
                Arc::clone(&owner.inner.driver).stop().await?;
                if let Some(io) = attached {
                    // As a live owner's stop: the rest of the output within a bound, then closed.
                    io.close_after_stop().await;
                }
                Ok(())
            }
            .await;
            if result.is_err() {
                *lock(&owner.inner.stop) = None;
            }
            result
        });
        *slot = Some(actual.clone());
        actual
    }

    async fn observed(actual: Actual<()>, operation: CleanupOperation) -> Result<(), OwnerError> {
        let what = match operation {
            CleanupOperation::Stop => "recovered sandbox stop",
            CleanupOperation::Destroy => "recovered sandbox destruction",
        };
        match observe(
            actual,
            Some(Duration::from_millis(CLEANUP_MS_MAX)),
            &[],
            what,
        )
        .await
        {
            Observed::Settled(Ok(())) => Ok(()),
            Observed::Settled(Err(cause)) | Observed::Interrupted(cause) => {
                // The original's texts; the details are in the cause.
                let message = match operation {
                    CleanupOperation::Stop => "Recovered sandbox compute cleanup failed.",
                    CleanupOperation::Destroy => "Recovered sandbox destruction failed.",
                };
                Err(OwnerError::Cleanup {
                    operation,
                    message: message.into(),
                    cause: Arc::new(cause),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use futures::future::{BoxFuture, FutureExt};
    use futures::StreamExt;
    use tokio::sync::mpsc;

    use crate::lifecycle::driver::{OutputStream, ProcessChannels};
    use crate::lifecycle::error::OperationCode;
    use crate::recovery::record::{test_record, Identity};

    type Piece = Result<(OutputStream, Bytes), OwnerError>;

    /// An engine that, as Docker's does, holds a killed process until its attached output is
    /// read: its stop writes more than the staging holds into a connection of one slot.
    struct Engine {
        record: SandboxRecoveryRecord,
        feed: mpsc::Sender<Piece>,
        attached: Mutex<Option<mpsc::Receiver<Piece>>>,
    }

    const PIECES: usize = 64;
    const PIECE: usize = 64 * 1024;

    impl RecoveredDriver for Engine {
        fn recovery_record(
            self: Arc<Self>,
        ) -> BoxFuture<'static, Result<SandboxRecoveryRecord, OwnerError>> {
            futures::future::ready(Ok(self.record.clone())).boxed()
        }

        fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
            async move {
                for _ in 0..PIECES {
                    let piece = Bytes::from(vec![7; PIECE]);
                    self.feed
                        .send(Ok((OutputStream::Stdout, piece)))
                        .await
                        .map_err(|_| OwnerError::driver("the attachment went away"))?;
                }
                Ok(())
            }
            .boxed()
        }

        fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
            futures::future::ready(Ok(())).boxed()
        }

        fn attach_process(
            self: Arc<Self>,
        ) -> BoxFuture<'static, Result<ProcessChannels, OwnerError>> {
            let attached = lock(&self.attached).take();
            async move {
                let mut output = attached.ok_or_else(|| OwnerError::state("attached once only"))?;
                Ok(ProcessChannels {
                    input: Box::pin(tokio::io::sink()),
                    output: crate::lifecycle::driver::output_of_chunks(
                        futures::stream::poll_fn(move |cx| output.poll_recv(cx)).boxed(),
                    ),
                    exit: futures::future::pending().boxed(),
                })
            }
            .boxed()
        }
    }

    #[tokio::test]
    async fn a_stop_reads_past_the_attached_streams_unread_output() {
        let (feed, attached) = mpsc::channel(1);
        let record = test_record(Identity::Planned);
        let engine = Arc::new(Engine {
            record: record.clone(),
            feed,
            attached: Mutex::new(Some(attached)),
        });
        let owner = RecoveredOwner::new(engine, record);
        let io = owner
            .attach_process(StreamLimits::DEFAULT, Duration::from_secs(5))
            .await
            .expect("attached");
        // Nobody reads: without the stop reading on, the engine's stop would never finish.
        tokio::time::timeout(Duration::from_secs(10), owner.stop())
            .await
            .expect("the stop settles")
            .expect("the stop succeeds");
        let mut staged = 0;
        let failure = loop {
            match io.read(OutputStream::Stdout, usize::MAX).await {
                Ok(Some(bytes)) => staged += bytes.len(),
                Ok(None) => panic!("stdout ended after {staged} bytes as if nothing was lost"),
                Err(error) => break error,
            }
        };
        assert!(
            staged > 0 && staged < PIECES * PIECE,
            "{staged} bytes staged"
        );
        assert_eq!(
            failure.code(),
            Some(OperationCode::Cancelled),
            "{failure:?}"
        );
        // stderr lost nothing, but the engine never ended its stream: the stop cut it.
        let cut = io.read(OutputStream::Stderr, usize::MAX).await;
        assert_eq!(
            cut.as_ref().err().and_then(OwnerError::code),
            Some(OperationCode::Cancelled),
            "{cut:?}"
        );
    }
}
