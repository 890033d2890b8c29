//! Connecting to the engine: `DOCKER_HOST` or the default socket, or what the caller named.

use std::time::Duration;

use bollard::Docker;

use super::options::Engine;
use crate::lifecycle::error::OwnerError;

/// Requests wait at most this long for response headers. Archive uploads answer only after the
/// whole body, so long transfers use their own clone with a longer limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

pub fn connect(engine: &Engine) -> Result<Docker, OwnerError> {
    let connected = match engine {
        Engine::Default => Docker::connect_with_defaults(),
        Engine::Socket(path) => Docker::connect_with_unix(
            path,
            REQUEST_TIMEOUT.as_secs(),
            bollard::API_DEFAULT_VERSION,
        ),
        Engine::Url(url) => Docker::connect_with_host(url),
    };
    connected
        .map(|docker| docker.with_timeout(REQUEST_TIMEOUT))
        .map_err(|e| OwnerError::driver(format!("cannot reach the Docker engine: {e}")))
}

/// True for the engine's "no such object" answer.
pub fn is_not_found(error: &bollard::errors::Error) -> bool {
    matches!(
        error,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

pub fn engine_error(what: &str, error: bollard::errors::Error) -> OwnerError {
    OwnerError::driver(format!("{what}: {error}"))
}
