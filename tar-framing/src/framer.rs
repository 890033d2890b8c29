//! The one incremental framing state machine: bytes in, in pieces of any size, events out.
//!
//! A caller hands `Framer::feed` the bytes it has; the framer takes a prefix of them and says
//! what that prefix was (`Fed`): part of a header block (which it collects), a complete
//! header (an extended header, a marker, or an entry with every extended header before it
//! applied), bytes of a body (which it only counts: the caller slices them out of its own
//! buffer, without a copy, or moves them itself and says so with `body_taken`), padding, the
//! end-of-archive block, or what follows it. Extended headers (PAX `x` and `g`, GNU `L` and
//! `K`, as the `Options` read them) are kept whole, bounded by `Options::extended_max`, and
//! applied to the next entry: its path (PAX `path` over a GNU long name over the header's own
//! name and ustar prefix), its link name, its size (PAX `size` over the header's field).
//!
//! The framer frames and judges nothing else: which entry types, names and sizes may pass is
//! the caller's to say. Every caller reads through it: the host's export reader
//! (`src/transfer/tar_read.rs`), the Docker driver's relays of the helper's archives
//! (`src/docker/sandbox/deferred_bodies.rs`, `import_bodies.rs`) and the helper's import
//! (`helper/src/import.rs`); each sets the options its archive needs.

use crate::header::Header;
use crate::{padding, pax, BLOCK, MARKER};

/// What may follow the end-of-archive block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trailer {
    /// Anything: it passes as `Event::Trailer`.
    Any,
    /// Only zeros (the second end block, record padding), at most `max` bytes of them;
    /// anything else is `Error::DataAfterEnd`.
    Zeros { max: u64 },
}

/// How a framer reads its archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Whether each header's checksum is checked (a relay leaves it to the reader after it).
    pub checksums: bool,
    /// PAX extended headers (`x`): their `path`, `linkpath` and `size` apply to the next entry.
    pub pax: bool,
    /// PAX global headers (`g`): skipped (their defaults are nobody's concern here).
    pub pax_global: bool,
    /// GNU long names (`L`): the next entry's name.
    pub gnu_long_names: bool,
    /// GNU long link names (`K`): the next entry's link name.
    pub gnu_long_links: bool,
    /// The largest extended header body read (each is kept whole); past it,
    /// `Error::ExtensionTooLarge` before any of it is read.
    pub extended_max: u64,
    /// Whether entries of typeflag `MARKER` are markers (`Event::Marker`, taking none of the
    /// extended headers before them) rather than entries.
    pub markers: bool,
    pub trailer: Trailer,
}

impl Default for Options {
    /// A foreign archive: checksums checked, every extended header read (64 KiB at most), no
    /// markers, anything after the end.
    fn default() -> Self {
        Self {
            checksums: true,
            pax: true,
            pax_global: true,
            gnu_long_names: true,
            gnu_long_links: true,
            extended_max: 64 * 1_024,
            markers: false,
            trailer: Trailer::Any,
        }
    }
}

/// Where an entry's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    /// Its header's name field (after the ustar prefix, if any).
    Header,
    /// A GNU long name entry before it.
    LongName,
    /// A PAX `path` record before it.
    Pax,
}

/// An entry's header, its extended headers applied. The header block itself is
/// `Framer::header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub typeflag: u8,
    /// Up to its first NUL; a trailing `/` kept.
    pub name: Vec<u8>,
    pub name_source: NameSource,
    pub link_name: Vec<u8>,
    /// Its body's size: its body (then padding) follows unless the caller says it does not.
    pub size: u64,
}

/// What the bytes a `feed` took were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Part of a header block, collected: nothing to do yet (the block comes whole with the
    /// event that completes it, as `Framer::header`).
    Partial,
    /// The last bytes of an extended header's block (`x`, `g`, `L` or `K`, as read): its body
    /// of `size` bytes follows.
    Extension { typeflag: u8, size: u64 },
    /// Bytes of an extended header's body (kept by the framer), `left` more to come.
    ExtensionBody { left: u64 },
    /// The last bytes of a marker's block: its body of `size` bytes follows as `Body`.
    Marker { size: u64 },
    /// The last bytes of an entry's block.
    Entry(Entry),
    /// Bytes of an entry's (or a marker's) body, `left` more to come.
    Body { left: u64 },
    /// Zero bytes after a body, `left` more to come.
    Padding { left: usize },
    /// The last bytes of the first end-of-archive block (all zeros).
    End,
    /// Bytes after the end-of-archive block.
    Trailer,
}

