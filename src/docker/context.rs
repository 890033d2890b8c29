//! Docker CLI contexts: the engine the docker CLI reaches when `DOCKER_HOST` is unset. Docker
//! Desktop, colima, OrbStack, Rancher Desktop and rootless Docker are found this way.
//!
//! The context's name comes from `DOCKER_CONTEXT`, else from `currentContext` in
//! `$DOCKER_CONFIG/config.json` (`~/.docker` by default). Its endpoint is `Endpoints.docker.Host`
//! in `contexts/meta/<sha256 of the name>/meta.json`, its TLS material `ca.pem`, `cert.pem` and
//! `key.pem` under `contexts/tls/<same>/docker/`. The name `default` (or none) means the default
//! engine. A context named but unusable fails naming it and why: never a silent fall back to
//! another engine.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::tls::{self, TlsMaterial};
use crate::digest::sha256;

/// The context the docker CLI would use: where its name came from and what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub name: String,
    /// `DOCKER_CONTEXT`, or `currentContext in <config.json path>`.
    pub origin: String,
    /// `Endpoints.docker.Host`, as written (`unix://…`, `tcp://…`, …).
    pub host: String,
    /// The context's TLS material, when it has any.
    pub tls: Option<TlsMaterial>,
}

impl Context {
    /// How errors name this context: `Docker context "colima" (DOCKER_CONTEXT)`.
    pub fn label(&self) -> String {
        label(&self.name, &self.origin)
    }
}

fn label(name: &str, origin: &str) -> String {
    format!("Docker context {name:?} ({origin})")
}

/// The context the environment selects (`variable` reads one environment variable; an empty
/// value counts as unset), or `None` for the default engine. Reads small files only.
pub fn selected(variable: &dyn Fn(&str) -> Option<String>) -> Result<Option<Context>, String> {
    let set = |name: &str| variable(name).filter(|value| !value.is_empty());
    let directory = match set("DOCKER_CONFIG") {
        Some(directory) => PathBuf::from(directory),
        None => match set("HOME") {
            Some(home) => Path::new(&home).join(".docker"),
            // No configuration directory: only DOCKER_CONTEXT can name a context, and it
            // cannot be found.
            None => {
                return match set("DOCKER_CONTEXT") {
                    Some(name) if name != DEFAULT_NAME => Err(format!(
                        "{} cannot be read: neither DOCKER_CONFIG nor HOME names the docker configuration directory",
                        label(&name, "DOCKER_CONTEXT")
                    )),
                    _ => Ok(None),
                };
            }
        },
    };
    let (name, origin) = match set("DOCKER_CONTEXT") {
        Some(name) => (name, "DOCKER_CONTEXT".to_owned()),
        None => {
            let config = directory.join("config.json");
            match current_context(&config)? {
                Some(name) => (name, format!("currentContext in {}", config.display())),
                None => return Ok(None),
            }
        }
    };
    if name == DEFAULT_NAME {
        return Ok(None);
    }
    read_context(&directory, name, origin).map(Some)
}

/// The docker CLI's own name for the engine of `DOCKER_HOST` or the default socket.
const DEFAULT_NAME: &str = "default";

/// `currentContext` of the docker CLI's configuration file, if the file exists and names one.
fn current_context(config: &Path) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(config) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "the docker configuration {} cannot be read: {e}",
                config.display()
            ))
        }
    };
    let json: Json = serde_json::from_str(&text).map_err(|e| {
        format!(
            "the docker configuration {} is not valid JSON ({e}), so its currentContext is unknown",
            config.display()
        )
    })?;
    match json.get("currentContext") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(name)) if name.is_empty() => Ok(None),
        Some(Json::String(name)) => Ok(Some(name.clone())),
        Some(_) => Err(format!(
            "the docker configuration {}: currentContext is not a string",
            config.display()
        )),
    }
}

