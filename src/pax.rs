//! PAX extended header records (`<length> <key>=<value>\n`), read by their length prefix, as
//! POSIX defines them: a value may hold any byte, newlines included. Only `path` and `size` are
//! kept; other keys are skipped.

/// What a PAX record set says of the next entry.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Records {
    pub path: Option<String>,
    pub size: Option<u64>,
}

/// The `path` and `size` of a PAX record set; an error names what is malformed.
pub fn parse(body: &[u8]) -> Result<Records, String> {
    let mut path = None;
    let mut size = None;
    let mut rest = body;
    while !rest.is_empty() && rest[0] != 0 {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| "a PAX record has no length".to_owned())?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&len| len > space + 1 && len <= rest.len())
            .ok_or_else(|| "a PAX record length is invalid".to_owned())?;
        let record = &rest[space + 1..len];
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Some(eq) = record.iter().position(|&b| b == b'=') {
            let (key, value) = (&record[..eq], &record[eq + 1..]);
            match key {
                b"path" => {
                    path = Some(
                        String::from_utf8(value.to_vec())
                            .map_err(|_| "a PAX path is not UTF-8".to_owned())?,
                    )
                }
                b"size" => {
                    size = Some(
                        std::str::from_utf8(value)
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .ok_or_else(|| "a PAX size is invalid".to_owned())?,
                    )
                }
                _ => {}
            }
        }
        rest = &rest[len..];
    }
    Ok(Records { path, size })
}

/// One record, its length counting itself (for tests that build PAX sets).
#[cfg(test)]
pub fn record(key: &str, value: &str) -> String {
    let body = key.len() + value.len() + 3;
    let mut length = body + 1;
    while format!("{length}").len() + body != length {
        length += 1;
    }
    format!("{length} {key}={value}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_by_their_length_not_their_newlines() {
        let name = "a\n3 size=0";
        let body = format!("{}{}", record("path", name), record("size", "600"));
        let records = parse(body.as_bytes()).expect("parsed");
        assert_eq!(records.path.as_deref(), Some(name));
        assert_eq!(records.size, Some(600));
        assert!(parse(b"99 size=1\n").is_err(), "a length past the end");
        assert!(parse(b"size=1\n").is_err(), "no length");
        assert_eq!(parse(b"").expect("empty"), Records::default());
    }
}
