//! The 512-byte header block: its fields read (numbers in octal or GNU base-256, names with the
//! ustar prefix), its checksum, and its encoding.

use std::ops::Range;

use crate::BLOCK;

const NAME: Range<usize> = 0..100;
const MODE: Range<usize> = 100..108;
const UID: Range<usize> = 108..116;
const GID: Range<usize> = 116..124;
const SIZE: Range<usize> = 124..136;
const MTIME: Range<usize> = 136..148;
const CHECKSUM: Range<usize> = 148..156;
const TYPEFLAG: usize = 156;
const LINK_NAME: Range<usize> = 157..257;
const MAGIC: Range<usize> = 257..263;
const VERSION: Range<usize> = 263..265;
const PREFIX: Range<usize> = 345..500;

/// The longest name (or link name) a header field holds; longer ones go in an extended header
/// before it.
pub const NAME_MAX: usize = 100;
/// The largest number an octal size field holds (eleven digits); larger sizes are written in a
/// PAX record or in base-256.
pub const OCTAL_SIZE_MAX: u64 = 0o77_777_777_777;

/// One header block.
#[derive(Clone, PartialEq, Eq)]
pub struct Header(pub(crate) [u8; BLOCK]);

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("typeflag", &char::from(self.typeflag()))
            .field("name", &String::from_utf8_lossy(&self.name()))
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

/// A number field: octal digits (after any spaces, up to a NUL or a space; none reads as 0),
/// or GNU base-256 when its first byte has the high bit set. `None` when it reads as neither,
/// or does not fit a `u64`.
pub fn number(field: &[u8]) -> Option<u64> {
    let (&first, rest) = field.split_first()?;
    if first & 0x80 != 0 {
        return rest.iter().try_fold(u64::from(first & 0x7f), |value, &b| {
            value.checked_mul(256)?.checked_add(u64::from(b))
        });
    }
    let digits: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&b| b == b' ')
        .take_while(|&b| b != 0 && b != b' ')
        .collect();
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(std::str::from_utf8(&digits).ok()?, 8).ok()
}

/// The bytes of a text field up to its first NUL.
fn text(field: &[u8]) -> &[u8] {
    &field[..field.iter().position(|&b| b == 0).unwrap_or(field.len())]
}

/// Writes `value` into a number field: octal digits zero-padded to all but its last byte, a
/// NUL in that one; GNU base-256 when the digits would not fit.
fn put_number(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    if digits < 22 && value >> (3 * digits) != 0 {
        field.fill(0);
        let at = field.len() - 8;
        field[at..].copy_from_slice(&value.to_be_bytes());
        field[0] |= 0x80;
        return;
    }
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}

/// Which header format a block is written in: the two differ in their magic and version, and
/// only ustar has a prefix field (which the writers leave empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// POSIX ustar (`ustar\0`, `00`): what PAX archives are made of.
    Ustar,
    /// GNU (`ustar `, ` \0`): what GNU long names go with.
    Gnu,
}

/// What a header block is made of.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    /// Cut at `NAME_MAX` bytes (an extended header before the block carries the whole).
    pub name: &'a [u8],
    /// Cut at `NAME_MAX` bytes likewise.
    pub link_name: &'a [u8],
    pub typeflag: u8,
    pub size: u64,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub mtime: u64,
    pub format: Format,
}

impl Header {
    pub fn from_block(block: [u8; BLOCK]) -> Self {
        Self(block)
    }

