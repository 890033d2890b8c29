//! The tar format's 512-byte block: a header is one block, and a body is padded with zeros to a
//! whole number of them. Shared by the transfers' tar reading and writing and by the Docker
//! driver's relay of the workspace helper's archive.

/// Bytes in one tar block.
pub const BLOCK: usize = 512;

/// How many zero bytes pad a body of `size` bytes to a whole number of blocks (fewer than
/// `BLOCK`).
pub fn padding(size: u64) -> usize {
    let block = BLOCK as u64;
    ((block - size % block) % block) as usize
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
}
