//! Reading an untrusted tar stream from the engine, entry by entry, with bounded memory, framed
//! by the shared `tar_framing::Framer`. Only regular files and directories pass; links, devices,
//! FIFOs, malformed and truncated archives fail with the offending name.

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::StreamExt;
use tar_framing::{Error as FramingError, Event, Framer, NameSource, Options, Trailer};

/// Largest GNU long name or PAX header we accept (names are bounded far below it anyway).
const EXTENDED_HEADER_MAX: u64 = 64 * 1024;
/// The most read after the end marker (the second zero block, record padding), all zeros.
const TRAILER_MAX: u64 = 1024 * 1024;

/// How the engine's archives (and the workspace helper's) are framed: checksums checked, PAX
/// and GNU long names read, global PAX headers skipped; a GNU long link name is an entry like
/// any other (and refused).
const FRAMING: Options = Options {
    checksums: true,
    pax: true,
    pax_global: true,
    gnu_long_names: true,
    gnu_long_links: false,
    extended_max: EXTENDED_HEADER_MAX,
    markers: false,
    trailer: Trailer::Zeros { max: TRAILER_MAX },
};

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

impl From<FramingError> for TarError {
    fn from(error: FramingError) -> Self {
        TarError::Malformed(error.to_string())
    }
}

fn truncated() -> TarError {
    TarError::Malformed(FramingError::Truncated.to_string())
}

pub struct TarReader {
    stream: BoxStream<'static, Result<Bytes, String>>,
    buffer: BytesMut,
    framer: Framer,
    finished: bool,
    /// Whether the current entry is a file, whose body `read_body` reads (a directory's is
    /// skipped).
    file: bool,
    /// Whether links, devices and FIFOs are passed over instead of refused (`skipping_others`).
    skip_others: bool,
    /// Bytes taken from the stream so far: headers, bodies and padding.
    pub consumed: u64,
}

impl TarReader {
    pub fn new(stream: BoxStream<'static, Result<Bytes, String>>) -> Self {
        Self {
            stream,
            buffer: BytesMut::new(),
            framer: Framer::new(FRAMING),
            finished: false,
            file: false,
            skip_others: false,
            consumed: 0,
        }
    }

    /// A reader that passes over links, devices and FIFOs (what a workspace archive leaves
    /// out) instead of refusing them; malformed archives still fail.
    pub fn skipping_others(mut self) -> Self {
        self.skip_others = true;
        self
    }

    /// Buffers the stream's next piece; false when the stream ended.
    async fn fill(&mut self) -> Result<bool, TarError> {
        match self.stream.next().await {
            Some(Ok(chunk)) => {
                self.buffer.extend_from_slice(&chunk);
                Ok(true)
            }
            Some(Err(e)) => Err(TarError::Transport(e)),
            None => Ok(false),
        }
    }

    /// Frames what is buffered (filling it first when it is empty): the next event.
    async fn step(&mut self) -> Result<Event, TarError> {
        while self.buffer.is_empty() {
            if !self.fill().await? {
                return Err(truncated());
            }
        }
        let fed = self.framer.feed(&self.buffer);
        self.consumed += fed.consumed as u64;
        self.buffer.advance(fed.consumed);
        Ok(fed.event?)
    }

    /// Reads what follows the end marker (the second zero block, record padding) so the
    /// archive's size is exact; anything but zeros there is malformed.
    async fn drain_trailer(&mut self) -> Result<(), TarError> {
        let fed = self.framer.feed(&self.buffer);
        fed.event?;
        self.consumed += fed.consumed as u64;
        self.buffer.clear();
        while let Some(chunk) = self.stream.next().await {
            let chunk = chunk.map_err(TarError::Transport)?;
            let fed = self.framer.feed(&chunk);
            fed.event?;
            self.consumed += fed.consumed as u64;
        }
        Ok(())
    }

