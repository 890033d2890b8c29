//! TLS to a remote engine, as `docker --tlsverify` does it: the caller's CA is the only trust
//! root, the engine's name is checked against its certificate, and the client proves itself with
//! its own certificate. Key material stays in memory; nothing is written to disk.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bollard::{BollardRequest, Docker};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// PEM text of the CA that signed the engine's certificate, and of the client's certificate and key.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

/// Key material never reaches logs or error messages.
impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsMaterial { .. }")
    }
}

/// What is wrong with one of the three PEM texts: `field` is `ca`, `cert` or `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProblem {
    pub field: &'static str,
    pub message: String,
}

fn problem(field: &'static str, message: impl Into<String>) -> TlsProblem {
    TlsProblem {
        field,
        message: message.into(),
    }
}

/// The client configuration the material describes, or the first field that cannot be used.
pub fn client_config(material: &TlsMaterial) -> Result<ClientConfig, TlsProblem> {
    let mut roots = RootCertStore::empty();
    for ca in certificates(&material.ca, "ca")? {
        roots.add(ca).map_err(|e| {
            problem(
                "ca",
                format!("holds a certificate that cannot be a trust root: {e}"),
            )
        })?;
    }
    let chain = certificates(&material.cert, "cert")?;
    let key = PrivateKeyDer::from_pem_slice(material.key.as_bytes())
        .map_err(|e| problem("key", format!("holds no PEM private key ({e})")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| problem("cert", format!("no usable TLS protocol version: {e}")))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| {
            problem(
                "key",
                format!("cannot sign for the client certificate: {e}"),
            )
        })
}

fn certificates(
    pem: &str,
    field: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsProblem> {
    let found = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(field, format!("is not valid PEM ({e})")))?;
    if found.is_empty() {
        return Err(problem(
            field,
            "holds no PEM certificate (pass the file's text, not its path)",
        ));
    }
    Ok(found)
}

/// A client for `authority` (`host:port`) over TLS with `config`.
pub fn connect(authority: &str, config: ClientConfig, timeout: Duration) -> Result<Docker, String> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let mut builder = Client::builder(TokioExecutor::new());
    // Hijacked attach connections must never return to a pool.
    builder.pool_max_idle_per_host(0);
    let client = Arc::new(builder.build(https));
    let address = format!("https://{authority}");
    Docker::connect_with_custom_transport(
        move |request: BollardRequest| {
            let client = Arc::clone(&client);
            async move {
                client
                    .request(request)
                    .await
                    .map_err(bollard::errors::Error::from)
            }
        },
        Some(address),
        timeout.as_secs(),
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| e.to_string())
}

/// The material the docker CLI uses when `DOCKER_TLS_VERIFY` is set: `ca.pem`, `cert.pem` and
/// `key.pem` in `DOCKER_CERT_PATH`, else in `~/.docker`.
pub fn material_from_environment() -> Result<TlsMaterial, String> {
    let directory = match std::env::var_os("DOCKER_CERT_PATH").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => Path::new(&home).join(".docker"),
            None => {
                return Err(
                    "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME names the certificate directory"
                        .into(),
                )
            }
        },
    };
    let read = |name: &str| {
        let path = directory.join(name);
        std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "DOCKER_TLS_VERIFY is set but {} cannot be read: {e}",
                path.display()
            )
        })
    };
    Ok(TlsMaterial {
        ca: read("ca.pem")?,
        cert: read("cert.pem")?,
        key: read("key.pem")?,
    })
}

/// True when the docker CLI would speak TLS to `DOCKER_HOST`.
pub fn verify_requested_by_environment() -> bool {
    std::env::var_os("DOCKER_TLS_VERIFY").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn material(ca: &str, cert: &str, key: &str) -> TlsMaterial {
        TlsMaterial {
            ca: ca.into(),
            cert: cert.into(),
            key: key.into(),
        }
    }

    #[test]
    fn names_the_unusable_field() {
        let field = |m: TlsMaterial| client_config(&m).err().map(|p| p.field);
        assert_eq!(field(material("", "", "")), Some("ca"));
        assert_eq!(field(material("/etc/docker/ca.pem", "", "")), Some("ca"));
        let garbage = "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n";
        assert_eq!(field(material(garbage, "", "")), Some("ca"));
    }

    #[test]
    fn debug_output_hides_the_key() {
        let shown = format!("{:?}", material("a", "b", "secret-key"));
        assert!(!shown.contains("secret-key"));
    }
}
