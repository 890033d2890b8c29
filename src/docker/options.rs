//! `createDockerSandboxBackend(options)`: parsed and checked before anything talks to an engine.

use crate::input::read::{array, boolean, object, string};
use crate::input::{Issue, IssueCode, Issues, Seg, Value};
use crate::paths::{self, Anchor};
use crate::policy::ids::identifier;

use super::tls::{self, TlsMaterial};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    /// `DOCKER_HOST`, else the local default socket, as the docker CLI does.
    Default,
    Socket(String),
    /// Plain HTTP (`tcp://`, `http://`) or another unix socket (`unix://`).
    Url(String),
    /// `tcp://` or `https://` with the caller's CA and client certificate.
    Tls {
        url: String,
        material: TlsMaterial,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerOptions {
    pub image: String,
    pub namespace: String,
    pub spill_directory: String,
    pub engine: Engine,
    /// `uid:gid` of the guest process.
    pub user: String,
    pub runtime: Option<String>,
    /// Whether this controller's reaper removes the `in_process` sandboxes it leaves behind
    /// (`src/docker/reaper/`); default true.
    pub reaper: bool,
    /// Where the egress gateways of allowlist sandboxes reach upstream.
    pub egress: EgressUpstream,
}

/// `egress: { network, resolvers }`: the existing engine network an allowlist sandbox's gateway
/// joins to reach upstream (default the engine's `bridge`), and the resolvers it asks for the
/// allowed names (default those of its own `/etc/resolv.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressUpstream {
    pub network: String,
    pub resolvers: Vec<std::net::Ipv4Addr>,
}

pub const DEFAULT_EGRESS_NETWORK: &str = "bridge";
/// At most this many upstream resolvers.
const EGRESS_RESOLVERS_MAX: usize = 3;

impl Default for EgressUpstream {
    fn default() -> Self {
        Self {
            network: DEFAULT_EGRESS_NETWORK.to_owned(),
            resolvers: Vec::new(),
        }
    }
}

pub const DEFAULT_USER: &str = "65532:65532";

pub fn parse_docker_options(input: &Value) -> Result<DockerOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = options(input, &mut issues);
    issues.finish(options)
}

fn options(value: &Value, issues: &mut Issues) -> Option<DockerOptions> {
    let mut f = object(value, &[], issues)?;
    let image = f
        .required("image", issues)
        .and_then(|v| image_reference(v, &f.at("image"), issues));
    let namespace = f
        .required("namespace", issues)
        .and_then(|v| identifier(v, &f.at("namespace"), issues));
    let spill_directory = f
        .required("spillDirectory", issues)
        .and_then(|v| paths::path(v, &f.at("spillDirectory"), Anchor::Host, issues));
    let engine = match f.optional("engine") {
        None => Some(Engine::Default),
        Some(v) => engine(v, &f.at("engine"), issues),
    };
    let user = match f.optional("user") {
        None => Some(DEFAULT_USER.to_owned()),
        Some(v) => user(v, &f.at("user"), issues),
    };
    let runtime = match f.optional("runtime") {
        None => Some(None),
        Some(v) => identifier(v, &f.at("runtime"), issues).map(Some),
    };
    let reaper = match f.optional("reaper") {
        None => Some(reaper_by_default(
            std::env::var("NATIVE_SANDBOX_REAPER").ok().as_deref(),
        )),
        Some(v) => boolean(v, &f.at("reaper"), issues),
    };
    let egress = match f.optional("egress") {
        None => Some(EgressUpstream::default()),
        Some(v) => egress_upstream(v, &f.at("egress"), issues),
    };
    f.finish(issues);
    Some(DockerOptions {
        image: image?,
        namespace: namespace?,
        spill_directory: spill_directory?,
        engine: engine?,
        user: user?,
        runtime: runtime?,
        reaper: reaper?,
        egress: egress?,
    })
}

fn egress_upstream(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<EgressUpstream> {
    let mut f = object(value, at, issues)?;
    let network = match f.optional("network") {
        None => Some(DEFAULT_EGRESS_NETWORK.to_owned()),
        Some(v) => identifier(v, &f.at("network"), issues),
    };
    let resolvers = match f.optional("resolvers") {
        None => Some(Vec::new()),
        Some(v) => {
            let path = f.at("resolvers");
            array(v, &path, EGRESS_RESOLVERS_MAX, issues).and_then(|items| {
                let mut out = Vec::new();
                for (index, item) in items.iter().enumerate() {
                    let mut item_path = path.clone();
                    item_path.push(Seg::Index(index));
                    let text = string(item, &item_path, 15, issues)?;
                    match text.parse::<std::net::Ipv4Addr>() {
                        Ok(address) if address.to_string() == text => out.push(address),
                        _ => {
                            issues.add(
                                IssueCode::InvalidValue,
                                &item_path,
                                "must be an IPv4 address in dotted-decimal form",
                            );
                            return None;
                        }
                    }
                }
                Some(out)
            })
        }
    };
    f.finish(issues);
    Some(EgressUpstream {
        network: network?,
        resolvers: resolvers?,
    })
}

/// Whether a backend that does not say runs a reaper: yes, unless `NATIVE_SANDBOX_REAPER` is
/// `0`, `false` or `off` (for places where this process cannot start another, such as a Node.js
/// run under qemu-user without binfmt_misc, or a sandboxed CI runner).
fn reaper_by_default(environment: Option<&str>) -> bool {
    !matches!(
        environment
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref(),
        Some("0" | "false" | "off")
    )
}

/// A non-empty image reference or ID without whitespace.
fn image_reference(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 512, issues)?;
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        issues.add(
            IssueCode::InvalidValue,
            at,
            "must be a non-empty image reference or ID without whitespace",
        );
        return None;
    }
    Some(s)
}

