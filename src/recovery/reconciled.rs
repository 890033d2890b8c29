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
