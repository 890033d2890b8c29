use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::*;
use crate::input::Value;
use crate::lifecycle::error::OperationCode;
use crate::test_support::settles;

/// A feed whose wakes are counted (input, room), with a one-second cleanup bound.
struct Fed {
    channels: ProcessChannels,
    feed: Arc<ExternalFeed>,
    execution: Cancel,
    wakes: Arc<[AtomicUsize; 2]>,
}

fn fed() -> Fed {
    let execution = Cancel::new();
    let wakes: Arc<[AtomicUsize; 2]> = Arc::default();
    let counted = Arc::clone(&wakes);
    let (channels, feed) = external_process(ExternalSettings {
        execution: execution.clone(),
        cleanup: Duration::from_secs(30),
        on_wake: Arc::new(move |wake| {
            let slot = if wake == Wake::Input { 0 } else { 1 };
            counted[slot].fetch_add(1, Ordering::SeqCst);
        }),
    });
    Fed {
        channels,
        feed,
        execution,
        wakes,
    }
}

fn bytes(stream: OutputStream, text: &'static str) -> OutputEvent {
    OutputEvent::Bytes(stream, Bytes::from_static(text.as_bytes()))
}

#[tokio::test]
async fn output_keeps_its_order_refuses_past_the_queue_and_wakes_the_feeder_for_room() {
    let Fed {
        mut channels,
        feed,
        wakes,
        ..
    } = fed();
    let out = OutputStream::Stdout;
    assert_eq!(feed.offer(out, Bytes::from_static(b"a")), Offer::Taken);
    assert_eq!(feed.offer_end(OutputStream::Stderr), Offer::Taken);
    assert_eq!(feed.offer(out, Bytes::from_static(b"b")), Offer::Full);
    assert_eq!(wakes[1].load(Ordering::SeqCst), 0);
    let first = settles("the first event", channels.output.next()).await;
    assert_eq!(first, Some(Ok(bytes(out, "a"))));
    assert_eq!(wakes[1].load(Ordering::SeqCst), 1, "room, once");
    assert_eq!(feed.offer(out, Bytes::from_static(b"b")), Offer::Taken);
    let second = settles("the second event", channels.output.next()).await;
    assert_eq!(second, Some(Ok(OutputEvent::End(OutputStream::Stderr))));
    assert_eq!(feed.offer_cut(out, Cut::Closed), Offer::Taken);
    // Nothing follows a stream's end or failure.
    assert_eq!(feed.offer(out, Bytes::from_static(b"c")), Offer::Taken);
    let rest: Vec<_> = settles("the rest", channels.output.collect()).await;
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0], Ok(bytes(out, "b")));
    match &rest[1] {
        Ok(OutputEvent::Failed(OutputStream::Stdout, error)) => {
            assert_eq!(error.code(), Some(OperationCode::Cancelled));
            assert!(error
                .to_string()
                .contains("stdout was closed before the driver ended it"));
        }
        other => panic!("a cut, not {other:?}"),
    }
}

#[tokio::test]
async fn a_feeder_waiting_for_room_learns_the_owner_reads_nothing_more() {
    let Fed {
        channels,
        feed,
        wakes,
        ..
    } = fed();
    let out = OutputStream::Stdout;
    while feed.offer(out, Bytes::from_static(b"x")) == Offer::Taken {}
    drop(channels);
    assert_eq!(wakes[1].load(Ordering::SeqCst), 1);
    assert_eq!(feed.offer(out, Bytes::from_static(b"x")), Offer::Closed);
}

#[tokio::test]
async fn stdin_is_taken_a_chunk_at_a_time_and_its_end_waits_for_the_driver() {
    let Fed {
        mut channels,
        feed,
        wakes,
        ..
    } = fed();
    assert_eq!(feed.input_take(), Take::Nothing);
    settles("a write", channels.input.write_all(b"one"))
        .await
        .expect("taken");
    assert_eq!(
        wakes[0].load(Ordering::SeqCst),
        1,
        "the idle feeder is woken"
    );
    // The queue holds one chunk: the next write waits until the feeder takes it.
    let mut input = channels.input;
    let second = tokio::spawn(async move {
        input.write_all(b"two").await.expect("taken");
        input.shutdown().await.map(|()| input)
    });
    tokio::task::yield_now().await;
    assert_eq!(feed.input_take(), Take::Chunk(Bytes::from_static(b"one")));
    let mut taken = Vec::new();
    let ended = loop {
        match feed.input_take() {
            Take::Chunk(chunk) => taken.push(chunk),
            Take::End => break true,
            Take::Nothing => tokio::time::sleep(Duration::from_millis(1)).await,
            Take::Over => break false,
        }
    };
    assert!(ended);
    assert_eq!(taken, vec![Bytes::from_static(b"two")]);
    assert!(
        !second.is_finished(),
        "the end waits for the driver's stdin to finish"
    );
    feed.input_ended();
    settles("the end", second)
        .await
        .expect("joined")
        .expect("ended");
    assert_eq!(feed.input_take(), Take::Over);
}