    /// The next entry's header, or `None` at the end marker.
    pub async fn next_entry(&mut self) -> Result<Option<RawEntry>, TarError> {
        loop {
            match self.next_header().await {
                Err(TarError::Refused { .. }) if self.skip_others => continue,
                other => return other,
            }
        }
    }

    /// The next entry's header as it is (a link, device or FIFO refused), or `None` at the end
    /// marker.
    async fn next_header(&mut self) -> Result<Option<RawEntry>, TarError> {
        self.file = false;
        if self.finished {
            return Ok(None);
        }
        // The rest of the last entry's body, its padding, and the extended headers before the
        // next entry go by.
        let entry = loop {
            match self.step().await? {
                Event::Entry(entry) => break entry,
                Event::End => {
                    self.finished = true;
                    self.drain_trailer().await?;
                    return Ok(None);
                }
                _ => {}
            }
        };
        let raw_name = String::from_utf8(entry.name).map_err(|_| {
            TarError::Malformed(
                match entry.name_source {
                    NameSource::Header => "an entry name is not UTF-8",
                    NameSource::LongName => "a long name is not UTF-8",
                    NameSource::Pax => "a PAX path is not UTF-8",
                }
                .into(),
            )
        })?;
        let name = raw_name.trim_end_matches('/').to_owned();
        let refused = |what| {
            Err(TarError::Refused {
                name: name.clone(),
                what,
            })
        };
        let directory = match entry.typeflag {
            b'5' => true,
            b'0' | 0 | b'7' => false,
            b'2' => return refused("symbolic link"),
            b'1' => return refused("hard link"),
            b'3' | b'4' => return refused("device"),
            b'6' => return refused("FIFO"),
            _ => return refused("special entry"),
        };
        let mode = self
            .framer
            .header()
            .mode()
            .and_then(|mode| u32::try_from(mode).ok())
            .ok_or_else(|| TarError::Malformed(format!("{name} has an unreadable mode")))?;
        self.file = !directory;
        Ok(Some(RawEntry {
            name,
            directory,
            size: if directory { 0 } else { entry.size },
            mode,
        }))
    }

