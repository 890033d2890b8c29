//! Attach connections of the owner's own: a fresh connection to the engine (its unix socket,
//! plain TCP, or TLS with the caller's material) whose `attach` request the engine answers with
//! `101 Switching Protocols`, after which the connection carries the container's streams. The
//! owner reads them itself (`demux.rs`) instead of through bollard's decoder, which reads a
//! few KiB at a time and silently drops a frame the connection cut short.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, UPGRADE};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::TlsConnector;

use super::address;

/// An engine's error answer is read up to this many bytes (its JSON message).
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where attach connections go: the same engine every other request of the backend reaches.
#[derive(Clone)]
pub enum Dialer {
    Unix(PathBuf),
    /// `host:port`.
    Tcp(String),
    Tls {
        authority: String,
        server_name: ServerName<'static>,
        connector: TlsConnector,
    },
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dialer::Unix(path) => write!(f, "Dialer::Unix({})", path.display()),
            Dialer::Tcp(authority) => write!(f, "Dialer::Tcp({authority})"),
            Dialer::Tls { authority, .. } => write!(f, "Dialer::Tls({authority})"),
        }
    }
}

/// Why an attach connection was not made.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("cannot connect to the engine: {0}")]
    Connect(#[source] std::io::Error),
    #[error("the engine connection failed: {0}")]
    Http(#[source] hyper::Error),
    #[error("Docker responded with status code {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("the engine did not answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Invalid(String),
}

/// Anything an attach connection can run over.
pub(super) trait Transport: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Transport for T {}

pub type Upgraded = TokioIo<hyper::upgrade::Upgraded>;

/// The two directions of an attach connection, past the engine's answer.
pub struct Hijacked {
    pub output: ReadHalf<Upgraded>,
    pub input: WriteHalf<Upgraded>,
}

impl Dialer {
    /// TLS to `authority` (`host:port`) with `config`; the host is checked against the engine's
    /// certificate.
    pub fn tls(authority: String, config: ClientConfig) -> Result<Self, String> {
        let host = address::host(&authority);
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host} cannot name a TLS server: {e}"))?;
        Ok(Dialer::Tls {
            authority,
            server_name,
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Attaches to all three streams of container `id`, within `limit` until the engine's
    /// answer.
    pub async fn attach(&self, id: &str, limit: Duration) -> Result<Hijacked, AttachError> {
        if id.is_empty()
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            return Err(AttachError::Invalid(format!(
                "{id:?} is not a container ID or name"
            )));
        }
        let path = format!("/containers/{id}/attach?stream=1&stdin=1&stdout=1&stderr=1");
        tokio::time::timeout(limit, self.upgrade(&path, None))
            .await
            .map_err(|_| AttachError::Timeout(limit))?
    }

    /// Starts exec `id` (created with all three streams attached, no TTY) with its streams on
    /// this connection, within `limit` until the engine's answer.
    pub async fn start_exec(&self, id: &str, limit: Duration) -> Result<Hijacked, AttachError> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AttachError::Invalid(format!("{id:?} is not an exec ID")));
        }
        let path = format!("/exec/{id}/start");
        let body = r#"{"Detach":false,"Tty":false}"#;
        tokio::time::timeout(limit, self.upgrade(&path, Some(body)))
            .await
            .map_err(|_| AttachError::Timeout(limit))?
    }

    /// A fresh connection to the engine (also each traced request's: `traced.rs`).
    pub(super) async fn connect(&self) -> Result<Box<dyn Transport>, AttachError> {
        Ok(match self {
            Dialer::Unix(path) => Box::new(
                UnixStream::connect(path)
                    .await
                    .map_err(AttachError::Connect)?,
            ),
            Dialer::Tcp(authority) => Box::new(tcp(authority).await?),
            Dialer::Tls {
                authority,
                server_name,
                connector,
            } => Box::new(
                connector
                    .connect(server_name.clone(), tcp(authority).await?)
                    .await
                    .map_err(AttachError::Connect)?,
            ),
        })
    }

    pub(super) fn host(&self) -> &str {
        match self {
            Dialer::Unix(_) => "docker",
            Dialer::Tcp(authority) | Dialer::Tls { authority, .. } => authority,
        }
    }

    /// POSTs `path` (with a JSON `body`, if any) asking to upgrade the connection, and hands
    /// over both directions once the engine switched protocols.
    async fn upgrade(&self, path: &str, body: Option<&str>) -> Result<Hijacked, AttachError> {
        let transport = self.connect().await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(transport))
                .await
                .map_err(AttachError::Http)?;
        // Ends once the connection is upgraded (handed over below) or given up.
        tokio::spawn(connection.with_upgrades());
        let mut request = Request::post(path)
            .header(HOST, self.host())
            .header(CONNECTION, "Upgrade")
            .header(UPGRADE, "tcp");
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::copy_from_slice(
                body.unwrap_or_default().as_bytes(),
            )))
            .map_err(|e| AttachError::Invalid(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(AttachError::Http)?;
        let status = response.status();
        if status != StatusCode::SWITCHING_PROTOCOLS {
            let body = error_body(response.into_body()).await;
            return Err(AttachError::Refused {
                status: status.as_u16(),
                message: error_message(&body),
            });
        }
        let upgraded = hyper::upgrade::on(response)
            .await
            .map_err(AttachError::Http)?;
        let (output, input) = tokio::io::split(TokioIo::new(upgraded));
        Ok(Hijacked { output, input })
    }
}

