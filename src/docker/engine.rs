//! Connecting to the engine: what the caller named, else what the docker CLI would reach
//! (`DOCKER_HOST`, else the current Docker context, else the default socket).

use std::time::Duration;

use bollard::Docker;

use super::address;
use super::context::{self, Context};
use super::dialer::Dialer;
use super::options::Engine;
use super::tls::{self, TlsMaterial};
use crate::lifecycle::error::OwnerError;

/// Requests wait at most this long for response headers. Archive uploads answer only after the
/// whole body, so long transfers use their own clone with a longer limit.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The engine's socket when neither the caller, `DOCKER_HOST` nor a Docker context names another.
const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Where the engine is, resolved once from the options and the environment.
enum Endpoint {
    Unix(String),
    /// A `tcp://` or `http://` URL.
    Plain(String),
    Tls(String, TlsMaterial),
}

/// The engine the options name: bollard's client for every request, and the dialer for attach
/// connections to the very same place.
pub struct Connected {
    pub docker: Docker,
    pub dialer: Dialer,
    /// The engine reached, named explicitly (the default resolved once, here): what this
    /// controller's reaper is told, so it reaches exactly the same engine.
    pub engine: Engine,
}

pub fn connect(engine: &Engine) -> Result<Connected, OwnerError> {
    let (endpoint, origin) = endpoint(engine)
        .map_err(|e| OwnerError::driver(format!("cannot reach the Docker engine: {e}")))?;
    let resolved = match &endpoint {
        // Absolute (a relative `unix://` path is this process's working directory's): the
        // reaper reaches the same socket whatever its own working directory.
        Endpoint::Unix(path) => Engine::Socket(
            std::path::absolute(path)
                .map_or_else(|_| path.clone(), |p| p.to_string_lossy().into_owned()),
        ),
        Endpoint::Plain(url) => Engine::Url(url.clone()),
        Endpoint::Tls(url, material) => Engine::Tls {
            url: url.clone(),
            material: material.clone(),
        },
    };
    let unreachable =
        |e: String| OwnerError::driver(format!("cannot reach the Docker engine ({origin}): {e}"));
    let connected = match endpoint {
        // A socket that does not exist yet (the engine not up) is dialed at each request.
        Endpoint::Unix(path) if super::later_socket::missing(&path) => {
            super::later_socket::connect_later(
                path.clone(),
                origin.clone(),
                REQUEST_TIMEOUT.as_secs(),
            )
            .map(|docker| (docker, Dialer::Unix(path.into())))
            .map_err(|e| e.to_string())
        }
        Endpoint::Unix(path) => Docker::connect_with_unix(
            &path,
            REQUEST_TIMEOUT.as_secs(),
            bollard::API_DEFAULT_VERSION,
        )
        .map(|docker| (docker, Dialer::Unix(path.into())))
        .map_err(|e| e.to_string()),
        Endpoint::Plain(url) => {
            let authority = address::authority(&url, address::PLAIN_PORT);
            plain_tcp(&authority).map(|docker| (docker, Dialer::Tcp(authority)))
        }
        Endpoint::Tls(url, material) => {
            let config = tls::client_config(&material)
                .map_err(|p| format!("engine.tls.{} {}", p.field, p.message))
                .map_err(unreachable)?;
            let authority = address::authority(&url, address::TLS_PORT);
            Dialer::tls(authority.clone(), config.clone()).and_then(|dialer| {
                tls::connect(&authority, config, REQUEST_TIMEOUT).map(|docker| (docker, dialer))
            })
        }
    };
    let (docker, dialer) = connected.map_err(unreachable)?;
    // With NODE_DEBUG, every request of this client is traced (one connection per request).
    let docker = if crate::debug::enabled() {
        super::traced::client(dialer.clone(), origin.clone(), REQUEST_TIMEOUT.as_secs())
            .map_err(|e| unreachable(e.to_string()))?
    } else {
        docker
    };
    Ok(Connected {
        docker: docker.with_timeout(REQUEST_TIMEOUT),
        dialer,
        engine: resolved,
    })
}

