//! Deferred bodies in the workspace helper's tree archive. The helper writes a large regular
//! file as a marker entry (typeflag `N`, its body the file's workspace-relative path) followed
//! by the file's own header without a body (`helper/src/main.rs`). The relay cuts the marker
//! out and fills the body in from the engine's archive endpoint, which moves large bodies
//! faster than the helper's attach stream: the export reads one archive with every body in
//! place. Exports run with compute stopped, and the helper reached the file through no link,
//! so the engine reads the very file the walk found; its type and size are checked again.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::sync::mpsc;

use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use bollard::Docker;
use tar_framing::{padding, Error as FramingError, Event, Framer as Framing, Options, Trailer};

use crate::docker::engine::with_causes;
use crate::docker::layout::WORKSPACE;
use crate::paths::{check, Anchor};

/// The longest workspace-relative path a marker may carry (the helper defers only paths of at
/// most `PATH_BYTES_MAX`, which `check` holds them to again).
const MARKER_PATH_MAX: u64 = crate::limits::PATH_BYTES_MAX as u64;
/// The longest PAX record set read for its `size` (the helper's and the engine's are short).
const PAX_MAX: u64 = 64 * 1_024;
/// Archive requests wait on the engine as long as the bytes keep flowing; the caller's signal
/// and deadline bound how long anyone observes them.
const FETCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// How the relay frames the helper's archive: PAX sets read (for the size they give the next
/// header), the markers found; every other entry, GNU long names and global headers included,
/// passes with its body. Checksums are the export's reader's to check, and what follows the
/// end is passed on for it to judge.
const HELPER_FRAMING: Options = Options {
    checksums: false,
    pax: true,
    pax_global: false,
    gnu_long_names: false,
    gnu_long_links: false,
    extended_max: PAX_MAX,
    markers: true,
    trailer: Trailer::Any,
};

/// How the engine's archive of one file is framed: every extended header read and skipped
/// (the file's own is its only entry).
const ENGINE_FRAMING: Options = Options {
    checksums: false,
    pax: true,
    pax_global: true,
    gnu_long_names: true,
    gnu_long_links: true,
    extended_max: PAX_MAX,
    markers: false,
    trailer: Trailer::Any,
};

/// What the relay does next with the helper's archive.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// Bytes of the archive, passed on as they are.
    Bytes(Bytes),
    /// The body of `size` bytes of the workspace file `path`, to be read from the engine, then
    /// its padding.
    Fetch { path: String, size: u64 },
}

/// What a framing error says of the helper's archive.
fn framing_error(error: FramingError) -> String {
    match error {
        FramingError::SizeUnreadable => "a header's size is unreadable".into(),
        FramingError::SizeTooLarge => "a header's size is too large".into(),
        FramingError::ExtensionTooLarge { size, .. } => format!("a PAX record set of {size} bytes"),
        FramingError::Pax(why) => format!("a PAX record set: {why}"),
        other => other.to_string(),
    }
}

/// Cuts the helper's archive into pieces, finding its markers.
pub(super) struct Framer {
    framing: Framing,
    /// The body of the marker being read (its path), while it is.
    marker: Option<BytesMut>,
    /// The path of the last marker: the next header's body is deferred.
    deferred: Option<String>,
}

impl Framer {
    pub fn new() -> Self {
        Self {
            framing: Framing::new(HELPER_FRAMING),
            marker: None,
            deferred: None,
        }
    }

    /// Whether both end-of-archive blocks were fed: the archive is whole, and the helper
    /// writes nothing after them (`helper/src/main.rs`). A second block that is not all zeros
    /// never ends it (the export's reader then refuses what follows the end).
    pub fn ended(&self) -> bool {
        self.framing.ended()
    }

    /// The header block just framed, to pass on.
    fn header(&self) -> Piece {
        Piece::Bytes(Bytes::copy_from_slice(self.framing.header().as_bytes()))
    }

