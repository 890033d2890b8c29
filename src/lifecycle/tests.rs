//! State-machine tests with a scriptable Rust driver and paused tokio time.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};

use super::cancel::Cancel;
use super::driver::{DriverReservation, Persist, ReadyFacts, StartContext};
use super::error::{CleanupOperation, OperationCode, OwnerError};
use super::owner::SandboxOwner;
use super::state::{Operation, State};
use crate::input::value::from_json;
use crate::policy::effective::{EffectiveDiskQuota, SandboxEffectivePolicy};
use crate::policy::network::NetworkKind;
use crate::policy::request::{parse_sandbox_request, SandboxRequest};
use crate::policy::resources::{Resources, TemporaryStorage};
use crate::recovery::record::{test_record as record, Identity, Phase, SandboxRecoveryRecord};

/// What one driver step does.
#[derive(Clone)]
enum Step {
    Ok,
    Fail(&'static str),
    /// Never settles on its own (a start still honours its cancellation).
    Hang,
    Delay(u64),
}

#[derive(Default)]
struct Script {
    start: VecDeque<Step>,
    stop: VecDeque<Step>,
    destroy: VecDeque<Step>,
    calls: Vec<&'static str>,
    /// Records the driver checkpoints during start (before its one effect).
    checkpoints: Vec<SandboxRecoveryRecord>,
    effective: Option<SandboxEffectivePolicy>,
}

struct TestDriver {
    script: Mutex<Script>,
}

impl TestDriver {
    fn new(edit: impl FnOnce(&mut Script)) -> Arc<Self> {
        let mut script = Script::default();
        edit(&mut script);
        Arc::new(Self {
            script: Mutex::new(script),
        })
    }

    fn calls(&self) -> Vec<&'static str> {
        self.script.lock().expect("script").calls.clone()
    }

    fn next(&self, name: &'static str) -> Step {
        let mut script = self.script.lock().expect("script");
        script.calls.push(name);
        let queue = match name {
            "start" => &mut script.start,
            "stop" => &mut script.stop,
            _ => &mut script.destroy,
        };
        queue.pop_front().unwrap_or(Step::Ok)
    }
}

async fn perform(step: Step) -> Result<(), OwnerError> {
    match step {
        Step::Ok => Ok(()),
        Step::Fail(message) => Err(OwnerError::driver(message)),
        Step::Hang => futures::future::pending().await,
        Step::Delay(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(())
        }
    }
}

impl DriverReservation for TestDriver {
    fn start(
        self: Arc<Self>,
        context: StartContext,
    ) -> BoxFuture<'static, Result<ReadyFacts, OwnerError>> {
        async move {
            let step = self.next("start");
            let (checkpoints, effective) = {
                let script = self.script.lock().expect("script");
                (script.checkpoints.clone(), script.effective.clone())
            };
            for record in checkpoints {
                context.journal.checkpoint(record).await?;
            }
            tokio::select! {
                reason = context.cancel.cancelled() => Err(reason),
                done = perform(step) => done.map(|()| ReadyFacts {
                    effective: effective.unwrap_or_else(exact_effective),
                    workspace: "/sandbox/workspace".into(),
                }),
            }
        }
        .boxed()
    }

    fn stop(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { perform(self.next("stop")).await }.boxed()
    }

    fn destroy(self: Arc<Self>) -> BoxFuture<'static, Result<(), OwnerError>> {
        async move { perform(self.next("destroy")).await }.boxed()
    }
}

struct FailingPersist;

impl Persist for FailingPersist {
    fn persist(
        &self,
        _record: SandboxRecoveryRecord,
    ) -> BoxFuture<'static, Result<(), OwnerError>> {
        async { Err(OwnerError::driver("disk full")) }.boxed()
    }
}

struct RecordingPersist(Mutex<Vec<Phase>>);

impl Persist for RecordingPersist {
    fn persist(&self, record: SandboxRecoveryRecord) -> BoxFuture<'static, Result<(), OwnerError>> {
        self.0.lock().expect("records").push(record.phase);
        async { Ok(()) }.boxed()
    }
}

