//! Whom the bandwidth server serves and what it agrees to run; pure.
//!
//! The port is unauthenticated, so the rules are about limiting harm:
//! only configured peers (and addresses an operator allows by CIDR) get a
//! test at all; a test's length, omit included, stays within what scheduled
//! tests need; the rate a client may ask the server to send at is capped,
//! and an unlimited UDP rate is refused (TCP is held back by congestion
//! control, UDP by nothing).

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use crate::bandwidth::iperf3::{Params, DEFAULT_TCP_BLKSIZE};

/// Largest parallel count accepted (iperf3 caps at 128 too).
pub const MAX_STREAMS: u64 = 128;
/// Largest TCP block accepted.
pub const MAX_BLOCK: u64 = 16 * 1024 * 1024;
/// Largest UDP datagram payload over IPv4.
pub const MAX_UDP_BLOCK: u64 = 65_507;

/// Who may run a test.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// Configured peers' addresses: always served.
    pub peers: Vec<IpAddr>,
    /// Anyone else inside one of these networks is served too.
    pub allow: Vec<IpNet>,
    /// Clients on loopback are served (a loopback source cannot come from
    /// another host; the local lab and `iperf3 -c 127.0.0.1` use it).
    pub loopback: bool,
}

impl Admission {
    /// True when a client at `ip` may run a test.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        (self.loopback && ip.is_loopback())
            || self.peers.iter().any(|p| p.to_canonical() == ip)
            || self.allow.iter().any(|n| n.contains(&ip))
    }
}

/// What a remote client may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest test, `time` plus `omit`.
    pub max_duration: Duration,
    /// Highest total rate (all streams, both directions) a client may ask
    /// for, bits/s.
    pub max_rate_bps: u64,
}

/// A test the server agreed to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// Measured part of the test.
    pub time: Duration,
    /// Omitted part before it.
    pub omit: Duration,
    /// Block (write) size.
    pub block: usize,
    /// Per-stream rate, bits/s (0: unpaced TCP).
    pub rate_bps: u64,
}

