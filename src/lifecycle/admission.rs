//! Admission checks around a driver: what its support can honour before it is asked anything,
//! and whether what it observed after startup is within the request.

use super::error::OwnerError;
use crate::policy::effective::{EffectiveDiskQuota, SandboxEffectivePolicy};
use crate::policy::network::NetworkKind;
use crate::policy::request::{Execution, SandboxRequest, WorkspaceDiskQuota};
use crate::policy::support::SandboxSupport;

/// Refuses, before any driver call, a request the declared support cannot enforce.
pub fn check_supported(
    request: &SandboxRequest,
    support: &SandboxSupport,
) -> Result<(), OwnerError> {
    let policy = &request.policy;
    if !support.network.contains(&policy.network) {
        return Err(OwnerError::Unsupported(format!(
            "backend {} cannot enforce policy.network.kind '{}'",
            support.backend_id,
            policy.network.as_str()
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
    if asked.network == NetworkKind::Isolated && effective.network != NetworkKind::Isolated {
        looser.push("network.kind outbound where isolated was requested".into());
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
