//! Kubernetes resource quantities (`1`, `500m`, `128Mi`, `1G`) as the API server returns them,
//! read back into the numbers the effective policy reports.

/// The quantity in its base unit (cores, bytes), exactly when it is one; `None` for a form this
/// reader does not know (a caller then reports the policy as not observed).
pub fn parse(quantity: &str) -> Option<f64> {
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    if suffix == "m" {
        // Divided, not multiplied by 0.001: a correctly rounded quotient is the very number a
        // policy's `cpus` (a multiple of 0.001) parses to, so the check finds no looser cpus.
        return Some(value / 1000.0);
    }
    let scale = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(value * scale)
}

/// Bytes, as a whole number, when the quantity is one.
pub fn bytes(quantity: &str) -> Option<u64> {
    let value = parse(quantity)?;
    (value.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&value))
        .then_some(value as u64)
}

/// Cores as millicores, the form a pod asks with: exact for every `cpus` the policy allows
/// (a multiple of 0.001).
pub fn millicores(cpus: f64) -> String {
    format!("{}m", (cpus * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_the_api_server_returns() {
        assert_eq!(parse("1"), Some(1.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1500m"), Some(1.5));
        // Every millicore count reads back as the cpus it was made from.
        for millis in 1..=64_000u32 {
            let cpus: f64 = format!("{}.{:03}", millis / 1000, millis % 1000)
                .parse()
                .expect("cpus");
            assert_eq!(parse(&millicores(cpus)), Some(cpus), "{millis}m");
        }
        assert_eq!(bytes("128Mi"), Some(128 * 1024 * 1024));
        assert_eq!(bytes("134217728"), Some(134_217_728));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("64Ki"), Some(65_536));
    }

    #[test]
    fn unknown_forms_are_not_guessed() {
        for bad in ["", "m", "1e3", "1.", ".5", "12Xi", "-1", "1 Mi"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(bytes("1500m"), None);
    }

    #[test]
    fn cores_become_millicores() {
        assert_eq!(millicores(1.0), "1000m");
        assert_eq!(millicores(0.25), "250m");
        assert_eq!(millicores(1.5), "1500m");
    }
}