    /// The pieces `bytes` makes, in order.
    pub fn feed(&mut self, mut bytes: Bytes) -> Result<Vec<Piece>, String> {
        let mut pieces = Vec::new();
        while !bytes.is_empty() {
            let fed = self.framing.feed(&bytes);
            let piece = bytes.split_to(fed.consumed);
            match fed.event.map_err(framing_error)? {
                Event::Partial => {}
                Event::Marker { size } => {
                    // A marker comes right before its file's header (or the PAX set before
                    // it), once.
                    if self.deferred.is_some() || self.framing.pending() {
                        return Err("a deferred body's marker out of place".into());
                    }
                    if size > MARKER_PATH_MAX {
                        return Err(format!("a deferred path of {size} bytes"));
                    }
                    self.marker = Some(BytesMut::new());
                }
                // A marker's path, and its padding, passed on to nobody.
                Event::Body { .. } if self.marker.is_some() => {
                    if let Some(kept) = &mut self.marker {
                        kept.extend_from_slice(&piece);
                    }
                }
                Event::Padding { .. } if self.marker.is_some() => {}
                Event::Extension { .. } => pieces.push(self.header()),
                Event::Entry(entry) => {
                    pieces.push(self.header());
                    if let Some(path) = self.deferred.take() {
                        if entry.typeflag != b'0' && entry.typeflag != 0 {
                            return Err(format!(
                                "{path}: a deferred body that is not a regular file's"
                            ));
                        }
                        // The helper wrote the header without its body or padding.
                        self.framing.skip_body();
                        let size = entry.size;
                        pieces.push(Piece::Fetch { path, size });
                        let pad = padding(size);
                        if pad > 0 {
                            pieces.push(Piece::Bytes(Bytes::from(vec![0u8; pad])));
                        }
                    }
                }
                Event::End => {
                    if self.deferred.is_some() || self.marker.is_some() {
                        return Err("the archive ended after a deferred body's marker".into());
                    }
                    pieces.push(self.header());
                }
                Event::ExtensionBody { .. }
                | Event::Body { .. }
                | Event::Padding { .. }
                | Event::Trailer => pieces.push(Piece::Bytes(piece)),
            }
            if self.framing.at_header() {
                if let Some(kept) = self.marker.take() {
                    let path = String::from_utf8(kept.to_vec())
                        .map_err(|_| "a deferred path is not UTF-8".to_owned())?;
                    // Only a workspace-relative path is ever read through the engine.
                    check(&path, Anchor::Relative)
                        .map_err(|(_, why)| format!("a deferred path {path:?}: {why}"))?;
                    self.deferred = Some(path);
                }
            }
        }
        Ok(pieces)
    }
}

/// Reads the one regular file's body out of the engine's archive of it.
struct EngineEntry {
    path: String,
    expected: u64,
    framing: Framing,
    /// Whether the file's header was read (its body is what follows).
    found: bool,
}

impl EngineEntry {
    fn new(path: String, expected: u64) -> Self {
        Self {
            path,
            expected,
            framing: Framing::new(ENGINE_FRAMING),
            found: false,
        }
    }

    fn done(&self) -> bool {
        self.found && self.framing.body_left() == 0
    }

    /// The body bytes `bytes` holds, in order.
    fn feed(&mut self, mut bytes: Bytes) -> Result<Vec<Bytes>, String> {
        let mut body = Vec::new();
        while !bytes.is_empty() && !self.done() {
            let fed = self.framing.feed(&bytes);
            let piece = bytes.split_to(fed.consumed);
            let event = fed.event.map_err(|error| match error {
                FramingError::SizeUnreadable => {
                    format!("the engine's archive of {}: an unreadable size", self.path)
                }
                FramingError::SizeTooLarge => {
                    format!("the engine's archive of {}: a size too large", self.path)
                }
                FramingError::Pax(why) => format!("a PAX record set: {why}"),
                other => format!("the engine's archive of {}: {other}", self.path),
            })?;
            match event {
                Event::Entry(entry) if matches!(entry.typeflag, b'0' | 0) => {
                    if entry.size != self.expected {
                        return Err(format!(
                            "{} changed while it was exported ({} bytes, then {})",
                            self.path, self.expected, entry.size
                        ));
                    }
                    self.found = true;
                }
                Event::Entry(_) => {
                    return Err(format!(
                        "{} changed while it was exported (no longer a regular file)",
                        self.path
                    ))
                }
                Event::End => {
                    return Err(format!(
                        "the engine's archive of {} holds no file",
                        self.path
                    ))
                }
                Event::Body { .. } => body.push(piece),
                _ => {}
            }
        }
        Ok(body)
    }
}

