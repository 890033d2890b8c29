//! Recovery: the v2 record, the rule that keeps its identity fixed, and the persistence policy.

pub mod continuation;
pub mod policy;
pub mod reconciled;
pub mod record;
