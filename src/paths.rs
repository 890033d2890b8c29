//! Relative workspace paths and absolute guest paths: one grammar, two anchors.

use crate::input::{IssueCode, Issues, Seg, Value};
use crate::limits::{PATH_BYTES_MAX, PATH_COMPONENTS_MAX, PATH_COMPONENT_BYTES_MAX};

/// Where a path is anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// `a/b/c` inside the workspace.
    Relative,
    /// `/sandbox/workspace` inside the guest.
    Guest,
    /// `/var/run/docker.sock` on the host (the same grammar as a guest path).
    Host,
}

/// Parses a path string; records one issue naming the first problem and returns `None`.
pub fn path(value: &Value, at: &[Seg], anchor: Anchor, issues: &mut Issues) -> Option<String> {
    let s = match value {
        Value::String(s) => s,
        other => {
            issues.mismatch(at, "expected a path string", other);
            return None;
        }
    };
    match check(s, anchor) {
        Ok(()) => Some(s.clone()),
        Err((code, message)) => {
            issues.add(code, at, message);
            None
        }
    }
}

/// The grammar itself, free of issue plumbing so other modules (tar entries) can reuse it.
pub fn check(s: &str, anchor: Anchor) -> Result<(), (IssueCode, String)> {
    let invalid = |m: &str| Err((IssueCode::InvalidPath, m.to_owned()));
    if s.contains('\0') {
        return invalid("must not contain NUL");
    }
    if s.len() > PATH_BYTES_MAX {
        return Err((
            IssueCode::TooLong,
            format!(
                "must be at most {PATH_BYTES_MAX} bytes, received {}",
                s.len()
            ),
        ));
    }
    let body = match anchor {
        Anchor::Relative => {
            if s.is_empty() {
                return invalid("must not be empty");
            }
            if s.starts_with('/') {
                return invalid("must be relative (no leading /)");
            }
            s
        }
        Anchor::Guest | Anchor::Host => {
            let Some(rest) = s.strip_prefix('/') else {
                return invalid(if anchor == Anchor::Host {
                    "must be an absolute host path (leading /)"
                } else {
                    "must be an absolute guest path (leading /)"
                });
            };
            if rest.is_empty() {
                return Ok(());
            }
            rest
        }
    };
    let mut count = 0usize;
    for component in body.split('/') {
        count += 1;
        match component {
            "" => return invalid("must not contain empty components (// or a trailing /)"),
            "." | ".." => return invalid("must not contain . or .. components"),
            c if c.len() > PATH_COMPONENT_BYTES_MAX => {
                return Err((
                    IssueCode::TooLong,
                    format!(
                        "components must be at most {PATH_COMPONENT_BYTES_MAX} bytes, one has {}",
                        c.len()
                    ),
                ))
            }
            _ => {}
        }
    }
    if count > PATH_COMPONENTS_MAX {
        return Err((
            IssueCode::TooLong,
            format!("must have at most {PATH_COMPONENTS_MAX} components, received {count}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(s: &str, anchor: Anchor) -> Option<&'static str> {
        check(s, anchor).err().map(|(c, _)| c.as_str())
    }

    #[test]
    fn relative_paths() {
        assert_eq!(code("a/b.txt", Anchor::Relative), None);
        assert_eq!(code("", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("/a", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("a//b", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("a/", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("a/./b", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("../a", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("a\0b", Anchor::Relative), Some("invalid_path"));
        assert_eq!(code("...", Anchor::Relative), None);
    }

    #[test]
    fn relative_bounds_at_and_one_past() {
        let component = "x".repeat(255);
        assert_eq!(code(&component, Anchor::Relative), None);
        assert_eq!(code(&"x".repeat(256), Anchor::Relative), Some("too_long"));
        let deep = vec!["a"; 64].join("/");
        assert_eq!(code(&deep, Anchor::Relative), None);
        assert_eq!(
            code(&vec!["a"; 65].join("/"), Anchor::Relative),
            Some("too_long")
        );
        let long = format!(
            "{}/{}/{}/{}",
            "a".repeat(255),
            "b".repeat(255),
            "c".repeat(255),
            "d".repeat(256)
        );
        assert_eq!(long.len(), 1_024);
        assert_eq!(code(&long, Anchor::Relative), Some("too_long"));
        let exact = format!(
            "{}/{}/{}/{}",
            "a".repeat(255),
            "b".repeat(255),
            "c".repeat(255),
            "d".repeat(255)
        );
        assert_eq!(exact.len(), 1_023);
        assert_eq!(code(&exact, Anchor::Relative), None);
        let over = format!("{exact}/ab");
        assert_eq!(over.len(), 1_026);
        assert_eq!(code(&over, Anchor::Relative), Some("too_long"));
    }

    #[test]
    fn guest_paths() {
        assert_eq!(code("/", Anchor::Guest), None);
        assert_eq!(code("/sandbox/workspace", Anchor::Guest), None);
        assert_eq!(code("sandbox", Anchor::Guest), Some("invalid_path"));
        assert_eq!(code("/sandbox/", Anchor::Guest), Some("invalid_path"));
        assert_eq!(code("/a/../b", Anchor::Guest), Some("invalid_path"));
        assert_eq!(code("//a", Anchor::Guest), Some("invalid_path"));
        assert_eq!(
            code(&format!("/{}", vec!["a"; 64].join("/")), Anchor::Guest),
            None
        );
        assert_eq!(
            code(&format!("/{}", vec!["a"; 65].join("/")), Anchor::Guest),
            Some("too_long")
        );
    }
}
