//! The hosts of `network: { kind: 'allowlist', hosts }`: each entry a DNS name (exact, or `*.`
//! and a name of at least two labels, which matches names one or more labels deeper and never
//! the name itself) with an optional `:port` (without one, 443 and 80). An entry is a string, or
//! `{ host, allowPrivate: true }` for a name that may resolve to link-local or private addresses
//! (or the host's own); the network's `allowPrivate` list (`allow_private_entries`) says the
//! same by naming listed entries, and is the form a parsed policy takes (its `hosts` all
//! strings).
//! Names are lower-cased and held in their ASCII form (a Unicode label as its `xn--` Punycode;
//! an `xn--` label must decode; full-width letters, digits and dots are read as the ASCII ones
//! clients send for them). IP literals, CIDRs, paths, `*` alone, empty labels and names over 253
//! bytes are refused, each with an issue naming the entry.

use crate::input::read::{array, boolean, object, string};
use crate::input::{IssueCode, Issues, Seg, ToValue, Value};

/// At most this many entries in one allowlist.
pub const EGRESS_HOSTS_MAX: usize = 256;
/// A name's longest form, as DNS allows (without the trailing dot).
const NAME_BYTES_MAX: usize = 253;
const LABEL_BYTES_MAX: usize = 63;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressHost {
    /// Lower-case ASCII; a wildcard entry keeps its leading `*.`.
    pub name: String,
    /// `None`: 443 and 80.
    pub port: Option<u16>,
    /// Whether the name may resolve to link-local or private addresses (or the host's own).
    pub allow_private: bool,
}

impl EgressHost {
    /// Whether `other` is the same entry: the same name and port (opt-in aside).
    pub fn same_entry(&self, other: &EgressHost) -> bool {
        self.name == other.name && self.port == other.port
    }

    /// The entry as a string: the name, and `:port` when it has one.
    pub fn rendered(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.name),
            None => self.name.clone(),
        }
    }
}

/// An entry renders as its string; whether it admits private addresses is the network's
/// `allowPrivate` list (`NetworkPolicy`'s rendering).
impl ToValue for EgressHost {
    fn to_value(&self) -> Value {
        Value::string(self.rendered())
    }
}

