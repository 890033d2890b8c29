//! An archive handed in to replace a workspace, read whole before anything is written: within
//! its limits, regular files and directories only, every name a workspace path (a leading `./`
//! and the root entry `.` allowed), no path twice, and no file where another entry needs a
//! directory. The archive is read in pieces of `PIECE_BYTES`: a body is the pieces it spans (or
//! what the reader buffered of them), never copied into one, so the members hold at most about
//! the archive's size again.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use futures::StreamExt;

use super::limits::{ArchiveLimits, Limit};
use crate::input::{Issue, IssueCode, Seg};
use crate::lifecycle::error::OwnerError;
use crate::paths::{check, Anchor};
use crate::transfer::tar_read::{TarError, TarReader};

/// The pieces the archive is read in.
const PIECE_BYTES: usize = 64 * 1024;

/// One member of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    Directory(String),
    File {
        path: String,
        executable: bool,
        /// The body's bytes, in the pieces they were read in.
        body: Vec<Bytes>,
    },
}

/// The archive's refusal: a validation issue at `archive`, naming why.
fn refused(message: String) -> OwnerError {
    OwnerError::Validation(vec![Issue {
        code: IssueCode::InvalidValue,
        path: vec![Seg::Key("archive".into())],
        message,
    }])
}

/// The members of `archive`, in its order, or why it is refused.
pub async fn read_members(
    archive: Bytes,
    limits: &ArchiveLimits,
) -> Result<Vec<Member>, OwnerError> {
    limits.check(Limit::InputBytes, archive.len() as u64, None)?;
    let pieces: Vec<Result<Bytes, String>> = (0..archive.len())
        .step_by(PIECE_BYTES)
        .map(|at| Ok(archive.slice(at..archive.len().min(at + PIECE_BYTES))))
        .collect();
    let mut reader = TarReader::new(futures::stream::iter(pieces).boxed());
    let mut members = Vec::new();
    let mut extracted: u64 = 0;
    let mut kinds: HashMap<String, bool> = HashMap::new();
    loop {
        let entry = match reader.next_entry().await {
            Ok(Some(entry)) => entry,
            Ok(None) => break,
            Err(TarError::Refused { name, what }) => {
                return Err(refused(format!(
                    "member {name:?} is a {what}; a workspace archive holds only regular files and directories"
                )))
            }
            Err(error) => return Err(refused(format!("not a readable tar archive: {error}"))),
        };
        let name = entry.name.trim_start_matches("./");
        if name.is_empty() || name == "." {
            continue;
        }
        if let Err((_, message)) = check(name, Anchor::Relative) {
            return Err(refused(format!("member {:?}: {message}", entry.name)));
        }
        let path = name.to_owned();
        limits.check(Limit::Members, members.len() as u64 + 1, Some(&path))?;
        if kinds.insert(path.clone(), entry.directory).is_some() {
            return Err(refused(format!("member {path:?} appears twice")));
        }
        if entry.directory {
            members.push(Member::Directory(path));
            continue;
        }
        extracted = extracted.saturating_add(entry.size);
        limits.check(Limit::ExtractedBytes, extracted, Some(&path))?;
        let mut body = Vec::new();
        while let Some(piece) = reader
            .read_body(PIECE_BYTES)
            .await
            .map_err(|error| refused(format!("member {path:?}: {error}")))?
        {
            body.push(piece);
        }
        members.push(Member::File {
            path,
            executable: entry.mode & 0o100 != 0,
            body,
        });
    }
    check_tree(&kinds)?;
    Ok(members)
}

