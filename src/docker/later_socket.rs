//! A client for an engine whose unix socket does not exist yet (a service constructed before
//! Docker is up): bollard's own unix client refuses a missing socket at construction, so this
//! one dials the socket for each request instead, and a request fails only when the engine is
//! still not there. docs/docker.md: an unreachable engine fails the start, never the backend's creation.

use bollard::{BollardRequest, Docker};
use hyper::header::HeaderValue;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

/// A bollard client that dials `path` for every request; a failure to reach it names the path
/// and `origin` (where the address came from).
pub fn connect_later(
    path: String,
    origin: String,
    timeout_secs: u64,
) -> Result<Docker, bollard::errors::Error> {
    // Where the engine should be, once: the origin names the path itself when the caller gave it.
    let engine = if origin.contains(path.as_str()) {
        format!("({origin})")
    } else {
        format!("({origin}) at {path}")
    };
    let transport = move |mut request: BollardRequest| {
        let path = path.clone();
        let engine = engine.clone();
        async move {
            // One request per connection.
            super::traced::for_own_connection(&mut request, HeaderValue::from_static("docker"))?;
            let stream = UnixStream::connect(&path).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot reach the Docker engine {engine}: {e}"),
                )
            })?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection.with_upgrades());
            Ok(sender.send_request(request).await?)
        }
    };
    Docker::connect_with_custom_transport(
        transport,
        Some("http://docker"),
        timeout_secs,
        bollard::API_DEFAULT_VERSION,
    )
}

/// Whether bollard's own unix client would refuse `path` now (it checks that the socket exists).
pub fn missing(path: &str) -> bool {
    !std::path::Path::new(path).exists()
}