    /// A block of exactly `BLOCK` bytes.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        Some(Self(bytes.try_into().ok()?))
    }

    pub fn as_bytes(&self) -> &[u8; BLOCK] {
        &self.0
    }

    /// Whether every byte is zero: an end-of-archive block, not a header.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    pub fn typeflag(&self) -> u8 {
        self.0[TYPEFLAG]
    }

    /// The size field; `None` when it is unreadable.
    pub fn size(&self) -> Option<u64> {
        number(&self.0[SIZE])
    }

    pub fn mode(&self) -> Option<u64> {
        number(&self.0[MODE])
    }

    pub fn uid(&self) -> Option<u64> {
        number(&self.0[UID])
    }

    pub fn gid(&self) -> Option<u64> {
        number(&self.0[GID])
    }

    pub fn mtime(&self) -> Option<u64> {
        number(&self.0[MTIME])
    }

    /// The checksum the block holds; `None` when its field is unreadable.
    pub fn stored_checksum(&self) -> Option<u64> {
        number(&self.0[CHECKSUM])
    }

    /// The block's checksum: the sum of its bytes, those of the checksum field counted as
    /// spaces.
    pub fn computed_checksum(&self) -> u64 {
        self.0
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if CHECKSUM.contains(&i) {
                    u64::from(b' ')
                } else {
                    u64::from(b)
                }
            })
            .sum()
    }

    /// Whether the ustar magic is there (`ustar\0`; GNU headers have `ustar `).
    pub fn is_ustar(&self) -> bool {
        &self.0[MAGIC] == b"ustar\0"
    }

    /// The name field up to its first NUL, after the prefix field and a `/` when a ustar
    /// header has one.
    pub fn name(&self) -> Vec<u8> {
        let name = text(&self.0[NAME]);
        let prefix = if self.is_ustar() {
            text(&self.0[PREFIX])
        } else {
            &[]
        };
        if prefix.is_empty() {
            return name.to_vec();
        }
        let mut joined = Vec::with_capacity(prefix.len() + 1 + name.len());
        joined.extend_from_slice(prefix);
        joined.push(b'/');
        joined.extend_from_slice(name);
        joined
    }

    /// The link name field up to its first NUL.
    pub fn link_name(&self) -> &[u8] {
        text(&self.0[LINK_NAME])
    }

    /// A header block of `fields`, its checksum set. Numbers are written as the `tar` crate
    /// writes them (octal, zero-padded, NUL-terminated; base-256 past the octal digits), so an
    /// archive the addon writes is what it wrote with that crate.
    pub fn encode(fields: &Fields) -> Self {
        let mut block = [0u8; BLOCK];
        let name = &fields.name[..fields.name.len().min(NAME_MAX)];
        block[..name.len()].copy_from_slice(name);
        let link = &fields.link_name[..fields.link_name.len().min(NAME_MAX)];
        block[LINK_NAME.start..LINK_NAME.start + link.len()].copy_from_slice(link);
        put_number(&mut block[MODE], u64::from(fields.mode));
        put_number(&mut block[UID], fields.uid);
        put_number(&mut block[GID], fields.gid);
        put_number(&mut block[SIZE], fields.size);
        put_number(&mut block[MTIME], fields.mtime);
        block[TYPEFLAG] = fields.typeflag;
        let (magic, version) = match fields.format {
            Format::Ustar => (b"ustar\0", b"00"),
            Format::Gnu => (b"ustar ", b" \0"),
        };
        block[MAGIC].copy_from_slice(magic);
        block[VERSION].copy_from_slice(version);
        let mut header = Self(block);
        let sum = header.computed_checksum();
        put_number(&mut header.0[CHECKSUM], sum);
        header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_octal_and_base_256() {
        assert_eq!(number(b"0000644\0"), Some(0o644));
        assert_eq!(number(b"   755 \0"), Some(0o755));
        assert_eq!(number(b"\0\0\0\0"), Some(0));
        assert_eq!(number(b"00000001750\0"), Some(1_000));
        assert_eq!(number(b"           \0"), Some(0));
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]), Some(258));
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1]), Some(513));
        assert_eq!(number(b"0000000009\0\0"), None);
        assert_eq!(number(b"0009\0"), None);
        assert_eq!(number(&[0xff; 12]), None, "past a u64");
        assert_eq!(number(b""), None);
    }

    #[test]
    fn numbers_are_written_in_octal_then_base_256() {
        let mut field = [0u8; 12];
        put_number(&mut field, 1_000);
        assert_eq!(&field, b"00000001750\0");
        put_number(&mut field, OCTAL_SIZE_MAX);
        assert_eq!(&field, b"77777777777\0");
        put_number(&mut field, OCTAL_SIZE_MAX + 1);
        assert_eq!(field[..4], [0x80, 0, 0, 0]);
        assert_eq!(number(&field), Some(OCTAL_SIZE_MAX + 1));
        let mut short = [0u8; 8];
        put_number(&mut short, 0o7_777_777);
        assert_eq!(&short, b"7777777\0");
        put_number(&mut short, 0o10_000_000);
        assert_eq!(number(&short), Some(0o10_000_000));
        assert_eq!(short[0] & 0x80, 0x80);
    }

    fn fields(name: &[u8]) -> Fields<'_> {
        Fields {
            name,
            link_name: b"",
            typeflag: b'0',
            size: 5,
            mode: 0o644,
            uid: 65_532,
            gid: 7,
            mtime: 1_700_000_000,
            format: Format::Ustar,
        }
    }

    #[test]
    fn an_encoded_header_reads_back_with_a_matching_checksum() {
        let header = Header::encode(&Fields {
            link_name: b"target",
            ..fields(b"dir/file")
        });
        assert_eq!(header.name(), b"dir/file");
        assert_eq!(header.link_name(), b"target");
        assert_eq!(header.typeflag(), b'0');
        assert_eq!(header.size(), Some(5));
        assert_eq!(header.mode(), Some(0o644));
        assert_eq!(header.uid(), Some(65_532));
        assert_eq!(header.gid(), Some(7));
        assert_eq!(header.mtime(), Some(1_700_000_000));
        assert_eq!(header.stored_checksum(), Some(header.computed_checksum()));
        assert!(header.is_ustar() && !header.is_zero());
        let gnu = Header::encode(&Fields {
            format: Format::Gnu,
            ..fields(b"f")
        });
        assert!(!gnu.is_ustar());
        assert_eq!(&gnu.as_bytes()[257..265], b"ustar  \0");
    }

    #[test]
    fn names_are_cut_at_the_field_and_a_ustar_prefix_is_joined() {
        let long = [b'n'; 150];
        assert_eq!(Header::encode(&fields(&long)).name(), [b'n'; 100]);
        let mut block = *Header::encode(&fields(b"name")).as_bytes();
        block[PREFIX.start..PREFIX.start + 6].copy_from_slice(b"prefix");
        assert_eq!(Header::from_block(block).name(), b"prefix/name");
        // A GNU header has no prefix field: those bytes are not part of its name.
        let mut gnu = *Header::encode(&Fields {
            format: Format::Gnu,
            ..fields(b"name")
        })
        .as_bytes();
        gnu[PREFIX.start..PREFIX.start + 6].copy_from_slice(b"prefix");
        assert_eq!(Header::from_block(gnu).name(), b"name");
    }
}
