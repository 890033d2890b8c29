//! Writing the tar headers of the host's import archives (`tar_framing::write::gnu_header`:
//! GNU headers, GNU long names past 100 bytes), owned by the sandbox user. Bodies are streamed by
//! the caller between a header and its padding; the archive ends with `END`.

use tar_framing::write::{gnu_header, Meta, END};

/// The sandbox user every imported entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u64,
    pub gid: u64,
}

/// The header block(s) of one entry. Directories get a trailing `/`.
pub fn entry_header(
    path: &str,
    directory: bool,
    size: u64,
    mode: u32,
    owner: Ownership,
    mtime: u64,
) -> Vec<u8> {
    let name = if directory {
        format!("{path}/")
    } else {
        path.to_owned()
    };
    let meta = Meta {
        typeflag: if directory { b'5' } else { b'0' },
        size,
        mode,
        uid: owner.uid,
        gid: owner.gid,
        mtime,
    };
    gnu_header(name.as_bytes(), &meta)
}

/// Two zero blocks.
pub fn end_of_archive() -> Vec<u8> {
    END.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar_framing::padding;

    #[test]
    fn the_tar_crate_reads_what_we_write() {
        let owner = Ownership {
            uid: 65532,
            gid: 65532,
        };
        let long = format!("{}/{}", "d".repeat(80), "f".repeat(60));
        let mut archive = Vec::new();
        archive.extend(entry_header("dir", true, 0, 0o755, owner, 7));
        for (path, body) in [("dir/a.txt", &b"hello"[..]), (long.as_str(), &b""[..])] {
            archive.extend(entry_header(
                path,
                false,
                body.len() as u64,
                0o644,
                owner,
                7,
            ));
            archive.extend_from_slice(body);
            archive.resize(archive.len() + padding(body.len() as u64), 0);
        }
        archive.extend(end_of_archive());
        let mut reader = tar::Archive::new(archive.as_slice());
        let entries: Vec<(String, u64, u64)> = reader
            .entries()
            .expect("entries")
            .map(|e| {
                let e = e.expect("entry");
                (
                    e.path().expect("path").display().to_string(),
                    e.size(),
                    e.header().uid().expect("uid"),
                )
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                ("dir/".into(), 0, 65532),
                ("dir/a.txt".into(), 5, 65532),
                (long.clone(), 0, 65532)
            ]
        );
    }

    /// The headers as the `tar` crate wrote them before the shared framing wrote them: the
    /// engine extracts these archives, and gets the very same bytes.
    #[test]
    fn the_headers_are_those_the_tar_crate_wrote() {
        fn tar_crate(kind: tar::EntryType, size: u64, mode: u32, owner: Ownership) -> tar::Header {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_size(size);
            header.set_mode(mode);
            header.set_uid(owner.uid);
            header.set_gid(owner.gid);
            header.set_mtime(1_700_000_000);
            header
        }
        for owner in [
            Ownership { uid: 0, gid: 0 },
            Ownership {
                uid: 65_532,
                gid: 65_532,
            },
            Ownership {
                uid: 3_000_000,
                gid: 100,
            },
        ] {
            for (path, directory, size) in [
                ("d", true, 0),
                ("f.txt", false, 5),
                ("big", false, 9_000_000_001),
                ("sub/dir/deep", false, 0),
            ] {
                let mode = if directory { 0o755 } else { 0o640 };
                let kind = if directory {
                    tar::EntryType::Directory
                } else {
                    tar::EntryType::Regular
                };
                let mut expected = tar_crate(kind, size, mode, owner);
                let name = if directory {
                    format!("{path}/")
                } else {
                    path.to_owned()
                };
                if let Some(gnu) = expected.as_gnu_mut() {
                    gnu.name[..name.len()].copy_from_slice(name.as_bytes());
                }
                expected.set_cksum();
                let written = entry_header(path, directory, size, mode, owner, 1_700_000_000);
                assert_eq!(written, expected.as_bytes(), "{path} {owner:?}");
            }
            let long = "l".repeat(130);
            let mut expected = tar_crate(tar::EntryType::GNULongName, 131, 0o644, owner);
            if let Some(gnu) = expected.as_gnu_mut() {
                gnu.name[..13].copy_from_slice(b"././@LongLink");
            }
            expected.set_cksum();
            let written = entry_header(&long, false, 1, 0o644, owner, 1_700_000_000);
            assert_eq!(&written[..512], expected.as_bytes(), "{owner:?}");
            assert_eq!(&written[512..643], format!("{long}\0").as_bytes());
            assert!(written[643..1024].iter().all(|&b| b == 0));
        }
    }
}
