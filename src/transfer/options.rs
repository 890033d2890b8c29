//! `parseTransferOptions`: the per-call signal, deadline and quotas of one transfer.

use crate::input::read::{amount, finite, object};
use crate::input::{Issue, IssueCode, Issues, Seg, Value};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransferOptions {
    /// Whether a signal was given; the JS layer holds the signal itself.
    pub has_signal: bool,
    /// Epoch milliseconds after which the caller stops waiting.
    pub deadline_at: Option<f64>,
    /// Whether an `onProgress` callback was given; the JS layer holds and calls it.
    pub has_progress: bool,
    pub quotas: TransferQuotas,
}

/// Logical ceilings of one transfer; `None` imposes none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferQuotas {
    pub max_files: Option<u64>,
    pub max_file_bytes: Option<u64>,
    pub max_total_bytes: Option<u64>,
    pub max_archive_bytes: Option<u64>,
    pub max_paths: Option<u64>,
}

const QUOTA_NAMES: [&str; 5] = [
    "maxFiles",
    "maxFileBytes",
    "maxTotalBytes",
    "maxArchiveBytes",
    "maxPaths",
];

pub fn parse_transfer_options(input: &Value) -> Result<TransferOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = match input {
        Value::Undefined => Some(TransferOptions::default()),
        value => options(value, &mut issues),
    };
    issues.finish(options)
}

fn options(value: &Value, issues: &mut Issues) -> Option<TransferOptions> {
    let mut f = object(value, &[], issues)?;
    let has_signal = match f.optional("signal") {
        None => Some(false),
        Some(Value::Foreign(class)) if class == "AbortSignal" => Some(true),
        Some(other) => {
            issues.mismatch(&f.at("signal"), "expected an AbortSignal", other);
            None
        }
    };
    let has_progress = match f.optional("onProgress") {
        None => Some(false),
        Some(Value::Function) => Some(true),
        Some(other) => {
            issues.mismatch(
                &f.at("onProgress"),
                "expected a function ({ files, bytes }) => void",
                other,
            );
            None
        }
    };
    let deadline_at = match f.optional("deadlineAt") {
        None => Some(None),
        Some(v) => {
            let at = f.at("deadlineAt");
            finite(v, &at, issues).and_then(|n| {
                if n < 0.0 {
                    issues.add(
                        IssueCode::TooSmall,
                        &at,
                        format!("must be an epoch time in ms (at least 0), received {n}"),
                    );
                    None
                } else {
                    Some(Some(n))
                }
            })
        }
    };
    let quotas = match f.optional("quotas") {
        None => Some(TransferQuotas::default()),
        Some(v) => quotas(v, &f.at("quotas"), issues),
    };
    f.finish(issues);
    Some(TransferOptions {
        has_signal: has_signal?,
        deadline_at: deadline_at?,
        has_progress: has_progress?,
        quotas: quotas?,
    })
}

fn quotas(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<TransferQuotas> {
    let mut f = object(value, at, issues)?;
    let before = issues.len();
    let mut read = [None; 5];
    for (slot, name) in read.iter_mut().zip(QUOTA_NAMES) {
        if let Some(v) = f.optional(name) {
            *slot = amount(v, &f.at(name), issues);
        }
    }
    f.finish(issues);
    let [max_files, max_file_bytes, max_total_bytes, max_archive_bytes, max_paths] = read;
    (issues.len() == before).then_some(TransferQuotas {
        max_files,
        max_file_bytes,
        max_total_bytes,
        max_archive_bytes,
        max_paths,
    })
}

impl TransferQuotas {
    /// `(name, amount)` for every quota that was set, in contract order.
    pub fn entries(&self) -> Vec<(&'static str, u64)> {
        let values = [
            self.max_files,
            self.max_file_bytes,
            self.max_total_bytes,
            self.max_archive_bytes,
            self.max_paths,
        ];
        QUOTA_NAMES
            .iter()
            .zip(values)
            .filter_map(|(name, v)| v.map(|v| (*name, v)))
            .collect()
    }
}

impl TransferOptions {
    /// Plain data for JS: quotas become bigint; the signal is reattached by the JS layer.
    pub fn to_value(&self) -> Value {
        let quotas = Value::object(
            self.quotas
                .entries()
                .into_iter()
                .map(|(name, n)| (name, Value::BigInt(Some(i128::from(n))))),
        );
        let mut fields = Vec::new();
        if let Some(at) = self.deadline_at {
            fields.push(("deadlineAt", Value::Number(at)));
        }
        fields.push(("quotas", quotas));
        Value::object(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::issue_list;

    fn quotas(fields: Vec<(&str, Value)>) -> Value {
        Value::object([("quotas", Value::object(fields))])
    }

    #[test]
    fn numbers_and_bigints() {
        let options = parse_transfer_options(&quotas(vec![
            ("maxFiles", Value::Number(3.0)),
            ("maxPaths", Value::BigInt(Some(i128::from(u64::MAX)))),
        ]))
        .expect("valid options");
        assert_eq!(options.quotas.max_files, Some(3));
        assert_eq!(options.quotas.max_paths, Some(u64::MAX));
        assert_eq!(
            parse_transfer_options(&Value::Undefined),
            Ok(TransferOptions::default())
        );
    }

    #[test]
    fn bad_amounts() {
        let input = quotas(vec![
            ("maxFiles", Value::BigInt(Some(-1))),
            (
                "maxFileBytes",
                Value::BigInt(Some(i128::from(u64::MAX) + 1)),
            ),
            ("maxTotalBytes", Value::Number(0.5)),
            ("maxArchiveBytes", Value::Number(f64::INFINITY)),
            ("maxPaths", Value::string("1")),
            ("maxDirs", Value::Number(1.0)),
        ]);
        assert_eq!(
            issue_list(parse_transfer_options(&input)),
            vec![
                ("too_small", "quotas.maxFiles".into()),
                ("too_large", "quotas.maxFileBytes".into()),
                ("not_integer", "quotas.maxTotalBytes".into()),
                ("not_finite", "quotas.maxArchiveBytes".into()),
                ("invalid_type", "quotas.maxPaths".into()),
                ("unknown_field", "quotas.maxDirs".into()),
            ]
        );
    }

    #[test]
    fn signal_must_be_an_abort_signal() {
        let good = Value::object([("signal", Value::Foreign("AbortSignal".into()))]);
        assert!(parse_transfer_options(&good).is_ok_and(|o| o.has_signal));
        let bad = Value::object([("signal", Value::object([("aborted", Value::Bool(false))]))]);
        assert_eq!(
            issue_list(parse_transfer_options(&bad)),
            vec![("invalid_type", "signal".into())]
        );
    }
}
