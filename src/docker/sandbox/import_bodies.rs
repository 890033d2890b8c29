//! Large import bodies written through the engine. The workspace helper writes inside the
//! holder, whose memory limit is the sandbox's: past it the kernel evicts the pages of a large
//! file while it is still being written, and the next export reads them back from disk. The
//! engine's archive endpoint writes from the engine's own process, whose page cache no sandbox
//! limit bounds. So the relay cuts each regular file of `ENGINE_BODY_MIN` bytes or more out of
//! the import archive: the helper gets a marker and the file's header, prepares the file's
//! place as for any file (`helper/src/import.rs`) and answers; the engine then gets the file
//! (its long name, header, body and padding, and the end-of-archive blocks) as one archive, and
//! the helper's archive goes on once the engine has written it. The engine extracts a file as
//! the helper does (exactly the header's mode, owner and time; the helper already cleared its
//! place), and imports close before any guest process runs, so nothing else writes meanwhile.
//! A file after a long name too long to keep stays with the helper, which refuses that name.

use bytes::{Bytes, BytesMut};

use crate::tar_block::{padding, size_field, BLOCK};

/// A regular file this large or larger is written through the engine (as exports read their
/// large bodies through it).
pub(super) const ENGINE_BODY_MIN: u64 = 16 * 1_024 * 1_024;
/// The longest long-name entry body kept for the engine's archive (the host's paths are at most
/// 1,024 bytes; the helper refuses long names past 4,096).
const LONG_NAME_KEPT_MAX: u64 = 4_096;
/// The helper's marker entry: the next file's body comes through the engine.
const MARKER_TYPEFLAG: u8 = b'N';

/// What the relay does next with the import archive.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Bytes of the archive for the helper.
    Helper(Bytes),
    /// A large file's entry begins. The helper gets the marker and `header`; once it answers,
    /// the engine's archive begins with `long_name` (the long-name entry before the header, if
    /// there was one) and `header`.
    EngineStart {
        name: String,
        long_name: Option<Bytes>,
        header: Bytes,
    },
    /// Bytes of that file's body and padding, for the engine.
    Engine(Bytes),
    /// That file's body and padding are complete.
    EngineEnd,
}

enum State {
    /// Collecting a header.
    Header,
    /// Passing on `left` bytes of an entry's body and padding to the helper, keeping them too
    /// when `keep` (a long name).
    ToHelper { left: u64, keep: bool },
    /// Passing on `left` bytes of a large file's body and padding to the engine.
    ToEngine { left: u64 },
    /// After the first end-of-archive block, or a header it cannot read: everything goes to
    /// the helper, which reads it and refuses what it does not extract.
    Trailer,
}

/// Cuts the host's import archive (`src/transfer/import.rs`: ustar or GNU headers, GNU long
/// names, directories and regular files) into steps.
pub(super) struct ImportFramer {
    state: State,
    header: BytesMut,
    /// The last long-name entry, while the next header is still to come.
    long_name: Option<BytesMut>,
    /// The smallest body written through the engine.
    engine_min: u64,
}

impl ImportFramer {
    pub fn new(engine_min: u64) -> Self {
        Self {
            state: State::Header,
            header: BytesMut::with_capacity(BLOCK),
            long_name: None,
            engine_min,
        }
    }

    /// The steps `bytes` makes, in order.
    pub fn feed(&mut self, mut bytes: Bytes) -> Vec<Step> {
        let mut steps = Vec::new();
        while !bytes.is_empty() {
            match &mut self.state {
                State::Trailer => steps.push(Step::Helper(bytes.split_to(bytes.len()))),
                State::ToHelper { left, keep } => {
                    let piece = bytes.split_to(taken(&bytes, *left));
                    if *keep {
                        if let Some(long_name) = &mut self.long_name {
                            long_name.extend_from_slice(&piece);
                        }
                    }
                    *left -= piece.len() as u64;
                    if *left == 0 {
                        self.state = State::Header;
                    }
                    steps.push(Step::Helper(piece));
                }
                State::ToEngine { left } => {
                    let piece = bytes.split_to(taken(&bytes, *left));
                    *left -= piece.len() as u64;
                    steps.push(Step::Engine(piece));
                    if *left == 0 {
                        steps.push(Step::EngineEnd);
                        self.state = State::Header;
                    }
                }
                State::Header => {
                    let want = BLOCK - self.header.len();
                    let piece = bytes.split_to(want.min(bytes.len()));
                    self.header.extend_from_slice(&piece);
                    if self.header.len() == BLOCK {
                        let header = self.header.split().freeze();
                        steps.push(self.header_read(header));
                    }
                }
            }
        }
        steps
    }

