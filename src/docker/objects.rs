//! Engine objects of one sandbox: creating them under recorded checkpoints, fingerprinting them,
//! and removing them only when they are provably ours.

use std::collections::HashMap;

use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::{RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder};
use bollard::Docker;

use super::engine::{engine_error, is_kill_raced_exit, is_not_found};
use super::layout::{LABEL_NAMESPACE, LABEL_OPERATION, LABEL_ROLE, LABEL_SANDBOX};
use crate::digest::sha256;
use crate::lifecycle::error::OwnerError;
use crate::recovery::record::{Identity, Role, SandboxRecoveryRecord};

/// A container's incarnation: its ID and creation time cannot be forged by a later object of
/// the same name.
pub fn container_fingerprint(inspect: &ContainerInspectResponse) -> String {
    let id = inspect.id.clone().unwrap_or_default();
    let created = inspect.created.clone().unwrap_or_default();
    sha256(format!("container:{id}:{created}").as_bytes())
}

/// A volume has no ID, and its reported creation time follows its data directory's mtime, so
/// its incarnation is its name plus its immutable labels (which carry the random operation id).
pub fn volume_fingerprint(name: &str, labels: &HashMap<String, String>) -> String {
    let mut pairs: Vec<(&String, &String)> = labels.iter().collect();
    pairs.sort();
    let rendered: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    sha256(format!("volume:{name}:{}", rendered.join("\n")).as_bytes())
}

pub fn network_fingerprint(id: &str, created: Option<&str>) -> String {
    sha256(format!("network:{id}:{}", created.unwrap_or_default()).as_bytes())
}

/// Whether `labels` say the object belongs to this record's sandbox, in this role.
pub fn labels_match(
    labels: Option<&HashMap<String, String>>,
    record: &SandboxRecoveryRecord,
    role: Role,
) -> bool {
    let Some(labels) = labels else { return false };
    let is = |key: &str, value: &str| labels.get(key).map(String::as_str) == Some(value);
    is(LABEL_NAMESPACE, &record.namespace)
        && is(LABEL_SANDBOX, &record.sandbox_id)
        && is(LABEL_OPERATION, &record.operation_id)
        && is(LABEL_ROLE, role.as_str())
}

/// Returns a copy of `record` with `role`'s identity replaced.
pub fn with_identity(
    record: &SandboxRecoveryRecord,
    role: Role,
    identity: Identity,
) -> SandboxRecoveryRecord {
    let mut next = record.clone();
    for resource in &mut next.resources {
        if resource.role == role {
            resource.identity = identity.clone();
        }
    }
    next
}

pub fn identity_of(record: &SandboxRecoveryRecord, role: Role) -> Option<&Identity> {
    record
        .resources
        .iter()
        .find(|r| r.role == role)
        .map(|r| &r.identity)
}

pub fn name_of(record: &SandboxRecoveryRecord, role: Role) -> Option<&str> {
    record
        .resources
        .iter()
        .find(|r| r.role == role)
        .map(|r| r.name.as_str())
}

/// Removes a container we can prove is ours: by exact ID and fingerprint when identified, or by
/// name with this sandbox's labels when its creation was entered but not yet identified.
pub async fn remove_container(
    docker: &Docker,
    record: &SandboxRecoveryRecord,
    role: Role,
) -> Result<(), OwnerError> {
    let Some(target) = provable_container(docker, record, role).await? else {
        return Ok(());
    };
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(false)
        .build();
    let mut attempt = 1;
    loop {
        match docker
            .remove_container(&target, Some(options.clone()))
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            // Removal already in progress: the object is going away.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => return Ok(()),
            Err(e) if is_kill_raced_exit(&e) && attempt < RACED_EXIT_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(RACED_EXIT_PAUSE).await;
            }
            Err(e) => {
                return Err(engine_error(
                    &format!("removing the {} container", role.as_str()),
                    e,
                ))
            }
        }
    }
}

