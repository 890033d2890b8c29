//! The shape of a host name, shared by the command line's entries (`config.rs`) and the names a
//! guest's connection gives (`peek.rs`): 1 to 253 bytes of dot-separated labels, each 1 to 63
//! bytes of which `byte` admits.

pub fn well_formed(name: &str, byte: impl Fn(u8) -> bool) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .split('.')
            .all(|label| !label.is_empty() && label.len() <= 63 && label.bytes().all(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(b: u8) -> bool {
        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
    }

    #[test]
    fn labels_and_lengths_are_bounded() {
        assert!(well_formed("api.example.com", letters));
        assert!(well_formed(&"a".repeat(63), letters));
        assert!(!well_formed(&"a".repeat(64), letters));
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(long.len(), 253);
        assert!(well_formed(&long, letters));
        assert!(!well_formed(&format!("{long}e"), letters));
        for bad in ["", ".", "a..b", "a.", "A.b", "a_b.c", "a b"] {
            assert!(!well_formed(bad, letters), "{bad:?}");
        }
    }
}