/// The first `ERROR_BODY_BYTES` of an error answer, as far as it arrives.
async fn error_body(mut body: hyper::body::Incoming) -> Vec<u8> {
    let mut kept = Vec::new();
    while kept.len() < ERROR_BODY_BYTES {
        let Some(Ok(frame)) = body.frame().await else {
            break;
        };
        if let Some(data) = frame.data_ref() {
            let room = ERROR_BODY_BYTES - kept.len();
            kept.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    kept
}

async fn tcp(authority: &str) -> Result<TcpStream, AttachError> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(AttachError::Connect)?;
    // Small writes (a prompt, a keystroke) leave at once, as the engine's other clients do.
    stream.set_nodelay(true).map_err(AttachError::Connect)?;
    // A peer gone without a word fails the connection within `keepalive::DEAD_AFTER`.
    super::keepalive::enable(&stream).map_err(AttachError::Connect)?;
    Ok(stream)
}

/// The engine's `{"message": ...}`, else its answer as text.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::settles;

    #[test]
    fn the_engine_message_of_an_error_answer() {
        assert_eq!(
            error_message(br#"{"message":"No such container: x"}"#),
            "No such container: x"
        );
        assert_eq!(error_message(b"page not found\n"), "page not found");
    }

    #[tokio::test]
    async fn an_id_that_is_no_container_name_is_refused_before_any_connection() {
        let dialer = Dialer::Unix("/nonexistent/engine.sock".into());
        for id in ["", "a/b", "x?y=1", "a b"] {
            let error = dialer.attach(id, Duration::from_secs(1)).await.err();
            assert!(matches!(error, Some(AttachError::Invalid(_))), "{id:?}");
        }
        let error = dialer.attach("abc", Duration::from_secs(1)).await.err();
        assert!(matches!(error, Some(AttachError::Connect(_))));
    }

    /// A stand-in engine: a listener on a unix socket in a directory of the test's own,
    /// removed when dropped.
    struct Peer {
        dir: PathBuf,
        listener: tokio::net::UnixListener,
    }

    impl Peer {
        fn new(name: &str) -> Self {
            // Short: a socket path must fit in 108 bytes whatever TMPDIR is.
            let dir = std::env::temp_dir().join(format!("nsd-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a test directory");
            let listener = tokio::net::UnixListener::bind(dir.join("s")).expect("a test socket");
            Self { dir, listener }
        }

        fn dialer(&self) -> Dialer {
            Dialer::Unix(self.dir.join("s"))
        }

        /// The attach connection, and the request's head read whole from it.
        async fn accept(&self) -> (UnixStream, Vec<u8>) {
            use tokio::io::AsyncReadExt;
            let (mut stream, _) = settles("the attach connection", self.listener.accept())
                .await
                .expect("the attach connection");
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                let read = settles("the request", stream.read(&mut byte))
                    .await
                    .expect("the request");
                assert_eq!(read, 1, "the request ended early: {head:?}");
                head.push(byte[0]);
            }
            (stream, head)
        }
    }

    impl Drop for Peer {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// What the peer reads after the request until the owner closes the connection.
    async fn rest_until_closed(mut stream: UnixStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut rest = Vec::new();
        settles("the owner's close", stream.read_to_end(&mut rest))
            .await
            .expect("read to the end");
        rest
    }

    #[tokio::test]
    async fn an_engine_that_never_answers_times_out_and_its_connection_is_let_go() {
        let peer = Peer::new("silent");
        let dialer = peer.dialer();
        let limit = Duration::from_secs(1);
        let started = tokio::time::Instant::now();
        let attaching = tokio::spawn(async move { dialer.attach("abc", limit).await.err() });
        // The engine reads the request and says nothing.
        let (engine, head) = peer.accept().await;
        assert!(
            head.starts_with(b"POST /containers/abc/attach?"),
            "{head:?}"
        );
        let error = settles("the attach", attaching).await.expect("joined");
        assert!(
            matches!(error, Some(AttachError::Timeout(l)) if l == limit),
            "{error:?}"
        );
        assert!(started.elapsed() >= limit, "{:?}", started.elapsed());
        // The owner closed the connection it gave up: the engine reads to its end.
        assert_eq!(rest_until_closed(engine).await, b"");
    }

    #[tokio::test]
    async fn an_engine_that_refuses_the_upgrade_is_reported_with_its_status_and_message() {
        use tokio::io::AsyncWriteExt;
        let peer = Peer::new("refusing");
        let dialer = peer.dialer();
        let attaching =
            tokio::spawn(async move { dialer.attach("gone", Duration::from_secs(5)).await.err() });
        let (mut engine, head) = peer.accept().await;
        assert!(
            head.starts_with(b"POST /containers/gone/attach?"),
            "{head:?}"
        );
        // The engine's answer for a container that is not there.
        let body = br#"{"message":"No such container: gone"}"#;
        let answer = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        engine
            .write_all(answer.as_bytes())
            .await
            .expect("the answer");
        engine.write_all(body).await.expect("the answer's body");
        let error = settles("the attach", attaching).await.expect("joined");
        match error {
            Some(AttachError::Refused { status, message }) => {
                assert_eq!((status, message.as_str()), (404, "No such container: gone"));
            }
            other => panic!("{other:?}"),
        }
        // The owner closed the refused connection.
        assert_eq!(rest_until_closed(engine).await, b"");
    }

    #[tokio::test]
    async fn an_exec_starts_with_its_json_body_and_hands_over_both_directions() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let peer = Peer::new("exec");
        let dialer = peer.dialer();
        let starting =
            tokio::spawn(async move { dialer.start_exec("ab12", Duration::from_secs(5)).await });
        let (mut engine, head) = peer.accept().await;
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(text.starts_with("post /exec/ab12/start "), "{text}");
        assert!(text.contains("content-type: application/json"), "{text}");
        assert!(text.contains("upgrade: tcp"), "{text}");
        let body = br#"{"Detach":false,"Tty":false}"#;
        assert!(
            text.contains(&format!("content-length: {}", body.len())),
            "{text}"
        );
        let mut sent = vec![0u8; body.len()];
        settles("the body", engine.read_exact(&mut sent))
            .await
            .expect("the body");
        assert_eq!(sent, body);
        engine
            .write_all(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nout")
            .await
            .expect("the answer");
        let mut hijacked = settles("the start", starting)
            .await
            .expect("joined")
            .expect("upgraded");
        let mut out = [0u8; 3];
        settles("the output", hijacked.output.read_exact(&mut out))
            .await
            .expect("the output");
        assert_eq!(&out, b"out");
        hijacked.input.write_all(b"in").await.expect("the input");
        let mut input = [0u8; 2];
        settles("the input", engine.read_exact(&mut input))
            .await
            .expect("the input");
        assert_eq!(&input, b"in");
    }

    #[tokio::test]
    async fn an_exec_id_that_is_not_one_is_refused_before_any_connection() {
        let peer = Peer::new("no-exec");
        let error = peer
            .dialer()
            .start_exec("../containers/x", Duration::from_secs(1))
            .await
            .err();
        assert!(matches!(error, Some(AttachError::Invalid(_))), "{error:?}");
    }
}
