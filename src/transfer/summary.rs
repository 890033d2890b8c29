//! The counters every transfer reports, and the quota checks against them.

use super::options::TransferQuotas;
use crate::input::{Issue, IssueCode, Seg, ToValue, Value};
use crate::lifecycle::error::OwnerError;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub directories: u64,
    pub files: u64,
    pub file_bytes: u64,
    pub archive_bytes: u64,
}

impl ToValue for Summary {
    fn to_value(&self) -> Value {
        let big = |n: u64| Value::BigInt(Some(i128::from(n)));
        Value::object([
            ("directories", big(self.directories)),
            ("files", big(self.files)),
            ("fileBytes", big(self.file_bytes)),
            ("archiveBytes", big(self.archive_bytes)),
        ])
    }
}

/// A quota crossed: a validation issue at `quotas.<name>`, naming what crossed it.
pub fn quota_error(name: &str, limit: u64, what: String) -> OwnerError {
    OwnerError::Validation(vec![Issue {
        code: IssueCode::TooLarge,
        path: vec![Seg::Key("quotas".into()), Seg::Key(name.into())],
        message: format!("{what} exceeds quotas.{name} ({limit})"),
    }])
}

/// A bad entry: a validation issue at `entries[index].<field>` (or the selection's path).
pub fn entry_error(path: Vec<Seg>, code: IssueCode, message: String) -> OwnerError {
    OwnerError::Validation(vec![Issue {
        code,
        path,
        message,
    }])
}

impl Summary {
    /// Checks every quota against the counters so far.
    pub fn check(&self, quotas: &TransferQuotas, at: &str) -> Result<(), OwnerError> {
        let checks = [
            ("maxFiles", quotas.max_files, self.files, "the file count"),
            (
                "maxTotalBytes",
                quotas.max_total_bytes,
                self.file_bytes,
                "the total file bytes",
            ),
            (
                "maxArchiveBytes",
                quotas.max_archive_bytes,
                self.archive_bytes,
                "the archive bytes",
            ),
        ];
        for (name, limit, value, what) in checks {
            if let Some(limit) = limit {
                if value > limit {
                    return Err(quota_error(
                        name,
                        limit,
                        format!("{what} ({value}, at {at})"),
                    ));
                }
            }
        }
        Ok(())
    }
}
