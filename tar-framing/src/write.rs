//! What the writers emit around the bodies they stream: an entry's header blocks (GNU long
//! names for the host's import archives, PAX records for the helper's export archives), the
//! project's marker entry, the padding after a body and the end of an archive.

use std::io::Write;

use crate::header::{Fields, Format, Header, NAME_MAX, OCTAL_SIZE_MAX};
use crate::{padding, pax, BLOCK, MARKER};

/// The two zero blocks that end an archive.
pub const END: [u8; 2 * BLOCK] = [0; 2 * BLOCK];
/// Zeros enough for any padding (`&ZEROS[..padding(size)]`).
pub const ZEROS: [u8; BLOCK] = [0; BLOCK];
/// The name of a GNU long-name pseudo-entry.
pub const LONG_NAME_ENTRY: &[u8] = b"././@LongLink";
/// The name of a PAX extended header.
pub const PAX_ENTRY: &[u8] = b"././@PaxHeader";
/// The name of the project's marker entry.
pub const MARKER_ENTRY: &[u8] = b"././@NativeSandboxDeferred";

/// An entry's header fields but its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    pub typeflag: u8,
    pub size: u64,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub mtime: u64,
}

impl Meta {
    fn fields<'a>(&self, name: &'a [u8], link_name: &'a [u8], format: Format) -> Fields<'a> {
        Fields {
            name,
            link_name,
            typeflag: self.typeflag,
            size: self.size,
            mode: self.mode,
            uid: self.uid,
            gid: self.gid,
            mtime: self.mtime,
            format,
        }
    }
}

/// The GNU header block(s) of one entry: a long-name entry (owned and dated as the entry) and
/// the header, when `name` is longer than a header holds; the header alone otherwise. Sizes
/// past the octal digits are written in base-256.
pub fn gnu_header(name: &[u8], meta: &Meta) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * BLOCK);
    if name.len() > NAME_MAX {
        let size = name.len() as u64 + 1;
        let long = Meta {
            typeflag: b'L',
            size,
            mode: 0o644,
            ..*meta
        };
        out.extend_from_slice(
            Header::encode(&long.fields(LONG_NAME_ENTRY, b"", Format::Gnu)).as_bytes(),
        );
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(&ZEROS[..padding(size)]);
    }
    out.extend_from_slice(Header::encode(&meta.fields(name, b"", Format::Gnu)).as_bytes());
    out
}

/// The ustar header block of one entry, after a PAX record set when its name, its link name or
/// its size does not fit the block (which then holds them cut).
pub fn pax_header(
    out: &mut impl Write,
    name: &[u8],
    link_name: &[u8],
    meta: &Meta,
) -> std::io::Result<()> {
    let mut records = Vec::new();
    if name.len() > NAME_MAX {
        records.extend(pax::record("path", name));
    }
    if link_name.len() > NAME_MAX {
        records.extend(pax::record("linkpath", link_name));
    }
    if meta.size > OCTAL_SIZE_MAX {
        records.extend(pax::record("size", meta.size.to_string().as_bytes()));
    }
    if !records.is_empty() {
        let set = Meta {
            typeflag: b'x',
            size: records.len() as u64,
            mode: 0o644,
            ..*meta
        };
        out.write_all(Header::encode(&set.fields(PAX_ENTRY, b"", Format::Ustar)).as_bytes())?;
        out.write_all(&records)?;
        out.write_all(&ZEROS[..padding(records.len() as u64)])?;
    }
    let cut = Meta {
        size: meta.size.min(OCTAL_SIZE_MAX),
        ..*meta
    };
    out.write_all(Header::encode(&cut.fields(name, link_name, Format::Ustar)).as_bytes())
}

/// A whole ustar entry of a name that fits its header (no extended header) and `body`, padded:
/// for the small archives the host builds whole (the seed image, a build context).
pub fn ustar_entry(
    out: &mut Vec<u8>,
    name: &[u8],
    meta: &Meta,
    body: &[u8],
) -> std::io::Result<()> {
    if name.len() > NAME_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is too long a name for a ustar header",
                String::from_utf8_lossy(name)
            ),
        ));
    }
    let meta = Meta {
        size: body.len() as u64,
        ..*meta
    };
    out.extend_from_slice(Header::encode(&meta.fields(name, b"", Format::Ustar)).as_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&ZEROS[..padding(meta.size)]);
    Ok(())
}

