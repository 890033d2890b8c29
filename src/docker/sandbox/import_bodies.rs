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
//! place). The engine reaches the file by its path, so only while no guest command can run:
//! once the sandbox's first container is made, or for a transfer beside running commands, every
//! body goes to the helper, which writes through the descriptors it opened (`Split`).
//! A file after a long name too long to keep stays with the helper, which refuses that name.

use bytes::{Bytes, BytesMut};
use tar_framing::{Event, Framer, Options, Trailer};

/// A regular file this large or larger is written through the engine (as exports read their
/// large bodies through it).
pub(super) const ENGINE_BODY_MIN: u64 = 16 * 1_024 * 1_024;
/// The longest long-name entry body kept for the engine's archive (the host's paths are at most
/// 1,024 bytes; the helper refuses long names past 4,096).
const LONG_NAME_KEPT_MAX: u64 = 4_096;

/// How the relay frames the host's import archive: GNU long names read (and kept for the
/// engine), every other entry passed with its body; checksums are the helper's to check.
const FRAMING: Options = Options {
    checksums: false,
    pax: false,
    pax_global: false,
    gnu_long_names: true,
    gnu_long_links: false,
    extended_max: LONG_NAME_KEPT_MAX,
    markers: false,
    trailer: Trailer::Any,
};

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

/// Cuts the host's import archive (`src/transfer/import.rs`: ustar or GNU headers, GNU long
/// names, directories and regular files) into steps.
pub(super) struct ImportFramer {
    framing: Framer,
    /// The last long-name entry (its header, body and padding), while the next header is still
    /// to come.
    long_name: Option<BytesMut>,
    /// Whether a large file's body and padding are going to the engine.
    to_engine: bool,
    /// After the first end-of-archive block, or a header it cannot frame: everything goes to
    /// the helper, which reads it and refuses what it does not extract.
    trailer: bool,
    /// The smallest body written through the engine.
    engine_min: u64,
}

impl ImportFramer {
    pub fn new(engine_min: u64) -> Self {
        Self {
            framing: Framer::new(FRAMING),
            long_name: None,
            to_engine: false,
            trailer: false,
            engine_min,
        }
    }

    /// No body after this point goes to the engine (a body already going there goes on).
    pub fn stop_splitting(&mut self) {
        self.engine_min = u64::MAX;
    }

    /// The header block just framed.
    fn header(&self) -> Bytes {
        Bytes::copy_from_slice(self.framing.header().as_bytes())
    }

    /// The steps `bytes` makes, in order.
    pub fn feed(&mut self, mut bytes: Bytes) -> Vec<Step> {
        let mut steps = Vec::new();
        while !bytes.is_empty() {
            if self.trailer {
                steps.push(Step::Helper(bytes.split_to(bytes.len())));
                break;
            }
            let fed = self.framing.feed(&bytes);
            let piece = bytes.split_to(fed.consumed);
            let Ok(event) = fed.event else {
                // A header with a size the helper will refuse, or a long name too long to keep
                // (which the helper refuses): nothing after it goes to the engine. Only header
                // blocks fail with these options.
                self.trailer = true;
                steps.push(Step::Helper(self.header()));
                continue;
            };
            match event {
                Event::Partial => {}
                Event::End => {
                    self.trailer = true;
                    steps.push(Step::Helper(self.header()));
                }
                Event::Extension { size, .. } => {
                    let header = self.header();
                    let mut kept = BytesMut::with_capacity(2 * tar_framing::BLOCK + size as usize);
                    kept.extend_from_slice(&header);
                    self.long_name = Some(kept);
                    steps.push(Step::Helper(header));
                }
                Event::Entry(entry) => {
                    let long_name = self.long_name.take().map(BytesMut::freeze);
                    let header = self.header();
                    if matches!(entry.typeflag, b'0' | 0) && entry.size >= self.engine_min {
                        self.to_engine = true;
                        steps.push(Step::EngineStart {
                            name: String::from_utf8_lossy(&entry.name).into_owned(),
                            long_name,
                            header,
                        });
                    } else {
                        steps.push(Step::Helper(header));
                    }
                }
                Event::Body { .. } | Event::Padding { .. } if self.to_engine => {
                    steps.push(Step::Engine(piece));
                }
                Event::ExtensionBody { .. } | Event::Padding { .. } if self.long_name.is_some() => {
                    if let Some(kept) = &mut self.long_name {
                        kept.extend_from_slice(&piece);
                    }
                    steps.push(Step::Helper(piece));
                }
                Event::ExtensionBody { .. }
                | Event::Body { .. }
                | Event::Padding { .. }
                | Event::Marker { .. }
                | Event::Trailer => steps.push(Step::Helper(piece)),
            }
            if self.to_engine && self.framing.at_header() {
                self.to_engine = false;
                steps.push(Step::EngineEnd);
            }
        }
        steps
    }
}

/// The marker the helper reads before a file whose body comes through the engine: the shared
/// marker entry, without a body.
pub(super) fn marker() -> Bytes {
    Bytes::copy_from_slice(tar_framing::write::marker(0).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::tar_write::{end_of_archive, entry_header, Ownership};
    use tar_framing::{padding, BLOCK};

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
        assert_eq!(entry.header().entry_type().as_byte(), tar_framing::MARKER);
        assert_eq!(entry.header().size().ok(), Some(0));
        assert!(entries.next().is_none());
    }
}
