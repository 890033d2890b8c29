//! PAX extended header records (`<length> <key>=<value>\n`), read by their length prefix, as
//! POSIX defines them: a value may hold any byte, newlines included. Only `path`, `linkpath`
//! and `size` are kept; other keys are skipped.

/// What a PAX record set says of the next entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Records {
    pub path: Option<String>,
    pub link_path: Option<Vec<u8>>,
    pub size: Option<u64>,
}

/// What is malformed in a PAX record set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    NoLength,
    InvalidLength,
    PathNotUtf8,
    InvalidSize,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::NoLength => "a PAX record has no length",
            Error::InvalidLength => "a PAX record length is invalid",
            Error::PathNotUtf8 => "a PAX path is not UTF-8",
            Error::InvalidSize => "a PAX size is invalid",
        })
    }
}

impl std::error::Error for Error {}

/// The `path`, `linkpath` and `size` of a PAX record set (a later record overrides an earlier
/// one); reading stops at a NUL where a record would begin.
pub fn parse(body: &[u8]) -> Result<Records, Error> {
    let mut records = Records::default();
    let mut rest = body;
    while !rest.is_empty() && rest[0] != 0 {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or(Error::NoLength)?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&len| len > space + 1 && len <= rest.len())
            .ok_or(Error::InvalidLength)?;
        let record = &rest[space + 1..len];
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Some(eq) = record.iter().position(|&b| b == b'=') {
            let (key, value) = (&record[..eq], &record[eq + 1..]);
            match key {
                b"path" => {
                    records.path =
                        Some(String::from_utf8(value.to_vec()).map_err(|_| Error::PathNotUtf8)?)
                }
                b"linkpath" => records.link_path = Some(value.to_vec()),
                b"size" => {
                    records.size = Some(
                        std::str::from_utf8(value)
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .ok_or(Error::InvalidSize)?,
                    )
                }
                _ => {}
            }
        }
        rest = &rest[len..];
    }
    Ok(records)
}

/// One record: its length counts itself.
pub fn record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut length = body + 1;
    while length.to_string().len() + body != length {
        length += 1;
    }
    let mut record = format!("{length} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_by_their_length_not_their_newlines() {
        let name = "a\n3 size=0";
        let body = [record("path", name.as_bytes()), record("size", b"600")].concat();
        let records = parse(&body).expect("parsed");
        assert_eq!(records.path.as_deref(), Some(name));
        assert_eq!(records.size, Some(600));
        assert_eq!(
            parse(b"99 size=1\n"),
            Err(Error::InvalidLength),
            "past the end"
        );
        assert_eq!(parse(b"size=1\n"), Err(Error::NoLength));
        assert_eq!(parse(b"").expect("empty"), Records::default());
    }

    #[test]
    fn malformed_values_are_named_and_other_keys_skipped() {
        assert_eq!(parse(&record("size", b"-1")), Err(Error::InvalidSize));
        assert_eq!(parse(&record("path", b"\xff")), Err(Error::PathNotUtf8));
        assert_eq!(
            Error::PathNotUtf8.to_string(),
            "a PAX path is not UTF-8",
            "the message the host's reader reports"
        );
        let body = [
            record("mtime", b"1700000000.5"),
            record("linkpath", b"\xfftarget"),
            record("path", b"first"),
            record("path", b"second"),
        ]
        .concat();
        let mut padded = body.clone();
        padded.resize(512, 0);
        let records = parse(&padded).expect("parsed up to the NULs");
        assert_eq!(records.path.as_deref(), Some("second"));
        assert_eq!(records.link_path.as_deref(), Some(&b"\xfftarget"[..]));
        assert_eq!(records.size, None);
    }

    #[test]
    fn a_record_length_counts_its_own_digits() {
        assert_eq!(record("size", b"600"), b"12 size=600\n");
        // 99 bytes without the length's own digits: three of them, not two.
        let value = vec![b'v'; 92];
        let long = record("path", &value);
        assert_eq!(long.len(), 102);
        assert!(long.starts_with(b"102 path="));
        assert_eq!(
            parse(&long).expect("parsed").path.map(String::into_bytes),
            Some(value)
        );
    }
}
