//! Whether the engine saw the kernel kill a container for memory. The container state's
//! `OOMKilled` alone does not say: Docker 20.10 sets it only when the runtime's OOM event reaches
//! it before the container's exit event, and the runtime's shim sends the two from independent
//! watchers. Under gVisor on a busy machine some memory kills arrive the other way round (the
//! `oom` event up to 0.7 s after `die` here), and their state never says `OOMKilled`. The
//! engine still publishes the container's `oom` event, so a leader killed by SIGKILL whose state
//! says no is checked against the engine's events for that container since its start (the
//! engine replays the ones it still holds, then streams new ones), for a short grace. As with
//! the engine's own `OOMKilled`, a memory kill of any process in the container counts. A state
//! whose start is not RFC 3339 in UTC (the engine's form) is not asked about.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{ContainerState, EventMessage};
use bollard::query_parameters::EventsOptionsBuilder;
use bollard::Docker;
use futures::{Stream, StreamExt};

use super::engine_time::EngineTime;

/// How long the engine's events are watched for the container's `oom` event, counted from the
/// question (after the engine has reported the exit): the longest wait a leader killed by
/// SIGKILL for another reason adds to its exit.
pub const OOM_EVENT_GRACE: Duration = Duration::from_secs(2);

/// The moment from which to ask: the container's start, by the engine's clock. `None` when the
/// state does not name it.
pub fn asked_since(state: &ContainerState) -> Option<EngineTime> {
    EngineTime::parse(state.started_at.as_deref()?)
}

/// Whether the engine publishes an `oom` event for container `id` (started as `state` says)
/// within `OOM_EVENT_GRACE`. An engine that cannot be asked says no.
pub async fn oom_event_published(docker: &Docker, id: &str, state: &ContainerState) -> bool {
    let Some(since) = asked_since(state) else {
        return false;
    };
    let filters = HashMap::from([
        ("type", vec!["container"]),
        ("container", vec![id]),
        ("event", vec!["oom"]),
    ]);
    let options = EventsOptionsBuilder::default()
        .since(&since.query())
        .filters(&filters)
        .build();
    oom_among(docker.events(Some(options))).await
}

/// Whether `events` yields an `oom` event within `OOM_EVENT_GRACE`: an error, their end or the
/// grace's end says no.
async fn oom_among<E>(events: impl Stream<Item = Result<EventMessage, E>>) -> bool {
    let published = async {
        tokio::pin!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) if event.action.as_deref() == Some("oom") => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    tokio::time::timeout(OOM_EVENT_GRACE, published)
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(at: Option<&str>) -> ContainerState {
        ContainerState {
            started_at: at.map(str::to_string),
            ..ContainerState::default()
        }
    }

    #[test]
    fn the_engine_is_asked_from_the_containers_start() {
        assert_eq!(
            asked_since(&started(Some("2026-12-02T22:50:00.5Z"))).map(EngineTime::query),
            Some("1796251800.500000000".to_string())
        );
    }

    fn event(action: &str) -> Result<EventMessage, ()> {
        Ok(EventMessage {
            action: Some(action.to_string()),
            ..EventMessage::default()
        })
    }

    /// `item` after `delay`.
    fn later(
        delay: Duration,
        item: Result<EventMessage, ()>,
    ) -> impl Stream<Item = Result<EventMessage, ()>> {
        futures::stream::once(async move {
            tokio::time::sleep(delay).await;
            item
        })
    }

    /// Ended by the grace: not before it, nor later than the timer's resolution after it.
    fn within_grace(elapsed: Duration) -> bool {
        (OOM_EVENT_GRACE..OOM_EVENT_GRACE + Duration::from_millis(5)).contains(&elapsed)
    }

    #[tokio::test(start_paused = true)]
    async fn an_oom_event_replayed_or_coming_within_the_grace_is_found() {
        let replayed = futures::stream::iter([event("start"), event("oom")]);
        assert!(oom_among(replayed).await);
        let late =
            later(Duration::from_millis(1_500), event("oom")).chain(futures::stream::pending());
        assert!(oom_among(late).await);
    }

    #[tokio::test(start_paused = true)]
    async fn no_oom_event_within_the_grace_an_error_or_the_end_says_no() {
        let started = tokio::time::Instant::now();
        let too_late = later(OOM_EVENT_GRACE + Duration::from_millis(1), event("oom"));
        assert!(!oom_among(too_late).await);
        assert!(within_grace(started.elapsed()));

        // Bounded from outside too: a grace that stopped ending would fail here, not hang.
        let started = tokio::time::Instant::now();
        let never = futures::stream::pending::<Result<EventMessage, ()>>();
        let found = tokio::time::timeout(OOM_EVENT_GRACE * 2, oom_among(never)).await;
        assert_eq!(found, Ok(false));
        assert!(within_grace(started.elapsed()));

        let failed = futures::stream::iter([Err(()), event("oom")]);
        assert!(!oom_among(failed).await);
        let ended = futures::stream::iter([event("start"), event("die")]);
        assert!(!oom_among(ended).await);
    }

    #[test]
    fn a_state_without_a_start_is_not_asked_about() {
        assert_eq!(asked_since(&started(Some("0001-01-01T00:00:00Z"))), None);
        assert_eq!(asked_since(&started(None)), None);
    }
}
