//! The options of a workspace archive: its limits (`maxInputBytes`, `maxExtractedBytes`,
//! `maxMembers`; `null` for none) and the workspace paths a persisted archive leaves out.

use crate::input::read::{array, object, positive_integer, string};
use crate::input::{Issue, IssueCode, Issues, Seg, Value};
use crate::lifecycle::error::OwnerError;
use crate::limits::PATH_BYTES_MAX;
use crate::paths::{check, Anchor};

/// Workspace paths a persisted archive may leave out, at most.
const EXCLUDED_MAX: usize = 100_000;

/// The bounds of one archive; `None` sets none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// The archive's own bytes.
    pub max_input_bytes: Option<u64>,
    /// Its files' bytes together.
    pub max_extracted_bytes: Option<u64>,
    /// Its entries, directories and files.
    pub max_members: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveOptions {
    pub limits: ArchiveLimits,
    /// Workspace-relative paths left out of a persisted archive, with all below them.
    pub excluded: Vec<String>,
}

/// The limit a count crossed, named as the options name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    InputBytes,
    ExtractedBytes,
    Members,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::InputBytes => "maxInputBytes",
            Limit::ExtractedBytes => "maxExtractedBytes",
            Limit::Members => "maxMembers",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Limit::InputBytes => "the archive's size",
            Limit::ExtractedBytes => "the archive's extracted size",
            Limit::Members => "the archive's member count",
        }
    }
}

impl ArchiveLimits {
    fn get(&self, limit: Limit) -> Option<u64> {
        match limit {
            Limit::InputBytes => self.max_input_bytes,
            Limit::ExtractedBytes => self.max_extracted_bytes,
            Limit::Members => self.max_members,
        }
    }

    /// `actual` against `limit`: past it, a validation issue at `archiveLimits.<name>` that
    /// says the count and, when there is one, the member that crossed it.
    pub fn check(&self, limit: Limit, actual: u64, member: Option<&str>) -> Result<(), OwnerError> {
        match self.get(limit) {
            Some(max) if actual > max => Err(OwnerError::Validation(vec![Issue {
                code: IssueCode::TooLarge,
                path: vec![
                    Seg::Key("archiveLimits".into()),
                    Seg::Key(limit.name().into()),
                ],
                message: format!(
                    "{} ({actual}) exceeds archiveLimits.{} ({max}){}",
                    limit.what(),
                    limit.name(),
                    member.map_or(String::new(), |m| format!(" at member {m:?}"))
                ),
            }])),
            _ => Ok(()),
        }
    }
}

/// `{ archiveLimits?: { maxInputBytes?, maxExtractedBytes?, maxMembers? } | null, exclude?:
/// string[] }`, each limit a positive integer or `null`.
pub fn parse_archive_options(input: &Value) -> Result<ArchiveOptions, Vec<Issue>> {
    let mut issues = Issues::new();
    let options = match input {
        Value::Undefined => Some(ArchiveOptions::default()),
        value => options(value, &mut issues),
    };
    issues.finish(options)
}

fn options(value: &Value, issues: &mut Issues) -> Option<ArchiveOptions> {
    let mut f = object(value, &[], issues)?;
    let limits = match f.optional("archiveLimits") {
        None | Some(Value::Null) => Some(ArchiveLimits::default()),
        Some(v) => limits(v, &f.at("archiveLimits"), issues),
    };
    let excluded = match f.optional("exclude") {
        None => Some(Vec::new()),
        Some(v) => excluded(v, &f.at("exclude"), issues),
    };
    f.finish(issues);
    Some(ArchiveOptions {
        limits: limits?,
        excluded: excluded?,
    })
}

