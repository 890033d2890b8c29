//! The one container configuration every sandbox container gets (hardening plus the requested
//! limits), and reading back what the engine actually applied.

use std::collections::HashMap;

use bollard::models::{HostConfig, HostConfigLogConfig, Mount, MountType, MountVolumeOptions};

use super::gvisor;
use super::layout::{HOME, TMPDIR, WORKSPACE};
use crate::lifecycle::error::OwnerError;
use crate::policy::effective::{EffectiveDiskQuota, SandboxEffectivePolicy};
use crate::policy::network::{NetworkKind, NetworkPolicy};
use crate::policy::request::Policy;
use crate::policy::resources::{Resources, TemporaryStorage};

/// tmpfs options besides owner and size.
const TMPFS_OPTIONS: &str = "rw,nosuid,nodev,mode=0700";

/// The host configuration of every container of a sandbox: non-root user (set on the body),
/// no capabilities, no new privileges, read-only root, an init that reaps zombies, no host
/// mounts, no published ports, no privileged mode, the requested limits, no extra swap, and the
/// `none` log driver (the engine would otherwise copy every output byte to the host's disk).
/// Under gVisor, `pids` is held by gVisor's kernel and the engine's limit covers gVisor's own
/// tasks (`gvisor.rs`).
pub fn host_config(policy: &Policy, placement: &Placement<'_>) -> HostConfig {
    let memory = i64::try_from(policy.resources.memory_bytes).unwrap_or(i64::MAX);
    // HOME and TMPDIR belong to the sandbox user: a tmpfs root is root's otherwise.
    let (uid, gid) = placement
        .user
        .split_once(':')
        .unwrap_or((placement.user, placement.user));
    let tmpfs = |size: u64| format!("{TMPFS_OPTIONS},uid={uid},gid={gid},size={size}");
    let pids = policy.resources.pids;
    let (pids_limit, ulimits) = if gvisor::is_gvisor(placement.runtime) {
        (
            gvisor::engine_pids_limit(pids),
            Some(vec![gvisor::guest_task_limit(pids)]),
        )
    } else {
        (i64::try_from(pids).unwrap_or(i64::MAX), None)
    };
    HostConfig {
        nano_cpus: Some((policy.resources.cpus * 1e9).round() as i64),
        memory: Some(memory),
        memory_swap: Some(memory),
        pids_limit: Some(pids_limit),
        ulimits,
        tmpfs: Some(HashMap::from([
            (HOME.to_owned(), tmpfs(policy.temporary_storage.home_bytes)),
            (
                TMPDIR.to_owned(),
                tmpfs(policy.temporary_storage.temp_bytes),
            ),
        ])),
        network_mode: Some(match (policy.network.kind, placement.network) {
            // The sandbox's own network: a bridge for outbound, internal for an allowlist.
            (NetworkKind::Outbound | NetworkKind::Allowlist, Some(name)) => name.to_owned(),
            _ => "none".to_owned(),
        }),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        readonly_rootfs: Some(true),
        init: Some(true),
        privileged: Some(false),
        publish_all_ports: Some(false),
        mounts: Some(vec![Mount {
            target: Some(WORKSPACE.to_owned()),
            source: Some(placement.volume.to_owned()),
            typ: Some(MountType::VOLUME),
            read_only: Some(false),
            volume_options: Some(MountVolumeOptions {
                no_copy: Some(!placement.seed_volume),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".to_owned()),
            config: None,
        }),
        runtime: placement.runtime.map(str::to_owned),
        ..Default::default()
    }
}

/// Where a container of the sandbox sits: its user, the workspace volume, the network, the
/// runtime, and whether its image seeds the fresh volume (only the holder's does).
pub struct Placement<'a> {
    pub user: &'a str,
    pub volume: &'a str,
    pub network: Option<&'a str>,
    pub runtime: Option<&'a str>,
    pub seed_volume: bool,
}

fn tmpfs_size(options: Option<&String>) -> Option<u64> {
    options?
        .split(',')
        .find_map(|option| option.strip_prefix("size="))
        .and_then(|size| size.parse().ok())
}

/// Reads back the applied configuration against `expected` (the host configuration the
/// container was created with). Anything that is not exactly the hardening is an error:
/// startup fails closed and the owner cleans up. The network mode, the log driver, the tmpfs
/// options and the runtime must be exactly what was asked; the network kind is read from the
/// mode (`none` isolated, the sandbox's own network outbound, or for an `asked` allowlist the
/// sandbox's own internal network, created internal and read back so: the allowlist as asked).
pub fn applied(
    host: &HostConfig,
    user: Option<&str>,
    expected_user: &str,
    expected: &HostConfig,
    asked: &NetworkPolicy,
) -> Result<SandboxEffectivePolicy, OwnerError> {
    let mut wrong = placement_differences(host, expected);
    if user != Some(expected_user) {
        wrong.push(format!("user {user:?} instead of {expected_user}"));
    }
    if host.cap_drop.as_deref() != Some(&["ALL".to_owned()][..]) {
        wrong.push("capabilities not all dropped".to_owned());
    }
    // Exactly the capabilities asked (none, or the supervisor's two: `compute.rs`).
    let added = |config: &HostConfig| {
        let mut added = config.cap_add.clone().unwrap_or_default();
        added.sort();
        added
    };
    let asked_added = added(expected);
    if added(host) != asked_added || asked_added.iter().any(|c| c != "SETUID" && c != "SETGID") {
        wrong.push("capabilities added".to_owned());
    }
    if !host.security_opt.as_ref().is_some_and(|o| {
        o.iter()
            .any(|s| s == "no-new-privileges" || s == "no-new-privileges:true")
    }) {
        wrong.push("no-new-privileges missing".to_owned());
    }
    if host.readonly_rootfs != Some(true) {
        wrong.push("root filesystem writable".to_owned());
    }
    // The engine's init, unless the entry is its own (the session supervisor).
    if host.init != expected.init.or(Some(true)) {
        wrong.push("init process not as asked".to_owned());
    }
    if host.privileged == Some(true) {
        wrong.push("privileged".to_owned());
    }
    if host.binds.as_ref().is_some_and(|b| !b.is_empty()) {
        wrong.push("host bind mounts".to_owned());
    }
    if host
        .mounts
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m.typ != Some(MountType::VOLUME)))
    {
        wrong.push("a mount other than the workspace volume".to_owned());
    }
    if host.port_bindings.as_ref().is_some_and(|p| !p.is_empty())
        || host.publish_all_ports == Some(true)
    {
        wrong.push("published ports".to_owned());
    }
    if host.memory_swap != host.memory {
        wrong.push("extra swap".to_owned());
    }
    let tmpfs = host.tmpfs.clone().unwrap_or_default();
    let home = tmpfs_size(tmpfs.get(HOME));
    let temp = tmpfs_size(tmpfs.get(TMPDIR));
    let nano = host.nano_cpus.unwrap_or(0);
    let memory = host.memory.unwrap_or(0);
    // The guest's task limit: the engine's pids limit, or under gVisor the one its kernel holds
    // (the engine's limit must then be exactly the one asked, gVisor's need included).
    let pids = if gvisor::is_gvisor(expected.runtime.as_deref()) {
        match gvisor::read_guest_task_limit(host.ulimits.as_deref()) {
            Some(pids) if host.pids_limit == expected.pids_limit => pids as i64,
            _ => {
                wrong.push("the guest's task limit under gVisor is not the one asked".to_owned());
                0
            }
        }
    } else {
        if host.ulimits.as_ref().is_some_and(|u| !u.is_empty()) {
            wrong.push("resource limits (ulimits) that were not asked".to_owned());
        }
        host.pids_limit.unwrap_or(0)
    };
    if nano <= 0 || memory <= 0 || pids <= 0 || home.is_none() || temp.is_none() {
        wrong.push("a resource limit is missing (cpus, memory, pids or tmpfs size)".to_owned());
    }
    if !wrong.is_empty() {
        return Err(OwnerError::Unsupported(format!(
            "the engine did not apply the sandbox hardening: {}",
            wrong.join("; ")
        )));
    }
    let network = match host.network_mode.as_deref() {
        Some("none") => NetworkPolicy::of(NetworkKind::Isolated),
        // Exactly the sandbox's own internal network (checked above), its gateway the only way
        // out.
        _ if asked.kind == NetworkKind::Allowlist => asked.clone(),
        // Exactly the sandbox's own bridge network (checked above): outbound.
        _ => NetworkPolicy::of(NetworkKind::Outbound),
    };
    Ok(SandboxEffectivePolicy {
        resources: Resources {
            cpus: nano as f64 / 1e9,
            memory_bytes: memory as u64,
            pids: pids as u64,
        },
        temporary_storage: TemporaryStorage {
            home_bytes: home.unwrap_or(0),
            temp_bytes: temp.unwrap_or(0),
        },
        network,
        workspace_disk_quota: EffectiveDiskQuota::NotRequested,
    })
}