/// Reads the `hosts` array: between 1 and `EGRESS_HOSTS_MAX` distinct entries.
pub fn egress_hosts(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<Vec<EgressHost>> {
    let items = array(value, path, EGRESS_HOSTS_MAX, issues)?;
    if items.is_empty() {
        issues.add(
            IssueCode::InvalidValue,
            path,
            "an allowlist names at least one host (use { kind: 'isolated' } for none)",
        );
        return None;
    }
    let mut hosts: Vec<EgressHost> = Vec::with_capacity(items.len());
    let mut complete = true;
    for (index, item) in items.iter().enumerate() {
        let mut at = path.to_vec();
        at.push(Seg::Index(index));
        match entry(item, &at, issues) {
            Some(host) if hosts.iter().any(|h| h.same_entry(&host)) => {
                issues.add(
                    IssueCode::InvalidValue,
                    &at,
                    format!("{} is listed twice", host.rendered()),
                );
                complete = false;
            }
            Some(host) => hosts.push(host),
            None => complete = false,
        }
    }
    complete.then_some(hosts)
}

/// Reads the network's `allowPrivate` list: entries of `hosts` (written as there, or in any
/// form that parses to the same name and port), each once, marked in `hosts` as admitting
/// private addresses. Every bad or repeated string is an issue naming it, whether or not
/// `hosts` parsed (`None`: it did not, so no string is matched against it); so is one that
/// names no entry of `hosts`. Whether every string was good.
pub fn allow_private_entries(
    value: &Value,
    path: &[Seg],
    mut hosts: Option<&mut [EgressHost]>,
    issues: &mut Issues,
) -> bool {
    let Some(items) = array(value, path, EGRESS_HOSTS_MAX, issues) else {
        return false;
    };
    let mut seen: Vec<EgressHost> = Vec::with_capacity(items.len());
    let mut complete = true;
    for (index, item) in items.iter().enumerate() {
        let mut at = path.to_vec();
        at.push(Seg::Index(index));
        let Some((name, port)) =
            string(item, &at, 512, issues).and_then(|s| host_and_port(&s, &at, issues))
        else {
            complete = false;
            continue;
        };
        let wanted = EgressHost {
            name,
            port,
            allow_private: true,
        };
        if seen.iter().any(|h| h.same_entry(&wanted)) {
            issues.add(
                IssueCode::InvalidValue,
                &at,
                format!("{} is listed twice", wanted.rendered()),
            );
            complete = false;
            continue;
        }
        if let Some(hosts) = hosts.as_deref_mut() {
            match hosts.iter_mut().find(|h| h.same_entry(&wanted)) {
                Some(host) => host.allow_private = true,
                None => {
                    issues.add(
                        IssueCode::InvalidValue,
                        &at,
                        format!(
                            "{} is not an entry of hosts; list it there too",
                            wanted.rendered()
                        ),
                    );
                    complete = false;
                }
            }
        }
        seen.push(wanted);
    }
    complete
}

fn entry(value: &Value, path: &[Seg], issues: &mut Issues) -> Option<EgressHost> {
    match value {
        Value::Object(_) => {
            let mut f = object(value, path, issues)?;
            let host = f.required("host", issues).and_then(|v| {
                let at = f.at("host");
                string(v, &at, 512, issues).and_then(|s| host_and_port(&s, &at, issues))
            });
            let allow_private = match f.optional("allowPrivate") {
                None => Some(false),
                Some(v) => boolean(v, &f.at("allowPrivate"), issues),
            };
            f.finish(issues);
            let (name, port) = host?;
            Some(EgressHost {
                name,
                port,
                allow_private: allow_private?,
            })
        }
        _ => {
            let s = string(value, path, 512, issues)?;
            let (name, port) = host_and_port(&s, path, issues)?;
            Some(EgressHost {
                name,
                port,
                allow_private: false,
            })
        }
    }
}

fn host_and_port(s: &str, path: &[Seg], issues: &mut Issues) -> Option<(String, Option<u16>)> {
    let refuse = |issues: &mut Issues, why: String| {
        issues.add(IssueCode::InvalidValue, path, why);
        None
    };
    if s.contains("://") {
        return refuse(
            issues,
            format!("{s:?} has a scheme; give the host name only (with an optional :port)"),
        );
    }
    let is_ipv6 = |text: &str| {
        let unzoned = text
            .split_once('%')
            .map_or(text, |(address, _zone)| address);
        unzoned.parse::<std::net::Ipv6Addr>().is_ok()
    };
    if let Some((before, after)) = s.split_once('/') {
        let ipv4 = before.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        let why = if !after.is_empty()
            && after.bytes().all(|b| b.is_ascii_digit())
            && (ipv4 || is_ipv6(before))
        {
            "is an address range; an allowlist names hosts by DNS name"
        } else {
            "has a path; give the host name only (with an optional :port)"
        };
        return refuse(issues, format!("{s:?} {why}"));
    }
    if s.starts_with('[') || is_ipv6(s) {
        return refuse(
            issues,
            format!("{s:?} is an IP address; an allowlist names hosts by DNS name"),
        );
    }
    if s.matches(':').count() > 1 {
        return refuse(
            issues,
            format!("{s:?} has more than one ':'; give the host name with at most one :port"),
        );
    }
    let (name, port) = match s.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u16>() {
            Ok(p)
                if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) && !port.starts_with('0') =>
            {
                (name, Some(p))
            }
            _ => {
                return refuse(
                    issues,
                    format!("{s:?} has port {port:?}; a port is an integer from 1 to 65535"),
                )
            }
        },
        None => (s, None),
    };
    match dns_name(name) {
        Ok(name) => Some((name, port)),
        Err(why) => refuse(issues, format!("{s:?} {why}")),
    }
}

