//! Where a bandwidth server is: the agent's and iperf3's default ports
//! and [`resolve`], which turns an address as configured or typed into a
//! socket address and the interface its test must be bound to.

use super::error::BandwidthError;
use crate::discovery::scoped::{self, ScopedAddr};

/// The agent's default bandwidth server port (iperf3's own is 5201).
pub const DEFAULT_PORT: u16 = 5202;
/// The port a stock iperf3 server listens on.
pub const IPERF3_PORT: u16 = 5201;

/// Resolves "host", "host:port", "[v6]:port" or "v6" with `default_port`,
/// and the scoped forms "ip%if", "ip%if:port", "[v6%if]:port" (an IP, not
/// a name: [`crate::discovery::scoped`] is their one parser).
pub fn resolve(target: &str, default_port: u16) -> Result<ScopedAddr, BandwidthError> {
    if target.contains('%') {
        return scoped::parse(target, Some(default_port))
            .map_err(|e| BandwidthError::Resolve(e.to_string()));
    }
    resolve_unscoped(target, default_port).map(ScopedAddr::from)
}

fn resolve_unscoped(
    target: &str,
    default_port: u16,
) -> Result<std::net::SocketAddr, BandwidthError> {
    use std::net::ToSocketAddrs;
    let t = target.trim();
    let with_port = if t.parse::<std::net::SocketAddr>().is_ok() {
        t.to_string()
    } else if t.parse::<std::net::IpAddr>().is_ok() {
        // A bare address; wrap v6 in brackets.
        if t.contains(':') {
            format!("[{t}]:{default_port}")
        } else {
            format!("{t}:{default_port}")
        }
    } else if t
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        t.to_string()
    } else {
        format!("{t}:{default_port}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|_| BandwidthError::Resolve(target.to_string()))?
        .next()
        .ok_or_else(|| BandwidthError::Resolve(target.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_forms() {
        let r = |s: &str| resolve(s, 5202).unwrap().to_string();
        assert_eq!(r("169.254.1.2%en2"), "169.254.1.2%en2:5202");
        assert_eq!(r("169.254.1.2%en2:9"), "169.254.1.2%en2:9");
        assert_eq!(r("[fe80::1%en2]:9"), "[fe80::1%en2]:9");
        assert_eq!(r("fe80::1%en2"), "[fe80::1%en2]:5202");
        let e = resolve("10.0.0.2%", 1).unwrap_err().to_string();
        assert!(e.contains("empty interface"), "{e}");
    }

    #[test]
    fn resolve_forms() {
        let resolve = |t: &str, p: u16| resolve(t, p).map(|a| a.addr);
        assert_eq!(
            resolve("127.0.0.1", 5201).unwrap(),
            "127.0.0.1:5201".parse().unwrap()
        );
        assert_eq!(
            resolve("127.0.0.1:9", 5201).unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(resolve("::1", 5202).unwrap(), "[::1]:5202".parse().unwrap());
        assert_eq!(
            resolve("[::1]:7", 5202).unwrap(),
            "[::1]:7".parse().unwrap()
        );
        assert_eq!(resolve("localhost:8", 1).unwrap().port(), 8);
        assert!(resolve("no.such.host.invalid", 1).is_err());
    }
}