/// What went wrong. Once a `feed` fails, every later one fails the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    ChecksumUnreadable,
    ChecksumMismatch,
    SizeUnreadable,
    /// A size that with its padding does not fit a `u64`.
    SizeTooLarge,
    /// An extended header larger than `Options::extended_max`.
    ExtensionTooLarge {
        typeflag: u8,
        size: u64,
    },
    Pax(pax::Error),
    /// The input ended before the end-of-archive block (`Framer::finish`).
    Truncated,
    /// Something else than zeros, or too many bytes, after the end (`Trailer::Zeros`).
    DataAfterEnd,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::ChecksumUnreadable => f.write_str("a header checksum is unreadable"),
            Error::ChecksumMismatch => f.write_str("a header checksum does not match"),
            Error::SizeUnreadable => f.write_str("a header size is unreadable"),
            Error::SizeTooLarge => f.write_str("a header size is too large"),
            Error::ExtensionTooLarge { size, .. } => {
                write!(f, "an extended header of {size} bytes is too large")
            }
            Error::Pax(error) => error.fmt(f),
            Error::Truncated => f.write_str("the archive is truncated"),
            Error::DataAfterEnd => f.write_str("data follows the end of the archive"),
        }
    }
}

impl std::error::Error for Error {}

/// What one `feed` did: it took the first `consumed` bytes of its input, and they were
/// `event` (or, on failure, the bytes up to the failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fed {
    pub consumed: usize,
    pub event: Result<Event, Error>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a header block: `have` bytes of it so far.
    Header {
        have: usize,
    },
    /// An extended header's body (`left` bytes of it), then `pad` bytes of padding.
    Extension {
        typeflag: u8,
        left: u64,
        pad: usize,
    },
    /// An entry's body, then its padding.
    Body {
        left: u64,
        pad: usize,
    },
    Padding {
        left: usize,
    },
    /// After the first end block: `seen` bytes since, and whether those of the second block
    /// were all zeros.
    Ended {
        seen: u64,
        zeros: bool,
    },
    Failed(Error),
}

/// What extended headers say of the next entry.
#[derive(Debug, Default)]
struct Pending {
    pax_path: Option<String>,
    pax_link: Option<Vec<u8>>,
    pax_size: Option<u64>,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
}

/// The framing of one archive.
#[derive(Debug)]
pub struct Framer {
    options: Options,
    state: State,
    header: Header,
    /// The body of the extended header being read.
    kept: Vec<u8>,
    pending: Pending,
}

/// The bytes up to the first NUL.
fn up_to_nul(bytes: &[u8]) -> Vec<u8> {
    bytes.split(|&b| b == 0).next().unwrap_or_default().to_vec()
}

/// How many of `input` a stretch with `left` bytes to go takes.
fn taken(input: &[u8], left: u64) -> usize {
    input.len().min(usize::try_from(left).unwrap_or(usize::MAX))
}

/// What follows a body or an extended header's body: its padding, or the next header.
fn after_body(pad: usize) -> State {
    if pad == 0 {
        State::Header { have: 0 }
    } else {
        State::Padding { left: pad }
    }
}

/// The state for a body of `size` bytes and its padding.
fn body(size: u64) -> Result<State, Error> {
    let pad = padding(size);
    size.checked_add(pad as u64).ok_or(Error::SizeTooLarge)?;
    Ok(if size == 0 {
        State::Header { have: 0 }
    } else {
        State::Body { left: size, pad }
    })
}

impl Framer {
    pub fn new(options: Options) -> Self {
        Self {
            options,
            state: State::Header { have: 0 },
            header: Header::from_block([0; BLOCK]),
            kept: Vec::new(),
            pending: Pending::default(),
        }
    }

    /// The last header block read whole (with `Extension`, `Marker`, `Entry` and `End`, and
    /// the block a header error was found in).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Takes a prefix of `input` (all of it, or up to the end of what it is in: a header
    /// block, a body, padding) and says what it was. An empty `input` takes nothing.
    pub fn feed(&mut self, input: &[u8]) -> Fed {
        let (consumed, event) = self.step(input);
        if let Err(error) = event {
            self.state = State::Failed(error);
        }
        Fed { consumed, event }
    }