/// The endpoint as the docker CLI would find it, and where it came from (for messages): the
/// caller's engine, else `DOCKER_HOST` (over TLS when `DOCKER_TLS_VERIFY` asks for it), else the
/// Docker context that `DOCKER_CONTEXT` or the configuration's `currentContext` names, else the
/// default socket.
fn endpoint(engine: &Engine) -> Result<(Endpoint, String), String> {
    let url = |url: &str, origin: &str| {
        let endpoint = if is_plain_tcp(url) {
            Endpoint::Plain(url.to_owned())
        } else if let Some(path) = url.strip_prefix("unix://") {
            Endpoint::Unix(path.to_owned())
        } else {
            return Err(format!(
                "{origin} {url} names no engine this library reaches (unix://, tcp:// or http://; tcp:// or https:// with TLS)"
            ));
        };
        Ok((endpoint, format!("{origin} {url}")))
    };
    match engine {
        Engine::Default => match default_tls_host() {
            Some(host) => Ok((
                Endpoint::Tls(host.clone(), tls::material_from_environment()?),
                format!("DOCKER_HOST {host}"),
            )),
            None => match std::env::var("DOCKER_HOST") {
                Ok(host) if !host.is_empty() => url(&host, "DOCKER_HOST"),
                _ => match context::selected(&|name| std::env::var(name).ok())? {
                    Some(context) => {
                        let origin = format!("{} at {}", context.label(), context.host);
                        context_endpoint(context).map(|endpoint| (endpoint, origin))
                    }
                    None => Ok((
                        Endpoint::Unix(DEFAULT_SOCKET.to_owned()),
                        format!("the default socket {DEFAULT_SOCKET}"),
                    )),
                },
            },
        },
        Engine::Socket(path) => Ok((
            Endpoint::Unix(path.clone()),
            format!("engine.socketPath {path}"),
        )),
        Engine::Url(engine_url) => url(engine_url, "engine.url"),
        Engine::Tls { url, material } => Ok((
            Endpoint::Tls(url.clone(), material.clone()),
            format!("engine.url {url}"),
        )),
    }
}

/// A Docker context's endpoint: a unix socket, or TCP in plain HTTP or (with the context's TLS
/// material) TLS. Anything else is refused naming the context.
fn context_endpoint(context: Context) -> Result<Endpoint, String> {
    let host = context.host.as_str();
    let remote = host.starts_with("tcp://") || host.starts_with("https://");
    match (context.tls.clone(), host.strip_prefix("unix://")) {
        (_, Some(path)) if !path.is_empty() => Ok(Endpoint::Unix(path.to_owned())),
        (Some(material), None) if remote => Ok(Endpoint::Tls(host.to_owned(), material)),
        (None, None) if is_plain_tcp(host) => Ok(Endpoint::Plain(host.to_owned())),
        (None, None) if host.starts_with("https://") => Err(format!(
            "{} names {host} but holds no TLS material (ca.pem, cert.pem, key.pem)",
            context.label()
        )),
        _ => Err(format!(
            "{} names {host}, which this library does not reach (unix://, tcp:// or http://; tcp:// or https:// with TLS); set DOCKER_HOST or pass engine to choose another",
            context.label()
        )),
    }
}

fn is_plain_tcp(url: &str) -> bool {
    url.starts_with("tcp://") || url.starts_with("http://")
}

/// Plain HTTP to `authority` (`host:port`; see `address::authority` for the default port).
fn plain_tcp(authority: &str) -> Result<Docker, String> {
    let address = format!("tcp://{authority}");
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

/// Whether a forced removal failed only because the engine's kill raced the container's own
/// exit ("Could not kill running container …, cannot remove - Container … is not running"):
/// the container is stopped now, so asking again removes it.
pub fn is_kill_raced_exit(error: &bollard::errors::Error) -> bool {
    match error {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 500,
            message,
        } => {
            message.contains("Could not kill running container")
                && message.contains("is not running")
        }
        _ => false,
    }
}

/// The engine's "Container … is not running" conflict (an exec in a container that ended).
pub fn is_not_running(error: &bollard::errors::Error) -> bool {
    matches!(
        error,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            message,
        } if message.contains("is not running")
    )
}

pub fn engine_error(what: &str, error: bollard::errors::Error) -> OwnerError {
    OwnerError::driver(format!("{what}: {}", with_causes(&error)))
}

/// Where `engine` is, as a message names it (`engine.url tcp://…`, `DOCKER_HOST …`, the default
/// socket), or why it names no engine.
pub fn engine_label(engine: &Engine) -> String {
    endpoint(engine).map_or_else(|why| why, |(_, origin)| origin)
}

/// The HTTP client library's own layers: they name the library, not what failed.
const CLIENT_LAYERS: [&str; 2] = ["Error in the hyper legacy client", "client error ("];

