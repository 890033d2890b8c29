//! The backend's API requests: each bounded by `REQUEST_TIMEOUT`, and sent again while it failed
//! on the connection as far as that is safe (`Retry`), so an API server restarting or a pooled
//! connection it closed is ridden over; the server's answers (a refusal, an absence) never are.

use std::time::Duration;

use super::client::REQUEST_TIMEOUT;
use crate::lifecycle::error::OwnerError;

pub fn api_error(what: &str, error: kube::Error) -> OwnerError {
    OwnerError::driver(format!("{what}: {error}"))
}

pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// How long an idempotent request waits before it is tried again after its connection failed.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Whether `error` is the connection's, not the API server's answer: a pooled connection the
/// server closed, or a server restarting or not answering yet.
pub fn is_transport(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Service(_) | kube::Error::HyperError(_))
}

/// Whether `error` is a connection never made (refused, unreachable): the request was never
/// sent, so even one that is not idempotent (a creation, an attach) may be sent again.
fn never_sent(error: &kube::Error) -> bool {
    let kube::Error::Service(inner) = error else {
        return false;
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(inner.as_ref());
    while let Some(cause) = source {
        if let Some(client) = cause.downcast_ref::<hyper_util::client::legacy::Error>() {
            return client.is_connect();
        }
        source = cause.source();
    }
    false
}

/// Which failed requests are sent again.
#[derive(Clone, Copy)]
pub enum Retry {
    /// Any the connection failed (a read, a delete by UID: sending it twice does no harm).
    Idempotent,
    /// Only those never sent (a creation, an attach, an exec).
    NeverSent,
}

/// A request tried again while its failure is the connection's (as `retry` allows), all within
/// `REQUEST_TIMEOUT`: an API server restarting, or a pooled connection it closed, is ridden
/// over; its answers (a refusal, an absence) are not. `Err(None)`: no answer within the bound.
pub async fn retried<T, F, Fut>(retry: Retry, request: F) -> Result<T, Option<kube::Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, request()).await {
            Err(_) => return Err(None),
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(e))
                if match retry {
                    Retry::Idempotent => is_transport(&e),
                    Retry::NeverSent => never_sent(&e),
                } && tokio::time::Instant::now() + RETRY_PAUSE < deadline =>
            {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Ok(Err(e)) => return Err(Some(e)),
        }
    }
}

/// `retried`, its failure an error saying `what` failed.
pub async fn requested<T, F, Fut>(what: &str, retry: Retry, request: F) -> Result<T, OwnerError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    retried(retry, request)
        .await
        .map_err(|failure| match failure {
            Some(e) => api_error(what, e),
            None => OwnerError::driver(format!(
                "{what}: the API server did not answer within {} s",
                REQUEST_TIMEOUT.as_secs()
            )),
        })
}

/// An idempotent request (`requested` with `Retry::Idempotent`).
pub async fn idempotent<T, F, Fut>(what: &str, request: F) -> Result<T, OwnerError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    requested(what, Retry::Idempotent, request).await
}
