//! Reaching the cluster: a kubeconfig file or context when the options name one, else the
//! in-cluster service account, else `KUBECONFIG` or `~/.kube/config` as kubectl finds them. Every
//! failure says which of those it was and is bounded.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::options::ClusterSource;
use crate::lifecycle::error::OwnerError;

/// How long backend creation may take in all: the configuration loaded and the API server's
/// first answer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one API request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster as connected: the client, and how to name it in errors and records.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    /// `kubeconfig <path>, context <name>` or `the in-cluster service account`.
    pub label: String,
    /// The API server's URL: part of the records' backend identity.
    pub server: String,
}

/// How `source` names the cluster, for errors: in the order `connect` looks.
pub fn describe(source: &ClusterSource) -> String {
    let file = match &source.kubeconfig {
        Some(path) => format!("kubeconfig {path}"),
        None if in_cluster() && source.context.is_none() => {
            return "the in-cluster service account".into()
        }
        None => match std::env::var("KUBECONFIG") {
            Ok(paths) if !paths.is_empty() => format!("kubeconfig {paths} (KUBECONFIG)"),
            _ => "kubeconfig ~/.kube/config".into(),
        },
    };
    match &source.context {
        Some(context) => format!("{file}, context {context}"),
        None => format!("{file}, its current context"),
    }
}

fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

/// Loads the configuration and asks the API server its version, both within `CONNECT_TIMEOUT`.
pub async fn connect(source: &ClusterSource) -> Result<Cluster, OwnerError> {
    let label = describe(source);
    tokio::time::timeout(CONNECT_TIMEOUT, connect_unbounded(source, &label))
        .await
        .map_err(|_| {
            OwnerError::driver(format!(
                "native-sandbox/kubernetes: reaching the cluster ({label}): no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            ))
        })?
}

async fn connect_unbounded(source: &ClusterSource, label: &str) -> Result<Cluster, OwnerError> {
    let failed = |what: &str, why: String| {
        OwnerError::driver(format!(
            "native-sandbox/kubernetes: {what} ({label}): {why}"
        ))
    };
    let options = KubeConfigOptions {
        context: source.context.clone(),
        ..KubeConfigOptions::default()
    };
    let loaded = match &source.kubeconfig {
        Some(path) => match Kubeconfig::read_from(path) {
            Ok(file) => Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        None if in_cluster() && source.context.is_none() => {
            Config::incluster().map_err(|e| e.to_string())
        }
        None => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
    };
    let mut config = loaded.map_err(|why| failed("loading the cluster's configuration", why))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = None;
    config.write_timeout = Some(REQUEST_TIMEOUT);
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config)
        .map_err(|e| failed("making the cluster's client", e.to_string()))?;
    client
        .apiserver_version()
        .await
        .map_err(|e| failed("reaching the API server", format!("{server}: {e}")))?;
    Ok(Cluster {
        client,
        label: label.to_owned(),
        server,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_kubeconfig_and_context_are_named() {
        let source = ClusterSource {
            kubeconfig: Some("/etc/k.yaml".into()),
            context: Some("ci".into()),
        };
        assert_eq!(describe(&source), "kubeconfig /etc/k.yaml, context ci");
        let source = ClusterSource {
            kubeconfig: Some("/etc/k.yaml".into()),
            context: None,
        };
        assert_eq!(
            describe(&source),
            "kubeconfig /etc/k.yaml, its current context"
        );
    }
}