/// No member lies below a file: every ancestor of a member is a directory or absent (made as
/// one).
fn check_tree(kinds: &HashMap<String, bool>) -> Result<(), OwnerError> {
    let files: HashSet<&str> = kinds
        .iter()
        .filter(|(_, directory)| !**directory)
        .map(|(path, _)| path.as_str())
        .collect();
    for path in kinds.keys() {
        let mut at = path.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            if files.contains(parent) {
                return Err(refused(format!(
                    "member {path:?} lies below {parent:?}, which the archive makes a file"
                )));
            }
            at = parent;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::tar_write::{end_of_archive, entry_header, Ownership};
    use tar_framing::padding;

    const OWNER: Ownership = Ownership { uid: 0, gid: 0 };

    fn archive(entries: &[(&str, Option<&[u8]>, u32)]) -> Bytes {
        let mut out = Vec::new();
        for (name, body, mode) in entries {
            match body {
                None => out.extend(entry_header(name, true, 0, *mode, OWNER, 0)),
                Some(body) => {
                    out.extend(entry_header(
                        name,
                        false,
                        body.len() as u64,
                        *mode,
                        OWNER,
                        0,
                    ));
                    out.extend_from_slice(body);
                    out.resize(out.len() + padding(body.len() as u64), 0);
                }
            }
        }
        out.extend(end_of_archive());
        Bytes::from(out)
    }

    fn message(error: OwnerError) -> String {
        match error {
            OwnerError::Validation(issues) => issues[0].to_string(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn members_come_in_order_with_their_bodies_and_modes() {
        let input = archive(&[
            (".", None, 0o755),
            ("./src", None, 0o755),
            ("./src/run.sh", Some(b"#!/bin/sh\n"), 0o755),
            ("notes.txt", Some(b""), 0o644),
        ]);
        let members = read_members(input, &ArchiveLimits::default())
            .await
            .expect("read");
        assert_eq!(
            members,
            vec![
                Member::Directory("src".into()),
                Member::File {
                    path: "src/run.sh".into(),
                    executable: true,
                    body: vec![Bytes::from_static(b"#!/bin/sh\n")],
                },
                Member::File {
                    path: "notes.txt".into(),
                    executable: false,
                    body: Vec::new(),
                },
            ]
        );
    }

    #[tokio::test]
    async fn a_body_across_pieces_comes_whole() {
        let large: Vec<u8> = (0..3 * PIECE_BYTES + 17).map(|i| (i % 251) as u8).collect();
        let members = read_members(
            archive(&[("big", Some(&large), 0o644)]),
            &ArchiveLimits::default(),
        )
        .await
        .expect("read");
        let Member::File { body, .. } = &members[0] else {
            panic!("a file");
        };
        assert_eq!(body.concat(), large);
    }

    #[tokio::test]
    async fn each_limit_is_enforced_with_the_member_that_crossed_it() {
        let input = archive(&[("a", Some(b"12345"), 0o644), ("b", Some(b"678"), 0o644)]);
        let limits = |input, extracted, members| ArchiveLimits {
            max_input_bytes: input,
            max_extracted_bytes: extracted,
            max_members: members,
        };
        let size = input.len() as u64;
        assert!(
            read_members(input.clone(), &limits(Some(size), Some(8), Some(2)))
                .await
                .is_ok()
        );
        let too_big = message(
            read_members(input.clone(), &limits(Some(size - 1), None, None))
                .await
                .expect_err("input"),
        );
        assert!(too_big.contains("archiveLimits.maxInputBytes"), "{too_big}");
        let extracted = message(
            read_members(input.clone(), &limits(None, Some(7), None))
                .await
                .expect_err("extracted"),
        );
        assert!(
            extracted.contains("(8) exceeds archiveLimits.maxExtractedBytes (7) at member \"b\""),
            "{extracted}"
        );
        let members = message(
            read_members(input, &limits(None, None, Some(1)))
                .await
                .expect_err("members"),
        );
        assert!(
            members.contains("(2) exceeds archiveLimits.maxMembers (1) at member \"b\""),
            "{members}"
        );
    }

    #[tokio::test]
    async fn escaping_duplicate_and_conflicting_members_are_refused_by_name() {
        for (entries, says) in [
            (vec![("../up", Some(&b"x"[..]), 0o644)], "\"../up\""),
            (
                vec![("/etc/passwd", Some(&b"x"[..]), 0o644)],
                "\"/etc/passwd\"",
            ),
            (
                vec![("a", Some(&b"x"[..]), 0o644), ("a", Some(&b"y"[..]), 0o644)],
                "\"a\" appears twice",
            ),
            (
                vec![
                    ("a", Some(&b"x"[..]), 0o644),
                    ("a/b", Some(&b"y"[..]), 0o644),
                ],
                "\"a/b\" lies below \"a\"",
            ),
        ] {
            let error = message(
                read_members(archive(&entries), &ArchiveLimits::default())
                    .await
                    .expect_err("refused"),
            );
            assert!(
                error.contains("at archive") && error.contains(says),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn links_and_garbage_are_refused() {
        let mut link = Vec::new();
        let meta = tar_framing::write::Meta {
            typeflag: b'2',
            mode: 0o777,
            ..Default::default()
        };
        tar_framing::write::pax_header(&mut link, b"escape", b"/etc", &meta).expect("written");
        link.extend(end_of_archive());
        let error = message(
            read_members(Bytes::from(link), &ArchiveLimits::default())
                .await
                .expect_err("link"),
        );
        assert!(error.contains("\"escape\" is a symbolic link"), "{error}");
        let error = message(
            read_members(
                Bytes::from_static(b"{\"version\":1}"),
                &ArchiveLimits::default(),
            )
            .await
            .expect_err("garbage"),
        );
        assert!(error.contains("not a readable tar archive"), "{error}");
    }
}