fn limits(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<ArchiveLimits> {
    let mut f = object(value, at, issues)?;
    let before = issues.len();
    let mut read = [None; 3];
    for (slot, limit) in
        read.iter_mut()
            .zip([Limit::InputBytes, Limit::ExtractedBytes, Limit::Members])
    {
        match f.optional(limit.name()) {
            None | Some(Value::Null) => {}
            Some(v) => *slot = positive_integer(v, &f.at(limit.name()), issues),
        }
    }
    f.finish(issues);
    let [max_input_bytes, max_extracted_bytes, max_members] = read;
    (issues.len() == before).then_some(ArchiveLimits {
        max_input_bytes,
        max_extracted_bytes,
        max_members,
    })
}

fn excluded(value: &Value, at: &[Seg], issues: &mut Issues) -> Option<Vec<String>> {
    let items = array(value, at, EXCLUDED_MAX, issues)?;
    let before = issues.len();
    let mut paths = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let mut path = at.to_vec();
        path.push(Seg::Index(index));
        let Some(relative) = string(item, &path, PATH_BYTES_MAX, issues) else {
            continue;
        };
        // The empty path is the workspace itself: everything is left out.
        if relative.is_empty() {
            paths.push(relative);
            continue;
        }
        match check(&relative, Anchor::Relative) {
            Ok(()) => paths.push(relative),
            Err((code, message)) => issues.add(code, &path, format!("{relative:?}: {message}")),
        }
    }
    (issues.len() == before).then_some(paths)
}

/// Whether `path` is `excluded` or lies below one of them.
pub fn is_excluded(path: &str, excluded: &[String]) -> bool {
    excluded.iter().any(|root| {
        root.is_empty()
            || path == root
            || path
                .strip_prefix(root.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(fields: Vec<(&str, Value)>) -> Value {
        Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    #[test]
    fn limits_and_exclusions_are_read_and_null_sets_none() {
        let parsed = parse_archive_options(&object(vec![
            (
                "archiveLimits",
                object(vec![
                    ("maxInputBytes", Value::Number(10.0)),
                    ("maxExtractedBytes", Value::Null),
                    ("maxMembers", Value::Number(3.0)),
                ]),
            ),
            (
                "exclude",
                Value::Array(vec![Value::String("tmp/cache".into())]),
            ),
        ]))
        .expect("valid");
        assert_eq!(
            parsed.limits,
            ArchiveLimits {
                max_input_bytes: Some(10),
                max_extracted_bytes: None,
                max_members: Some(3),
            }
        );
        assert_eq!(parsed.excluded, ["tmp/cache"]);
        let none =
            parse_archive_options(&object(vec![("archiveLimits", Value::Null)])).expect("valid");
        assert_eq!(none, ArchiveOptions::default());
    }

    #[test]
    fn bad_limits_and_paths_name_their_field() {
        let issues = parse_archive_options(&object(vec![
            (
                "archiveLimits",
                object(vec![
                    ("maxMembers", Value::Number(0.0)),
                    ("other", Value::Number(1.0)),
                ]),
            ),
            ("exclude", Value::Array(vec![Value::String("../up".into())])),
        ]))
        .expect_err("invalid");
        let at: Vec<String> = issues
            .iter()
            .map(|i| crate::input::issues::render_path(&i.path))
            .collect();
        assert!(
            at.iter().any(|p| p.contains("archiveLimits.maxMembers")),
            "{at:?}"
        );
        assert!(
            at.iter().any(|p| p.contains("archiveLimits.other")),
            "{at:?}"
        );
        assert!(at.iter().any(|p| p.contains("exclude[0]")), "{at:?}");
    }

    #[test]
    fn a_crossed_limit_names_the_limit_the_count_and_the_member() {
        let limits = ArchiveLimits {
            max_members: Some(2),
            ..ArchiveLimits::default()
        };
        assert!(limits.check(Limit::Members, 2, None).is_ok());
        assert!(limits.check(Limit::InputBytes, u64::MAX, None).is_ok());
        match limits.check(Limit::Members, 3, Some("a/b")) {
            Err(OwnerError::Validation(issues)) => {
                assert_eq!(
                    issues[0].path,
                    vec![
                        Seg::Key("archiveLimits".into()),
                        Seg::Key("maxMembers".into())
                    ]
                );
                assert!(issues[0]
                    .message
                    .contains("(3) exceeds archiveLimits.maxMembers (2) at member \"a/b\""));
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn exclusion_covers_a_path_and_what_lies_below_it_only() {
        let excluded = vec!["cache".to_owned()];
        assert!(is_excluded("cache", &excluded));
        assert!(is_excluded("cache/x", &excluded));
        assert!(!is_excluded("cached", &excluded));
        assert!(!is_excluded("a/cache", &excluded));
        assert!(is_excluded("anything/at/all", &[String::new()]));
    }
}
