//! The throughput a link is expected to carry, stamped into every result
//! of its tests so the collector's alerts compare against it (pure).
//!
//! Configured Gbit/s (`bandwidth.expected`, per peer, then `*`) win; else
//! `bandwidth.expected_share` of the negotiated speed of the interface the
//! peer is reached through ([`path_speed`]: a bridge's members'), read as
//! each test starts (so it follows the
//! link as it is now: a link that renegotiated down lowers its own
//! expectation, which `boltwatch_link_speed_bytes_per_second` shows);
//! else nothing, and no alert compares. Where the share is configured but
//! the interface reports no speed (a Thunderbolt netdev whose XDomain
//! gives none, a route not known yet) there is no expectation either, and
//! the scheduler says so in its log.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use super::injected::Injected;

/// How a link's expectation is decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expected {
    /// Nothing configured: no expectation.
    Nothing,
    /// `bandwidth.expected`, bits per second.
    Fixed(f64),
    /// `bandwidth.expected_share` of the negotiated link speed.
    Share(f64),
}

impl Expected {
    /// The rule for `peer`: its own `bandwidth.expected` entry, else `*`,
    /// else the share, else nothing. `configured` is in Gbit/s.
    pub fn for_peer(configured: &BTreeMap<String, f64>, share: Option<f64>, peer: &str) -> Self {
        match (configured.get(peer).or_else(|| configured.get("*")), share) {
            (Some(gbps), _) => Expected::Fixed(gbps * 1e9),
            (None, Some(s)) => Expected::Share(s),
            (None, None) => Expected::Nothing,
        }
    }

    /// Whether the link speed is needed to decide.
    pub fn needs_speed(self) -> bool {
        matches!(self, Expected::Share(_))
    }

    /// Bits per second expected of a link whose interface reports
    /// `speed_bits_per_second` (0: unknown); 0 when there is no
    /// expectation (what `BandwidthResult.expected_bits_per_second` says
    /// for "none").
    pub fn bits_per_second(self, speed_bits_per_second: u64) -> f64 {
        match self {
            Expected::Nothing => 0.0,
            Expected::Fixed(bps) => bps,
            Expected::Share(s) => s * speed_bits_per_second as f64,
        }
    }
}

/// The speed of the path through an interface reporting `own` bits per
/// second (0: unknown) whose bridge members, if it is a bridge, report
/// `members`: the interface's own speed, except for a bridge (macOS'
/// Thunderbolt Bridge, a Linux `br0` over thunderbolt-net), whose own
/// figure is not a link's: there, the one speed its members report where
/// they agree, else unknown (which member carries the peer is not known
/// here).
pub fn path_speed(own: u64, bridge: bool, members: &[u64]) -> u64 {
    if !bridge {
        return own;
    }
    let mut known = members.iter().copied().filter(|s| *s > 0);
    match known.next() {
        Some(first) if known.all(|s| s == first) => first,
        _ => 0,
    }
}

/// Reads the negotiated speed, bits per second (0: unknown), of the
/// interface that carries the path to a peer's bandwidth server (given the
/// interface the topology knows and the server's address). The reader is
/// the agent's I/O, injected; [`LinkSpeed::none`] knows no speed.
#[derive(Clone, Default, Debug)]
pub struct LinkSpeed(Injected<SpeedFn>);

type SpeedFn = dyn Fn(&str, SocketAddr) -> u64 + Send + Sync;

impl LinkSpeed {
    /// Reads with `f`.
    pub fn new(f: impl Fn(&str, SocketAddr) -> u64 + Send + Sync + 'static) -> LinkSpeed {
        LinkSpeed(Injected::new(Arc::new(f)))
    }

    /// Knows no speed.
    pub fn none() -> LinkSpeed {
        LinkSpeed(Injected::none())
    }

    /// The speed towards `addr` (blocking: sysfs reads, or tools on macOS).
    pub fn read(&self, interface: &str, addr: SocketAddr) -> u64 {
        self.0.get().map_or(0, |f| f(interface, addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_figures_win_then_the_share_then_nothing() {
        let none = BTreeMap::new();
        let star = BTreeMap::from([("*".to_string(), 40.0)]);
        let per = BTreeMap::from([("b".to_string(), 65.0)]);
        for (configured, share, peer, want) in [
            (&none, None, "b", Expected::Nothing),
            (&none, Some(0.6), "b", Expected::Share(0.6)),
            (&star, Some(0.6), "b", Expected::Fixed(40e9)),
            (&per, Some(0.6), "b", Expected::Fixed(65e9)),
            (&per, Some(0.6), "c", Expected::Share(0.6)),
            (&per, None, "c", Expected::Nothing),
        ] {
            let got = Expected::for_peer(configured, share, peer);
            assert_eq!(got, want, "{configured:?} {share:?} {peer}");
        }
    }

    #[test]
    fn a_bridge_has_its_members_speed_where_they_agree() {
        assert_eq!(path_speed(10_000_000_000, false, &[]), 10_000_000_000);
        assert_eq!(path_speed(0, false, &[40_000_000_000]), 0);
        let tb4 = 40_000_000_000;
        assert_eq!(path_speed(10_000_000_000, true, &[tb4, 0, tb4]), tb4);
        assert_eq!(path_speed(0, true, &[tb4, 20_000_000_000]), 0, "which one?");
        assert_eq!(path_speed(0, true, &[0, 0]), 0);
        assert_eq!(path_speed(0, true, &[]), 0);
    }

    #[test]
    fn a_share_of_the_speed_and_nothing_without_one() {
        // Thunderbolt 4: 40 Gbit/s negotiated.
        let s = Expected::Share(0.6);
        assert!(s.needs_speed());
        assert_eq!(s.bits_per_second(40_000_000_000), 24e9);
        assert_eq!(s.bits_per_second(0), 0.0, "unknown speed: no expectation");
        assert!(!Expected::Fixed(1e9).needs_speed());
        assert_eq!(Expected::Fixed(1e9).bits_per_second(0), 1e9);
        assert_eq!(Expected::Nothing.bits_per_second(40_000_000_000), 0.0);
    }
}
