//! The engine's own clock. A container's state carries its times as RFC 3339 text in UTC
//! (`2026-12-02T22:50:07.188305882Z`), while the events API takes Unix seconds with an optional
//! fraction (`1796251807.188305882`). Asking the engine about a moment by its own timestamps keeps
//! the answer right on a remote engine whose clock differs from ours.

/// A moment on the engine's clock, at or after the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct EngineTime {
    seconds: u64,
    nanos: u32,
}

impl EngineTime {
    /// The moment a container state's timestamp names: `None` for anything but RFC 3339 in UTC
    /// (`Z`) with at most nine fraction digits, and for the engine's "never" (year 1).
    pub fn parse(text: &str) -> Option<EngineTime> {
        let text = text.strip_suffix('Z')?;
        let (date, time) = text.split_once('T')?;
        let (clock, fraction) = match time.split_once('.') {
            Some((clock, fraction)) => (clock, Some(fraction)),
            None => (time, None),
        };
        let [year, month, day] = numbers::<3>(date, '-', &[4, 2, 2])?;
        let [hour, minute, second] = numbers::<3>(clock, ':', &[2, 2, 2])?;
        if !(1..=12).contains(&month)
            || !(1..=days_in_month(year, month)).contains(&day)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let nanos = match fraction {
            None => 0,
            Some(digits) => nanos_of(digits)?,
        };
        let days = u64::try_from(days_since_epoch(year, month, day)).ok()?;
        Some(EngineTime {
            seconds: days * 86_400 + hour * 3_600 + minute * 60 + second,
            nanos,
        })
    }

    /// The form the events API's `since` and `until` take.
    pub fn query(self) -> String {
        format!("{}.{:09}", self.seconds, self.nanos)
    }
}

/// `N` decimal fields of exactly the given widths, separated by `separator`.
fn numbers<const N: usize>(text: &str, separator: char, widths: &[usize; N]) -> Option<[u64; N]> {
    let mut fields = text.split(separator);
    let mut values = [0; N];
    for (value, width) in values.iter_mut().zip(widths) {
        let field = fields.next()?;
        if field.len() != *width || !field.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *value = field.parse().ok()?;
    }
    fields.next().is_none().then_some(values)
}

/// Nanoseconds from the digits after the decimal point (one to nine of them).
fn nanos_of(digits: &str) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u32 = digits.parse().ok()?;
    Some(value * 10u32.pow(9 - digits.len() as u32))
}

fn is_leap(year: u64) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given civil date of the proleptic Gregorian calendar (negative
/// before the epoch), counted in 400-year eras of 146,097 days from a year that starts in March.
fn days_since_epoch(year: u64, month: u64, day: u64) -> i64 {
    let year = year as i64 - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month as i64 + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(text: &str) -> Option<String> {
        EngineTime::parse(text).map(EngineTime::query)
    }

    #[test]
    fn a_state_timestamp_becomes_unix_seconds_with_nanoseconds() {
        for (text, seconds_since_epoch) in [
            ("1970-01-01T00:00:00Z", "0.000000000"),
            ("2026-12-02T22:50:07.188305882Z", "1796251807.188305882"),
            ("2000-02-29T12:00:00.5Z", "951825600.500000000"),
            ("2024-12-31T23:59:59.000000001Z", "1735689599.000000001"),
        ] {
            assert_eq!(
                seconds(text).as_deref(),
                Some(seconds_since_epoch),
                "{text}"
            );
        }
    }

    #[test]
    fn anything_else_is_not_a_moment() {
        for text in [
            "0001-01-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-12-02T22:50:07+01:00",
            "2026-12-02T22:50:07",
            "2026-12-02 22:50:07Z",
            "2026-13-02T22:50:07Z",
            "2026-02-29T22:50:07Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T22:60:00Z",
            "2026-12-02T22:50:07.Z",
            "2026-12-02T22:50:07.1234567890Z",
            "2026-12-2T22:50:07Z",
            "+026-12-02T22:50:07Z",
            "2026-12-02T22:50:07.-1Z",
            "",
        ] {
            assert_eq!(seconds(text), None, "{text}");
        }
    }
}
