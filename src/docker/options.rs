//! `createDockerSandboxBackend(options)`: parsed and checked before anything talks to an engine.

use crate::input::read::{object, string};
use crate::input::{Issue, IssueCode, Issues, Seg, Value};
use crate::paths::{self, Anchor};
use crate::policy::ids::identifier;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    /// `DOCKER_HOST`, else the local default socket, as the docker CLI does.
    Default,
    Socket(String),
    Url(String),
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
}

pub const DEFAULT_USER: &str = "65532:65532";

pub fn parse_docker_options(input: &Value) -> Result<DockerOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = options(input, &mut issues);
    issues.finish(options)
}

fn options(value: &Value, issues: &mut Issues) -> Option<DockerOptions> {
    let mut f = object(value, &[], issues)?;
    let image = f.required("image", issues).and_then(|v| {
        let at = f.at("image");
        let s = string(v, &at, 512, issues)?;
        if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            issues.add(
                IssueCode::InvalidValue,
                &at,
                "must be a non-empty image reference or ID without whitespace",
            );
            return None;
        }
        Some(s)
    });
    let namespace = f
        .required("namespace", issues)
        .and_then(|v| identifier(v, &f.at("namespace"), issues));
    let spill_directory = f
        .required("spillDirectory", issues)
        .and_then(|v| paths::path(v, &f.at("spillDirectory"), Anchor::Guest, issues));
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
    f.finish(issues);
    Some(DockerOptions {
        image: image?,
        namespace: namespace?,
        spill_directory: spill_directory?,
        engine: engine?,
        user: user?,
        runtime: runtime?,
    })
}

fn engine(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Engine> {
    let mut f = object(value, at, issues)?;
    let socket = f.optional("socketPath");
    let url = f.optional("url");
    let tls = f.optional("tls");
    let result = match (socket, url) {
        (Some(socket), None) => {
            paths::path(socket, &f.at("socketPath"), Anchor::Guest, issues).map(Engine::Socket)
        }
        (None, Some(url)) => {
            let at = f.at("url");
            let s = string(url, &at, 2_048, issues)?;
            if tls.is_some() {
                issues.add(
                    IssueCode::InvalidValue,
                    &f.at("tls"),
                    "TLS engine connections are not supported by this build; use a unix socket or a plain tcp:// URL on a trusted network",
                );
                None
            } else if s.starts_with("tcp://")
                || s.starts_with("http://")
                || s.starts_with("unix://")
            {
                Some(Engine::Url(s))
            } else {
                issues.add(
                    IssueCode::InvalidValue,
                    &at,
                    "must start with tcp://, http:// or unix://",
                );
                None
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
}
