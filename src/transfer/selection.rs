//! The export selection: the whole workspace, exact files, or one subtree.

use super::export::Selection;
use crate::input::read::{array, kind, object, string};
use crate::input::{child, Issue, Issues, Value};
use crate::limits::{EXPORT_FILE_PATHS_MAX, PATH_BYTES_MAX};

/// Parses `{ kind: 'workspace' } | { kind: 'files', paths } | { kind: 'subtree', path }`.
/// Paths are checked by the export itself (with their index in the error).
pub fn parse_export_selection(value: &Value) -> Result<Selection, Vec<Issue>> {
    let mut issues = Issues::new();
    let selection = (|| {
        let mut f = object(value, &[], &mut issues)?;
        let result = match kind(&mut f, &["workspace", "files", "subtree"], &mut issues) {
            Some("workspace") => Some(Selection::Workspace),
            Some("files") => {
                let at = f.at("paths");
                let items = f
                    .required("paths", &mut issues)
                    .and_then(|v| array(v, &at, EXPORT_FILE_PATHS_MAX, &mut issues));
                items.and_then(|items| {
                    let paths: Vec<Option<String>> = items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| string(v, &child(&at, i), PATH_BYTES_MAX, &mut issues))
                        .collect();
                    paths
                        .into_iter()
                        .collect::<Option<Vec<String>>>()
                        .map(Selection::Files)
                })
            }
            Some("subtree") => {
                let at = f.at("path");
                f.required("path", &mut issues)
                    .and_then(|v| string(v, &at, PATH_BYTES_MAX, &mut issues))
                    .map(Selection::Subtree)
            }
            _ => {
                f.optional("paths");
                f.optional("path");
                None
            }
        };
        f.finish(&mut issues);
        result
    })();
    issues.finish(selection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::issue_list;

    fn files(n: usize) -> Value {
        Value::object([
            ("kind", Value::string("files")),
            (
                "paths",
                Value::Array((0..n).map(|i| Value::string(format!("f{i}"))).collect()),
            ),
        ])
    }

    #[test]
    fn every_path_up_to_the_bound_is_kept() {
        match parse_export_selection(&files(EXPORT_FILE_PATHS_MAX)) {
            Ok(Selection::Files(paths)) => assert_eq!(paths.len(), EXPORT_FILE_PATHS_MAX),
            other => panic!("expected files, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn one_path_past_the_bound_is_refused_by_name() {
        assert_eq!(
            issue_list(parse_export_selection(&files(EXPORT_FILE_PATHS_MAX + 1))),
            vec![("too_long", "paths".to_owned())]
        );
    }
}