fn request(execution: serde_json::Value) -> SandboxRequest {
    let mut policy = serde_json::json!({
        "resources": { "cpus": 1, "memoryBytes": 1024, "pids": 16 },
        "temporaryStorage": { "homeBytes": 1024, "tempBytes": 1024 },
        "network": { "kind": "isolated" },
        "deadlines": { "startupMs": 1000, "cleanupMs": 500 },
        "transfers": { "chunkBytes": 65536, "metadataBatchBytes": 65536, "mergeFanIn": 8 },
        "streams": { "maxBufferedInputBytes": 65536, "maxBufferedOutputBytes": 65536, "highWaterMark": 1024 }
    });
    policy["execution"] = execution;
    parse_sandbox_request(&from_json(serde_json::json!({ "policy": policy })))
        .expect("valid request")
}

fn exact_effective() -> SandboxEffectivePolicy {
    SandboxEffectivePolicy {
        resources: Resources {
            cpus: 1.0,
            memory_bytes: 1024,
            pids: 16,
        },
        temporary_storage: TemporaryStorage {
            home_bytes: 1024,
            temp_bytes: 1024,
        },
        network: crate::policy::network::NetworkPolicy::of(NetworkKind::Isolated),
        workspace_disk_quota: EffectiveDiskQuota::NotRequested,
    }
}

fn owner_with(
    driver: &Arc<TestDriver>,
    execution: serde_json::Value,
    persist: Option<Arc<dyn Persist>>,
) -> SandboxOwner {
    SandboxOwner::new(
        "sbx".into(),
        Arc::clone(driver) as Arc<dyn DriverReservation>,
        request(execution),
        record(Identity::Planned),
        persist,
    )
}

fn owner(driver: &Arc<TestDriver>) -> SandboxOwner {
    owner_with(driver, serde_json::json!({ "kind": "until_stopped" }), None)
}

fn start_cause(error: OwnerError) -> OwnerError {
    match error {
        OwnerError::Start { cause, .. } => (*cause).clone(),
        other => panic!("expected a start error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn every_transition_of_a_clean_life() {
    let driver = TestDriver::new(|_| {});
    let owner = owner(&driver);
    assert_eq!(owner.state(), State::Reserved);
    let ready = owner.start(None).await.expect("started");
    assert_eq!(ready.workspace, "/sandbox/workspace");
    assert_eq!(owner.state(), State::Ready);
    owner.stop().await.expect("stopped");
    assert_eq!(owner.state(), State::Stopped);
    owner.stop().await.expect("stop is idempotent");
    owner.destroy().await.expect("destroyed");
    assert_eq!(owner.state(), State::Destroyed);
    owner.destroy().await.expect("destroy is idempotent");
    assert_eq!(driver.calls(), vec!["start", "stop", "destroy"]);
}

#[tokio::test(start_paused = true)]
async fn start_is_once_only() {
    let driver = TestDriver::new(|_| {});
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    assert!(matches!(owner.start(None).await, Err(OwnerError::State(_))));
    let fresh = self::owner(&driver);
    fresh.stop().await.expect("stop before start");
    assert!(matches!(fresh.start(None).await, Err(OwnerError::State(_))));
}

#[tokio::test(start_paused = true)]
async fn failed_start_keeps_cleanup_ownership() {
    let driver = TestDriver::new(|s| s.start.push_back(Step::Fail("image missing")));
    let owner = owner(&driver);
    let cause = start_cause(owner.start(None).await.expect_err("start fails"));
    assert_eq!(cause, OwnerError::driver("image missing"));
    assert_eq!(owner.state(), State::Uncertain(Operation::Start));
    owner.destroy().await.expect("the same owner cleans up");
    assert_eq!(owner.state(), State::Destroyed);
    assert_eq!(driver.calls(), vec!["start", "stop", "destroy"]);
}

#[tokio::test(start_paused = true)]
async fn startup_observation_expiry_leaves_a_live_cleanup_owner() {
    let driver = TestDriver::new(|s| s.start.push_back(Step::Hang));
    let owner = owner(&driver);
    let cause = start_cause(owner.start(None).await.expect_err("start expires"));
    assert_eq!(cause.code(), Some(OperationCode::DeadlineExceeded));
    // The expiry cancels startup and stops compute on its own; destroy joins that stop.
    owner.destroy().await.expect("destroyed after expiry");
    assert_eq!(owner.state(), State::Destroyed);
    assert_eq!(driver.calls(), vec!["start", "stop", "destroy"]);
}

#[tokio::test(start_paused = true)]
async fn cancellation_before_entry_never_reaches_the_driver() {
    let driver = TestDriver::new(|_| {});
    let owner = owner(&driver);
    let caller = Cancel::new();
    caller.cancel(OwnerError::cancelled("caller aborted"));
    let cause = start_cause(owner.start(Some(caller)).await.expect_err("cancelled"));
    assert_eq!(cause.code(), Some(OperationCode::Cancelled));
    tokio::task::yield_now().await;
    assert!(!driver.calls().contains(&"start"));
    assert!(
        owner.start(None).await.is_err(),
        "cancellation never authorizes a replay"
    );
}

#[tokio::test(start_paused = true)]
async fn cancellation_after_entry_stops_the_startup() {
    let driver = TestDriver::new(|s| s.start.push_back(Step::Hang));
    let owner = owner(&driver);
    let caller = Cancel::new();
    let cancel = caller.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        cancel.cancel(OwnerError::cancelled("caller aborted"));
    });
    let cause = start_cause(owner.start(Some(caller)).await.expect_err("cancelled"));
    assert_eq!(cause, OwnerError::cancelled("caller aborted"));
    owner.stop().await.expect("stop joins the background stop");
    assert_eq!(owner.state(), State::Stopped);
    assert_eq!(driver.calls(), vec!["start", "stop"]);
}

