//! Admission checks around a driver: what its support can honour before it is asked anything,
//! and whether what it observed after startup is within the request.

use super::error::OwnerError;
use crate::policy::effective::{EffectiveDiskQuota, SandboxEffectivePolicy};
use crate::policy::egress::EgressHost;
use crate::policy::network::NetworkKind;
use crate::policy::request::{Execution, SandboxRequest, WorkspaceDiskQuota};
use crate::policy::support::SandboxSupport;

/// Refuses, before any driver call, a request the declared support cannot enforce.
pub fn check_supported(
    request: &SandboxRequest,
    support: &SandboxSupport,
) -> Result<(), OwnerError> {
    let policy = &request.policy;
    if !support.network.contains(&policy.network.kind) {
        return Err(OwnerError::Unsupported(format!(
            "backend {} cannot enforce policy.network.kind '{}'",
            support.backend_id,
            policy.network.kind.as_str()
        )));
    }
    let execution = match policy.execution {
        Execution::UntilStopped => "until_stopped",
        Execution::Deadline { .. } => "deadline",
    };
    if !support.execution.contains(&execution) {
        return Err(OwnerError::Unsupported(format!(
            "backend {} cannot enforce policy.execution.kind '{execution}'",
            support.backend_id
        )));
    }
    if matches!(
        policy.workspace_disk_quota,
        WorkspaceDiskQuota::Required { .. }
    ) && !support.workspace_disk_quota
    {
        return Err(OwnerError::Unsupported(format!(
            "backend {} cannot enforce policy.workspaceDiskQuota (allocated-block accounting); it is never silently replaced by an ordinary volume",
            support.backend_id
        )));
    }
    Ok(())
}

/// Refuses an observed policy looser than the request: more CPU, memory, PIDs or temporary
/// storage, outbound where isolated was asked, or a disk quota that is missing or larger.
pub fn check_effective(
    request: &SandboxRequest,
    effective: &SandboxEffectivePolicy,
) -> Result<(), OwnerError> {
    let asked = &request.policy;
    let (have, want) = (&effective.resources, &asked.resources);
    let (have_tmp, want_tmp) = (&effective.temporary_storage, &asked.temporary_storage);
    // Every amount as (field, observed, requested); f64 holds each exactly (safe integers).
    let amounts = [
        ("resources.cpus", have.cpus, want.cpus),
        (
            "resources.memoryBytes",
            have.memory_bytes as f64,
            want.memory_bytes as f64,
        ),
        ("resources.pids", have.pids as f64, want.pids as f64),
        (
            "temporaryStorage.homeBytes",
            have_tmp.home_bytes as f64,
            want_tmp.home_bytes as f64,
        ),
        (
            "temporaryStorage.tempBytes",
            have_tmp.temp_bytes as f64,
            want_tmp.temp_bytes as f64,
        ),
    ];
    let mut looser: Vec<String> = amounts
        .iter()
        .filter(|(_, observed, requested)| observed > requested)
        .map(|(field, observed, requested)| format!("{field} {observed} > {requested}"))
        .collect();
    match (asked.network.kind, effective.network.kind) {
        (_, NetworkKind::Isolated) | (NetworkKind::Outbound, _) => {}
        (NetworkKind::Isolated, observed) => looser.push(format!(
            "network.kind {} where isolated was requested",
            observed.as_str()
        )),
        (NetworkKind::Allowlist, NetworkKind::Outbound) => {
            looser.push("network.kind outbound where an allowlist was requested".into())
        }
        (NetworkKind::Allowlist, NetworkKind::Allowlist) => {
            let extra: Vec<String> = effective
                .network
                .hosts
                .iter()
                .filter(|host| !asked.network.hosts.iter().any(|a| within(host, a)))
                .map(|host| match host.allow_private {
                    true => format!("{} (private addresses too)", host.rendered()),
                    false => host.rendered(),
                })
                .collect();
            if !extra.is_empty() {
                looser.push(format!(
                    "network.hosts allows {} beyond the requested allowlist",
                    extra.join(", ")
                ));
            }
        }
    }
    match (asked.workspace_disk_quota, effective.workspace_disk_quota) {
        (WorkspaceDiskQuota::NotRequested, EffectiveDiskQuota::NotRequested) => {}
        (WorkspaceDiskQuota::NotRequested, EffectiveDiskQuota::Enforced { .. }) => {
            looser.push("workspaceDiskQuota reported enforced where none was requested".into())
        }
        (WorkspaceDiskQuota::Required { .. }, EffectiveDiskQuota::NotRequested) => {
            looser.push("workspaceDiskQuota not enforced where it was required".into())
        }
        (
            WorkspaceDiskQuota::Required { bytes },
            EffectiveDiskQuota::Enforced { bytes: observed },
        ) => {
            if observed > bytes {
                looser.push(format!("workspaceDiskQuota.bytes {observed} > {bytes}"));
            }
        }
    }
    if looser.is_empty() {
        Ok(())
    } else {
        Err(OwnerError::Unsupported(format!(
            "the backend observed a policy looser than the request: {}",
            looser.join("; ")
        )))
    }
}