/// The name in lower-case ASCII, or why it is not one an allowlist takes.
fn dns_name(name: &str) -> Result<String, String> {
    let narrowed = narrowed(name);
    let name = narrowed.strip_suffix('.').unwrap_or(&narrowed);
    if name == "*" {
        return Err("would allow every host; list the names".into());
    }
    let (wildcard, rest) = match name.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let mut labels = Vec::new();
    for label in rest.split('.') {
        if label.is_empty() {
            return Err("has an empty label".into());
        }
        labels.push(ascii_label(label)?);
    }
    // The WHATWG URL rule: a name whose last label is a number (decimal, or 0x and hex digits)
    // is an IPv4 address to resolvers (`0x7f000001` is 127.0.0.1).
    let numeric = |l: &str| {
        l.bytes().all(|b| b.is_ascii_digit())
            || l.strip_prefix("0x")
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if labels.last().is_some_and(|l| numeric(l)) {
        return Err("is an IP address; an allowlist names hosts by DNS name".into());
    }
    if wildcard && labels.len() < 2 {
        return Err(
            "is a wildcard over a top-level domain; name at least two labels after *.".into(),
        );
    }
    let ascii = labels.join(".");
    if wildcard {
        if let Some(why) = over_public_suffixes(&ascii) {
            return Err(why);
        }
    }
    let ascii = if wildcard {
        format!("*.{ascii}")
    } else {
        ascii
    };
    if ascii.len() > NAME_BYTES_MAX {
        return Err(format!(
            "is {} bytes long in its ASCII form; a name has at most {NAME_BYTES_MAX}",
            ascii.len()
        ));
    }
    Ok(ascii)
}

/// Why a wildcard over `base` (lower-case ASCII, two labels or more) would match the hosts of
/// unrelated owners, by Mozilla's Public Suffix List (ICANN's section and the private one, as
/// the `psl` crate compiles it in): `base` is a public suffix (`co.uk`, `github.io`), or a
/// wildcard rule makes every name directly under it one (`*.kawasaki.jp`; the lookup of
/// `*.base` meets that rule, as no exception is spelled `*`). `None`: it is neither.
fn over_public_suffixes(base: &str) -> Option<String> {
    let listed = |name: &str| {
        psl::suffix(name.as_bytes())
            .is_some_and(|s| s.typ().is_some() && s.as_bytes() == name.as_bytes())
    };
    if listed(base) {
        Some(format!(
            "is a wildcard directly under the public suffix {base}, whose names belong to unrelated owners; list the names, or a wildcard under one of them (*.example.{base})"
        ))
    } else if listed(&format!("*.{base}")) {
        Some(format!(
            "is a wildcard over public suffixes (each name directly under {base} is one); list the names, or a wildcard under one of them"
        ))
    } else {
        None
    }
}

/// The name with the full-width letters, digits and hyphen and the ideographic and full-width
/// dots written as the ASCII ones clients send for them (UTS-46 maps them so: `ｅｘａｍｐｌｅ。ｃｏｍ`
/// is `example.com` to a browser or curl). Every other compatibility form stays, and is refused
/// (`unicode_label_ok`).
fn narrowed(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{3002}' | '\u{FF0E}' | '\u{FF61}' => '.',
            '\u{FF0D}' => '-',
            '\u{FF10}'..='\u{FF19}' | '\u{FF41}'..='\u{FF5A}' => {
                char::from_u32(c as u32 - 0xFEE0).unwrap_or(c)
            }
            '\u{FF21}'..='\u{FF3A}' => char::from_u32(c as u32 - 0xFEE0 + 0x20).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// One label in lower-case ASCII: letters, digits and inner hyphens, at most 63 bytes; a Unicode
/// label becomes `xn--` and its Punycode, and an `xn--` label must decode to one.
fn ascii_label(label: &str) -> Result<String, String> {
    let lower = label.to_lowercase();
    let ascii = if lower.is_ascii() {
        if let Some(encoded) = lower.strip_prefix("xn--") {
            // Canonical only: what decodes must encode back to the very same label.
            match punycode::decode(encoded) {
                Some(decoded)
                    if !decoded.is_ascii()
                        && unicode_label_ok(&decoded)
                        && decoded.to_lowercase() == decoded
                        && punycode::encode(&decoded) == encoded => {}
                _ => {
                    return Err(format!(
                        "has the label {label:?}, which is not valid Punycode"
                    ))
                }
            }
        }
        lower
    } else {
        if !unicode_label_ok(&lower) {
            return Err(format!(
                "has the label {label:?}, which is not a DNS label (write it as clients send it, or in its xn-- form)"
            ));
        }
        format!("xn--{}", punycode::encode(&lower))
    };
    let ldh = ascii
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ldh || ascii.starts_with('-') || ascii.ends_with('-') {
        return Err(format!(
            "has the label {label:?}; a label holds letters, digits and inner hyphens (a wildcard only as a leading *.)"
        ));
    }
    if ascii.len() > LABEL_BYTES_MAX {
        return Err(format!(
            "has a label of {} bytes; a label has at most {LABEL_BYTES_MAX}",
            ascii.len()
        ));
    }
    Ok(ascii)
}

/// A Unicode label this parser takes: no wildcard, space, control or invisible format character,
/// no half-width or full-width form (what `narrowed` leaves of them clients map to something
/// else), no combining mark written apart (no other UTS-46 mapping is made, so only the
/// precomposed forms clients send can ever match).
fn unicode_label_ok(label: &str) -> bool {
    !label.chars().any(|c| {
        c == '*'
            || ('\u{FF00}'..='\u{FFEF}').contains(&c)
            || c.is_whitespace()
            || c.is_control()
            || matches!(c,
                '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
                | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
                | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{0300}'..='\u{036F}')
    })
}

/// RFC 3492 Punycode, as IDNA uses it for one label.
mod punycode {
    const BASE: u32 = 36;
    const T_MIN: u32 = 1;
    const T_MAX: u32 = 26;
    const SKEW: u32 = 38;
    const DAMP: u32 = 700;
    const INITIAL_BIAS: u32 = 72;
    const INITIAL_N: u32 = 128;

    fn adapt(mut delta: u32, points: u32, first: bool) -> u32 {
        delta /= if first { DAMP } else { 2 };
        delta += delta / points;
        let mut k = 0;
        while delta > ((BASE - T_MIN) * T_MAX) / 2 {
            delta /= BASE - T_MIN;
            k += BASE;
        }
        k + (BASE - T_MIN + 1) * delta / (delta + SKEW)
    }

    fn digit(d: u32) -> char {
        // d < 36 by construction: a–z then 0–9.
        char::from(if d < 26 {
            b'a' + d as u8
        } else {
            b'0' + (d - 26) as u8
        })
    }

    fn value(c: u8) -> Option<u32> {
        match c {
            b'a'..=b'z' => Some(u32::from(c - b'a')),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 26),
            _ => None,
        }
    }

    fn threshold(k: u32, bias: u32) -> u32 {
        if k <= bias {
            T_MIN
        } else if k >= bias + T_MAX {
            T_MAX
        } else {
            k - bias
        }
    }

    pub fn encode(input: &str) -> String {
        let points: Vec<u32> = input.chars().map(u32::from).collect();
        let mut output: String = input.chars().filter(char::is_ascii).collect();
        let basic = output.len() as u32;
        let mut handled = basic;
        if basic > 0 {
            output.push('-');
        }
        let (mut n, mut delta, mut bias) = (INITIAL_N, 0u32, INITIAL_BIAS);
        while (handled as usize) < points.len() {
            let m = points
                .iter()
                .copied()
                .filter(|&p| p >= n)
                .min()
                .unwrap_or(n);
            delta = delta.saturating_add((m - n).saturating_mul(handled + 1));
            n = m;
            for &p in &points {
                if p < n {
                    delta = delta.saturating_add(1);
                }
                if p == n {
                    let mut q = delta;
                    let mut k = BASE;
                    loop {
                        let t = threshold(k, bias);
                        if q < t {
                            break;
                        }
                        output.push(digit(t + (q - t) % (BASE - t)));
                        q = (q - t) / (BASE - t);
                        k += BASE;
                    }
                    output.push(digit(q));
                    bias = adapt(delta, handled + 1, handled == basic);
                    delta = 0;
                    handled += 1;
                }
            }
            delta = delta.saturating_add(1);
            n += 1;
        }
        output
    }

    pub fn decode(input: &str) -> Option<String> {
        // A delimiter at the very start has no basic code points before it: it is then part
        // of the encoded digits (and invalid there).
        let (basic, extended) = match input.rfind('-') {
            Some(at) if at > 0 => (&input[..at], &input[at + 1..]),
            _ => ("", input),
        };
        if !basic.is_ascii() {
            return None;
        }
        let mut output: Vec<char> = basic.chars().collect();
        let (mut n, mut i, mut bias) = (INITIAL_N, 0u32, INITIAL_BIAS);
        let mut bytes = extended.bytes().peekable();
        while bytes.peek().is_some() {
            let old = i;
            let mut w = 1u32;
            let mut k = BASE;
            loop {
                let d = value(bytes.next()?)?;
                i = i.checked_add(d.checked_mul(w)?)?;
                let t = threshold(k, bias);
                if d < t {
                    break;
                }
                w = w.checked_mul(BASE - t)?;
                k += BASE;
            }
            let length = output.len() as u32 + 1;
            bias = adapt(i - old, length, old == 0);
            n = n.checked_add(i / length)?;
            i %= length;
            output.insert(i as usize, char::from_u32(n)?);
            i += 1;
        }
        Some(output.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::value::{from_json, issue_list};
    use serde_json::json;

    fn parse(hosts: serde_json::Value) -> Result<Vec<EgressHost>, Vec<crate::input::Issue>> {
        let mut issues = Issues::new();
        let parsed = egress_hosts(&from_json(hosts), &[Seg::from("hosts")], &mut issues);
        issues.finish(parsed)
    }

    #[test]
    fn names_are_lower_cased_ascii_with_optional_ports() {
        let hosts = parse(json!([
            "API.Example.com",
            "*.example.com:8443",
            "registry.npmjs.org.",
            "bücher.example",
            { "host": "db.internal:5432", "allowPrivate": true },
            "ｗｗｗ。Ｅｘａｍｐｌｅ－１．ｃｏｍ:8080"
        ]))
        .expect("parses");
        let rendered: Vec<Value> = hosts.iter().map(ToValue::to_value).collect();
        assert_eq!(
            rendered,
            vec![
                Value::string("api.example.com"),
                Value::string("*.example.com:8443"),
                Value::string("registry.npmjs.org"),
                Value::string("xn--bcher-kva.example"),
                Value::string("db.internal:5432"),
                Value::string("www.example-1.com:8080"),
            ]
        );
        assert_eq!(hosts[0].port, None);
        assert_eq!(hosts[1].port, Some(8443));
        let private: Vec<bool> = hosts.iter().map(|h| h.allow_private).collect();
        assert_eq!(private, [false, false, false, false, true, false]);
    }

    /// The paths of the issues a parse gave (it must give some).
    fn issue_paths<T: std::fmt::Debug>(result: Result<T, Vec<crate::input::Issue>>) -> Vec<String> {
        issue_list(result)
            .into_iter()
            .map(|(_, path)| path)
            .collect()
    }

    fn parse_network(network: serde_json::Value) -> Result<Value, Vec<crate::input::Issue>> {
        let mut issues = Issues::new();
        let parsed = crate::policy::network::network(
            &from_json(network),
            &[Seg::from("network")],
            &mut issues,
        );
        issues.finish(parsed).map(|n| n.to_value())
    }

    #[test]
    fn a_parsed_allowlist_is_strings_and_names_its_private_entries_apart() {
        let both_forms = parse_network(json!({
            "kind": "allowlist",
            "hosts": ["a.example", { "host": "DB.internal:5432", "allowPrivate": true }, "c.example"],
            "allowPrivate": ["C.Example."]
        }))
        .expect("parses");
        let strings =
            |list: &[&str]| Value::Array(list.iter().map(|s| Value::string(*s)).collect());
        let rendered = Value::object([
            ("kind", Value::string("allowlist")),
            (
                "hosts",
                strings(&["a.example", "db.internal:5432", "c.example"]),
            ),
            ("allowPrivate", strings(&["db.internal:5432", "c.example"])),
        ]);
        assert_eq!(both_forms, rendered);
        // The rendering parses back to itself.
        let again = parse_network(json!({
            "kind": "allowlist",
            "hosts": ["a.example", "db.internal:5432", "c.example"],
            "allowPrivate": ["db.internal:5432", "c.example"]
        }))
        .expect("parses");
        assert_eq!(again, rendered);
        let plain =
            parse_network(json!({ "kind": "allowlist", "hosts": ["a.example"] })).expect("parses");
        assert_eq!(
            plain,
            Value::object([
                ("kind", Value::string("allowlist")),
                ("hosts", strings(&["a.example"])),
            ])
        );
    }

    #[test]
    fn every_bad_private_entry_is_named() {
        let result = parse_network(json!({
            "kind": "allowlist",
            "hosts": ["a.example", "b.example:8080"],
            "allowPrivate": ["a.example", "b.example", "a.example", "10.0.0.1", 7, "b.example:8080"]
        }));
        assert_eq!(
            issue_paths(result),
            [
                "network.allowPrivate[1]",
                "network.allowPrivate[2]",
                "network.allowPrivate[3]",
                "network.allowPrivate[4]",
            ]
        );
        // A bad allowPrivate string is named even when hosts has issues of its own.
        let both = parse_network(json!({
            "kind": "allowlist",
            "hosts": ["1.2.3.4"],
            "allowPrivate": [7, "x/y", "a.example"]
        }));
        assert_eq!(
            issue_paths(both),
            [
                "network.hosts[0]",
                "network.allowPrivate[0]",
                "network.allowPrivate[1]"
            ]
        );
        // A misspelled kind is the one issue: its lists are not unknown fields too.
        let misspelled = parse_network(json!({
            "kind": "allowlst",
            "hosts": ["a.example"],
            "allowPrivate": ["a.example"]
        }));
        assert_eq!(issue_paths(misspelled), ["network.kind"]);
        let isolated = parse_network(json!({ "kind": "isolated", "allowPrivate": ["a.example"] }));
        assert_eq!(issue_paths(isolated), ["network.allowPrivate"]);
    }

    #[test]
    fn punycode_matches_rfc_3492() {
        for (unicode, ascii) in [
            ("bücher", "bcher-kva"),
            ("münchen", "mnchen-3ya"),
            ("例え", "r8jz45g"),
            ("ü", "tda"),
        ] {
            assert_eq!(punycode::encode(unicode), ascii);
            assert_eq!(punycode::decode(ascii).as_deref(), Some(unicode));
        }
        assert_eq!(punycode::decode("99999999999"), None);
    }

    #[test]
    fn every_bad_entry_is_named() {
        let long = format!("{}.com", vec!["a".repeat(63); 4].join("."));
        let result = parse(json!([
            "1.2.3.4",
            "10.0.0.0/8",
            "[::1]",
            "fe80::1",
            "*",
            "*.com",
            "a..b",
            "-a.example",
            "a_b.example",
            "example.com:0",
            "example.com:http",
            "xn--zz-.example",
            "xn---tda.example",
            "0x7f000001",
            "a.0x7f",
            "http://x.example",
            "x.example:01",
            "zero\u{200B}width.example",
            long,
            "ok.example",
            "ok.example",
            { "host": "x.example", "allowPrivate": "yes" },
            7
        ]));
        assert_eq!(
            issue_paths(result),
            [
                "hosts[0]",
                "hosts[1]",
                "hosts[2]",
                "hosts[3]",
                "hosts[4]",
                "hosts[5]",
                "hosts[6]",
                "hosts[7]",
                "hosts[8]",
                "hosts[9]",
                "hosts[10]",
                "hosts[11]",
                "hosts[12]",
                "hosts[13]",
                "hosts[14]",
                "hosts[15]",
                "hosts[16]",
                "hosts[17]",
                "hosts[18]",
                "hosts[20]",
                "hosts[21].allowPrivate",
                "hosts[22]",
            ]
        );
    }

    #[test]
    fn compatibility_forms_paths_and_extra_colons_are_refused_saying_why() {
        for (entry, why) in [
            ("a\u{FF0A}b.example", "not a DNS label"),
            ("\u{FF76}\u{FF80}.example", "not a DNS label"),
            ("example.com\u{FF1A}8080", "not a DNS label"),
            ("\u{FF0A}\u{3002}example.com", "not a DNS label"),
            ("example.com/index.html", "has a path"),
            ("example.com:80:80", "more than one ':'"),
            ("fe80::1%eth0", "is an IP address"),
            ("fe80:0:0:0:0:0:0:1%eth0", "is an IP address"),
            ("example.com::80", "more than one ':'"),
            ("1:2:3:4:5:6:7:8", "is an IP address"),
            ("10.0.0.0/8", "is an address range"),
            ("2001:db8::/32", "is an address range"),
            ("example.com:80/x", "has a path"),
        ] {
            let Err(issues) = parse(json!([entry])) else {
                panic!("{entry} parsed");
            };
            assert_eq!(issues.len(), 1, "{entry}");
            assert!(
                issues[0].message.contains(why),
                "{entry}: {}",
                issues[0].message
            );
        }
    }

    #[test]
    fn a_wildcard_directly_under_a_public_suffix_is_refused_naming_it() {
        for (entry, why) in [
            ("*.co.uk", "directly under the public suffix co.uk"),
            ("*.github.io", "directly under the public suffix github.io"),
            (
                "*.s3.amazonaws.com:443",
                "directly under the public suffix s3.amazonaws.com",
            ),
            ("*.GitHub.IO.", "directly under the public suffix github.io"),
            (
                "*.公司.cn",
                "directly under the public suffix xn--55qx5d.cn",
            ),
            ("*.bar.ck", "directly under the public suffix bar.ck"),
            (
                "*.kawasaki.jp",
                "each name directly under kawasaki.jp is one",
            ),
            (
                "*.compute.amazonaws.com",
                "each name directly under compute.amazonaws.com",
            ),
        ] {
            let Err(issues) = parse(json!(["ok.example", entry])) else {
                panic!("{entry} parsed");
            };
            assert_eq!(issues.len(), 1, "{entry}");
            assert_eq!(
                crate::input::render_path(&issues[0].path),
                "hosts[1]",
                "{entry}"
            );
            assert_eq!(issues[0].code, IssueCode::InvalidValue, "{entry}");
            assert!(
                issues[0]
                    .message
                    .starts_with(&format!("{entry:?} is a wildcard")),
                "{entry}: {}",
                issues[0].message
            );
            assert!(
                issues[0].message.contains(why),
                "{entry}: {}",
                issues[0].message
            );
        }
        // One label deeper is one owner's; so are exact names, and names the list does not know.
        let hosts = parse(json!([
            "*.example.co.uk",
            "*.example.github.io",
            "*.foo.bar.ck",
            "*.city.kawasaki.jp",
            "*.corp.internal",
            "*.wild.test",
            "github.io",
            "co.uk"
        ]))
        .expect("parses");
        assert_eq!(hosts.len(), 8);
    }

    #[test]
    fn an_allowlist_has_between_1_and_256_entries() {
        assert!(!issue_list(parse(json!([]))).is_empty());
        let many: Vec<String> = (0..257).map(|i| format!("h{i}.example")).collect();
        assert!(!issue_list(parse(json!(many))).is_empty());
        let most: Vec<String> = (0..256).map(|i| format!("h{i}.example")).collect();
        assert_eq!(parse(json!(most)).map(|h| h.len()).ok(), Some(256));
    }
}
