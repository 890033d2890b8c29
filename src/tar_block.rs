//! The tar format's 512-byte block: a header is one block, and a body is padded with zeros to a
//! whole number of them. Shared by the transfers' tar reading and writing and by the Docker
//! driver's relays of the workspace helper's archives (exports and imports).

/// Bytes in one tar block.
pub const BLOCK: usize = 512;

/// How many zero bytes pad a body of `size` bytes to a whole number of blocks (fewer than
/// `BLOCK`).
pub fn padding(size: u64) -> usize {
    let block = BLOCK as u64;
    ((block - size % block) % block) as usize
}

/// A header block's size field: octal, or GNU base-256; `None` when it reads as neither.
pub fn size_field(header: &[u8]) -> Option<u64> {
    let field = &header[124..136];
    if field[0] & 0x80 != 0 {
        return field[1..]
            .iter()
            .try_fold(u64::from(field[0] & 0x7f), |value, &b| {
                value.checked_mul(256)?.checked_add(u64::from(b))
            });
    }
    let text: Vec<u8> = field
        .iter()
        .copied()
        .skip_while(|&b| b == b' ')
        .take_while(|&b| b != 0 && b != b' ')
        .collect();
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(std::str::from_utf8(&text).ok()?, 8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_fills_the_last_block_and_only_it() {
        assert_eq!(padding(0), 0);
        assert_eq!(padding(1), 511);
        assert_eq!(padding(512), 0);
        assert_eq!(padding(513), 511);
        assert_eq!(padding(1_000), 24);
        assert_eq!(padding(u64::MAX), 1);
    }

    #[test]
    fn size_fields_read_octal_and_base_256() {
        let mut header = [0u8; BLOCK];
        header[124..136].copy_from_slice(b"00000001750\0");
        assert_eq!(size_field(&header), Some(1_000));
        header[124..136].copy_from_slice(b"           \0");
        assert_eq!(size_field(&header), Some(0));
        header[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(size_field(&header), Some(258));
        header[124..136].copy_from_slice(b"0000000009\0\0");
        assert_eq!(size_field(&header), None);
    }
}
