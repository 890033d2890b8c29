//! Engine requests in debug output: with `NODE_DEBUG=native-sandbox` a backend's client sends
//! each request over a connection of its own, dialed by the backend's `Dialer` (the very engine
//! its other requests reach), and writes one line per request once the engine answered:
//! `engine <METHOD> <path> <status> <ms> ms`. The path goes without its query, which can hold a
//! guest path; a request that got no answer reads `failed`. Without `NODE_DEBUG`, bollard's own
//! pooled client serves every request and nothing here runs.

use std::time::Instant;

use bollard::{BollardRequest, Docker};
use hyper::header::{HeaderValue, HOST};
use hyper_util::rt::TokioIo;

use super::dialer::Dialer;
use crate::debug;

/// Makes `request` one for a connection of its own: origin-form (the path and query only), with
/// the `Host` header the engine requires.
pub fn for_own_connection(
    request: &mut BollardRequest,
    host: HeaderValue,
) -> Result<(), bollard::errors::Error> {
    let target = request
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    *request.uri_mut() = target.parse().map_err(|e: hyper::http::uri::InvalidUri| {
        bollard::errors::Error::HttpClientError { err: e.into() }
    })?;
    request.headers_mut().insert(HOST, host);
    Ok(())
}

/// A bollard client that traces every request; a failure to reach the engine names `origin`
/// (where its address came from).
pub fn client(
    dialer: Dialer,
    origin: String,
    timeout_secs: u64,
) -> Result<Docker, bollard::errors::Error> {
    let transport = move |mut request: BollardRequest| {
        let dialer = dialer.clone();
        let origin = origin.clone();
        async move {
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let host = HeaderValue::from_str(dialer.host())
                .unwrap_or_else(|_| HeaderValue::from_static("docker"));
            for_own_connection(&mut request, host)?;
            let started = Instant::now();
            let answered = async {
                let stream = dialer.connect().await.map_err(|e| {
                    std::io::Error::other(format!("cannot reach the Docker engine ({origin}): {e}"))
                })?;
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
                // Ends with the response body (or an upgraded connection's hand-over).
                tokio::spawn(connection.with_upgrades());
                Ok::<_, bollard::errors::Error>(sender.send_request(request).await?)
            }
            .await;
            let status = answered
                .as_ref()
                .map_or_else(|_| "failed".to_owned(), |r| r.status().as_u16().to_string());
            debug::line(&format!(
                "engine {method} {path} {status} {} ms",
                started.elapsed().as_millis()
            ));
            answered
        }
    };
    Docker::connect_with_custom_transport(
        transport,
        Some("http://docker"),
        timeout_secs,
        bollard::API_DEFAULT_VERSION,
    )
}