#[tokio::test]
async fn a_failed_driver_stdin_fails_what_waits_with_its_cause_or_the_stop() {
    let Fed {
        channels,
        feed,
        execution,
        ..
    } = fed();
    let mut input = channels.input;
    input.write_all(b"queued").await.expect("taken");
    let waiting = tokio::spawn(async move { input.write_all(b"waits").await });
    tokio::task::yield_now().await;
    feed.input_failed(OwnerError::driver("write EPIPE"));
    let error = settles("the waiting write", waiting)
        .await
        .expect("joined")
        .expect_err("failed");
    let carried = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<OwnerError>())
        .cloned();
    let carried = carried.expect("the owner's failure travels inside");
    assert_eq!(carried.code(), Some(OperationCode::StreamFailure));
    assert!(carried
        .to_string()
        .contains("writing the process's stdin failed: write EPIPE"));
    assert_eq!(feed.input_take(), Take::Over);

    drop(execution);

    // Once compute is stopping, a close is the stop's doing.
    let stopping = fed();
    stopping.execution.cancel(OwnerError::cancelled("stopping"));
    stopping.feed.input_closed();
    let mut input = stopping.channels.input;
    let error = input.write_all(b"x").await.expect_err("failed");
    let carried = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<OwnerError>())
        .cloned();
    assert!(carried
        .expect("carried")
        .to_string()
        .contains("the sandbox stopped before the driver took the process's stdin"));

    // A close after the driver's stdin finished fails nothing.
    let Fed { channels, feed, .. } = fed();
    let mut input = channels.input;
    input.write_all(b"x").await.expect("taken");
    let ending = tokio::spawn(async move { input.shutdown().await });
    while feed.input_take() != Take::End {
        tokio::task::yield_now().await;
    }
    feed.input_ended();
    feed.input_closed();
    settles("the end", ending)
        .await
        .expect("joined")
        .expect("ended");
}

#[tokio::test]
async fn a_writer_dropped_without_its_end_still_ends_the_driver_stdin() {
    let Fed {
        channels,
        feed,
        wakes,
        ..
    } = fed();
    assert_eq!(feed.input_take(), Take::Nothing);
    drop(channels);
    assert_eq!(wakes[0].load(Ordering::SeqCst), 1);
    assert_eq!(feed.input_take(), Take::End);
}

#[tokio::test(start_paused = true)]
async fn a_reported_fate_is_the_exit_and_a_lost_one_is_unavailable_only_after_a_stop() {
    let Fed { channels, feed, .. } = fed();
    feed.report_exit(Some(ProcessExit::Exited(3)));
    feed.report_exit(Some(ProcessExit::Exited(4)));
    assert_eq!(channels.exit.await, ProcessExit::Exited(3));

    let Fed {
        channels,
        feed,
        execution,
        ..
    } = fed();
    feed.report_exit(None);
    let exit = tokio::spawn(channels.exit);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(!exit.is_finished(), "no fate is made up before a stop");
    execution.cancel(OwnerError::cancelled("stopping"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!exit.is_finished(), "the stop has not settled yet");
    feed.stop_settled();
    tokio::time::sleep(exit::RECEIPT_AFTER_STOP + Duration::from_millis(1)).await;
    assert_eq!(exit.await.expect("joined"), ProcessExit::Unavailable);

    // A driver whose stop never settles: the cleanup bound after the stop began.
    let Fed {
        channels,
        execution,
        feed,
        ..
    } = fed();
    let exit = tokio::spawn(channels.exit);
    execution.cancel(OwnerError::cancelled("stopping"));
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(!exit.is_finished());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(exit.await.expect("joined"), ProcessExit::Unavailable);
    drop(feed);
}

#[test]
fn a_reported_exit_is_read_as_the_contract_says() {
    let value = |fields: Vec<(&str, Value)>| Value::object(fields);
    let s = Value::string;
    assert_eq!(
        reported_exit(&value(vec![
            ("kind", s("exited")),
            ("code", Value::Number(4.0))
        ])),
        Some(ProcessExit::Exited(4))
    );
    assert_eq!(
        reported_exit(&value(vec![
            ("kind", s("exited")),
            ("code", Value::Number(1.5))
        ])),
        None
    );
    assert_eq!(
        reported_exit(&value(vec![
            ("kind", s("signaled")),
            ("signal", s("SIGTERM"))
        ])),
        Some(ProcessExit::Signaled("SIGTERM".into()))
    );
    assert_eq!(
        reported_exit(&value(vec![
            ("kind", s("signaled")),
            ("signal", s("SIGKILL")),
            ("reason", s("out_of_memory"))
        ])),
        Some(ProcessExit::OutOfMemory)
    );
    assert_eq!(
        reported_exit(&value(vec![("kind", s("signaled")), ("signal", s(""))])),
        None
    );
    assert_eq!(
        reported_exit(&value(vec![
            ("kind", s("unavailable")),
            ("reason", s("sandbox_stopped"))
        ])),
        Some(ProcessExit::Unavailable)
    );
    assert_eq!(reported_exit(&Value::Undefined), None);
    assert_eq!(reported_exit(&s("exited")), None);
}