/// The project's marker entry (`MARKER`), with a body of `size` bytes to follow it: a
/// deferred path in the helper's archives, nothing in the host's.
pub fn marker(size: u64) -> Header {
    let meta = Meta {
        typeflag: MARKER,
        size,
        mode: 0o644,
        ..Meta::default()
    };
    Header::encode(&meta.fields(MARKER_ENTRY, b"", Format::Ustar))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framer::{Event, Framer, NameSource, Options};

    /// An entry read: name, where it came from, link name, size, typeflag, and the body.
    type Read = (String, NameSource, Vec<u8>, u64, u8, Vec<u8>);

    /// The entries a framer reads in `archive`.
    fn read(archive: &[u8]) -> Vec<Read> {
        let mut framer = Framer::new(Options {
            markers: true,
            ..Options::default()
        });
        let mut entries = Vec::new();
        let mut rest = archive;
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            let taken = &rest[..fed.consumed];
            rest = &rest[fed.consumed..];
            match fed.event.expect("framed") {
                Event::Entry(e) => entries.push((
                    String::from_utf8(e.name).expect("UTF-8"),
                    e.name_source,
                    e.link_name,
                    e.size,
                    e.typeflag,
                    Vec::new(),
                )),
                Event::Marker { size } => entries.push((
                    "marker".into(),
                    NameSource::Header,
                    Vec::new(),
                    size,
                    MARKER,
                    Vec::new(),
                )),
                Event::Body { .. } => entries
                    .last_mut()
                    .expect("an entry")
                    .5
                    .extend_from_slice(taken),
                _ => {}
            }
        }
        assert_eq!(framer.finish(), Ok(()));
        entries
    }

    #[test]
    fn gnu_long_names_read_back() {
        let long = format!("{}/{}", "d".repeat(80), "f".repeat(60));
        let meta = Meta {
            typeflag: b'0',
            size: 5,
            mode: 0o640,
            uid: 65_532,
            gid: 65_532,
            mtime: 7,
        };
        let mut archive = gnu_header(long.as_bytes(), &meta);
        assert_eq!(archive.len(), 3 * BLOCK, "a long name of one block");
        archive.extend(b"hello");
        archive.extend(&ZEROS[..padding(5)]);
        archive.extend(gnu_header(
            b"dir/",
            &Meta {
                typeflag: b'5',
                size: 0,
                ..meta
            },
        ));
        archive.extend(END);
        assert_eq!(
            read(&archive),
            vec![
                (
                    long,
                    NameSource::LongName,
                    vec![],
                    5,
                    b'0',
                    b"hello".to_vec()
                ),
                ("dir/".into(), NameSource::Header, vec![], 0, b'5', vec![]),
            ]
        );
        let header = Header::from_slice(&archive[2 * BLOCK..3 * BLOCK]).expect("a block");
        assert_eq!(
            (header.uid(), header.gid(), header.mtime(), header.mode()),
            (Some(65_532), Some(65_532), Some(7), Some(0o640))
        );
    }

    #[test]
    fn pax_records_carry_what_does_not_fit() {
        let long = "n".repeat(150);
        let target = "t".repeat(120);
        let mut archive = Vec::new();
        let huge = OCTAL_SIZE_MAX + 2;
        pax_header(
            &mut archive,
            long.as_bytes(),
            target.as_bytes(),
            &Meta {
                typeflag: b'2',
                mode: 0o777,
                ..Meta::default()
            },
        )
        .expect("written");
        pax_header(
            &mut archive,
            b"short",
            b"",
            &Meta {
                typeflag: b'0',
                size: 3,
                mode: 0o644,
                ..Meta::default()
            },
        )
        .expect("written");
        archive.extend(b"abc");
        archive.extend(&ZEROS[..padding(3)]);
        let big_at = archive.len();
        pax_header(
            &mut archive,
            b"big",
            b"",
            &Meta {
                typeflag: b'0',
                size: huge,
                mode: 0o644,
                ..Meta::default()
            },
        )
        .expect("written");
        let header = Header::from_slice(&archive[archive.len() - BLOCK..]).expect("a block");
        assert_eq!(
            header.size(),
            Some(OCTAL_SIZE_MAX),
            "the block holds the size cut"
        );
        assert!(archive.len() - big_at == 3 * BLOCK, "a PAX set before it");
        let mut framer = Framer::new(Options::default());
        let mut rest = &archive[..];
        let mut entries = Vec::new();
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            rest = &rest[fed.consumed..];
            if let Event::Entry(e) = fed.event.expect("framed") {
                entries.push((e.name, e.link_name, e.size, e.name_source));
            }
        }
        assert_eq!(
            entries,
            vec![
                (long.into_bytes(), target.into_bytes(), 0, NameSource::Pax),
                (b"short".to_vec(), vec![], 3, NameSource::Header),
                (b"big".to_vec(), vec![], huge, NameSource::Header),
            ]
        );
        assert_eq!(framer.body_left(), huge);
    }

    #[test]
    fn ustar_entries_and_markers_read_back() {
        let mut archive = Vec::new();
        let meta = Meta {
            typeflag: b'0',
            mode: 0o755,
            ..Meta::default()
        };
        ustar_entry(&mut archive, b"native-sandbox-helper", &meta, b"\x7fELF").expect("fits");
        archive.extend(marker(7).as_bytes());
        archive.extend(b"big.bin");
        archive.extend(&ZEROS[..padding(7)]);
        ustar_entry(&mut archive, b"after", &meta, b"").expect("fits");
        archive.extend(END);
        let entries = read(&archive);
        let summary: Vec<(&str, u64, u8, &[u8])> = entries
            .iter()
            .map(|e| (e.0.as_str(), e.3, e.4, &e.5[..]))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("native-sandbox-helper", 4, b'0', &b"\x7fELF"[..]),
                ("marker", 7, MARKER, b"big.bin"),
                ("after", 0, b'0', b""),
            ]
        );
        assert!(ustar_entry(&mut Vec::new(), &[b'n'; 101], &meta, b"").is_err());
        assert_eq!(marker(0).name(), MARKER_ENTRY);
    }
}