    /// Up to `max` bytes of the current entry's body; `None` once it is all read.
    pub async fn read_body(&mut self, max: usize) -> Result<Option<Bytes>, TarError> {
        let left = self.framer.body_left();
        if !self.file || left == 0 {
            return Ok(None);
        }
        let want = left.min(max.max(1) as u64) as usize;
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
                None => return Err(truncated()),
            }
        };
        // Body bytes: the framer counts them.
        let fed = self.framer.feed(&chunk);
        fed.event?;
        self.consumed += chunk.len() as u64;
        // The body's padding is read at once, so the archive's bytes are counted as they go.
        while self.framer.body_left() == 0 && !self.framer.at_header() {
            self.step().await?;
        }
        Ok(Some(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tar_write::{end_of_archive, entry_header, Ownership};
    use super::*;
    use tar_framing::{padding, BLOCK};

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

    /// An archive as the workspace helper writes it (`tar_framing::write::pax_header`: ustar,
    /// PAX records for long names and large sizes).
    fn helper_archive(entries: &[(&str, u8, &[u8])]) -> Vec<u8> {
        let mut archive = Vec::new();
        for (name, typeflag, body) in entries {
            let meta = tar_framing::write::Meta {
                typeflag: *typeflag,
                size: body.len() as u64,
                mode: 0o755,
                ..Default::default()
            };
            tar_framing::write::pax_header(&mut archive, name.as_bytes(), b"", &meta)
                .expect("written");
            archive.extend_from_slice(body);
            archive.resize(archive.len() + padding(body.len() as u64), 0);
        }
        archive.extend(end_of_archive());
        archive
    }

    #[tokio::test]
    async fn a_reader_skipping_others_passes_over_links_and_fifos_only() {
        let archive = helper_archive(&[
            ("workspace/", b'5', b""),
            ("workspace/link", b'2', b""),
            ("workspace/fifo", b'6', b""),
            ("workspace/f", b'0', b"body"),
        ]);
        let mut skipping = reader(archive.clone(), 7).skipping_others();
        let mut names = Vec::new();
        while let Some(entry) = skipping.next_entry().await.expect("read") {
            let mut body = Vec::new();
            while let Some(chunk) = skipping.read_body(64).await.expect("body") {
                body.extend_from_slice(&chunk);
            }
            assert_eq!(body, if entry.directory { &b""[..] } else { b"body" });
            names.push(entry.name);
        }
        assert_eq!(names, ["workspace", "workspace/f"]);
        assert_eq!(skipping.consumed, archive.len() as u64);
        let mut strict = reader(archive, 7);
        strict.next_entry().await.expect("read");
        assert_eq!(
            strict.next_entry().await,
            Err(TarError::Refused {
                name: "workspace/link".into(),
                what: "symbolic link"
            })
        );
    }

    #[tokio::test]
    async fn pax_paths_name_entries_whatever_the_chunking() {
        let long = format!("workspace/{}/{}", "d".repeat(90), "f".repeat(90));
        let body: Vec<u8> = (0..1_500u32).map(|i| (i % 253) as u8).collect();
        let archive = helper_archive(&[
            ("workspace/", b'5', b""),
            (&long, b'0', &body),
            ("workspace/after", b'0', b"z"),
        ]);
        let total = archive.len() as u64;
        for piece in [1, 100, 512, 4_096] {
            let mut tar = reader(archive.clone(), piece);
            let root = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!((root.name.as_str(), root.directory), ("workspace", true));
            let file = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!((file.name.as_str(), file.size), (long.as_str(), 1_500));
            let mut read = Vec::new();
            while let Some(chunk) = tar.read_body(700).await.expect("body") {
                read.extend_from_slice(&chunk);
            }
            assert_eq!(read, body, "piece {piece}");
            // The next entry is read without its predecessor's body being read first.
            let after = tar.next_entry().await.expect("ok").expect("entry");
            assert_eq!(after.name, "workspace/after");
            assert_eq!(tar.next_entry().await.expect("ok"), None);
            assert_eq!(tar.consumed, total, "piece {piece}");
        }
    }

    #[tokio::test]
    async fn only_zeros_may_follow_the_end_and_not_too_many() {
        let mut archive = entry_header("d", true, 0, 0o755, OWNER, 0);
        archive.extend(end_of_archive());
        let mut padded = archive.clone();
        padded.extend(vec![0u8; 10 * BLOCK]);
        let mut tar = reader(padded.clone(), 300);
        tar.next_entry().await.expect("ok").expect("entry");
        assert_eq!(tar.next_entry().await.expect("ok"), None);
        assert_eq!(
            tar.consumed,
            padded.len() as u64,
            "the record padding counted"
        );
        for trailer in [vec![0u8, 0, 7], vec![0u8; TRAILER_MAX as usize]] {
            let mut dirty = archive.clone();
            dirty.extend(trailer);
            let mut tar = reader(dirty, 4_096);
            tar.next_entry().await.expect("ok").expect("entry");
            match tar.next_entry().await {
                Err(TarError::Malformed(message)) => {
                    assert_eq!(message, "data follows the end of the archive")
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_long_link_name_is_an_entry_refused_by_its_name() {
        let mut long_link = tar::Header::new_gnu();
        long_link.set_entry_type(tar::EntryType::GNULongLink);
        if let Some(gnu) = long_link.as_gnu_mut() {
            gnu.name[..13].copy_from_slice(b"././@LongLink");
        }
        long_link.set_size(0);
        long_link.set_cksum();
        let mut archive = long_link.as_bytes().to_vec();
        archive.extend(end_of_archive());
        match reader(archive, 512).next_entry().await {
            Err(TarError::Refused { name, what }) => {
                assert_eq!((name.as_str(), what), ("././@LongLink", "special entry"))
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
