//! Addresses with an interface scope: `ADDR%IF:PORT` (IPv4) and
//! `[ADDR%IF]:PORT` (IPv6), the one parser every peer and bandwidth
//! address goes through (config keys, `--peer`, `ping`, `bandwidth`).
//!
//! Why: each Thunderbolt port without a bridge has its own 169.254/16
//! address, and macOS routes 169.254/16 out of one interface only, so the
//! routing table cannot pick the cable; the scope does. A scoped address's
//! sockets are bound to the interface (`SO_BINDTODEVICE`, `IP_BOUND_IF`)
//! and its interface is the scope, never a route lookup.
//!
//! Parsing is pure; [`ScopedAddr::socket_addr`] is the one I/O step (the
//! interface index an IPv6 scope id needs), taken where the socket is made
//! so `run --check-config` accepts a scope naming a port that is not
//! plugged in yet.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Longest interface name (`IFNAMSIZ` 16 on both OSes, less the NUL).
const MAX_IFNAME: usize = 15;

/// A socket address, optionally scoped to a local interface.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopedAddr {
    /// The address (an IPv6 scope id given as a number stays in it).
    pub addr: SocketAddr,
    /// The interface its traffic must leave through.
    pub interface: Option<String>,
}

impl From<SocketAddr> for ScopedAddr {
    fn from(addr: SocketAddr) -> ScopedAddr {
        ScopedAddr {
            addr,
            interface: None,
        }
    }
}

impl std::str::FromStr for ScopedAddr {
    type Err = ScopeError;

    /// [`parse`] with the port required.
    fn from_str(s: &str) -> Result<ScopedAddr, ScopeError> {
        parse(s, None)
    }
}

impl fmt::Display for ScopedAddr {
    /// The form [`parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.interface, self.addr.ip()) {
            (None, _) => write!(f, "{}", self.addr),
            (Some(i), IpAddr::V4(ip)) => write!(f, "{ip}%{i}:{}", self.addr.port()),
            (Some(i), IpAddr::V6(ip)) => write!(f, "[{ip}%{i}]:{}", self.addr.port()),
        }
    }
}

impl ScopedAddr {
    /// The IP.
    pub fn ip(&self) -> IpAddr {
        self.addr.ip()
    }

    /// The address to connect or send to: for a scoped IPv6 address
    /// without a scope id, the interface's index fills it (a link-local
    /// destination needs one). Fails when the interface does not exist.
    pub fn socket_addr(&self) -> io::Result<SocketAddr> {
        match (&self.interface, self.addr) {
            (Some(name), SocketAddr::V6(mut v6)) if v6.scope_id() == 0 => {
                let index = nix::net::if_::if_nametoindex(name.as_str()).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("interface {name} (scope of {self}): {e}"),
                    )
                })?;
                v6.set_scope_id(index);
                Ok(SocketAddr::V6(v6))
            }
            _ => Ok(self.addr),
        }
    }
}

/// Why an address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}`: {reason}")]
pub struct ScopeError {
    /// What was given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Splits `input` into host, scope and port: `ADDR%IF:PORT`,
/// `[ADDR%IF]:PORT`, `ADDR%IF`, `[ADDR%IF]` and the unscoped forms.
/// The host is not checked here.
pub fn split(input: &str) -> Result<(&str, Option<&str>, Option<&str>), ScopeError> {
    let err = |reason: &str| ScopeError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let t = input.trim();
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(|| err("missing `]`"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| err("expected `]:PORT`"))?,
            ),
        };
        (inside, port)
    } else if t.matches(':').count() > 1 {
        // A bare IPv6 address: no port without brackets.
        (t, None)
    } else {
        match t.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (t, None),
        }
    };
    let (host, scope) = match host.split_once('%') {
        Some((h, s)) => (h, Some(check_interface(s).map_err(|r| err(&r))?)),
        None => (host, None),
    };
    Ok((host, scope, port))
}

