//! Connecting to the engine: `DOCKER_HOST` or the default socket, or what the caller named.

use std::time::Duration;

use bollard::Docker;

use super::address;
use super::options::Engine;
use super::tls;
use crate::lifecycle::error::OwnerError;

/// Requests wait at most this long for response headers. Archive uploads answer only after the
/// whole body, so long transfers use their own clone with a longer limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

pub fn connect(engine: &Engine) -> Result<Docker, OwnerError> {
    let unreachable =
        |e: String| OwnerError::driver(format!("cannot reach the Docker engine: {e}"));
    let connected = match engine {
        Engine::Default => match default_tls_host() {
            Some(host) => {
                let material = tls::material_from_environment().map_err(unreachable)?;
                tls::connect(&host, &material, REQUEST_TIMEOUT)
            }
            None => match std::env::var("DOCKER_HOST") {
                Ok(host) if is_plain_tcp(&host) => plain_tcp(&host),
                _ => Docker::connect_with_defaults().map_err(|e| e.to_string()),
            },
        },
        Engine::Socket(path) => Docker::connect_with_unix(
            path,
            REQUEST_TIMEOUT.as_secs(),
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| e.to_string()),
        Engine::Url(url) if is_plain_tcp(url) => plain_tcp(url),
        Engine::Url(url) => Docker::connect_with_host(url).map_err(|e| e.to_string()),
        Engine::Tls { url, material } => tls::connect(url, material, REQUEST_TIMEOUT),
    };
    connected
        .map(|docker| docker.with_timeout(REQUEST_TIMEOUT))
        .map_err(unreachable)
}

fn is_plain_tcp(url: &str) -> bool {
    url.starts_with("tcp://") || url.starts_with("http://")
}

/// Plain HTTP to `host:port`, the port defaulting to the engine's 2375 as with the docker CLI.
fn plain_tcp(url: &str) -> Result<Docker, String> {
    let address = format!("tcp://{}", address::authority(url, address::PLAIN_PORT));
    Docker::connect_with_http(
        &address,
        REQUEST_TIMEOUT.as_secs(),
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| e.to_string())
}

/// `DOCKER_HOST` when the docker CLI would reach it over TLS (`DOCKER_TLS_VERIFY` set and a
/// `tcp://` or `https://` host).
fn default_tls_host() -> Option<String> {
    let host = std::env::var("DOCKER_HOST").ok()?;
    let remote = host.starts_with("tcp://") || host.starts_with("https://");
    (remote && tls::verify_requested_by_environment()).then_some(host)
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
    OwnerError::driver(format!("{what}: {}", with_causes(&error)))
}

/// The error and every cause below it: a transport error such as a refused TLS certificate is
/// only visible in the causes ("client error (Connect)" alone says nothing).
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let shown = inner.to_string();
        if !text.contains(&shown) {
            text.push_str(": ");
            text.push_str(&shown);
        }
        cause = inner.source();
    }
    text
}
