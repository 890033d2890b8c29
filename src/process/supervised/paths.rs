//! A file call's path as the supervisor takes it: one of the guest's roots and the components
//! below it. Relative paths are relative to the workspace; an absolute one must lie under the
//! workspace, `HOME` or `TMPDIR`. `.` and repeated slashes are dropped; `..` is refused outright
//! (the supervisor never climbs, and a path is judged by its text, before anything is opened).

use session_frames::{Root, COMPONENT_MAX};

use crate::input::{Issue, IssueCode, Seg};
use crate::lifecycle::error::OwnerError;

/// The guest's absolute paths of the roots file calls reach: the workspace, `HOME`, `TMPDIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestRoots {
    pub workspace: &'static str,
    pub home: &'static str,
    pub tmp: &'static str,
}

/// A path below a root, as components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestPath {
    pub root: Root,
    pub components: Vec<Vec<u8>>,
}

fn refused(path: &str, why: &str) -> OwnerError {
    OwnerError::Validation(vec![Issue {
        code: IssueCode::InvalidValue,
        path: vec![Seg::from("path")],
        message: format!("{path:?} {why}"),
    }])
}

/// Components of `text` (no leading slash): `.` and empty ones dropped, `..` refused.
fn components<'a>(path: &str, text: &'a str) -> Result<Vec<&'a str>, OwnerError> {
    let mut kept = Vec::new();
    for component in text.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                return Err(refused(
                    path,
                    "holds `..`: give the path from the workspace, HOME or TMPDIR without climbing",
                ))
            }
            long if long.len() > COMPONENT_MAX => {
                return Err(refused(
                    path,
                    &format!("has a component longer than {COMPONENT_MAX} bytes"),
                ))
            }
            component => kept.push(component),
        }
    }
    Ok(kept)
}

/// The longest path a file call takes, in bytes (the kernel's `PATH_MAX`): every request fits
/// one frame.
pub const PATH_BYTES_MAX: usize = 4096;

/// Judges `path` against `roots`.
pub fn guest_path(path: &str, roots: &GuestRoots) -> Result<GuestPath, OwnerError> {
    if path.is_empty() {
        return Err(refused(path, "is empty"));
    }
    if path.len() > PATH_BYTES_MAX {
        return Err(OwnerError::Validation(vec![Issue {
            code: IssueCode::TooLong,
            path: vec![Seg::from("path")],
            message: format!(
                "a path must be at most {PATH_BYTES_MAX} bytes, received {}",
                path.len()
            ),
        }]));
    }
    if path.contains('\0') {
        return Err(refused(path, "holds a NUL byte"));
    }
    let wanted = components(path, path)?;
    let (root, below) = if path.starts_with('/') {
        let mut found = None;
        for (root, at) in [
            (Root::Workspace, roots.workspace),
            (Root::Home, roots.home),
            (Root::Tmp, roots.tmp),
        ] {
            let prefix = components(at, at)?;
            if wanted.len() >= prefix.len() && wanted[..prefix.len()] == prefix[..] {
                found = Some((root, wanted[prefix.len()..].to_vec()));
                break;
            }
        }
        found.ok_or_else(|| {
            refused(
                path,
                &format!(
                    "is outside the sandbox's file roots: give a path relative to the workspace, or under {}, {} or {}",
                    roots.workspace, roots.home, roots.tmp
                ),
            )
        })?
    } else {
        (Root::Workspace, wanted)
    };
    Ok(GuestPath {
        root,
        components: below.into_iter().map(|c| c.as_bytes().to_vec()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOTS: GuestRoots = GuestRoots {
        workspace: "/sandbox/workspace",
        home: "/sandbox/home",
        tmp: "/sandbox/tmp",
    };

    fn at(root: Root, components: &[&str]) -> GuestPath {
        GuestPath {
            root,
            components: components.iter().map(|c| c.as_bytes().to_vec()).collect(),
        }
    }

    fn issue(path: &str) -> String {
        match guest_path(path, &ROOTS) {
            Err(OwnerError::Validation(issues)) => {
                assert_eq!(issues[0].path, vec![Seg::from("path")]);
                issues[0].message.clone()
            }
            other => panic!("{path}: a validation error, not {other:?}"),
        }
    }

    #[test]
    fn relative_paths_are_below_the_workspace_and_absolute_ones_below_their_root() {
        let ok = |path| guest_path(path, &ROOTS).expect(path);
        assert_eq!(ok("a/b.txt"), at(Root::Workspace, &["a", "b.txt"]));
        assert_eq!(ok("./a//b/."), at(Root::Workspace, &["a", "b"]));
        assert_eq!(ok("."), at(Root::Workspace, &[]));
        assert_eq!(ok("/sandbox/workspace"), at(Root::Workspace, &[]));
        assert_eq!(ok("/sandbox/workspace/x"), at(Root::Workspace, &["x"]));
        assert_eq!(
            ok("/sandbox/home/.config/x"),
            at(Root::Home, &[".config", "x"])
        );
        assert_eq!(ok("//sandbox/tmp/"), at(Root::Tmp, &[]));
    }

    #[test]
    fn every_way_out_is_refused_naming_the_path() {
        for path in [
            "../etc/passwd",
            "a/../../x",
            "/sandbox/workspace/../home",
            "/sandbox/tmp/..",
        ] {
            assert!(issue(path).contains("`..`"), "{path}");
        }
        for path in [
            "/etc/passwd",
            "/sandbox",
            "/sandbox/workspaces/x",
            "/",
            "/proc/1/root",
        ] {
            assert!(
                issue(path).contains("outside the sandbox's file roots"),
                "{path}"
            );
        }
        assert!(issue("").contains("is empty"));
        assert!(issue("a\0b").contains("NUL"));
        assert!(issue(&"x".repeat(256)).contains("longer than 255"));
        assert!(issue(&"a/".repeat(600_000)).contains("at most 4096 bytes"));
    }
}