    /// The step a complete header makes, and the state after it.
    fn header_read(&mut self, header: Bytes) -> Step {
        let long_name = self.long_name.take();
        let typeflag = header[156];
        let framed = size_field(&header)
            .and_then(|size| Some((size, size.checked_add(padding(size) as u64)?)));
        let Some((size, left)) = framed.filter(|_| header.iter().any(|&b| b != 0)) else {
            // The end of the archive, or a size the helper will refuse.
            self.state = State::Trailer;
            return Step::Helper(header);
        };
        if matches!(typeflag, b'0' | 0) && size >= self.engine_min {
            self.state = State::ToEngine { left };
            let long_name = long_name.map(BytesMut::freeze);
            return Step::EngineStart {
                name: entry_name(long_name.as_deref(), &header),
                long_name,
                header,
            };
        }
        if typeflag == b'L' && size > LONG_NAME_KEPT_MAX {
            // The helper refuses a long name this long: nothing after it goes to the engine.
            self.state = State::Trailer;
            return Step::Helper(header);
        }
        let keep = typeflag == b'L';
        if keep {
            let mut kept = BytesMut::with_capacity(BLOCK + left as usize);
            kept.extend_from_slice(&header);
            self.long_name = Some(kept);
        }
        self.state = if left == 0 {
            State::Header
        } else {
            State::ToHelper { left, keep }
        };
        Step::Helper(header)
    }
}

/// How many of `bytes` an entry with `left` bytes to go takes.
fn taken(bytes: &Bytes, left: u64) -> usize {
    bytes.len().min(usize::try_from(left).unwrap_or(usize::MAX))
}