#[tokio::test(start_paused = true)]
async fn concurrent_cleanup_joins_one_physical_stop() {
    let driver = TestDriver::new(|s| s.stop.push_back(Step::Delay(100)));
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    let (a, b, c) = tokio::join!(owner.stop(), owner.stop(), owner.destroy());
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(driver.calls(), vec!["start", "stop", "destroy"]);
    assert_eq!(owner.state(), State::Destroyed);
}

#[tokio::test(start_paused = true)]
async fn failed_cleanup_is_retried_by_the_same_owner() {
    let driver = TestDriver::new(|s| {
        s.stop.push_back(Step::Fail("kill refused"));
        s.destroy.push_back(Step::Fail("volume busy"));
    });
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    match owner.stop().await {
        Err(OwnerError::Cleanup {
            operation, cause, ..
        }) => {
            assert_eq!(operation, CleanupOperation::Stop);
            assert_eq!(*cause, OwnerError::driver("kill refused"));
        }
        other => panic!("expected a stop cleanup error, got {other:?}"),
    }
    assert_eq!(owner.state(), State::Uncertain(Operation::Stop));
    owner.stop().await.expect("retry succeeds");
    assert_eq!(owner.state(), State::Stopped);
    match owner.destroy().await {
        Err(OwnerError::Cleanup { operation, .. }) => {
            assert_eq!(operation, CleanupOperation::Destroy)
        }
        other => panic!("expected a destroy cleanup error, got {other:?}"),
    }
    assert_eq!(owner.state(), State::Uncertain(Operation::Destroy));
    owner.destroy().await.expect("retry succeeds");
    assert_eq!(
        driver.calls(),
        vec!["start", "stop", "stop", "destroy", "destroy"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_past_its_bound_is_joined_by_a_retry_never_entered_twice() {
    let driver = TestDriver::new(|s| s.stop.push_back(Step::Hang));
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    for attempt in ["the first stop", "its retry"] {
        match owner.stop().await {
            Err(OwnerError::Cleanup { cause, message, .. }) => {
                assert_eq!(
                    cause.code(),
                    Some(OperationCode::DeadlineExceeded),
                    "{attempt}"
                );
                assert_eq!(
                    message,
                    "Sandbox compute cleanup did not settle successfully."
                );
            }
            other => panic!("{attempt}: expected an expired stop, got {other:?}"),
        }
        assert_eq!(
            owner.state(),
            State::Stopping,
            "the hung stop is not claimed to have ended"
        );
    }
    assert_eq!(
        driver.calls(),
        vec!["start", "stop"],
        "the retry joined the stop already entered"
    );
}

/// A started owner whose stop takes 800 ms, past its 500 ms observation, which has expired.
async fn an_expired_slow_stop() -> (Arc<TestDriver>, SandboxOwner) {
    let driver = TestDriver::new(|s| s.stop.push_back(Step::Delay(800)));
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    assert!(matches!(
        owner.stop().await,
        Err(OwnerError::Cleanup { .. })
    ));
    assert_eq!(owner.state(), State::Stopping);
    (driver, owner)
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_an_expired_stop_settles_with_the_stop_it_joined() {
    let (driver, owner) = an_expired_slow_stop().await;
    owner.stop().await.expect("the joined stop settled");
    assert_eq!(owner.state(), State::Stopped);
    assert_eq!(driver.calls(), vec!["start", "stop"]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_stop_whose_observer_gave_up_still_settles_the_state() {
    let (driver, owner) = an_expired_slow_stop().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(owner.state(), State::Stopped, "the entered stop settled");
    owner.stop().await.expect("already stopped");
    assert_eq!(driver.calls(), vec!["start", "stop"]);
}

#[tokio::test(start_paused = true)]
async fn a_destroy_past_its_bound_is_joined_by_a_retry_until_it_settles() {
    let driver = TestDriver::new(|s| {
        s.destroy.push_back(Step::Delay(800));
    });
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    match owner.destroy().await {
        Err(OwnerError::Cleanup {
            operation: CleanupOperation::Destroy,
            message,
            ..
        }) => assert_eq!(message, "Sandbox destruction did not settle successfully."),
        other => panic!("expected an expired destroy, got {other:?}"),
    }
    assert_eq!(owner.state(), State::Destroying);
    owner.destroy().await.expect("the joined destroy settled");
    assert_eq!(owner.state(), State::Destroyed);
    assert_eq!(
        driver.calls(),
        vec!["start", "stop", "destroy"],
        "one stop and one destroy, whatever the retries"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stop_does_not_wait_past_its_bound_for_a_hung_startup() {
    struct HangingPersist;
    impl Persist for HangingPersist {
        fn persist(
            &self,
            record: SandboxRecoveryRecord,
        ) -> BoxFuture<'static, Result<(), OwnerError>> {
            // The initial record persists; every later one hangs (a stuck user callback).
            let hang = record.phase != Phase::Reserved;
            async move {
                if hang {
                    futures::future::pending::<()>().await;
                }
                Ok(())
            }
            .boxed()
        }
    }
    let mut starting = record(Identity::Creating);
    starting.phase = Phase::Starting;
    let driver = TestDriver::new(|s| s.checkpoints.push(starting));
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "until_stopped" }),
        Some(Arc::new(HangingPersist)),
    );
    let start = owner.begin_start(None).expect("entered");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(matches!(
        owner.stop().await,
        Err(OwnerError::Cleanup { .. })
    ));
    drop(start);
}

#[tokio::test(start_paused = true)]
async fn cleanup_never_checkpoints_as_the_original() {
    let persist = Arc::new(RecordingPersist(Mutex::new(Vec::new())));
    let driver = TestDriver::new(|_| {});
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "until_stopped" }),
        Some(persist.clone()),
    );
    owner.start(None).await.expect("started");
    let started = owner.recovery_record();
    owner.stop().await.expect("stopped");
    owner.destroy().await.expect("destroyed");
    // The initial record only (this driver checkpoints nothing): stop and destroy persist nothing.
    assert_eq!(*persist.0.lock().expect("records"), vec![Phase::Reserved]);
    assert_eq!(
        owner.recovery_record(),
        started,
        "the record does not change after start"
    );
}

#[tokio::test(start_paused = true)]
async fn persistence_failure_fences_but_cleanup_still_works() {
    let driver = TestDriver::new(|_| {});
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "until_stopped" }),
        Some(Arc::new(FailingPersist)),
    );
    let cause = start_cause(owner.start(None).await.expect_err("persist fails"));
    assert_eq!(cause.code(), Some(OperationCode::PersistenceFailure));
    assert!(
        !driver.calls().contains(&"start"),
        "no effect without a persisted record"
    );
    owner
        .destroy()
        .await
        .expect("cleanup does not need persistence");
    assert_eq!(owner.state(), State::Destroyed);
}

