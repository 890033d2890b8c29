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
    let mut looser = Vec::new();
    if effective.resources.cpus > asked.resources.cpus {
        looser.push(format!(
            "resources.cpus {} > {}",
            effective.resources.cpus, asked.resources.cpus
        ));
    }
    if effective.resources.memory_bytes > asked.resources.memory_bytes {
        looser.push(format!(
            "resources.memoryBytes {} > {}",
            effective.resources.memory_bytes, asked.resources.memory_bytes
        ));
    }
    if effective.resources.pids > asked.resources.pids {
        looser.push(format!(
            "resources.pids {} > {}",
            effective.resources.pids, asked.resources.pids
        ));
    }
    if effective.temporary_storage.home_bytes > asked.temporary_storage.home_bytes {
        looser.push(format!(
            "temporaryStorage.homeBytes {} > {}",
            effective.temporary_storage.home_bytes, asked.temporary_storage.home_bytes
        ));
    }
    if effective.temporary_storage.temp_bytes > asked.temporary_storage.temp_bytes {
        looser.push(format!(
            "temporaryStorage.tempBytes {} > {}",
            effective.temporary_storage.temp_bytes, asked.temporary_storage.temp_bytes
        ));
    }
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