/// An interface name as a scope: non-empty, at most 15 bytes, printable,
/// without the characters the address syntax uses.
fn check_interface(s: &str) -> Result<&str, String> {
    if s.is_empty() {
        return Err("empty interface after `%`".into());
    }
    if s.len() > MAX_IFNAME {
        return Err(format!("interface `{s}` is longer than {MAX_IFNAME} bytes"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '%' | '/' | ':' | '[' | ']'))
    {
        return Err(format!("interface `{s}` contains {c:?}"));
    }
    Ok(s)
}

/// Parses an IP address with an optional scope and port; `default_port`
/// fills a missing port (`None`: the port is required). Names are not
/// resolved here: callers that accept host names try [`split`] themselves.
pub fn parse(input: &str, default_port: Option<u16>) -> Result<ScopedAddr, ScopeError> {
    let err = |reason: String| ScopeError {
        input: input.to_string(),
        reason,
    };
    // The standard forms first: `[fe80::1%3]:862` keeps its numeric scope
    // id as before (no interface to bind to).
    if let Ok(addr) = input.trim().parse::<SocketAddr>() {
        return Ok(addr.into());
    }
    let (host, scope, port) = split(input)?;
    let ip: IpAddr = host
        .parse()
        .map_err(|e| err(format!("address `{host}`: {e}")))?;
    let port = port_of(port, default_port).map_err(err)?;
    if let (Some(id), IpAddr::V6(v6)) = (scope.and_then(|s| s.parse::<u32>().ok()), ip) {
        // `fe80::1%3` without brackets or port: a numeric scope is an
        // index, as the standard form treats it.
        return Ok(SocketAddr::V6(std::net::SocketAddrV6::new(v6, port, 0, id)).into());
    }
    Ok(ScopedAddr {
        addr: SocketAddr::new(ip, port),
        interface: scope.map(str::to_owned),
    })
}

fn port_of(port: Option<&str>, default_port: Option<u16>) -> Result<u16, String> {
    match (port, default_port) {
        (Some(p), _) => p.parse().map_err(|e| format!("port `{p}`: {e}")),
        (None, Some(d)) => Ok(d),
        (None, None) => Err("expected a port (IP:PORT, IP%IF:PORT or [IPv6%IF]:PORT)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str, port: Option<u16>) -> (String, Option<String>) {
        let a = parse(s, port).unwrap_or_else(|e| panic!("{s}: {e}"));
        (a.addr.to_string(), a.interface)
    }

    #[test]
    fn accepted_forms() {
        let none = |s: &str| (s.to_string(), None::<String>);
        let some = |s: &str, i: &str| (s.to_string(), Some(i.to_string()));
        assert_eq!(ok("10.0.0.2:862", None), none("10.0.0.2:862"));
        assert_eq!(
            ok("169.254.3.2%en2:862", None),
            some("169.254.3.2:862", "en2")
        );
        assert_eq!(ok("[fe80::1%en2]:862", None), some("[fe80::1]:862", "en2"));
        assert_eq!(ok("[::1]:7", None), none("[::1]:7"));
        assert_eq!(ok("10.0.0.2%tb0", Some(5202)), some("10.0.0.2:5202", "tb0"));
        assert_eq!(ok("fe80::1%en2", Some(862)), some("[fe80::1]:862", "en2"));
        assert_eq!(ok("[fe80::1%en2]", Some(862)), some("[fe80::1]:862", "en2"));
        assert_eq!(ok("::1", Some(9)), none("[::1]:9"));
        assert_eq!(ok(" 10.0.0.2 ", Some(9)), none("10.0.0.2:9"));
        // A numeric scope id keeps working as before: no interface.
        let n = parse("[fe80::1%3]:862", None).unwrap();
        assert_eq!(n.interface, None);
        assert!(matches!(n.addr, SocketAddr::V6(v) if v.scope_id() == 3));
        let n = parse("fe80::1%4", Some(1)).unwrap();
        assert!(matches!(n.addr, SocketAddr::V6(v) if v.scope_id() == 4));
    }

    #[test]
    fn refused_forms_say_why() {
        for (s, why) in [
            ("10.0.0.2%:862", "empty interface"),
            ("10.0.0.2%averyveryverylongname:862", "longer than 15"),
            ("10.0.0.2%e n2:862", "contains"),
            ("[fe80::1%en2:862", "missing `]`"),
            ("[fe80::1%en2]862", "expected `]:PORT`"),
            ("10.0.0.2%en2", "expected a port"),
            ("10.0.0.2%en2:99999", "port `99999`"),
            ("host%en2:862", "address `host`"),
            ("10.0.0.2%en2%en3:862", "contains '%'"),
        ] {
            let e = parse(s, None).expect_err(s).to_string();
            assert!(e.contains(why), "{s}: {e}");
            assert!(e.contains(s.trim()), "{s}: the error names the input: {e}");
        }
    }

    #[test]
    fn display_reads_back() {
        for s in [
            "10.0.0.2:862",
            "169.254.3.2%en2:862",
            "[fe80::1%en2]:862",
            "[::1]:7",
        ] {
            let a = parse(s, None).unwrap();
            assert_eq!(a.to_string(), s);
            assert_eq!(parse(&a.to_string(), None).unwrap(), a);
        }
    }

    #[test]
    fn v6_scope_id_comes_from_the_interface() {
        let lo = if cfg!(target_os = "macos") {
            "lo0"
        } else {
            "lo"
        };
        let a = parse(&format!("[fe80::1%{lo}]:862"), None).unwrap();
        let SocketAddr::V6(v6) = a.socket_addr().unwrap() else {
            panic!("v6")
        };
        assert_eq!(v6.scope_id(), nix::net::if_::if_nametoindex(lo).unwrap());
        let gone = parse("[fe80::1%bw-nosuch0]:862", None).unwrap();
        let e = gone.socket_addr().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("bw-nosuch0"), "{e}");
        // IPv4 needs no index: the bind does the work.
        let v4 = parse("10.0.0.2%bw-nosuch0:862", None).unwrap();
        assert_eq!(v4.socket_addr().unwrap(), v4.addr);
    }
}
