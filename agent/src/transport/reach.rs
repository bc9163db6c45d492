//! Whether the collector's address takes a TCP connection, for
//! `run --check-config`: an agent aimed at a closed port still runs (it
//! spools until the collector is back), so this is a warning, not an error.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long `--check-config` waits for the collector to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// `host` and `port` of an `http://` or `https://` URL (the scheme's port
/// when none is written).
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: tonic::codegen::http::Uri = url.parse().ok()?;
    let default = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), uri.port_u16().unwrap_or(default)))
}

/// None when some address of `url` accepts a TCP connection within
/// [`CONNECT_TIMEOUT`]; otherwise why not, naming the URL.
pub fn unreachable(url: &str) -> Option<String> {
    let Some((host, port)) = host_port(url) else {
        return Some(format!("collector {url}: no host and port in the URL"));
    };
    let addrs = match (host.as_str(), port).to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Some(format!("collector {url}: cannot resolve {host}: {e}")),
    };
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(_) => return None,
            Err(e) => last = Some(format!("{a}: {e}")),
        }
    }
    Some(format!(
        "collector {url}: cannot reach it ({}); records will spool until it accepts",
        last.unwrap_or_else(|| format!("{host} has no address"))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn urls_give_host_and_port() {
        assert_eq!(
            host_port("http://10.0.0.1:50071"),
            Some(("10.0.0.1".into(), 50071))
        );
        assert_eq!(
            host_port("https://c.example"),
            Some(("c.example".into(), 443))
        );
        assert_eq!(host_port("http://[::1]:9"), Some(("::1".into(), 9)));
    }

    #[test]
    fn a_listening_port_is_reachable_and_a_closed_one_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = format!("http://{}", l.local_addr().unwrap());
        assert_eq!(unreachable(&open), None);
        drop(l);
        // The port just freed: nothing listens on it now.
        let why = unreachable(&open).expect("a closed port is unreachable");
        assert!(
            why.starts_with(&format!("collector {open}: cannot reach it")),
            "{why}"
        );
    }
}