/// `prepareDockerSandboxImage`'s options: the source image, the tag to give the result, the
/// engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareOptions {
    pub from: String,
    pub tag: String,
    pub engine: Engine,
}

pub fn parse_prepare_options(input: &Value) -> Result<PrepareOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = (|| {
        let mut f = object(input, &[], &mut issues)?;
        let from = f
            .required("from", &mut issues)
            .and_then(|v| image_reference(v, &f.at("from"), &mut issues));
        let tag = f.required("tag", &mut issues).and_then(|v| {
            let at = f.at("tag");
            let tag = image_reference(v, &at, &mut issues)?;
            // The repository is everything before the tag (a registry's port is no tag).
            let repository = match tag.rsplit_once(':') {
                Some((repository, version)) if !version.contains('/') => repository,
                _ => tag.as_str(),
            };
            if tag.starts_with("sha256:")
                || tag.contains('@')
                || repository.chars().any(|c| c.is_ascii_uppercase())
            {
                issues.add(
                    IssueCode::InvalidValue,
                    &at,
                    "must be a lowercase repository[:tag] to give the prepared image (not an image ID)",
                );
                return None;
            }
            Some(tag)
        });
        let engine = match f.optional("engine") {
            None => Some(Engine::Default),
            Some(v) => engine(v, &f.at("engine"), &mut issues),
        };
        f.finish(&mut issues);
        Some(PrepareOptions {
            from: from?,
            tag: tag?,
            engine: engine?,
        })
    })();
    issues.finish(options)
}