fn read_context(directory: &Path, name: String, origin: String) -> Result<Context, String> {
    let named = label(&name, &origin);
    let id = context_id(&name);
    let meta_path = directory
        .join("contexts")
        .join("meta")
        .join(&id)
        .join("meta.json");
    let text = std::fs::read_to_string(&meta_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{named} is not found: {} does not exist (docker context ls lists the contexts)",
                meta_path.display()
            )
        } else {
            format!("{named}: {} cannot be read: {e}", meta_path.display())
        }
    })?;
    let meta: Json = serde_json::from_str(&text)
        .map_err(|e| format!("{named}: {} is not valid JSON ({e})", meta_path.display()))?;
    let endpoint = meta.get("Endpoints").and_then(|e| e.get("docker"));
    let host = match endpoint.and_then(|e| e.get("Host")) {
        Some(Json::String(host)) if !host.is_empty() => host.clone(),
        _ => {
            return Err(format!(
                "{named}: {} names no Endpoints.docker.Host",
                meta_path.display()
            ))
        }
    };
    if endpoint
        .and_then(|e| e.get("SkipTLSVerify"))
        .and_then(Json::as_bool)
        == Some(true)
    {
        return Err(format!(
            "{named} sets SkipTLSVerify: this library always verifies the engine's certificate (give the context its CA, or pass engine.tls)"
        ));
    }
    let tls_directory = directory
        .join("contexts")
        .join("tls")
        .join(&id)
        .join("docker");
    let tls = tls_material(&tls_directory).map_err(|e| format!("{named}: {e}"))?;
    Ok(Context {
        name,
        origin,
        host,
        tls,
    })
}

/// The directory name the docker CLI gives a context: the hex SHA-256 of its name.
fn context_id(name: &str) -> String {
    let digest = sha256(name.as_bytes());
    digest.strip_prefix("sha256:").unwrap_or(&digest).to_owned()
}