    /// Body bytes of the current entry still to come (0 outside a body).
    pub fn body_left(&self) -> u64 {
        match self.state {
            State::Body { left, .. } => left,
            _ => 0,
        }
    }

    /// Whether the next byte begins a header block: the entry (or extended header, or marker)
    /// before it is complete, padding included.
    pub fn at_header(&self) -> bool {
        self.state == State::Header { have: 0 }
    }

    /// Whether extended headers were read whose entry is still to come.
    pub fn pending(&self) -> bool {
        let p = &self.pending;
        p.pax_path.is_some()
            || p.pax_link.is_some()
            || p.pax_size.is_some()
            || p.long_name.is_some()
            || p.long_link.is_some()
    }

    /// Whether both end-of-archive blocks were read, the second all zeros.
    pub fn ended(&self) -> bool {
        matches!(self.state, State::Ended { seen, zeros } if zeros && seen >= BLOCK as u64)
    }

    /// The rest of the current entry's body, and its padding, are not in the archive (a body
    /// read elsewhere): the next byte begins a header.
    pub fn skip_body(&mut self) {
        if let State::Body { .. } = self.state {
            self.state = State::Header { have: 0 };
        }
    }

    /// The caller took `count` bytes of the current entry's body from the input itself (at
    /// most `body_left`).
    pub fn body_taken(&mut self, count: u64) {
        if let State::Body { left, pad } = self.state {
            let left = left - count.min(left);
            self.state = if left == 0 {
                after_body(pad)
            } else {
                State::Body { left, pad }
            };
        }
    }

    /// The input ended: `Ok` once the end-of-archive block was read.
    pub fn finish(&self) -> Result<(), Error> {
        match self.state {
            State::Ended { .. } => Ok(()),
            State::Failed(error) => Err(error),
            _ => Err(Error::Truncated),
        }
    }

    fn reads_extension(&self, typeflag: u8) -> bool {
        match typeflag {
            b'x' => self.options.pax,
            b'g' => self.options.pax_global,
            b'L' => self.options.gnu_long_names,
            b'K' => self.options.gnu_long_links,
            _ => false,
        }
    }

    fn step(&mut self, input: &[u8]) -> (usize, Result<Event, Error>) {
        match self.state {
            State::Failed(error) => (0, Err(error)),
            State::Header { have } => {
                let n = input.len().min(BLOCK - have);
                self.header.0[have..have + n].copy_from_slice(&input[..n]);
                if have + n < BLOCK {
                    self.state = State::Header { have: have + n };
                    return (n, Ok(Event::Partial));
                }
                self.state = State::Header { have: 0 };
                (n, self.read_header())
            }
            State::Extension {
                typeflag,
                left,
                pad,
            } => {
                let n = taken(input, left);
                if typeflag != b'g' {
                    self.kept.extend_from_slice(&input[..n]);
                }
                let left = left - n as u64;
                self.state = State::Extension {
                    typeflag,
                    left,
                    pad,
                };
                if left == 0 {
                    if let Err(error) = self.apply(typeflag) {
                        return (n, Err(error));
                    }
                    self.state = after_body(pad);
                }
                (n, Ok(Event::ExtensionBody { left }))
            }
            State::Body { left, pad } => {
                let n = taken(input, left);
                let left = left - n as u64;
                self.state = if left == 0 {
                    after_body(pad)
                } else {
                    State::Body { left, pad }
                };
                (n, Ok(Event::Body { left }))
            }
            State::Padding { left } => {
                let n = input.len().min(left);
                let left = left - n;
                self.state = if left == 0 {
                    State::Header { have: 0 }
                } else {
                    State::Padding { left }
                };
                (n, Ok(Event::Padding { left }))
            }
            State::Ended { seen, zeros } => {
                let second = usize::try_from((BLOCK as u64).saturating_sub(seen))
                    .unwrap_or(BLOCK)
                    .min(input.len());
                let zeros = zeros && input[..second].iter().all(|&b| b == 0);
                let seen = seen.saturating_add(input.len() as u64);
                if let Trailer::Zeros { max } = self.options.trailer {
                    if seen > max || input.iter().any(|&b| b != 0) {
                        return (input.len(), Err(Error::DataAfterEnd));
                    }
                }
                self.state = State::Ended { seen, zeros };
                (input.len(), Ok(Event::Trailer))
            }
        }
    }

