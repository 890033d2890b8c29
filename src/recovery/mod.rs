//! Recovery: the v2 record and the caller's persistence policy.

pub mod policy;
pub mod record;
