//! What a reconciliation found, whichever backend looked.

use super::record::SandboxRecoveryRecord;

pub enum Reconciled {
    /// Every recorded object still there, each proven the record's.
    Matched(SandboxRecoveryRecord),
    /// An object announced but never identified was found (or could not be ruled out).
    Uncertain(SandboxRecoveryRecord),
    /// Something under the record's names is not provably its own; nothing is touched.
    Conflict(String),
    /// Nothing of the record's is left (its record, `destroyed`).
    Absent(SandboxRecoveryRecord),
}

use super::record::{Authority, Identity, Phase};

/// The conflict a record's authority makes before any object is read: written against another
/// backend identity (`ours`, named `where_` in the reason), or unverified yet owning entered
/// resources. `None`: the objects decide.
pub fn authority_conflict(
    record: &SandboxRecoveryRecord,
    ours: &str,
    where_: &str,
) -> Option<Reconciled> {
    match &record.authority {
        Authority::Verified { backend_identity } if backend_identity != ours => Some(
            Reconciled::Conflict(format!("the record was written against another {where_}")),
        ),
        Authority::Unverified
            if record
                .resources
                .iter()
                .any(|r| r.identity != Identity::Planned) =>
        {
            Some(Reconciled::Conflict(
                "an unverified record cannot own entered resources".into(),
            ))
        }
        _ => None,
    }
}

/// The verdict once every recorded object was looked at: an object announced but never
/// identified that may exist makes it uncertain; else one identified and present, matched;
/// else nothing is left (the record, destroyed).
pub fn verdict(record: &SandboxRecoveryRecord, creating: bool, identified: bool) -> Reconciled {
    if creating {
        Reconciled::Uncertain(record.clone())
    } else if identified {
        Reconciled::Matched(record.clone())
    } else {
        let mut absent = record.clone();
        absent.phase = Phase::Destroyed;
        Reconciled::Absent(absent)
    }
}