/// Checks `params` against `limits`; the error is what the client is told.
pub fn accept(
    params: &Params,
    limits: &Limits,
    default_udp_block: usize,
) -> Result<Accepted, &'static str> {
    let udp = params.is_udp();
    if params.parallel == 0 || params.parallel > MAX_STREAMS {
        return Err("bad parallel count");
    }
    let max_block = if udp { MAX_UDP_BLOCK } else { MAX_BLOCK };
    if params.len > max_block {
        return Err("block too large");
    }
    let max = limits.max_duration.as_secs();
    // `omit` runs before the measured time and holds the server as long:
    // it counts against the same cap (saturating: the values are remote).
    if params.omit >= max || params.time > max - params.omit {
        return Err("test too long");
    }
    let time = if params.time == 0 {
        // Byte- or block-count tests: bounded by the longest test instead.
        max - params.omit
    } else {
        params.time
    };
    let rate = params.bandwidth.unwrap_or(0);
    if udp && rate == 0 {
        return Err("unlimited UDP rate");
    }
    let directions = if params.bidirectional == Some(true) {
        2
    } else {
        1
    };
    let total = u128::from(rate) * u128::from(params.parallel) * directions;
    if total > u128::from(limits.max_rate_bps) {
        return Err("rate above the server's cap");
    }
    let block = match params.len {
        0 if udp => default_udp_block,
        0 => DEFAULT_TCP_BLKSIZE,
        n => n as usize,
    };
    Ok(Accepted {
        time: Duration::from_secs(time),
        omit: Duration::from_secs(params.omit),
        block,
        rate_bps: rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_duration: Duration::from_secs(60),
            max_rate_bps: 1_000_000_000,
        }
    }

    fn tcp(time: u64, omit: u64) -> Params {
        Params {
            tcp: Some(true),
            time,
            omit,
            parallel: 1,
            ..Default::default()
        }
    }

    #[test]
    fn peers_allow_list_and_loopback() {
        let a = Admission {
            peers: vec!["10.0.0.2".parse().unwrap()],
            allow: vec![
                "192.168.1.0/24".parse().unwrap(),
                "fd00::/8".parse().unwrap(),
            ],
            loopback: true,
        };
        for ok in [
            "10.0.0.2",
            "::ffff:10.0.0.2",
            "192.168.1.77",
            "fd12::1",
            "127.0.0.5",
            "::1",
        ] {
            assert!(a.admits(ok.parse().unwrap()), "{ok}");
        }
        for no in ["10.0.0.3", "192.168.2.1", "fe80::1", "8.8.8.8"] {
            assert!(!a.admits(no.parse().unwrap()), "{no}");
        }
        let strict = Admission {
            loopback: false,
            ..a
        };
        assert!(!strict.admits("127.0.0.1".parse().unwrap()));
        assert!(!Admission::default().admits("10.0.0.2".parse().unwrap()));
    }

    #[test]
    fn omit_counts_against_the_duration_cap() {
        assert!(accept(&tcp(10, 0), &limits(), 1460).is_ok());
        assert!(accept(&tcp(50, 9), &limits(), 1460).is_ok());
        assert_eq!(
            accept(&tcp(1, 100_000), &limits(), 1460),
            Err("test too long")
        );
        assert_eq!(accept(&tcp(1, 60), &limits(), 1460), Err("test too long"));
        assert_eq!(accept(&tcp(55, 6), &limits(), 1460), Err("test too long"));
        assert_eq!(accept(&tcp(61, 0), &limits(), 1460), Err("test too long"));
        assert_eq!(
            accept(&tcp(1, u64::MAX), &limits(), 1460),
            Err("test too long")
        );
        assert_eq!(
            accept(&tcp(u64::MAX, 1), &limits(), 1460),
            Err("test too long")
        );
        // A byte-count test gets what the omit leaves of the cap.
        let a = accept(&tcp(0, 10), &limits(), 1460).unwrap();
        assert_eq!(
            (a.time, a.omit),
            (Duration::from_secs(50), Duration::from_secs(10))
        );
    }

    #[test]
    fn rate_is_capped_in_total_and_udp_must_name_one() {
        let mut p = tcp(10, 0);
        p.bandwidth = Some(600_000_000);
        assert!(accept(&p, &limits(), 1460).is_ok());
        p.parallel = 2;
        assert_eq!(
            accept(&p, &limits(), 1460),
            Err("rate above the server's cap")
        );
        p.parallel = 1;
        p.bidirectional = Some(true);
        assert_eq!(
            accept(&p, &limits(), 1460),
            Err("rate above the server's cap")
        );
        p.bandwidth = Some(u64::MAX);
        p.parallel = MAX_STREAMS;
        assert_eq!(
            accept(&p, &limits(), 1460),
            Err("rate above the server's cap")
        );
        let mut u = tcp(10, 0);
        u.tcp = None;
        u.udp = Some(true);
        assert_eq!(accept(&u, &limits(), 1460), Err("unlimited UDP rate"));
        u.bandwidth = Some(1_000_000);
        let a = accept(&u, &limits(), 1460).unwrap();
        assert_eq!((a.block, a.rate_bps), (1460, 1_000_000));
    }

    #[test]
    fn streams_and_blocks_are_bounded() {
        let mut p = tcp(10, 0);
        p.parallel = 0;
        assert_eq!(accept(&p, &limits(), 1460), Err("bad parallel count"));
        p.parallel = MAX_STREAMS + 1;
        assert_eq!(accept(&p, &limits(), 1460), Err("bad parallel count"));
        p.parallel = 1;
        p.len = MAX_BLOCK + 1;
        assert_eq!(accept(&p, &limits(), 1460), Err("block too large"));
    }
}
