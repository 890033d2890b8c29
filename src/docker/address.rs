//! Engine addresses as the docker CLI reads them: `tcp://host` without a port means the engine's
//! conventional port, 2375 in plain HTTP and 2376 over TLS (not HTTP's 80 or HTTPS's 443).

pub const PLAIN_PORT: u16 = 2375;
pub const TLS_PORT: u16 = 2376;

/// `host:port` of a `tcp://`, `http://` or `https://` URL, without any path, with `default_port`
/// added when the URL names none. IPv6 literals keep their brackets.
pub fn authority(url: &str, default_port: u16) -> String {
    let rest = ["tcp://", "http://", "https://"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme))
        .unwrap_or(url);
    let host_port = rest.split('/').next().unwrap_or(rest);
    if port_colon(host_port).is_some() {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    }
}

/// The host of `host:port` (as `authority` gives it), without an IPv6 literal's brackets.
pub fn host(authority: &str) -> &str {
    let host = match port_colon(authority) {
        Some(colon) => &authority[..colon],
        None => authority,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Where the `:port` of `host_port` begins, if it names a port (a colon inside an IPv6
/// literal's brackets is not one).
fn port_colon(host_port: &str) -> Option<usize> {
    let colon = host_port.rfind(':')?;
    match host_port.rfind(']') {
        Some(bracket) if bracket > colon => None,
        _ => Some(colon),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_given_port_and_adds_the_conventional_one() {
        assert_eq!(authority("tcp://10.0.0.1:2376", TLS_PORT), "10.0.0.1:2376");
        assert_eq!(
            authority("https://engine.example:4000/", TLS_PORT),
            "engine.example:4000"
        );
        assert_eq!(
            authority("tcp://engine.example", TLS_PORT),
            "engine.example:2376"
        );
        assert_eq!(
            authority("tcp://engine.example/", PLAIN_PORT),
            "engine.example:2375"
        );
        assert_eq!(authority("http://[::1]", PLAIN_PORT), "[::1]:2375");
        assert_eq!(
            authority("tcp://[fd00::2]:9999", TLS_PORT),
            "[fd00::2]:9999"
        );
    }

    #[test]
    fn the_host_of_an_authority() {
        assert_eq!(host("engine.example:2376"), "engine.example");
        assert_eq!(host("10.0.0.1:2376"), "10.0.0.1");
        assert_eq!(host("[fd00::2]:9999"), "fd00::2");
        assert_eq!(host("[::1]"), "::1");
    }
}