/// The entry's name for messages: its long name when it has one, else the header's.
fn entry_name(long_name: Option<&[u8]>, header: &[u8]) -> String {
    let name = match long_name {
        Some(entry) if entry.len() > BLOCK => &entry[BLOCK..],
        _ => &header[..100],
    };
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

/// The marker the helper reads before a file whose body comes through the engine: a ustar
/// header of typeflag `N`, without a name or a body.
pub(super) fn marker() -> Bytes {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::new(MARKER_TYPEFLAG));
    header.set_size(0);
    header.set_mode(0o644);
    header.set_cksum();
    Bytes::copy_from_slice(header.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::tar_write::{end_of_archive, entry_header, Ownership};

    const OWNER: Ownership = Ownership {
        uid: 65_532,
        gid: 65_532,
    };

    fn long() -> String {
        format!("d/{}", "n".repeat(150))
    }

    /// Appends a file entry of `body` to `out`.
    fn file(out: &mut Vec<u8>, name: &str, body: &[u8]) {
        out.extend(entry_header(
            name,
            false,
            body.len() as u64,
            0o640,
            OWNER,
            1,
        ));
        out.extend_from_slice(body);
        out.resize(out.len() + padding(body.len() as u64), 0);
    }

    /// An archive of a directory, a small file, a large file with a long name and a small file
    /// after it, as the host writes it; where the large file's entries lie in it, and where its
    /// own header does.
    fn archive() -> (Vec<u8>, std::ops::Range<usize>, usize) {
        let mut out = entry_header("d", true, 0, 0o755, OWNER, 1);
        file(&mut out, "d/small", b"abc");
        let start = out.len();
        let body: Vec<u8> = (0..2_000u32).map(|i| i as u8).collect();
        file(&mut out, &long(), &body);
        let end = out.len();
        let header_at = end - body.len() - padding(2_000) - BLOCK;
        file(&mut out, "d/after", b"z");
        out.extend(end_of_archive());
        (out, start..end, header_at)
    }

    /// Feeds `archive` in pieces of `size` bytes; the helper's bytes, the engine's archive and
    /// the names and count of the large files.
    fn run(archive: &[u8], size: usize, min: u64) -> (Vec<u8>, Vec<u8>, Vec<String>) {
        let mut framer = ImportFramer::new(min);
        let (mut helper, mut engine, mut names) = (Vec::new(), Vec::new(), Vec::new());
        let mut open = false;
        for piece in archive.chunks(size) {
            for step in framer.feed(Bytes::copy_from_slice(piece)) {
                match step {
                    Step::Helper(bytes) => {
                        assert!(!open, "helper bytes while the engine's body is open");
                        helper.extend_from_slice(&bytes);
                    }
                    Step::EngineStart {
                        name,
                        long_name,
                        header,
                    } => {
                        assert!(!open);
                        open = true;
                        names.push(name);
                        helper.extend_from_slice(&marker());
                        helper.extend_from_slice(&header);
                        engine.extend_from_slice(long_name.as_deref().unwrap_or_default());
                        engine.extend_from_slice(&header);
                    }
                    Step::Engine(bytes) => {
                        assert!(open);
                        assert!(!bytes.is_empty());
                        engine.extend_from_slice(&bytes);
                    }
                    Step::EngineEnd => {
                        assert!(open);
                        open = false;
                    }
                }
            }
        }
        assert!(!open, "the engine's body ended");
        (helper, engine, names)
    }

    #[test]
    fn a_large_body_goes_to_the_engine_with_its_long_name_and_header() {
        let (archive, large, header_at) = archive();
        assert_eq!(
            header_at,
            large.start + 2 * BLOCK,
            "a long-name entry of two blocks"
        );
        for size in [1, 7, 511, 512, 513, 4_096, archive.len()] {
            let (helper, engine, names) = run(&archive, size, 2_000);
            assert_eq!(names, [long()], "pieces of {size}");
            // The engine gets the long-name entry, the header, the body and its padding.
            assert_eq!(engine, &archive[large.clone()], "pieces of {size}");
            // The helper gets everything else, with the marker before the header.
            let mut expected = archive[..header_at].to_vec();
            expected.extend_from_slice(&marker());
            expected.extend_from_slice(&archive[header_at..header_at + BLOCK]);
            expected.extend_from_slice(&archive[large.end..]);
            assert_eq!(helper, expected, "pieces of {size}");
        }
    }

    #[test]
    fn large_files_in_a_row_each_go_to_the_engine_whatever_their_size_field() {
        let (first, second) = (vec![1u8; 3_000], vec![2u8; 2_048]);
        let mut archive = Vec::new();
        file(&mut archive, "one", &first);
        let second_at = archive.len();
        file(&mut archive, "two", &second);
        archive.extend(end_of_archive());
        // The second header's size in GNU base-256, as the host writes sizes past 8 GiB.
        let mut base_256 = [0u8; 12];
        base_256[0] = 0x80;
        base_256[10..].copy_from_slice(&2_048u16.to_be_bytes());
        archive[second_at + 124..second_at + 136].copy_from_slice(&base_256);
        for size in [1, 512, 1_000, archive.len()] {
            let (helper, engine, names) = run(&archive, size, 2_000);
            assert_eq!(names, ["one", "two"]);
            let mut expected = marker().to_vec();
            expected.extend_from_slice(&archive[..BLOCK]);
            expected.extend(marker());
            expected.extend_from_slice(&archive[second_at..second_at + BLOCK]);
            expected.extend(end_of_archive());
            assert_eq!(helper, expected, "pieces of {size}");
            let body_end = archive.len() - 2 * BLOCK;
            assert_eq!(engine, &archive[..body_end], "pieces of {size}");
        }
    }

    #[test]
    fn a_large_file_after_a_long_name_the_helper_refuses_stays_with_the_helper() {
        let body = vec![3u8; 2_000];
        let mut refused = tar::Header::new_gnu();
        refused.set_entry_type(tar::EntryType::GNULongName);
        refused.set_size(LONG_NAME_KEPT_MAX + 1);
        refused.set_cksum();
        let mut archive = refused.as_bytes().to_vec();
        archive.resize(
            archive.len() + (LONG_NAME_KEPT_MAX as usize + 1) + 511,
            b'n',
        );
        file(&mut archive, "large", &body);
        archive.extend(end_of_archive());
        let (helper, engine, names) = run(&archive, 700, 1);
        assert!(names.is_empty() && engine.is_empty());
        assert_eq!(helper, archive);
    }

    #[test]
    fn smaller_bodies_and_other_entries_stay_with_the_helper() {
        let (archive, _, _) = archive();
        let (helper, engine, names) = run(&archive, 100, 2_001);
        assert!(names.is_empty() && engine.is_empty());
        assert_eq!(helper, archive);
    }

    #[test]
    fn an_unreadable_size_sends_the_rest_to_the_helper() {
        let (mut archive, _, _) = archive();
        archive[124..136].copy_from_slice(b"0000000009\0\0");
        let (helper, engine, _) = run(&archive, 64, 1);
        assert!(engine.is_empty());
        assert_eq!(helper, archive);
    }

    #[test]
    fn the_marker_is_a_header_the_helper_reads() {
        let marker = marker();
        assert_eq!(marker.len(), BLOCK);
        // A tar reader checks its checksum.
        let mut archive = marker.to_vec();
        archive.extend(end_of_archive());
        let mut reader = tar::Archive::new(archive.as_slice());
        let mut entries = reader.entries().expect("entries");
        let entry = entries.next().expect("one entry").expect("a valid header");
        assert_eq!(entry.header().entry_type().as_byte(), MARKER_TYPEFLAG);
        assert_eq!(entry.header().size().ok(), Some(0));
        assert!(entries.next().is_none());
    }
}
