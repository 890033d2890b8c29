//! Reading an untrusted tar stream from the engine, entry by entry, with bounded memory. Only
//! regular files and directories pass; links, devices, FIFOs, malformed and truncated archives
//! fail with the offending name.

use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::tar_block::{padding, BLOCK};

/// Largest GNU long name or PAX header we accept (names are bounded far below it anyway).
const EXTENDED_HEADER_MAX: u64 = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// As written in the archive, without a trailing `/`.
    pub name: String,
    pub directory: bool,
    pub size: u64,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TarError {
    #[error("{0}")]
    Malformed(String),
    #[error("{name} is a {what}; exports carry only regular files and directories")]
    Refused { name: String, what: &'static str },
    #[error("reading the archive failed: {0}")]
    Transport(String),
}

pub struct TarReader {
    stream: BoxStream<'static, Result<Bytes, String>>,
    buffer: BytesMut,
    finished: bool,
    /// Bytes taken from the stream so far: headers, bodies and padding.
    pub consumed: u64,
    /// Body bytes left in the current entry, then its padding.
    body_left: u64,
    pad_left: usize,
}

impl TarReader {
    pub fn new(stream: BoxStream<'static, Result<Bytes, String>>) -> Self {
        Self {
            stream,
            buffer: BytesMut::new(),
            finished: false,
            consumed: 0,
            body_left: 0,
            pad_left: 0,
        }
    }

    /// Ensures at least `n` buffered bytes; false when the stream ended first.
    async fn fill(&mut self, n: usize) -> Result<bool, TarError> {
        while self.buffer.len() < n {
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(TarError::Transport(e)),
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    async fn take(&mut self, n: usize) -> Result<Bytes, TarError> {
        if !self.fill(n).await? {
            return Err(TarError::Malformed("the archive is truncated".into()));
        }
        self.consumed += n as u64;
        Ok(self.buffer.split_to(n).freeze())
    }

    async fn skip_rest_of_entry(&mut self) -> Result<(), TarError> {
        while self.body_left > 0 {
            let n = self.body_left.min(64 * 1024) as usize;
            self.take(n).await?;
            self.body_left -= n as u64;
        }
        if self.pad_left > 0 {
            let n = self.pad_left;
            self.take(n).await?;
            self.pad_left = 0;
        }
        Ok(())
    }

    /// Reads what follows the end marker (the second zero block, record padding) so the
    /// archive's size is exact; anything but zeros there is malformed.
    async fn drain_trailer(&mut self) -> Result<(), TarError> {
        const TRAILER_MAX: u64 = 1024 * 1024;
        let mut trailer = self.buffer.len() as u64;
        let all_zero = |b: &[u8]| b.iter().all(|&x| x == 0);
        if !all_zero(&self.buffer) {
            return Err(TarError::Malformed(
                "data follows the end of the archive".into(),
            ));
        }
        self.consumed += self.buffer.len() as u64;
        self.buffer.clear();
        while let Some(chunk) = self.stream.next().await {
            let chunk = chunk.map_err(TarError::Transport)?;
            trailer += chunk.len() as u64;
            if trailer > TRAILER_MAX || !all_zero(&chunk) {
                return Err(TarError::Malformed(
                    "data follows the end of the archive".into(),
                ));
            }
            self.consumed += chunk.len() as u64;
        }
        Ok(())
    }

    /// The next entry's header, or `None` at the end marker.
    pub async fn next_entry(&mut self) -> Result<Option<RawEntry>, TarError> {
        self.skip_rest_of_entry().await?;
        if self.finished {
            return Ok(None);
        }
        let mut long_name: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        loop {
            let block = self.take(BLOCK).await?;
            if block.iter().all(|&b| b == 0) {
                self.finished = true;
                self.drain_trailer().await?;
                return Ok(None);
            }
            let header = tar::Header::from_byte_slice(&block);
            let stored = header
                .cksum()
                .map_err(|_| TarError::Malformed("a header checksum is unreadable".into()))?;
            let computed: u32 = block
                .iter()
                .enumerate()
                .map(|(i, &b)| {
                    if (148..156).contains(&i) {
                        32
                    } else {
                        u32::from(b)
                    }
                })
                .sum();
            if stored != computed {
                return Err(TarError::Malformed(
                    "a header checksum does not match".into(),
                ));
            }
            let size = match pax_size.take() {
                Some(size) => size,
                None => header
                    .entry_size()
                    .map_err(|_| TarError::Malformed("a header size is unreadable".into()))?,
            };
            let raw_name = match long_name.take() {
                Some(name) => name,
                None => String::from_utf8(header.path_bytes().into_owned())
                    .map_err(|_| TarError::Malformed("an entry name is not UTF-8".into()))?,
            };
            let kind = header.entry_type();
            if kind.is_gnu_longname()
                || kind.is_pax_local_extensions()
                || kind.is_pax_global_extensions()
            {
                // Every extended header is buffered whole, so its size is bounded first.
                if size > EXTENDED_HEADER_MAX {
                    return Err(TarError::Malformed(format!(
                        "an extended header of {size} bytes is too large"
                    )));
                }
                let body = self.take(size as usize).await?;
                let pad = padding(size);
                self.take(pad).await?;
                if kind.is_pax_global_extensions() {
                    // Global defaults (mtime, charset) mean nothing to the workspace.
                } else if kind.is_gnu_longname() {
                    let name = body.split(|&b| b == 0).next().unwrap_or_default();
                    long_name = Some(
                        String::from_utf8(name.to_vec())
                            .map_err(|_| TarError::Malformed("a long name is not UTF-8".into()))?,
                    );
                } else {
                    let (path, pax) = parse_pax(&body)?;
                    if path.is_some() {
                        long_name = path;
                    }
                    pax_size = pax;
                }
                continue;
            }
            let name = raw_name.trim_end_matches('/').to_owned();
            let refused = |what| {
                Err(TarError::Refused {
                    name: name.clone(),
                    what,
                })
            };
            let directory = if kind.is_dir() {
                true
            } else if kind.is_file() || kind.is_contiguous() {
                false
            } else if kind.is_symlink() {
                return refused("symbolic link");
            } else if kind.is_hard_link() {
                return refused("hard link");
            } else if kind.is_character_special() || kind.is_block_special() {
                return refused("device");
            } else if kind.is_fifo() {
                return refused("FIFO");
            } else {
                return refused("special entry");
            };
            let mode = header
                .mode()
                .map_err(|_| TarError::Malformed(format!("{name} has an unreadable mode")))?;
            self.body_left = if directory { 0 } else { size };
            self.pad_left = if directory { 0 } else { padding(size) };
            return Ok(Some(RawEntry {
                name,
                directory,
                size: if directory { 0 } else { size },
                mode,
            }));
        }
    }

    /// Up to `max` bytes of the current entry's body; `None` once it is all read.
    pub async fn read_body(&mut self, max: usize) -> Result<Option<Bytes>, TarError> {
        if self.body_left == 0 {
            return Ok(None);
        }
        let want = self.body_left.min(max.max(1) as u64) as usize;
        let chunk = loop {
            if !self.buffer.is_empty() {
                let n = want.min(self.buffer.len());
                break self.buffer.split_to(n).freeze();
            }
            // Nothing buffered: the stream's next piece is handed on as it is (no copy), and
            // only what lies past this body's share is buffered.
            match self.stream.next().await {
                Some(Ok(piece)) if piece.is_empty() => continue,
                Some(Ok(mut piece)) => {
                    if piece.len() > want {
                        self.buffer.extend_from_slice(&piece.split_off(want));
                    }
                    break piece;
                }
                Some(Err(e)) => return Err(TarError::Transport(e)),
                None => return Err(TarError::Malformed("the archive is truncated".into())),
            }
        };
        self.consumed += chunk.len() as u64;
        self.body_left -= chunk.len() as u64;
        if self.body_left == 0 && self.pad_left > 0 {
            let pad = self.pad_left;
            self.take(pad).await?;
            self.pad_left = 0;
        }
        Ok(Some(chunk))
    }
}

fn parse_pax(body: &[u8]) -> Result<(Option<String>, Option<u64>), TarError> {
    let records = crate::pax::parse(body).map_err(TarError::Malformed)?;
    Ok((records.path, records.size))
}

#[cfg(test)]
mod tests {
    use super::super::tar_write::{end_of_archive, entry_header, Ownership};
    use super::*;

    fn reader(archive: Vec<u8>, piece: usize) -> TarReader {
        let chunks: Vec<Result<Bytes, String>> = archive
            .chunks(piece)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        TarReader::new(futures::stream::iter(chunks).boxed())
    }

    const OWNER: Ownership = Ownership { uid: 1, gid: 1 };

    #[tokio::test]
    async fn reads_entries_and_bodies_across_odd_chunking() {
        let long = "x".repeat(150);
        let content: Vec<u8> = (0..700u32).map(|i| (i % 251) as u8).collect();
        let mut archive = entry_header("d", true, 0, 0o755, OWNER, 0);
        archive.extend(entry_header(&long, false, 700, 0o755, OWNER, 0));
        archive.extend(&content);
        archive.resize(archive.len() + padding(700), 0);
        archive.extend(entry_header("e", false, 3, 0o644, OWNER, 0));
        archive.extend(b"end");
        archive.resize(archive.len() + padding(3), 0);
        archive.extend(end_of_archive());
        let total = archive.len() as u64;
        // Pieces smaller than a read (handed on whole), larger than one (split, the rest
        // buffered), and larger than the whole body.
        for piece in [1, 37, 64, 100, 700, 5_000] {
            let mut tar = reader(archive.clone(), piece);
            let d = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!((d.name.as_str(), d.directory), ("d", true));
            let f = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!((f.name.len(), f.size, f.mode & 0o100), (150, 700, 0o100));
            let mut body = Vec::new();
            while let Some(chunk) = tar.read_body(64).await.expect("body") {
                assert!(!chunk.is_empty() && chunk.len() <= 64, "piece {piece}");
                body.extend_from_slice(&chunk);
            }
            assert_eq!(body, content, "piece {piece}");
            let e = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!((e.name.as_str(), e.size), ("e", 3));
            let mut end = Vec::new();
            while let Some(chunk) = tar.read_body(64).await.expect("body") {
                end.extend_from_slice(&chunk);
            }
            assert_eq!(end, b"end", "piece {piece}");
            assert_eq!(tar.next_entry().await.expect("ok"), None);
            assert_eq!(tar.consumed, total, "piece {piece}");
        }
    }

    #[tokio::test]
    async fn refuses_links_and_truncation() {
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_path("evil").expect("path");
        link.set_link_name("/etc/passwd").expect("link");
        link.set_size(0);
        link.set_cksum();
        let mut archive = link.as_bytes().to_vec();
        archive.extend(end_of_archive());
        match reader(archive, 512).next_entry().await {
            Err(TarError::Refused { name, what }) => {
                assert_eq!((name.as_str(), what), ("evil", "symbolic link"))
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let mut truncated = entry_header("f", false, 10_000, 0o644, OWNER, 0);
        truncated.extend(vec![1u8; 100]);
        let mut tar = reader(truncated, 512);
        tar.next_entry().await.expect("header").expect("entry");
        let mut failed = false;
        loop {
            match tar.read_body(4096).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(TarError::Malformed(_)) => {
                    failed = true;
                    break;
                }
                Err(other) => panic!("{other:?}"),
            }
        }
        assert!(failed);
        let mut corrupt = entry_header("f", false, 0, 0o644, OWNER, 0);
        corrupt[0] ^= 1;
        assert!(matches!(
            reader(corrupt, 512).next_entry().await,
            Err(TarError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn an_oversized_global_header_is_refused_before_it_is_buffered() {
        let mut global = tar::Header::new_ustar();
        global.set_entry_type(tar::EntryType::XGlobalHeader);
        global.set_path("pax_global_header").expect("path");
        global.set_size(1 << 40);
        global.set_cksum();
        // Only the header is there: a reader that buffers the claimed size waits for ever.
        let archive = global.as_bytes().to_vec();
        match reader(archive, 512).next_entry().await {
            Err(TarError::Malformed(message)) => assert!(message.contains("too large")),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_small_global_header_is_skipped() {
        let mut global = tar::Header::new_ustar();
        global.set_entry_type(tar::EntryType::XGlobalHeader);
        global.set_path("pax_global_header").expect("path");
        let body = b"20 comment=ignored!\n";
        global.set_size(body.len() as u64);
        global.set_cksum();
        let mut archive = global.as_bytes().to_vec();
        archive.extend_from_slice(body);
        archive.resize(archive.len() + padding(body.len() as u64), 0);
        archive.extend(entry_header("d", true, 0, 0o755, OWNER, 0));
        archive.extend(end_of_archive());
        let entry = reader(archive, 100)
            .next_entry()
            .await
            .expect("ok")
            .expect("entry");
        assert_eq!(entry.name, "d");
    }
}