    /// A complete header block: what it is, and the state after it.
    fn read_header(&mut self) -> Result<Event, Error> {
        let header = &self.header;
        if header.is_zero() {
            self.state = State::Ended {
                seen: 0,
                zeros: true,
            };
            return Ok(Event::End);
        }
        if self.options.checksums {
            let stored = header.stored_checksum().ok_or(Error::ChecksumUnreadable)?;
            if stored != header.computed_checksum() {
                return Err(Error::ChecksumMismatch);
            }
        }
        let size = header.size().ok_or(Error::SizeUnreadable)?;
        let typeflag = header.typeflag();
        if self.reads_extension(typeflag) {
            // Every extended header is kept whole, so its size is bounded first.
            if size > self.options.extended_max {
                return Err(Error::ExtensionTooLarge { typeflag, size });
            }
            self.kept.clear();
            if size == 0 {
                self.apply(typeflag)?;
            } else {
                self.state = State::Extension {
                    typeflag,
                    left: size,
                    pad: padding(size),
                };
            }
            return Ok(Event::Extension { typeflag, size });
        }
        if self.options.markers && typeflag == MARKER {
            self.state = body(size)?;
            return Ok(Event::Marker { size });
        }
        let pending = std::mem::take(&mut self.pending);
        let size = pending.pax_size.unwrap_or(size);
        let (name, name_source) = match (pending.pax_path, pending.long_name) {
            (Some(path), _) => (path.into_bytes(), NameSource::Pax),
            (None, Some(name)) => (name, NameSource::LongName),
            (None, None) => (header.name(), NameSource::Header),
        };
        let link_name = pending
            .pax_link
            .or(pending.long_link)
            .unwrap_or_else(|| header.link_name().to_vec());
        self.state = body(size)?;
        Ok(Event::Entry(Entry {
            typeflag,
            name,
            name_source,
            link_name,
            size,
        }))
    }

