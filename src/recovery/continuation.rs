//! A record may change its phase, authority and resource progress, never its identity. This is
//! what makes a persisted record safe to act on after a crash: nothing can re-point it.

use super::record::{Authority, Identity, SandboxRecoveryRecord};

/// Who proposes the next record: the live owner (`Checkpoint`) or a backend describing what it
/// found (`Reconciliation`, which may not report a new acquisition as entered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    Checkpoint,
    Reconciliation,
}

/// The original's texts for a record that does not continue its predecessor.
pub const CHANGED_IDENTITY: &str =
    "Recovery observations cannot change their reserved ownership identity.";
pub const REPLACED_AUTHORITY: &str =
    "Recovery observations cannot replace verified backend authority.";
pub const REPLACED_RESOURCE: &str =
    "Recovery observations cannot replace an owned resource identity or enter a new resource effect.";

/// `Ok` when `next` continues `previous`; otherwise why it does not (one of the texts above).
pub fn check_continuation(
    previous: &SandboxRecoveryRecord,
    next: &SandboxRecoveryRecord,
    by: Continuation,
) -> Result<(), &'static str> {
    let same_identity = next.backend_id == previous.backend_id
        && next.backend_revision == previous.backend_revision
        && next.namespace == previous.namespace
        && next.operation_id == previous.operation_id
        && next.sandbox_id == previous.sandbox_id
        && next.image_digest == previous.image_digest
        && next.policy_digest == previous.policy_digest
        && next.configuration_digest == previous.configuration_digest
        && next.resources.len() == previous.resources.len();
    if !same_identity {
        return Err(CHANGED_IDENTITY);
    }
    if let Authority::Verified { backend_identity } = &previous.authority {
        let kept = matches!(&next.authority, Authority::Verified { backend_identity: b } if b == backend_identity);
        if !kept {
            return Err(REPLACED_AUTHORITY);
        }
    }
    for resource in &previous.resources {
        let Some(replacement) = next.resources.iter().find(|r| r.role == resource.role) else {
            return Err(REPLACED_RESOURCE);
        };
        if replacement.name != resource.name {
            return Err(REPLACED_RESOURCE);
        }
        let allowed = match (&resource.identity, &replacement.identity) {
            (Identity::Planned, Identity::Planned) => true,
            (Identity::Planned, Identity::Creating) => by == Continuation::Checkpoint,
            (Identity::Planned, Identity::Identified { .. }) => false,
            (Identity::Creating, Identity::Planned) => false,
            (Identity::Creating, _) => true,
            (
                Identity::Identified { id, fingerprint },
                Identity::Identified {
                    id: i,
                    fingerprint: f,
                },
            ) => id == i && fingerprint == f,
            (Identity::Identified { .. }, _) => false,
        };
        if !allowed {
            return Err(REPLACED_RESOURCE);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::record::{test_record as record, Phase};

    fn identified(id: &str) -> Identity {
        Identity::Identified {
            id: id.into(),
            fingerprint: format!("sha256:{}", "d".repeat(64)),
        }
    }

    #[test]
    fn progress_is_allowed() {
        let planned = record(Identity::Planned);
        let creating = record(Identity::Creating);
        let done = record(identified("x"));
        assert!(check_continuation(&planned, &creating, Continuation::Checkpoint).is_ok());
        assert!(check_continuation(&creating, &done, Continuation::Checkpoint).is_ok());
        assert!(check_continuation(&done, &done, Continuation::Reconciliation).is_ok());
        let mut later = done.clone();
        later.phase = Phase::Ready;
        later.authority = Authority::Verified {
            backend_identity: "engine".into(),
        };
        assert!(check_continuation(&done, &later, Continuation::Checkpoint).is_ok());
    }

    #[test]
    fn identity_changes_are_refused() {
        let planned = record(Identity::Planned);
        assert!(
            check_continuation(&planned, &record(identified("x")), Continuation::Checkpoint)
                .is_err()
        );
        assert!(check_continuation(
            &planned,
            &record(Identity::Creating),
            Continuation::Reconciliation
        )
        .is_err());
        assert!(check_continuation(
            &record(identified("x")),
            &record(identified("y")),
            Continuation::Checkpoint
        )
        .is_err());
        assert!(check_continuation(
            &record(Identity::Creating),
            &planned,
            Continuation::Checkpoint
        )
        .is_err());
        let mut moved = planned.clone();
        moved.namespace = "other".into();
        assert!(check_continuation(&planned, &moved, Continuation::Checkpoint).is_err());
        let mut renamed = planned.clone();
        renamed.resources[0].name = "d".into();
        assert!(check_continuation(&planned, &renamed, Continuation::Checkpoint).is_err());
        let mut verified = planned.clone();
        verified.authority = Authority::Verified {
            backend_identity: "e".into(),
        };
        assert!(check_continuation(&verified, &planned, Continuation::Checkpoint).is_err());
    }
}