/// How many times a forced removal is asked when the engine's kill raced the container's exit,
/// and the pause between asks: the container is already stopped, so the second ask removes it;
/// the bound keeps a cleanup's wait finite whatever the engine answers.
const RACED_EXIT_ATTEMPTS: u32 = 4;
const RACED_EXIT_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// The container ID to act on, if the container exists and is provably this sandbox's.
pub async fn provable_container(
    docker: &Docker,
    record: &SandboxRecoveryRecord,
    role: Role,
) -> Result<Option<String>, OwnerError> {
    let (lookup, fingerprint) = match identity_of(record, role) {
        Some(Identity::Identified { id, fingerprint }) => (id.clone(), Some(fingerprint.clone())),
        Some(Identity::Creating) => match name_of(record, role) {
            Some(name) => (name.to_owned(), None),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let inspect = match docker.inspect_container(&lookup, None).await {
        Ok(inspect) => inspect,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(engine_error("inspecting a sandbox container", e)),
    };
    let labels = inspect.config.as_ref().and_then(|c| c.labels.as_ref());
    let proven = labels_match(labels, record, role)
        && fingerprint.is_none_or(|f| f == container_fingerprint(&inspect));
    if !proven {
        return Err(OwnerError::state(format!(
            "the {} container at {lookup} is not provably this sandbox's (labels or incarnation differ); it was left untouched",
            role.as_str()
        )));
    }
    Ok(inspect.id)
}

pub async fn remove_volume(
    docker: &Docker,
    record: &SandboxRecoveryRecord,
) -> Result<(), OwnerError> {
    let (Some(identity), Some(name)) = (
        identity_of(record, Role::Storage),
        name_of(record, Role::Storage),
    ) else {
        return Ok(());
    };
    if matches!(identity, Identity::Planned) {
        return Ok(());
    }
    let volume = match docker.inspect_volume(name).await {
        Ok(volume) => volume,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(engine_error("inspecting the workspace volume", e)),
    };
    let fingerprint_ok = match identity {
        Identity::Identified { fingerprint, .. } => {
            *fingerprint == volume_fingerprint(&volume.name, &volume.labels)
        }
        _ => true,
    };
    if !(labels_match(Some(&volume.labels), record, Role::Storage) && fingerprint_ok) {
        return Err(OwnerError::state(format!(
            "the workspace volume {name} is not provably this sandbox's; it was left untouched"
        )));
    }
    match docker
        .remove_volume(
            name,
            Some(RemoveVolumeOptionsBuilder::default().force(false).build()),
        )
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(engine_error("removing the workspace volume", e)),
    }
}

pub async fn remove_network(
    docker: &Docker,
    record: &SandboxRecoveryRecord,
) -> Result<(), OwnerError> {
    let (Some(identity), Some(name)) = (
        identity_of(record, Role::Network),
        name_of(record, Role::Network),
    ) else {
        return Ok(());
    };
    let lookup = match identity {
        Identity::Planned => return Ok(()),
        Identity::Creating => name.to_owned(),
        Identity::Identified { id, .. } => id.clone(),
    };
    let network = match docker.inspect_network(&lookup, None).await {
        Ok(network) => network,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(engine_error("inspecting the sandbox network", e)),
    };
    let id = network.id.clone().unwrap_or_default();
    let fingerprint_ok = match identity {
        Identity::Identified { fingerprint, .. } => {
            *fingerprint == network_fingerprint(&id, network.created.as_deref())
        }
        _ => true,
    };
    if !(labels_match(network.labels.as_ref(), record, Role::Network) && fingerprint_ok) {
        return Err(OwnerError::state(format!(
            "the network {lookup} is not provably this sandbox's; it was left untouched"
        )));
    }
    match docker.remove_network(&id).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(engine_error("removing the sandbox network", e)),
    }
}

/// Removes everything of the record, compute first, storage last. Every step is tried; the
/// first failure is reported after the others ran.
pub async fn remove_all(docker: &Docker, record: &SandboxRecoveryRecord) -> Result<(), OwnerError> {
    let results = [
        remove_container(docker, record, Role::Compute).await,
        remove_container(docker, record, Role::Holder).await,
        remove_volume(docker, record).await,
        remove_network(docker, record).await,
    ];
    results
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .map(drop)
}