/// Whether an applied allowlist entry allows no more than a requested one: names the asked
/// entry covers (`name_within`), the same port (or one of 443 and 80 where none was asked,
/// which means both), and private addresses only where asked.
fn within(applied: &EgressHost, asked: &EgressHost) -> bool {
    let port = applied.port == asked.port
        || (asked.port.is_none() && matches!(applied.port, Some(443) | Some(80)));
    name_within(&applied.name, &asked.name)
        && port
        && (asked.allow_private || !applied.allow_private)
}

/// Whether every name `applied` matches, `asked` matches too: the same entry, or under an asked
/// wildcard (`*.example.com`) a name one or more labels below its base, exact or itself a
/// wildcard (`a.example.com`, `*.a.example.com`; never `example.com`).
fn name_within(applied: &str, asked: &str) -> bool {
    if applied == asked {
        return true;
    }
    let Some(base) = asked.strip_prefix("*.") else {
        return false;
    };
    let name = applied.strip_prefix("*.").unwrap_or(applied);
    name.strip_suffix(base)
        .and_then(|above| above.strip_suffix('.'))
        .is_some_and(|above| !above.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::from_json;
    use crate::policy::effective::parse_sandbox_effective_policy;
    use crate::policy::request::parse_sandbox_request;
    use serde_json::json;

    fn request(network: serde_json::Value) -> SandboxRequest {
        parse_sandbox_request(&from_json(json!({ "policy": {
            "resources": { "cpus": 1, "memoryBytes": 1048576, "pids": 16 },
            "temporaryStorage": { "homeBytes": 1048576, "tempBytes": 1048576 },
            "network": network,
            "deadlines": { "startupMs": 1000, "cleanupMs": 1000 },
            "transfers": { "chunkBytes": 65536, "metadataBatchBytes": 65536, "mergeFanIn": 8 },
            "streams": { "maxBufferedInputBytes": 65536, "maxBufferedOutputBytes": 65536, "highWaterMark": 1024 }
        }})))
        .expect("a valid request")
    }

    fn effective(network: serde_json::Value) -> SandboxEffectivePolicy {
        parse_sandbox_effective_policy(&from_json(json!({
            "resources": { "cpus": 1, "memoryBytes": 1048576, "pids": 16 },
            "temporaryStorage": { "homeBytes": 1048576, "tempBytes": 1048576 },
            "network": network,
            "workspaceDiskQuota": { "kind": "not_requested" }
        })))
        .expect("a valid effective policy")
    }

    #[test]
    fn a_wildcard_covers_the_names_below_its_base_only() {
        for (applied, asked, covered) in [
            ("a.example.com", "a.example.com", true),
            ("*.example.com", "*.example.com", true),
            ("a.example.com", "*.example.com", true),
            ("b.a.example.com", "*.example.com", true),
            ("*.a.example.com", "*.example.com", true),
            ("example.com", "*.example.com", false),
            ("*.example.com", "*.a.example.com", false),
            ("aexample.com", "*.example.com", false),
            ("*.example.com", "a.example.com", false),
            ("a.example.com", "example.com", false),
        ] {
            assert_eq!(
                name_within(applied, asked),
                covered,
                "{applied} under {asked}"
            );
        }
    }

    #[test]
    fn an_allowlist_may_be_applied_as_asked_narrower_or_isolated_never_wider() {
        let asked = request(json!({ "kind": "allowlist", "hosts": ["a.example", "b.example"] }));
        for fine in [
            json!({ "kind": "allowlist", "hosts": ["a.example", "b.example"] }),
            json!({ "kind": "allowlist", "hosts": ["b.example"] }),
            json!({ "kind": "allowlist", "hosts": ["a.example:443"] }),
            json!({ "kind": "isolated" }),
        ] {
            assert!(
                check_effective(&asked, &effective(fine.clone())).is_ok(),
                "{fine}"
            );
        }
        // Names under a requested wildcard are narrower too.
        let wildcard = request(json!({ "kind": "allowlist", "hosts": ["*.example.org"] }));
        for fine in [
            json!({ "kind": "allowlist", "hosts": ["api.example.org", "*.cdn.example.org:443"] }),
            json!({ "kind": "allowlist", "hosts": ["*.example.org"] }),
        ] {
            assert!(
                check_effective(&wildcard, &effective(fine.clone())).is_ok(),
                "{fine}"
            );
        }
        for wider in [
            json!({ "kind": "allowlist", "hosts": ["example.org"] }),
            json!({ "kind": "allowlist", "hosts": ["api.example.net"] }),
        ] {
            assert!(
                check_effective(&wildcard, &effective(wider.clone())).is_err(),
                "{wider}"
            );
        }
        for (wider, why) in [
            (json!({ "kind": "outbound" }), "outbound where an allowlist"),
            (
                json!({ "kind": "allowlist", "hosts": ["a.example", "c.example"] }),
                "c.example",
            ),
            (
                json!({ "kind": "allowlist", "hosts": ["a.example:8443"] }),
                "8443",
            ),
            (
                json!({ "kind": "allowlist", "hosts": ["a.example"], "allowPrivate": ["a.example"] }),
                "network.hosts allows a.example (private addresses too) beyond",
            ),
            (
                json!({ "kind": "allowlist", "hosts": [{ "host": "a.example", "allowPrivate": true }] }),
                "network.hosts allows a.example (private addresses too) beyond",
            ),
        ] {
            let error = check_effective(&asked, &effective(wider.clone())).expect_err("wider");
            assert!(error.to_string().contains(why), "{wider}: {error}");
        }
        // Private addresses where the request opted in, in either form, are as asked.
        let opted = request(json!({
            "kind": "allowlist",
            "hosts": [{ "host": "a.example", "allowPrivate": true }, "b.example"]
        }));
        let listed = request(json!({
            "kind": "allowlist",
            "hosts": ["a.example", "b.example"],
            "allowPrivate": ["a.example"]
        }));
        for fine in [
            json!({ "kind": "allowlist", "hosts": ["a.example", "b.example"], "allowPrivate": ["a.example"] }),
            json!({ "kind": "allowlist", "hosts": ["a.example"] }),
        ] {
            for asked in [&opted, &listed] {
                assert!(
                    check_effective(asked, &effective(fine.clone())).is_ok(),
                    "{fine}"
                );
            }
        }
        for asked in [&opted, &listed] {
            let error = check_effective(
                asked,
                &effective(json!({ "kind": "allowlist", "hosts": ["b.example"], "allowPrivate": ["b.example"] })),
            )
            .expect_err("b.example was not opted in");
            assert!(
                error
                    .to_string()
                    .contains("b.example (private addresses too)"),
                "{error}"
            );
        }
        let isolated = request(json!({ "kind": "isolated" }));
        let error = check_effective(
            &isolated,
            &effective(json!({ "kind": "allowlist", "hosts": ["a.example"] })),
        )
        .expect_err("wider than isolated");
        assert!(
            error.to_string().contains("allowlist where isolated"),
            "{error}"
        );
    }
}