/// What differs from the requested placement: network mode, log driver, sysctls, resolvers,
/// tmpfs mounts and their options, runtime. The engine reports its default runtime by name when none was asked.
fn placement_differences(host: &HostConfig, expected: &HostConfig) -> Vec<String> {
    let mut wrong = Vec::new();
    if host.network_mode != expected.network_mode {
        wrong.push(format!(
            "network mode {:?} instead of {:?}",
            host.network_mode, expected.network_mode
        ));
    }
    let log = |c: &HostConfig| c.log_config.as_ref().and_then(|l| l.typ.clone());
    if log(host) != log(expected) {
        wrong.push(format!(
            "log driver {:?} instead of {:?}",
            log(host),
            log(expected)
        ));
    }
    if host.sysctls.clone().unwrap_or_default() != expected.sysctls.clone().unwrap_or_default() {
        wrong.push(format!(
            "sysctls {:?} instead of {:?}",
            host.sysctls, expected.sysctls
        ));
    }
    let listed = |list: &Option<Vec<String>>| list.clone().unwrap_or_default();
    if listed(&host.dns) != listed(&expected.dns)
        || listed(&host.dns_search) != listed(&expected.dns_search)
        || listed(&host.dns_options) != listed(&expected.dns_options)
    {
        wrong.push(format!(
            "resolvers {:?} (search {:?}, options {:?}) instead of {:?} (search {:?}, options {:?})",
            host.dns,
            host.dns_search,
            host.dns_options,
            expected.dns,
            expected.dns_search,
            expected.dns_options
        ));
    }
    if host.tmpfs != expected.tmpfs {
        wrong.push(format!(
            "tmpfs mounts {:?} instead of {:?}",
            host.tmpfs, expected.tmpfs
        ));
    }
    let runtime_ok = match (&host.runtime, &expected.runtime) {
        (applied, Some(asked)) => applied.as_deref() == Some(asked.as_str()),
        (None, None) => true,
        (Some(applied), None) => applied == DEFAULT_RUNTIME,
    };
    if !runtime_ok {
        wrong.push(format!(
            "runtime {:?} instead of {:?}",
            host.runtime, expected.runtime
        ));
    }
    wrong
}