/// The context's TLS files: none at all (no TLS), or all three, readable and usable.
fn tls_material(directory: &Path) -> Result<Option<TlsMaterial>, String> {
    const FILES: [&str; 3] = ["ca.pem", "cert.pem", "key.pem"];
    let mut texts = Vec::with_capacity(FILES.len());
    for file in FILES {
        let path = directory.join(file);
        match std::fs::read_to_string(&path) {
            Ok(text) => texts.push(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => texts.push(None),
            Err(e) => {
                return Err(format!(
                    "its TLS file {} cannot be read: {e}",
                    path.display()
                ))
            }
        }
    }
    let present = texts.iter().filter(|t| t.is_some()).count();
    if present == 0 {
        return Ok(None);
    }
    let [Some(ca), Some(cert), Some(key)] =
        <[Option<String>; 3]>::try_from(texts).map_err(|_| "TLS files miscounted".to_owned())?
    else {
        return Err(format!(
            "its TLS material in {} is incomplete: this library needs ca.pem, cert.pem and key.pem (the engine's CA and a client certificate)",
            directory.display()
        ));
    };
    let material = TlsMaterial { ca, cert, key };
    tls::client_config(&material).map_err(|problem| {
        format!(
            "its TLS file {} {}",
            directory.join(format!("{}.pem", problem.field)).display(),
            problem.message
        )
    })?;
    Ok(Some(material))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A docker configuration directory of the test's own, removed at the end.
    struct Config {
        directory: PathBuf,
    }

    impl Config {
        fn new(label: &str) -> Self {
            let directory = std::env::temp_dir().join(format!(
                "native-sandbox-context-{label}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&directory);
            std::fs::create_dir_all(&directory).expect("test directory");
            Self { directory }
        }

        fn write(&self, relative: &str, text: &str) {
            let path = self.directory.join(relative);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("parent directory");
            std::fs::write(path, text).expect("write");
        }

        fn context(&self, name: &str, endpoint: &str) {
            let meta = format!(
                r#"{{"Name":{name:?},"Metadata":{{}},"Endpoints":{{"docker":{endpoint}}}}}"#
            );
            self.write(
                &format!("contexts/meta/{}/meta.json", context_id(name)),
                &meta,
            );
        }

        fn selected(&self, extra: &[(&str, &str)]) -> Result<Option<Context>, String> {
            let mut variables: HashMap<String, String> = extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            variables
                .entry("DOCKER_CONFIG".into())
                .or_insert_with(|| self.directory.display().to_string());
            selected(&|name| variables.get(name).cloned())
        }
    }

    impl Drop for Config {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.directory);
        }
    }

    #[test]
    fn the_context_directory_is_the_sha256_of_the_name() {
        // As `docker context inspect desktop-linux` shows its storage path.
        assert_eq!(
            context_id("default"),
            "37a8eec1ce19687d132fe29051dca629d164e2c4958ba141d5f4133a33f0688f"
        );
    }

    #[test]
    fn no_configuration_or_the_default_context_means_the_default_engine() {
        let config = Config::new("none");
        assert_eq!(config.selected(&[]), Ok(None));
        config.write("config.json", r#"{"auths":{}}"#);
        assert_eq!(config.selected(&[]), Ok(None));
        config.write("config.json", r#"{"currentContext":"default"}"#);
        assert_eq!(config.selected(&[]), Ok(None));
        assert_eq!(config.selected(&[("DOCKER_CONTEXT", "default")]), Ok(None));
        assert_eq!(selected(&|_| None), Ok(None));
    }

    #[test]
    fn the_current_context_names_its_endpoint() {
        let config = Config::new("current");
        config.write("config.json", r#"{"currentContext":"colima"}"#);
        config.context(
            "colima",
            r#"{"Host":"unix:///home/u/.colima/default/docker.sock","SkipTLSVerify":false}"#,
        );
        let context = config.selected(&[]).expect("usable").expect("a context");
        assert_eq!(context.name, "colima");
        assert_eq!(context.host, "unix:///home/u/.colima/default/docker.sock");
        assert_eq!(context.tls, None);
        assert!(
            context.origin.starts_with("currentContext in "),
            "{context:?}"
        );
    }

    #[test]
    fn docker_context_wins_over_the_configuration() {
        let config = Config::new("variable");
        config.write("config.json", r#"{"currentContext":"colima"}"#);
        config.context("colima", r#"{"Host":"unix:///a.sock"}"#);
        config.context("remote", r#"{"Host":"tcp://10.0.0.9:2375"}"#);
        let context = config
            .selected(&[("DOCKER_CONTEXT", "remote")])
            .expect("usable")
            .expect("a context");
        assert_eq!(
            (context.host.as_str(), context.origin.as_str()),
            ("tcp://10.0.0.9:2375", "DOCKER_CONTEXT")
        );
    }

    #[test]
    fn a_context_that_cannot_be_used_fails_naming_it_and_why() {
        let config = Config::new("unusable");
        let failure = |extra: &[(&str, &str)]| config.selected(extra).expect_err("refused");
        let missing = failure(&[("DOCKER_CONTEXT", "gone")]);
        assert!(
            missing.contains(r#"Docker context "gone" (DOCKER_CONTEXT) is not found"#),
            "{missing}"
        );
        config.context("skip", r#"{"Host":"tcp://h:2376","SkipTLSVerify":true}"#);
        assert!(failure(&[("DOCKER_CONTEXT", "skip")]).contains("SkipTLSVerify"));
        config.context("hostless", r#"{}"#);
        assert!(failure(&[("DOCKER_CONTEXT", "hostless")]).contains("no Endpoints.docker.Host"));
        config.context("partial", r#"{"Host":"tcp://h:2376"}"#);
        config.write(
            &format!("contexts/tls/{}/docker/ca.pem", context_id("partial")),
            "x",
        );
        let partial = failure(&[("DOCKER_CONTEXT", "partial")]);
        assert!(
            partial.contains(r#"Docker context "partial""#) && partial.contains("incomplete"),
            "{partial}"
        );
        config.context("broken-tls", r#"{"Host":"tcp://h:2376"}"#);
        for file in ["ca.pem", "cert.pem", "key.pem"] {
            config.write(
                &format!("contexts/tls/{}/docker/{file}", context_id("broken-tls")),
                "not pem",
            );
        }
        let broken = failure(&[("DOCKER_CONTEXT", "broken-tls")]);
        assert!(broken.contains("ca.pem"), "{broken}");
        config.write("config.json", "{not json");
        let corrupt = failure(&[]);
        assert!(
            corrupt.contains("config.json") && corrupt.contains("not valid JSON"),
            "{corrupt}"
        );
        config.write("config.json", r#"{"currentContext":"gone"}"#);
        let current = failure(&[]);
        assert!(
            current.contains(r#"Docker context "gone" (currentContext in "#),
            "{current}"
        );
        let homeless = selected(&|name| (name == "DOCKER_CONTEXT").then(|| "x".to_owned()))
            .expect_err("refused");
        assert!(homeless.contains(r#"Docker context "x""#), "{homeless}");
    }

    #[test]
    fn home_is_where_the_configuration_lives_by_default() {
        let config = Config::new("home");
        config.write(".docker/config.json", r#"{"currentContext":"desktop"}"#);
        let home = config.directory.display().to_string();
        let variables = |name: &str| (name == "HOME").then(|| home.clone());
        let missing = selected(&variables).expect_err("no such context");
        assert!(missing.contains(".docker"), "{missing}");
    }
}
