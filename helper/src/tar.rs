//! Writing tar entries: ustar headers, PAX records for what does not fit them, and padding.

use std::io::Write;

pub const BLOCK: usize = 512;
/// The largest size the ustar size field holds (eleven octal digits).
const USTAR_SIZE_MAX: u64 = 0o77_777_777_777;

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

/// One ustar header block (owner 0:0, mtime 0): `name` and `link` cut at 100 bytes (a PAX
/// record before it carries the whole).
pub fn header(name: &[u8], size: u64, mode: u64, typeflag: u8, link: &[u8]) -> [u8; BLOCK] {
    let mut block = [0u8; BLOCK];
    let shown = &name[..name.len().min(100)];
    block[..shown.len()].copy_from_slice(shown);
    let link = &link[..link.len().min(100)];
    block[157..157 + link.len()].copy_from_slice(link);
    octal(&mut block[100..108], mode);
    octal(&mut block[108..116], 0);
    octal(&mut block[116..124], 0);
    octal(&mut block[124..136], size.min(USTAR_SIZE_MAX));
    octal(&mut block[136..148], 0);
    block[156] = typeflag;
    block[257..263].copy_from_slice(b"ustar\0");
    block[263..265].copy_from_slice(b"00");
    block[148..156].fill(b' ');
    let sum: u64 = block.iter().map(|&b| u64::from(b)).sum();
    octal(&mut block[148..155], sum);
    block[155] = b' ';
    block
}

/// One PAX record: its length counts itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut length = body + 1;
    while format!("{length}").len() + body != length {
        length += 1;
    }
    let mut record = format!("{length} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

/// Zero bytes that pad a body of `size` to the block size.
pub fn padding(size: u64) -> usize {
    (BLOCK - (size % BLOCK as u64) as usize) % BLOCK
}

/// One entry's header, after a PAX record when its name or size does not fit the header.
pub fn entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u64,
    typeflag: u8,
) -> std::io::Result<()> {
    linked_entry(out, name, size, mode, typeflag, b"")
}

/// `entry` with a link target (hard or symbolic links).
pub fn linked_entry(
    out: &mut impl Write,
    name: &[u8],
    size: u64,
    mode: u64,
    typeflag: u8,
    link: &[u8],
) -> std::io::Result<()> {
    let mut pax = Vec::new();
    if name.len() > 100 {
        pax.extend(pax_record("path", name));
    }
    if link.len() > 100 {
        pax.extend(pax_record("linkpath", link));
    }
    if size > USTAR_SIZE_MAX {
        pax.extend(pax_record("size", size.to_string().as_bytes()));
    }
    if !pax.is_empty() {
        out.write_all(&header(
            b"././@PaxHeader",
            pax.len() as u64,
            0o644,
            b'x',
            b"",
        ))?;
        out.write_all(&pax)?;
        out.write_all(&[0u8; BLOCK][..padding(pax.len() as u64)])?;
    }
    out.write_all(&header(name, size, mode, typeflag, link))
}