/// Sends the body of `path` (`size` bytes) from the engine's archive endpoint to `sender`.
/// `Err` says why it could not; a gone receiver ends it quietly.
pub(super) async fn fetch_body(
    docker: &Docker,
    holder: &str,
    path: String,
    size: u64,
    sender: &mpsc::Sender<Result<Bytes, String>>,
) -> Result<(), String> {
    let full = format!("{WORKSPACE}/{path}");
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(&full)
        .build();
    let docker = docker.clone().with_timeout(FETCH_TIMEOUT);
    let mut stream = docker.download_from_container(holder, Some(options));
    let mut entry = EngineEntry::new(path, size);
    while let Some(item) = stream.next().await {
        let bytes = item.map_err(|e| {
            format!(
                "reading {} from the engine's archive endpoint: {}",
                entry.path,
                with_causes(&e)
            )
        })?;
        for body in entry.feed(bytes)? {
            if sender.send(Ok(body)).await.is_err() {
                return Ok(());
            }
        }
        if entry.done() {
            return Ok(());
        }
    }
    Err(format!(
        "the engine's archive of {} ended before its body did",
        entry.path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tar_framing::BLOCK;

    fn record(key: &str, value: &str) -> String {
        String::from_utf8(tar_framing::pax::record(key, value.as_bytes())).expect("UTF-8")
    }

    fn header(name: &str, size: u64, typeflag: u8) -> Vec<u8> {
        let mut block = vec![0u8; BLOCK];
        block[..name.len()].copy_from_slice(name.as_bytes());
        let text = format!("{size:011o}");
        block[124..135].copy_from_slice(text.as_bytes());
        block[156] = typeflag;
        block
    }

    fn padded(body: &[u8]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.resize(out.len() + padding(body.len() as u64), 0);
        out
    }

    fn flatten(pieces: Vec<Piece>) -> (Vec<u8>, Vec<(String, u64)>) {
        let mut bytes = Vec::new();
        let mut fetches = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Bytes(b) => bytes.extend_from_slice(&b),
                Piece::Fetch { path, size } => {
                    fetches.push((path, size));
                    bytes.extend_from_slice(b"<FETCHED>");
                }
            }
        }
        (bytes, fetches)
    }

    #[test]
    fn markers_are_cut_out_and_their_bodies_fetched_whatever_the_cuts() {
        let mut archive = Vec::new();
        archive.extend(header("workspace/", 0, b'5'));
        archive.extend(header("workspace/small", 5, b'0'));
        archive.extend(padded(b"hello"));
        archive.extend(header("././@NativeSandboxDeferred", 7, b'N'));
        archive.extend(padded(b"big.bin"));
        archive.extend(header("workspace/big.bin", 1000, b'0'));
        archive.extend(header("././@PaxHeader", 12, b'x'));
        archive.extend(padded(b"12 size=600\n"));
        archive.extend(header("workspace/pax", 1, b'0'));
        archive.extend(padded(&[9u8; 600]));
        archive.extend(vec![0u8; 2 * BLOCK]);
        let mut expected = Vec::new();
        expected.extend(header("workspace/", 0, b'5'));
        expected.extend(header("workspace/small", 5, b'0'));
        expected.extend(padded(b"hello"));
        expected.extend(header("workspace/big.bin", 1000, b'0'));
        expected.extend(b"<FETCHED>");
        expected.extend(vec![0u8; padding(1000)]);
        expected.extend(header("././@PaxHeader", 12, b'x'));
        expected.extend(padded(b"12 size=600\n"));
        expected.extend(header("workspace/pax", 1, b'0'));
        expected.extend(padded(&[9u8; 600]));
        expected.extend(vec![0u8; 2 * BLOCK]);
        for cut in [1, 7, 511, 512, 513, 4096, archive.len()] {
            let mut framer = Framer::new();
            let mut pieces = Vec::new();
            for part in archive.chunks(cut) {
                pieces.extend(framer.feed(Bytes::copy_from_slice(part)).expect("framed"));
            }
            let (bytes, fetches) = flatten(pieces);
            assert_eq!(fetches, vec![("big.bin".to_owned(), 1000)], "cut {cut}");
            assert!(bytes == expected, "cut {cut}");
        }
    }

    #[test]
    fn the_archive_is_whole_only_once_both_end_blocks_arrived_whatever_the_cuts() {
        let mut archive = Vec::new();
        archive.extend(header("workspace/", 0, b'5'));
        archive.extend(header("workspace/empty", 0, b'0'));
        // A body of zeros is no end block, nor is a header's worth of it.
        archive.extend(header("workspace/zeros", BLOCK as u64, b'0'));
        archive.extend(vec![0u8; BLOCK]);
        // A PAX set and a marker just before the end.
        archive.extend(header("././@PaxHeader", 12, b'x'));
        archive.extend(padded(b"12 size=600\n"));
        archive.extend(header("workspace/pax", 1, b'0'));
        archive.extend(padded(&[9u8; 600]));
        archive.extend(header("././@NativeSandboxDeferred", 7, b'N'));
        archive.extend(padded(b"big.bin"));
        archive.extend(header("workspace/big.bin", 1000, b'0'));
        let end = archive.len();
        archive.extend(vec![0u8; 2 * BLOCK]);
        // What follows the end keeps it ended.
        archive.extend(vec![0u8; BLOCK]);
        for cut in [1, 7, 511, 512, 513, archive.len()] {
            let mut framer = Framer::new();
            let mut fed = 0;
            for part in archive.chunks(cut) {
                framer.feed(Bytes::copy_from_slice(part)).expect("framed");
                fed += part.len();
                assert_eq!(
                    framer.ended(),
                    fed >= end + 2 * BLOCK,
                    "cut {cut}, {fed} bytes fed"
                );
            }
        }
        // A second block that is not all zeros never ends the archive.
        let mut dirty = archive[..end + BLOCK].to_vec();
        dirty.extend(vec![0u8; BLOCK - 1]);
        dirty.push(1);
        for cut in [1, 513, dirty.len()] {
            let mut framer = Framer::new();
            for part in dirty.chunks(cut) {
                framer.feed(Bytes::copy_from_slice(part)).expect("framed");
            }
            assert!(!framer.ended(), "cut {cut}");
        }
    }

    #[test]
    fn a_name_that_looks_like_records_cannot_forge_a_size_or_a_marker() {
        // A guest's file name holding "\n3 size=0", and a body holding a marker and a header.
        let name = format!("{}\n3 size=0", "n".repeat(100));
        let pax = record("path", &name).into_bytes();
        let mut body = header("././@NativeSandboxDeferred", 9, b'N');
        body.extend(padded(b"../escape"));
        body.extend(header("x", 1234, b'0'));
        let mut archive = header("././@PaxHeader", pax.len() as u64, b'x');
        archive.extend(padded(&pax));
        archive.extend(header("workspace/long", body.len() as u64, b'0'));
        archive.extend(padded(&body));
        archive.extend(vec![0u8; 2 * BLOCK]);
        let (bytes, fetches) = flatten(
            Framer::new()
                .feed(Bytes::from(archive.clone()))
                .expect("framed"),
        );
        assert_eq!(fetches, vec![], "nothing is fetched");
        assert!(bytes == archive, "the archive passes unchanged");
    }

    #[test]
    fn a_marker_with_a_large_body_after_its_pax_set_is_fetched_and_a_bad_path_refused() {
        let mut archive = header("././@NativeSandboxDeferred", 5, b'N');
        archive.extend(padded(b"a/big"));
        let pax = record("size", "9000000001").into_bytes();
        archive.extend(header("././@PaxHeader", pax.len() as u64, b'x'));
        archive.extend(padded(&pax));
        archive.extend(header("workspace/a/big", 0o77_777_777_777, b'0'));
        let (_, fetches) = flatten(Framer::new().feed(Bytes::from(archive)).expect("framed"));
        assert_eq!(fetches, vec![("a/big".to_owned(), 9_000_000_001)]);
        for bad in [&b"../x"[..], b"/etc/passwd", b""] {
            let mut archive = header("././@NativeSandboxDeferred", bad.len() as u64, b'N');
            archive.extend(padded(bad));
            archive.extend(header("workspace/x", 1, b'0'));
            assert!(Framer::new().feed(Bytes::from(archive)).is_err(), "{bad:?}");
        }
        let mut twice = header("././@NativeSandboxDeferred", 1, b'N');
        twice.extend(padded(b"a"));
        twice.extend(header("././@NativeSandboxDeferred", 1, b'N'));
        twice.extend(padded(b"b"));
        assert!(
            Framer::new().feed(Bytes::from(twice)).is_err(),
            "a second marker"
        );
    }

    #[test]
    fn a_marker_before_anything_but_a_regular_file_is_refused() {
        let mut archive = header("././@NativeSandboxDeferred", 1, b'N');
        archive.extend(padded(b"d"));
        archive.extend(header("workspace/d/", 0, b'5'));
        let error = Framer::new()
            .feed(Bytes::from(archive))
            .expect_err("refused");
        assert!(error.contains("not a regular file"), "{error}");
        let mut ended = header("././@NativeSandboxDeferred", 1, b'N');
        ended.extend(padded(b"f"));
        ended.extend(vec![0u8; BLOCK]);
        assert!(Framer::new().feed(Bytes::from(ended)).is_err());
    }

    #[test]
    fn the_engine_entry_gives_exactly_the_body_and_checks_its_size() {
        let mut archive = header("././@PaxHeader", 30, b'x');
        archive.extend(padded(b"30 mtime=1700000000.123456789\n"));
        archive.extend(header("big.bin", 700, b'0'));
        archive.extend(padded(&[3u8; 700]));
        archive.extend(vec![0u8; 2 * BLOCK]);
        for cut in [1, 100, 512, archive.len()] {
            let mut entry = EngineEntry::new("big.bin".into(), 700);
            let mut body = Vec::new();
            for part in archive.chunks(cut) {
                for piece in entry.feed(Bytes::copy_from_slice(part)).expect("read") {
                    body.extend_from_slice(&piece);
                }
            }
            assert!(entry.done());
            assert_eq!(body, vec![3u8; 700], "cut {cut}");
        }
        let mut changed = EngineEntry::new("big.bin".into(), 701);
        let error = changed.feed(Bytes::from(archive)).expect_err("size");
        assert!(error.contains("changed while it was exported"), "{error}");
        let mut link = EngineEntry::new("big.bin".into(), 0);
        let error = link
            .feed(Bytes::from(header("big.bin", 0, b'2')))
            .expect_err("type");
        assert!(error.contains("no longer a regular file"), "{error}");
    }

    /// The helper's own writing (`helper/src/main.rs` through `tar_framing::write`): a marker,
    /// then the deferred file's header after a PAX set for its long name and large size.
    #[test]
    fn the_helpers_marker_and_pax_set_as_the_shared_writer_writes_them() {
        use tar_framing::write::{marker, pax_header, Meta};
        let path = format!("{}/big.bin", "d".repeat(120));
        let name = format!("workspace/{path}");
        let size = 0o77_777_777_777 + 10;
        let mut archive = marker(path.len() as u64).as_bytes().to_vec();
        archive.extend(padded(path.as_bytes()));
        let file_at = archive.len();
        let meta = Meta {
            typeflag: b'0',
            size,
            mode: 0o644,
            ..Meta::default()
        };
        pax_header(&mut archive, name.as_bytes(), b"", &meta).expect("written");
        let headers = archive[file_at..].to_vec();
        archive.extend(vec![0u8; 2 * BLOCK]);
        for cut in [1, 512, archive.len()] {
            let mut framer = Framer::new();
            let mut pieces = Vec::new();
            for part in archive.chunks(cut) {
                pieces.extend(framer.feed(Bytes::copy_from_slice(part)).expect("framed"));
            }
            assert!(framer.ended());
            let (bytes, fetches) = flatten(pieces);
            assert_eq!(fetches, vec![(path.clone(), size)], "cut {cut}");
            let mut expected = headers.clone();
            expected.extend(b"<FETCHED>");
            expected.extend(vec![0u8; padding(size)]);
            expected.extend(vec![0u8; 2 * BLOCK]);
            assert!(bytes == expected, "cut {cut}");
        }
    }
}