#[tokio::test(start_paused = true)]
async fn checkpoints_persist_before_effects_and_keep_identity() {
    let persist = Arc::new(RecordingPersist(Mutex::new(Vec::new())));
    let mut starting = record(Identity::Creating);
    starting.phase = Phase::Starting;
    let driver = TestDriver::new(|s| s.checkpoints.push(starting.clone()));
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "until_stopped" }),
        Some(persist.clone()),
    );
    owner.start(None).await.expect("started");
    assert_eq!(
        *persist.0.lock().expect("records"),
        vec![Phase::Reserved, Phase::Starting]
    );
    assert_eq!(owner.recovery_record(), starting);

    let mut renamed = record(Identity::Planned);
    renamed.namespace = "other".into();
    let driver = TestDriver::new(|s| s.checkpoints.push(renamed));
    let owner = self::owner(&driver);
    let cause = start_cause(
        owner
            .start(None)
            .await
            .expect_err("identity change refused"),
    );
    assert!(matches!(cause, OwnerError::State(_)));
    assert_eq!(owner.recovery_record(), record(Identity::Planned));
    owner.destroy().await.expect("cleanup still works");
}

#[tokio::test(start_paused = true)]
async fn a_looser_effective_policy_fails_startup_closed() {
    let mut loose = exact_effective();
    loose.resources.memory_bytes = 4096;
    loose.network = crate::policy::network::NetworkPolicy::of(NetworkKind::Outbound);
    let driver = TestDriver::new(|s| s.effective = Some(loose));
    let owner = owner(&driver);
    match start_cause(owner.start(None).await.expect_err("looser policy")) {
        OwnerError::Unsupported(message) => {
            assert!(
                message.contains("memoryBytes") && message.contains("outbound"),
                "{message}"
            );
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    owner.destroy().await.expect("cleanup");
}

#[tokio::test(start_paused = true)]
async fn a_thirty_day_execution_deadline_stops_the_whole_workload_exactly() {
    const THIRTY_DAYS_MS: u64 = 30 * 86_400_000;
    let driver = TestDriver::new(|_| {});
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "deadline", "timeoutMs": THIRTY_DAYS_MS }),
        None,
    );
    owner.start(None).await.expect("started");
    let execution = owner.enter_execution().expect("process entry");
    assert!(
        owner.enter_execution().is_err(),
        "one execution per sandbox"
    );
    tokio::time::sleep(Duration::from_millis(THIRTY_DAYS_MS - 1)).await;
    assert_eq!(owner.state(), State::Ready, "not a millisecond early");
    tokio::time::sleep(Duration::from_millis(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(owner.state(), State::Stopped);
    assert_eq!(
        execution.reason().and_then(|r| r.code()),
        Some(OperationCode::DeadlineExceeded)
    );
    assert_eq!(driver.calls(), vec!["start", "stop"]);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_beyond_two_years_is_exact() {
    const THREE_YEARS_MS: u64 = 3 * 365 * 86_400_000;
    let driver = TestDriver::new(|_| {});
    let owner = owner_with(
        &driver,
        serde_json::json!({ "kind": "deadline", "timeoutMs": THREE_YEARS_MS }),
        None,
    );
    owner.start(None).await.expect("started");
    owner.enter_execution().expect("process entry");
    tokio::time::sleep(Duration::from_millis(THREE_YEARS_MS - 1)).await;
    assert_eq!(owner.state(), State::Ready);
    tokio::time::sleep(Duration::from_millis(2)).await;
    tokio::task::yield_now().await;
    assert_eq!(owner.state(), State::Stopped);
}

#[tokio::test(start_paused = true)]
async fn until_stopped_installs_no_timer() {
    let driver = TestDriver::new(|_| {});
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    owner.enter_execution().expect("process entry");
    tokio::time::sleep(Duration::from_millis(365 * 86_400_000)).await;
    assert_eq!(owner.state(), State::Ready);
    owner.stop().await.expect("stopped");
}

#[tokio::test(start_paused = true)]
async fn a_process_start_cancelled_before_entry_never_reaches_the_driver_and_stops() {
    let driver = TestDriver::new(|_| {});
    let owner = owner(&driver);
    owner.start(None).await.expect("started");
    owner
        .reserve_process(crate::process::spec::SandboxProcessSpec {
            executable: "/bin/true".into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: "/sandbox/workspace".into(),
            reattachable: false,
        })
        .expect("reserved");
    let caller = Cancel::new();
    caller.cancel(OwnerError::cancelled("caller aborted"));
    let error = owner
        .begin_process_start(Some(&caller))
        .err()
        .expect("cancelled");
    assert_eq!(
        error,
        OwnerError::cancelled("Process startup was cancelled before entry.")
    );
    // As every failed start (the original's rule): fenced, then stopped in the background.
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(owner.state(), State::Stopped);
    assert_eq!(driver.calls(), vec!["start", "stop"]);
    owner.stop().await.expect("stopped already");
}
