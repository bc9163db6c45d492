//! Parsers for the values inside keys (`NAME=ADDR`, `NAME=PORT`, URLs) and
//! the token file.

use std::path::Path;

use boltwatch_common::config::ConfigError;

use super::model::{PeerConfig, ServiceConfig};
use crate::discovery::scoped::{self, ScopedAddr};

/// Reads a bearer token file: the first non-empty line, trimmed. An empty
/// file or a token with characters not allowed in a header is an error.
pub fn read_token(path: &Path) -> Result<String, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_token(&path.display().to_string(), &text)
}

/// The token in a token file's text (see [`read_token`]).
pub fn parse_token(file: &str, text: &str) -> Result<String, ConfigError> {
    let invalid = |line: usize, message: &str| ConfigError::Invalid {
        file: file.to_string(),
        line,
        key: "token".into(),
        message: message.into(),
    };
    let (i, token) = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .find(|(_, l)| !l.is_empty())
        .ok_or_else(|| invalid(1, "the token file is empty"))?;
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(i, "token must be printable ASCII without spaces"));
    }
    Ok(token.to_string())
}

/// `NAME=PORT`.
pub(super) fn service(s: &str) -> Result<ServiceConfig, String> {
    let (name, port) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=PORT"))?;
    let port: u16 = port
        .trim()
        .parse()
        .map_err(|e| format!("`{s}`: port: {e}"))?;
    if name.trim().is_empty() || port == 0 {
        return Err(format!(
            "`{s}`: expected NAME=PORT with a non-empty name and port 1..65535"
        ));
    }
    Ok(ServiceConfig {
        name: name.trim().to_string(),
        port,
    })
}

/// `NAME=IP:PORT`, `NAME=IP%IF:PORT` or `NAME=[IPv6%IF]:PORT`.
pub(super) fn peer(s: &str) -> Result<PeerConfig, String> {
    let (name, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=ADDR:PORT"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("`{s}`: empty peer name"));
    }
    let a = scoped_addr(addr).map_err(|e| format!("`{name}`: {e}"))?;
    Ok(PeerConfig {
        name: name.to_string(),
        addr: a.addr,
        interface: a.interface,
    })
}

/// An address with a port and an optional interface scope (the forms of
/// [`crate::discovery::scoped`]).
pub(super) fn scoped_addr(s: &str) -> Result<ScopedAddr, String> {
    scoped::parse(s.trim(), None)
        .map_err(|e| format!("{e} (expected IP:PORT, IP%IF:PORT or [IPv6%IF]:PORT)"))
}

/// A CIDR, e.g. `10.0.0.0/24`.
pub(super) fn cidr(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse()
        .map_err(|e| format!("`{s}`: {e} (expected a CIDR, e.g. 10.0.0.0/24)"))
}

/// A collector URL.
pub(super) fn url(s: &str) -> Result<String, String> {
    if s.starts_with("http://") || s.starts_with("https://") {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}`: expected a URL such as http://10.0.0.1:50071"
        ))
    }
}

/// The fast probing profile's interval: 100 probes a second per peer.
pub const FAST_PROBE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// A `probe_interval`: a duration from 1 ms to 60 s, or `fast`
/// ([`FAST_PROBE_INTERVAL`]).
pub fn probe_interval(v: &boltwatch_common::config::Value) -> Result<std::time::Duration, String> {
    if v.str().is_ok_and(|s| s.trim() == "fast") {
        return Ok(FAST_PROBE_INTERVAL);
    }
    v.duration(std::time::Duration::from_millis(1)..=std::time::Duration::from_secs(60))
}
