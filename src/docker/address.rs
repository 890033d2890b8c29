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
    let has_port = match host_port.rfind(']') {
        Some(bracket) => host_port[bracket..].contains(':'),
        None => host_port.contains(':'),
    };
    if has_port {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
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
}
