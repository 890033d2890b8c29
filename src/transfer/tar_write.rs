//! Writing tar headers for streamed entries: ustar names, GNU long names past 100 bytes,
//! padding and the end marker. Bodies are streamed by the caller between header and padding.

use tar::{EntryType, Header};

use crate::tar_block::{padding, BLOCK};

/// The sandbox user every imported entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u64,
    pub gid: u64,
}

fn base_header(kind: EntryType, size: u64, mode: u32, owner: Ownership, mtime: u64) -> Header {
    let mut header = Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(mode);
    header.set_uid(owner.uid);
    header.set_gid(owner.gid);
    header.set_mtime(mtime);
    header
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
    let kind = if directory {
        EntryType::Directory
    } else {
        EntryType::Regular
    };
    let mut out = Vec::with_capacity(1024);
    let mut header = base_header(kind, size, mode, owner, mtime);
    let bytes = name.as_bytes();
    if bytes.len() > 100 {
        // GNU long name: a pseudo-entry whose body is the full name, then the real header.
        let mut long = base_header(
            EntryType::GNULongName,
            bytes.len() as u64 + 1,
            0o644,
            owner,
            mtime,
        );
        if let Some(gnu) = long.as_gnu_mut() {
            gnu.name[..13].copy_from_slice(b"././@LongLink");
        }
        long.set_cksum();
        out.extend_from_slice(long.as_bytes());
        out.extend_from_slice(bytes);
        out.push(0);
        out.resize(out.len() + padding(bytes.len() as u64 + 1), 0);
    }
    if let Some(gnu) = header.as_gnu_mut() {
        let n = bytes.len().min(100);
        gnu.name[..n].copy_from_slice(&bytes[..n]);
    }
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out
}

/// Two zero blocks.
pub fn end_of_archive() -> Vec<u8> {
    vec![0; 2 * BLOCK]
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