/// The error and every cause below it: a transport error such as a refused TLS certificate is
/// only visible in the causes. The HTTP client library's wrapper layers are left out; a failed
/// connection reads `could not connect to the engine: <the system's reason>`.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut layers = Vec::new();
    let mut connect = false;
    let mut next: Option<&dyn std::error::Error> = Some(error);
    while let Some(layer) = next {
        let shown = layer.to_string();
        connect |= shown.starts_with("client error (Connect)");
        if !CLIENT_LAYERS
            .iter()
            .any(|wrapper| shown.starts_with(wrapper))
        {
            layers.push(shown);
        }
        next = layer.source();
    }
    let mut text = String::new();
    for shown in layers {
        if text.contains(&shown) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&shown);
    }
    match (connect, text.is_empty()) {
        (true, _) => format!("could not connect to the engine: {text}"),
        (false, true) => error.to_string(),
        (false, false) => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_that_raced_the_exit_is_told_apart_from_other_removal_failures() {
        let server =
            |status_code: u16, message: &str| bollard::errors::Error::DockerResponseServerError {
                status_code,
                message: message.to_owned(),
            };
        // What the engine answered in CI when a runsc export container exited as it was removed.
        assert!(is_kill_raced_exit(&server(
            500,
            "Could not kill running container d70810a2d3f6, cannot remove - Container d70810a2d3f6 is not running"
        )));
        assert!(!is_kill_raced_exit(&server(
            500,
            "Could not kill running container d70810a2d3f6, cannot remove - permission denied"
        )));
        assert!(!is_kill_raced_exit(&server(409, "is not running")));
        assert!(is_not_running(&server(
            409,
            "Container 901719f2d1b7 is not running"
        )));
        assert!(!is_not_running(&server(500, "is not running")));
        assert!(!is_not_running(&server(409, "is paused")));
        assert!(!is_kill_raced_exit(&server(500, "driver failed")));
    }

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1
                .as_deref()
                .map(|l| l as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn a_refused_connection_reads_without_the_client_librarys_layers() {
        let refused = Layer(
            "Error in the hyper legacy client: client error (Connect)",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer(
                    "tcp connect error: Connection refused (os error 111)",
                    Some(Box::new(Layer("Connection refused (os error 111)", None))),
                ))),
            ))),
        );
        assert_eq!(
            with_causes(&refused),
            "could not connect to the engine: tcp connect error: Connection refused (os error 111)"
        );
        let plain = Layer("Docker responded with status code 500: boom", None);
        assert_eq!(
            with_causes(&plain),
            "Docker responded with status code 500: boom"
        );
    }

    fn shown(endpoint: Endpoint) -> String {
        match endpoint {
            Endpoint::Unix(path) => format!("unix {path}"),
            Endpoint::Plain(url) => format!("plain {url}"),
            Endpoint::Tls(url, _) => format!("tls {url}"),
        }
    }

    fn resolved(engine: Engine) -> Result<String, String> {
        endpoint(&engine).map(|(endpoint, _)| shown(endpoint))
    }

    #[test]
    fn the_endpoint_is_the_engine_the_options_name() {
        let socket = Engine::Socket("/run/user/1000/docker.sock".into());
        assert_eq!(
            resolved(socket),
            Ok("unix /run/user/1000/docker.sock".into())
        );
        let unix = Engine::Url("unix:///var/run/other.sock".into());
        assert_eq!(resolved(unix), Ok("unix /var/run/other.sock".into()));
        for url in ["tcp://10.0.0.1", "http://engine.example:2375"] {
            assert_eq!(
                resolved(Engine::Url(url.into())),
                Ok(format!("plain {url}"))
            );
        }
        let tls = Engine::Tls {
            url: "https://engine.example".into(),
            material: TlsMaterial {
                ca: String::new(),
                cert: String::new(),
                key: String::new(),
            },
        };
        assert_eq!(resolved(tls), Ok("tls https://engine.example".into()));
        let refused = resolved(Engine::Url("ssh://engine.example".into())).unwrap_err();
        assert!(
            refused.contains("engine.url ssh://engine.example"),
            "{refused}"
        );
    }

    fn from_context(host: &str, tls: Option<TlsMaterial>) -> Result<String, String> {
        let context = Context {
            name: "desk".into(),
            origin: "DOCKER_CONTEXT".into(),
            host: host.into(),
            tls,
        };
        context_endpoint(context).map(shown)
    }

    #[test]
    fn a_context_endpoint_is_a_socket_plain_tcp_or_tls() {
        let material = || {
            Some(TlsMaterial {
                ca: String::new(),
                cert: String::new(),
                key: String::new(),
            })
        };
        assert_eq!(
            from_context("unix:///home/u/.colima/docker.sock", None),
            Ok("unix /home/u/.colima/docker.sock".into())
        );
        assert_eq!(
            from_context("tcp://10.0.0.9:2375", None),
            Ok("plain tcp://10.0.0.9:2375".into())
        );
        assert_eq!(
            from_context("tcp://engine.example:2376", material()),
            Ok("tls tcp://engine.example:2376".into())
        );
        for refused in [
            "ssh://user@engine.example",
            "npipe:////./pipe/docker_engine",
            "unix://",
        ] {
            let error = from_context(refused, None).unwrap_err();
            assert!(
                error.contains(r#"Docker context "desk" (DOCKER_CONTEXT) names"#)
                    && error.contains(refused),
                "{error}"
            );
        }
        let untrusted = from_context("https://engine.example", None).unwrap_err();
        assert!(untrusted.contains("no TLS material"), "{untrusted}");
    }
}