    /// Applies the extended header of `typeflag` just read whole (its body in `kept`).
    fn apply(&mut self, typeflag: u8) -> Result<(), Error> {
        match typeflag {
            b'x' => {
                let records = pax::parse(&self.kept).map_err(Error::Pax)?;
                let pending = &mut self.pending;
                pending.pax_path = records.path.or(pending.pax_path.take());
                pending.pax_link = records.link_path.or(pending.pax_link.take());
                pending.pax_size = records.size.or(pending.pax_size);
            }
            b'L' => self.pending.long_name = Some(up_to_nul(&self.kept)),
            b'K' => self.pending.long_link = Some(up_to_nul(&self.kept)),
            _ => {}
        }
        self.kept.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{Fields, Format};
    use crate::pax::record;

    fn block(name: &[u8], typeflag: u8, size: u64) -> Vec<u8> {
        Header::encode(&Fields {
            name,
            link_name: b"",
            typeflag,
            size,
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime: 0,
            format: Format::Ustar,
        })
        .as_bytes()
        .to_vec()
    }

    fn padded(body: &[u8]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.resize(out.len() + padding(body.len() as u64), 0);
        out
    }

    /// An entry (or extended header) of `body`.
    fn entry(name: &[u8], typeflag: u8, body: &[u8]) -> Vec<u8> {
        [block(name, typeflag, body.len() as u64), padded(body)].concat()
    }

    /// One of everything: a global header, a directory, a GNU long name, a PAX set overriding
    /// a path and a size, a long link name before a link, a marker, an empty file, the end and
    /// a trailer.
    fn archive() -> Vec<u8> {
        let long = [b'l'; 150];
        let pax = [
            record("path", b"pax/path"),
            record("size", b"700"),
            record("mtime", b"1"),
        ]
        .concat();
        [
            entry(b"pax_global_header", b'g', &record("comment", b"x")),
            entry(b"d/", b'5', b""),
            entry(b"././@LongLink", b'L', &[&long[..], b"\0"].concat()),
            entry(b"short", b'0', &[1u8; 600]),
            entry(b"././@LongLink", b'L', b"overridden\0"),
            entry(b"././@PaxHeader", b'x', &pax),
            block(b"header/name", b'0', 1),
            padded(&[2u8; 700]),
            entry(b"././@LongLink", b'K', &[b'k'; 120]),
            entry(b"link", b'2', b""),
            entry(b"././@NativeSandboxDeferred", MARKER, b"big"),
            entry(b"empty", b'0', b""),
            vec![0u8; 2 * BLOCK],
            vec![0u8; 100],
        ]
        .concat()
    }

    fn options() -> Options {
        Options {
            markers: true,
            ..Options::default()
        }
    }

    /// What feeding `pieces` in turn gives: each event with the bytes it took (a header's
    /// event with the whole block), the pieces of one stretch (body, padding, extension body,
    /// trailer) joined; an error ends it, as the last event's bytes.
    fn events(options: Options, pieces: &[&[u8]]) -> Vec<(Event, Vec<u8>)> {
        let stretch = |e: &Event| match e {
            Event::Body { .. } => 1,
            Event::Padding { .. } => 2,
            Event::ExtensionBody { .. } => 3,
            Event::Trailer => 4,
            _ => 0,
        };
        let mut framer = Framer::new(options);
        let mut out: Vec<(Event, Vec<u8>)> = Vec::new();
        let mut partial = Vec::new();
        for piece in pieces {
            let mut rest = *piece;
            while !rest.is_empty() {
                let fed = framer.feed(rest);
                let (taken, after) = rest.split_at(fed.consumed);
                rest = after;
                let event = match fed.event {
                    Ok(Event::Partial) => {
                        partial.extend_from_slice(taken);
                        continue;
                    }
                    Ok(event) => event,
                    Err(error) => {
                        out.push((Event::Partial, format!("{error:?}").into_bytes()));
                        return out;
                    }
                };
                let mut bytes = std::mem::take(&mut partial);
                bytes.extend_from_slice(taken);
                match out.last_mut() {
                    Some((last, joined))
                        if stretch(&event) != 0 && stretch(last) == stretch(&event) =>
                    {
                        *last = event;
                        joined.extend_from_slice(&bytes);
                    }
                    _ => out.push((event, bytes)),
                }
            }
        }
        out
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let archive = archive();
        let whole = events(options(), &[&archive]);
        for at in 0..=archive.len() {
            let (a, b) = archive.split_at(at);
            assert_eq!(events(options(), &[a, b]), whole, "split at {at}");
        }
        let bytes: Vec<&[u8]> = archive.chunks(1).collect();
        assert_eq!(events(options(), &bytes), whole, "byte by byte");
        let odd: Vec<&[u8]> = archive.chunks(37).collect();
        assert_eq!(events(options(), &odd), whole, "pieces of 37");
        // Every byte is taken by exactly one event, in order; a header's event takes its block.
        let taken: Vec<u8> = whole.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(taken, archive);
        for (event, bytes) in &whole {
            if matches!(
                event,
                Event::Extension { .. } | Event::Entry(_) | Event::Marker { .. } | Event::End
            ) {
                assert_eq!(bytes.len(), BLOCK, "{event:?}");
            }
        }
    }

    #[test]
    fn extended_headers_apply_to_the_next_entry() {
        let archive = archive();
        let entries: Vec<Entry> = events(options(), &[&archive])
            .into_iter()
            .filter_map(|(e, _)| match e {
                Event::Entry(entry) => Some(entry),
                _ => None,
            })
            .collect();
        let summary: Vec<(String, NameSource, u64, u8)> = entries
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(&e.name).into_owned(),
                    e.name_source,
                    e.size,
                    e.typeflag,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("d/".into(), NameSource::Header, 0, b'5'),
                ("l".repeat(150), NameSource::LongName, 600, b'0'),
                // PAX path over the long name before it, PAX size over the header's.
                ("pax/path".into(), NameSource::Pax, 700, b'0'),
                ("link".into(), NameSource::Header, 0, b'2'),
                ("empty".into(), NameSource::Header, 0, b'0'),
            ]
        );
        assert_eq!(entries[3].link_name, vec![b'k'; 120]);
        let whole = events(options(), &[&archive]);
        let body: Vec<u8> = whole
            .iter()
            .skip_while(|(e, _)| !matches!(e, Event::Entry(entry) if entry.name == b"pax/path"))
            .nth(1)
            .map(|(_, b)| b.clone())
            .expect("a body");
        assert_eq!(body, vec![2u8; 700], "the body is the PAX size long");
        assert!(whole
            .iter()
            .any(|(e, b)| *e == Event::Marker { size: 3 } && b.len() == BLOCK));
        assert_eq!(
            whole.last().map(|(e, b)| (e, b.len())),
            Some((&Event::Trailer, BLOCK + 100))
        );
    }

    #[test]
    fn a_marker_takes_none_of_the_extended_headers_before_it() {
        let archive = [
            entry(b"././@LongLink", b'L', b"long/name\0"),
            entry(b"", MARKER, b""),
            block(b"short", b'0', 0),
        ]
        .concat();
        let mut framer = Framer::new(options());
        let mut rest = &archive[..];
        let mut seen = Vec::new();
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            rest = &rest[fed.consumed..];
            match fed.event.expect("framed") {
                Event::Marker { size } => {
                    assert!(framer.pending(), "the long name still waits");
                    assert!(framer.at_header());
                    seen.push(format!("marker {size}"));
                }
                Event::Entry(entry) => {
                    assert!(!framer.pending());
                    seen.push(String::from_utf8_lossy(&entry.name).into_owned());
                }
                _ => {}
            }
        }
        assert_eq!(seen, ["marker 0", "long/name"]);
        // Without markers, a marker is an entry like any other, and takes the long name.
        let plain = events(Options::default(), &[&archive]);
        assert!(plain.iter().any(
            |(e, _)| matches!(e, Event::Entry(entry) if entry.typeflag == MARKER && entry.name == b"long/name")
        ));
    }

    #[test]
    fn extensions_not_read_are_entries() {
        let archive = [
            entry(b"././@LongLink", b'L', b"long\0"),
            entry(b"././@PaxHeader", b'x', &record("path", b"p")),
            block(b"f", b'0', 0),
        ]
        .concat();
        let none = Options {
            pax: false,
            gnu_long_names: false,
            ..Options::default()
        };
        let names: Vec<(u8, Vec<u8>)> = events(none, &[&archive])
            .into_iter()
            .filter_map(|(e, _)| match e {
                Event::Entry(entry) => Some((entry.typeflag, entry.name)),
                _ => None,
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (b'L', b"././@LongLink".to_vec()),
                (b'x', b"././@PaxHeader".to_vec()),
                (b'0', b"f".to_vec())
            ]
        );
    }

    #[test]
    fn a_truncated_archive_never_finishes() {
        let archive = archive();
        let end = archive.len() - 2 * BLOCK - 100;
        for cut in 0..archive.len() {
            let mut framer = Framer::new(options());
            let mut rest = &archive[..cut];
            while !rest.is_empty() {
                let fed = framer.feed(rest);
                fed.event.expect("framed");
                rest = &rest[fed.consumed..];
            }
            let finished = framer.finish();
            if cut < end + BLOCK {
                assert_eq!(finished, Err(Error::Truncated), "cut at {cut}");
            } else {
                assert_eq!(finished, Ok(()), "cut at {cut}");
            }
            assert_eq!(framer.ended(), cut >= end + 2 * BLOCK, "cut at {cut}");
        }
    }

    fn fail(options: Options, archive: &[u8]) -> Error {
        let mut framer = Framer::new(options);
        let mut rest = archive;
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            rest = &rest[fed.consumed..];
            if let Err(error) = fed.event {
                // It stays failed.
                assert_eq!(framer.feed(b"more").event, Err(error));
                assert_eq!(framer.finish(), Err(error));
                return error;
            }
        }
        panic!("no error");
    }

    #[test]
    fn malformed_headers_are_named() {
        let mut bad = block(b"f", b'0', 0);
        bad[0] = b'g';
        assert_eq!(fail(Options::default(), &bad), Error::ChecksumMismatch);
        let unchecked = Options {
            checksums: false,
            ..Options::default()
        };
        let mut archive = bad.clone();
        archive.extend([0u8; 2 * BLOCK]);
        assert!(events(unchecked, &[&archive])
            .iter()
            .any(|(e, _)| *e == Event::End));
        let mut unreadable = block(b"f", b'0', 0);
        unreadable[148..156].copy_from_slice(b"zzzzzzz\0");
        assert_eq!(
            fail(Options::default(), &unreadable),
            Error::ChecksumUnreadable
        );
        let mut size = block(b"f", b'0', 0);
        size[124..136].copy_from_slice(b"0000000009\0\0");
        assert_eq!(fail(unchecked, &size), Error::SizeUnreadable);
        let mut huge = block(b"f", b'0', 0);
        huge[124..136].copy_from_slice(&[
            0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]);
        assert_eq!(fail(unchecked, &huge), Error::SizeTooLarge);
        // Only the header is there: a framer that kept the claimed size would wait for ever.
        let global = block(b"pax_global_header", b'g', 1 << 40);
        assert_eq!(
            fail(Options::default(), &global),
            Error::ExtensionTooLarge {
                typeflag: b'g',
                size: 1 << 40
            }
        );
        let long = block(b"././@LongLink", b'L', 4_097);
        let small = Options {
            extended_max: 4_096,
            ..Options::default()
        };
        assert!(matches!(
            fail(small, &long),
            Error::ExtensionTooLarge { size: 4_097, .. }
        ));
        let pax = entry(b"././@PaxHeader", b'x', b"99 size=1\n");
        assert_eq!(
            fail(Options::default(), &pax),
            Error::Pax(pax::Error::InvalidLength)
        );
    }

    #[test]
    fn the_trailer_is_checked_when_asked() {
        let mut archive = block(b"f", b'0', 0);
        archive.extend([0u8; 2 * BLOCK]);
        let zeros = Options {
            trailer: Trailer::Zeros {
                max: 2 * BLOCK as u64,
            },
            ..Options::default()
        };
        let mut more = archive.clone();
        more.extend([0u8; BLOCK]);
        assert!(events(zeros, &[&more])
            .last()
            .is_some_and(|(e, _)| *e == Event::Trailer));
        more.extend([0u8; 1]);
        assert_eq!(fail(zeros, &more), Error::DataAfterEnd);
        let mut dirty = archive.clone();
        dirty.push(1);
        assert_eq!(fail(zeros, &dirty), Error::DataAfterEnd);
        // Anything passes otherwise, and a second block that is not all zeros never ends it.
        let mut framer = Framer::new(Options::default());
        let mut second = archive[..2 * BLOCK].to_vec();
        second.extend([0u8; BLOCK - 1]);
        second.push(1);
        second.extend(b"garbage");
        let mut rest = &second[..];
        while !rest.is_empty() {
            let fed = framer.feed(rest);
            fed.event.expect("framed");
            rest = &rest[fed.consumed..];
        }
        assert!(!framer.ended());
        assert_eq!(framer.finish(), Ok(()));
    }

    #[test]
    fn a_body_taken_or_skipped_by_the_caller() {
        let archive = [
            block(b"absent", b'0', 5_000),
            entry(b"moved", b'0', &[3u8; 1_000]),
            vec![0u8; 2 * BLOCK],
        ]
        .concat();
        let mut framer = Framer::new(Options::default());
        let fed = framer.feed(&archive);
        assert_eq!(fed.consumed, BLOCK);
        assert!(matches!(fed.event, Ok(Event::Entry(ref e)) if e.size == 5_000));
        assert_eq!(framer.body_left(), 5_000);
        framer.skip_body();
        assert!(framer.at_header());
        let rest = &archive[BLOCK..];
        let fed = framer.feed(rest);
        assert!(matches!(fed.event, Ok(Event::Entry(ref e)) if e.name == b"moved"));
        framer.body_taken(600);
        assert_eq!(framer.body_left(), 400);
        framer.body_taken(400);
        assert_eq!(framer.body_left(), 0);
        assert!(!framer.at_header(), "its padding is still to come");
        let rest = &rest[BLOCK + 1_000..];
        let fed = framer.feed(rest);
        assert_eq!(fed.consumed, padding(1_000));
        assert_eq!(fed.event, Ok(Event::Padding { left: 0 }));
        assert!(framer.at_header());
        let fed = framer.feed(&rest[fed.consumed..]);
        assert_eq!(fed.event, Ok(Event::End));
    }
}