/// The runtime the engine reports when none was asked for.
const DEFAULT_RUNTIME: &str = "runc";

/// The Docker backend fails closed on any difference, not only on a looser value.
pub fn check_exact(policy: &Policy, effective: &SandboxEffectivePolicy) -> Result<(), OwnerError> {
    let asked = Resources {
        cpus: (policy.resources.cpus * 1e9).round() / 1e9,
        ..policy.resources
    };
    if effective.resources != asked
        || effective.temporary_storage != policy.temporary_storage
        || effective.network != policy.network
    {
        return Err(OwnerError::Unsupported(format!(
            "the engine applied {:?} / {:?} / {} where {:?} / {:?} / {} was requested",
            effective.resources,
            effective.temporary_storage,
            effective.network.kind.as_str(),
            asked,
            policy.temporary_storage,
            policy.network.kind.as_str()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::from_json;
    use crate::policy::request::parse_sandbox_request;

    fn policy(network: &str) -> Policy {
        parse_sandbox_request(&from_json(serde_json::json!({ "policy": {
            "resources": { "cpus": 1, "memoryBytes": 67108864, "pids": 64 },
            "temporaryStorage": { "homeBytes": 1048576, "tempBytes": 1048576 },
            "network": { "kind": network },
            "deadlines": { "startupMs": 1000, "cleanupMs": 500 },
            "transfers": { "chunkBytes": 65536, "metadataBatchBytes": 65536, "mergeFanIn": 8 },
            "streams": { "maxBufferedInputBytes": 65536, "maxBufferedOutputBytes": 65536, "highWaterMark": 1024 }
        }})))
        .expect("valid request")
        .policy
    }

    fn asked(network: Option<&str>) -> HostConfig {
        let kind = if network.is_some() {
            "outbound"
        } else {
            "isolated"
        };
        host_config(
            &policy(kind),
            &Placement {
                user: "65532:65532",
                volume: "v",
                network,
                runtime: None,
                seed_volume: false,
            },
        )
    }

    fn read_back(host: &HostConfig, expected: &HostConfig) -> Result<NetworkKind, String> {
        applied(
            host,
            Some("65532:65532"),
            "65532:65532",
            expected,
            &NetworkPolicy::of(NetworkKind::Outbound),
        )
        .map(|effective| effective.network.kind)
        .map_err(|e| e.to_string())
    }

    #[test]
    fn exactly_what_was_asked_reads_back() {
        let isolated = asked(None);
        assert_eq!(read_back(&isolated, &isolated), Ok(NetworkKind::Isolated));
        let outbound = asked(Some("nsbx-net"));
        assert_eq!(read_back(&outbound, &outbound), Ok(NetworkKind::Outbound));
        let mut runc = isolated.clone();
        runc.runtime = Some("runc".into());
        assert_eq!(read_back(&runc, &isolated), Ok(NetworkKind::Isolated));
    }

    #[test]
    fn host_or_another_network_is_never_outbound() {
        for mode in ["host", "bridge", "default", "container:abc", "other-net"] {
            let mut host = asked(Some("nsbx-net"));
            host.network_mode = Some(mode.into());
            let refused = read_back(&host, &asked(Some("nsbx-net")));
            assert!(refused.is_err(), "{mode} was accepted");
            assert!(refused.unwrap_err().contains("network mode"));
        }
        let mut host = asked(None);
        host.network_mode = Some("host".into());
        assert!(read_back(&host, &asked(None)).is_err());
    }

    #[test]
    fn another_log_driver_tmpfs_option_or_runtime_fails_closed() {
        let expected = asked(None);
        let mut json_log = expected.clone();
        json_log.log_config = Some(HostConfigLogConfig {
            typ: Some("json-file".into()),
            config: None,
        });
        assert!(read_back(&json_log, &expected)
            .unwrap_err()
            .contains("log driver"));

        let mut exec_tmp = expected.clone();
        if let Some(tmpfs) = exec_tmp.tmpfs.as_mut() {
            for options in tmpfs.values_mut() {
                *options = options.replace("nosuid,", "");
            }
        }
        assert!(read_back(&exec_tmp, &expected)
            .unwrap_err()
            .contains("tmpfs"));

        let mut other_runtime = expected.clone();
        other_runtime.runtime = Some("runsc".into());
        assert!(read_back(&other_runtime, &expected)
            .unwrap_err()
            .contains("runtime"));

        let mut with_sysctls = expected.clone();
        with_sysctls.sysctls = Some(HashMap::from([(
            "net.ipv6.conf.all.disable_ipv6".to_owned(),
            "1".to_owned(),
        )]));
        assert!(read_back(&expected, &with_sysctls)
            .unwrap_err()
            .contains("sysctls"));
        let mut with_resolver = expected.clone();
        with_resolver.dns = Some(vec!["10.0.0.2".into()]);
        assert!(read_back(&expected, &with_resolver)
            .unwrap_err()
            .contains("resolvers"));
        let mut empty_lists = expected.clone();
        empty_lists.dns_search = Some(Vec::new());
        assert!(read_back(&empty_lists, &expected).is_ok());
        // No search domain (`.`) is not the engine's default (the host's domains).
        let mut no_search = expected.clone();
        no_search.dns_search = Some(vec![".".into()]);
        assert!(read_back(&empty_lists, &no_search)
            .unwrap_err()
            .contains("search Some([\".\"])"));
        assert!(read_back(&no_search, &no_search).is_ok());
    }

    #[test]
    fn under_gvisor_pids_is_the_guest_task_limit_held_by_gvisor() {
        let gvisor = host_config(
            &policy("isolated"),
            &Placement {
                user: "65532:65532",
                volume: "v",
                network: None,
                runtime: Some("runsc"),
                seed_volume: false,
            },
        );
        assert_eq!(
            gvisor.pids_limit,
            Some(super::gvisor::engine_pids_limit(64))
        );
        let effective = applied(
            &gvisor,
            Some("65532:65532"),
            "65532:65532",
            &gvisor,
            &NetworkPolicy::of(NetworkKind::Isolated),
        )
        .expect("what was asked reads back");
        assert_eq!(effective.resources.pids, 64);

        let mut no_guest_limit = gvisor.clone();
        no_guest_limit.ulimits = None;
        assert!(read_back(&no_guest_limit, &gvisor)
            .unwrap_err()
            .contains("task limit"));
        let mut engine_only = gvisor.clone();
        engine_only.pids_limit = Some(64);
        assert!(read_back(&engine_only, &gvisor)
            .unwrap_err()
            .contains("task limit"));
        // On runc, a ulimit nobody asked for is refused.
        let mut runc = asked(None);
        runc.ulimits = gvisor.ulimits.clone();
        assert!(read_back(&runc, &asked(None))
            .unwrap_err()
            .contains("ulimits"));
    }
}
