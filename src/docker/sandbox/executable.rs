//! The recipe's `executable`, looked at in the created process container before it starts: one
//! that is missing, a directory or not executable fails the start with a validation issue naming
//! `executable`, instead of a bare exit 127 with init's `exec … failed` on stderr.

use bollard::query_parameters::ContainerArchiveInfoOptionsBuilder;
use bollard::Docker;

use crate::docker::engine::{engine_error, is_not_found};
use crate::input::{Issue, IssueCode, Seg};
use crate::lifecycle::error::OwnerError;

/// Go's `os.ModeDir` and `os.ModeSymlink`, as the engine reports a path's mode.
const GO_MODE_DIR: u32 = 1 << 31;
const GO_MODE_SYMLINK: u32 = 1 << 27;

/// What the engine's stat of the executable says.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Runs,
    Missing,
    Directory,
    NotExecutable,
    /// A symbolic link: its target (the engine resolves it in the container) is judged instead.
    Link(String),
}

/// Judges a stat: `mode` in Go's `os.FileMode` bits, `link_target` the resolved target.
pub fn judge(mode: u32, link_target: &str) -> Verdict {
    if mode & GO_MODE_SYMLINK != 0 {
        return if link_target.is_empty() {
            Verdict::Missing
        } else {
            Verdict::Link(link_target.to_owned())
        };
    }
    if mode & GO_MODE_DIR != 0 {
        return Verdict::Directory;
    }
    if mode & 0o111 == 0 {
        return Verdict::NotExecutable;
    }
    Verdict::Runs
}

/// How many links are followed before the executable counts as missing (a loop).
const MAX_LINKS: usize = 8;

/// Fails with a validation issue at `executable` unless `path` in container `id` can be run.
pub async fn check_executable(docker: &Docker, id: &str, path: &str) -> Result<(), OwnerError> {
    let mut at = path.to_owned();
    for _ in 0..=MAX_LINKS {
        let options = ContainerArchiveInfoOptionsBuilder::default()
            .path(&at)
            .build();
        let verdict = match docker.get_container_archive_info(id, Some(options)).await {
            Ok(stat) => judge(stat.file_mode, &stat.link_target),
            // Not the container (a stop removed it): the engine's error, not the recipe's.
            Err(e) if is_not_found(&e) && !e.to_string().contains("No such container") => {
                Verdict::Missing
            }
            Err(e) => return Err(engine_error("looking at the process's executable", e)),
        };
        let problem = match verdict {
            Verdict::Runs => return Ok(()),
            Verdict::Link(target) => {
                at = target;
                continue;
            }
            Verdict::Missing => "does not exist in the sandbox's image or workspace",
            Verdict::Directory => "is a directory",
            Verdict::NotExecutable => "is not executable (no execute permission bit is set)",
        };
        return Err(refused(path, &at, problem));
    }
    Err(refused(
        path,
        &at,
        "is a chain of symbolic links too long to follow",
    ))
}

fn refused(path: &str, at: &str, problem: &str) -> OwnerError {
    let through = if at == path {
        String::new()
    } else {
        format!(" (a link to {at})")
    };
    OwnerError::Validation(vec![Issue {
        code: IssueCode::InvalidValue,
        path: vec![Seg::from("executable")],
        message: format!(
            "{path}{through} {problem}: give the absolute path of a program in the image, or import it first"
        ),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_judged_by_its_mode() {
        assert_eq!(judge(0o755, ""), Verdict::Runs);
        assert_eq!(judge(0o100, ""), Verdict::Runs);
        assert_eq!(judge(0o644, ""), Verdict::NotExecutable);
        assert_eq!(judge(GO_MODE_DIR | 0o755, ""), Verdict::Directory);
        assert_eq!(
            judge(GO_MODE_SYMLINK | 0o777, "/bin/busybox"),
            Verdict::Link("/bin/busybox".into())
        );
        assert_eq!(judge(GO_MODE_SYMLINK | 0o777, ""), Verdict::Missing);
    }

    #[test]
    fn a_refusal_names_executable_and_the_link() {
        let OwnerError::Validation(issues) = refused("/bin/x", "/opt/y", "is a directory") else {
            panic!("a validation error");
        };
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, vec![Seg::from("executable")]);
        assert!(issues[0]
            .message
            .starts_with("/bin/x (a link to /opt/y) is a directory"));
    }
}