fn engine(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Engine> {
    let mut f = object(value, at, issues)?;
    let socket = f.optional("socketPath");
    let url = f.optional("url");
    let tls = f.optional("tls");
    let result = match (socket, url) {
        (Some(socket), None) => {
            if tls.is_some() {
                issues.add(
                    IssueCode::InvalidValue,
                    &f.at("tls"),
                    "TLS applies to engine.url, not to a unix socket",
                );
            }
            paths::path(socket, &f.at("socketPath"), Anchor::Host, issues)
                .filter(|_| tls.is_none())
                .map(Engine::Socket)
        }
        (None, Some(url)) => {
            let at = f.at("url");
            let s = string(url, &at, 2_048, issues)?;
            match tls {
                Some(tls) => {
                    let material = tls_material(tls, &f.at("tls"), issues);
                    if !(s.starts_with("tcp://") || s.starts_with("https://")) {
                        issues.add(
                            IssueCode::InvalidValue,
                            &at,
                            "with engine.tls the URL must start with tcp:// or https://",
                        );
                        None
                    } else {
                        material.map(|material| Engine::Tls { url: s, material })
                    }
                }
                None if s.starts_with("https://") => {
                    issues.add(
                        IssueCode::InvalidValue,
                        &at,
                        "an https:// engine needs engine.tls with ca, cert and key",
                    );
                    None
                }
                None if s.starts_with("tcp://")
                    || s.starts_with("http://")
                    || s.starts_with("unix://") =>
                {
                    Some(Engine::Url(s))
                }
                None => {
                    issues.add(
                        IssueCode::InvalidValue,
                        &at,
                        "must start with tcp://, http://, https:// or unix://",
                    );
                    None
                }
            }
        }
        (Some(_), Some(_)) => {
            issues.add(
                IssueCode::InvalidValue,
                at,
                "give either socketPath or url, not both",
            );
            None
        }
        (None, None) => {
            issues.add(IssueCode::Required, at, "engine needs socketPath or url");
            None
        }
    };
    f.finish(issues);
    result
}

/// PEM texts, each bounded; checked by building the client configuration they describe, so a
/// path passed where the file's text belongs, a broken PEM or a key that does not match the
/// certificate fails here and names its field.
fn tls_material(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<TlsMaterial> {
    const MAX_PEM_BYTES: usize = 64 * 1024;
    let mut f = object(value, at, issues)?;
    let mut pem = |name: &str| {
        f.required(name, issues)
            .and_then(|v| string(v, &f.at(name), MAX_PEM_BYTES, issues))
    };
    let ca = pem("ca");
    let cert = pem("cert");
    let key = pem("key");
    f.finish(issues);
    let material = TlsMaterial {
        ca: ca?,
        cert: cert?,
        key: key?,
    };
    match tls::client_config(&material) {
        Ok(_) => Some(material),
        Err(problem) => {
            let mut path = at.to_vec();
            path.push(Seg::from(problem.field));
            issues.add(IssueCode::InvalidValue, &path, problem.message);
            None
        }
    }
}

/// `uid:gid`, numeric. Root (0) only when asked for explicitly, which this is.
fn user(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<String> {
    let s = string(value, at, 64, issues)?;
    let numeric = |part: &str| {
        !part.is_empty() && part.len() <= 10 && part.bytes().all(|b| b.is_ascii_digit())
    };
    match s.split_once(':') {
        Some((uid, gid)) if numeric(uid) && numeric(gid) => Some(s),
        _ => {
            issues.add(
                IssueCode::InvalidValue,
                at,
                "must be a numeric 'uid:gid' such as '65532:65532'",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list};

    #[test]
    fn the_reaper_runs_unless_the_environment_turns_it_off() {
        for (value, runs) in [
            (None, true),
            (Some("1"), true),
            (Some("on"), true),
            (Some(""), true),
            (Some("0"), false),
            (Some("false"), false),
            (Some(" OFF "), false),
        ] {
            assert_eq!(reaper_by_default(value), runs, "{value:?}");
        }
    }
    use serde_json::json;

    #[test]
    fn defaults_and_issues() {
        let ok = parse_docker_options(&from_json(
            json!({ "image": "busybox:1", "namespace": "ci", "spillDirectory": "/tmp/spill" }),
        ))
        .expect("valid options");
        assert_eq!(ok.user, DEFAULT_USER);
        assert_eq!(ok.engine, Engine::Default);
        let bad = from_json(json!({
            "image": "", "namespace": "a b", "spillDirectory": "relative", "engine": { "url": "ftp://x" },
            "user": "root", "runtime": "runsc", "extra": 1
        }));
        assert_eq!(
            issue_list(parse_docker_options(&bad)),
            vec![
                ("invalid_value", "image".into()),
                ("invalid_value", "namespace".into()),
                ("invalid_path", "spillDirectory".into()),
                ("invalid_value", "engine.url".into()),
                ("invalid_value", "user".into()),
                ("unknown_field", "extra".into()),
            ]
        );
    }

    const CA: &str = include_str!("../../__test__/fixtures/tls/ca.pem");
    const CERT: &str = include_str!("../../__test__/fixtures/tls/client.pem");
    const KEY: &str = include_str!("../../__test__/fixtures/tls/client-key.pem");
    const OTHER_KEY: &str = include_str!("../../__test__/fixtures/tls/server-key.pem");

    fn with_engine(engine: serde_json::Value) -> Result<DockerOptions, Vec<Issue>> {
        parse_docker_options(&from_json(json!({
            "image": "busybox:1", "namespace": "ci", "spillDirectory": "/tmp/spill", "engine": engine
        })))
    }

    #[test]
    fn tls_engine_is_checked_when_parsed() {
        let tls = json!({ "ca": CA, "cert": CERT, "key": KEY });
        let ok = with_engine(json!({ "url": "tcp://127.0.0.1:2376", "tls": tls }))
            .expect("valid TLS engine");
        assert!(matches!(ok.engine, Engine::Tls { ref url, .. } if url == "tcp://127.0.0.1:2376"));
        assert!(with_engine(json!({ "url": "https://localhost:2376", "tls": tls })).is_ok());

        let cases = [
            (json!({ "url": "https://localhost:2376" }), "engine.url"),
            (
                json!({ "url": "http://localhost:2376", "tls": tls }),
                "engine.url",
            ),
            (
                json!({ "socketPath": "/var/run/docker.sock", "tls": tls }),
                "engine.tls",
            ),
            (
                json!({ "url": "tcp://h:1", "tls": { "ca": "/certs/ca.pem", "cert": CERT, "key": KEY } }),
                "engine.tls.ca",
            ),
            (
                json!({ "url": "tcp://h:1", "tls": { "ca": CA, "cert": KEY, "key": KEY } }),
                "engine.tls.cert",
            ),
            (
                json!({ "url": "tcp://h:1", "tls": { "ca": CA, "cert": CERT, "key": CERT } }),
                "engine.tls.key",
            ),
            (
                json!({ "url": "tcp://h:1", "tls": { "ca": CA, "cert": CERT, "key": OTHER_KEY } }),
                "engine.tls.key",
            ),
        ];
        for (engine, path) in cases {
            let issues = issue_list(with_engine(engine.clone()));
            assert_eq!(issues, vec![("invalid_value", path.into())], "{engine}");
        }
        let missing = issue_list(with_engine(
            json!({ "url": "tcp://h:1", "tls": { "ca": CA, "pem": 1 } }),
        ));
        assert_eq!(
            missing,
            vec![
                ("required", "engine.tls.cert".into()),
                ("required", "engine.tls.key".into()),
                ("unknown_field", "engine.tls.pem".into()),
            ]
        );
    }
}
