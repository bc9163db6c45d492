//! Whether a Thunderbolt port runs below what it can: the downshift rules,
//! pure (readings in, verdicts out; no I/O, no clock).
//!
//! A port is judged on two numbers that an asymmetric Thunderbolt 5 link
//! (3 lanes one way, 1 the other, "Bandwidth Boost") does not disturb:
//! its *lanes*, both directions added (2 + 2 = 3 + 1 = 4 on a healthy
//! link), and its *lane speed*, the slower direction's per-lane speed.
//!
//! - **Below capability**: fewer than 4 lanes, or a lane slower than the
//!   port's generation runs (Thunderbolt 1-2: 10 Gb/s, 3 and USB4/TB4:
//!   20 Gb/s, 5: 40 Gb/s). Linux sysfs says `generation` 4 for every USB4
//!   router, TB5 included, so a TB5 port is known as one only by having
//!   run 40 Gb/s lanes; the capability of a port is the better of its
//!   `generation` and what it ran this boot. The remote end's generation
//!   is not in sysfs (the XDomain has none), so "what both ends support"
//!   is this end's: a TB5 port cabled to a TB4 host, judged against
//!   20 Gb/s as sysfs says, is fine; one that ran 40 Gb/s and drops to 20
//!   is below capability.
//! - **Below this boot's best**: fewer lanes, or a slower lane, than the
//!   port negotiated earlier in this agent boot. The best is kept for the
//!   agent's life, so a port that renegotiates down and stays there stays
//!   downshifted until it comes back up or the agent restarts.
//!
//! A port with nothing negotiated (no XDomain peer: lanes or speed 0) is
//! not judged: its carrier says what happened.

use std::collections::BTreeMap;

use boltwatch_proto::v1::{Downshift, ThunderboltPort};

use super::ThunderboltLink;

/// Lanes of a healthy link, both directions added.
pub const FULL_LANES: u32 = 4;

const GBPS: u64 = 1_000_000_000;

/// Per-lane speed, bits per second, of a Thunderbolt `generation` as
/// Linux sysfs names it (1-3 Thunderbolt, 4 USB4), or as [`generation`]
/// names Thunderbolt 5 ("5"); `None` unknown.
pub fn lane_capability(generation: &str) -> Option<u64> {
    match generation {
        "1" | "2" => Some(10 * GBPS),
        "3" | "4" => Some(20 * GBPS),
        "5" => Some(40 * GBPS),
        _ => None,
    }
}

/// The generation to report: "5" once a lane ran at 40 Gb/s or more (only
/// Thunderbolt 5 gets there), else sysfs's own (`4` is USB4/TB4).
pub fn generation(sysfs_generation: &str, best_lane_bits_per_second: u64) -> String {
    if best_lane_bits_per_second >= 40 * GBPS {
        "5".to_string()
    } else {
        sysfs_generation.to_string()
    }
}

/// Lanes of `link`, both directions added.
pub fn lanes(link: &ThunderboltLink) -> u32 {
    link.rx_lanes.saturating_add(link.tx_lanes)
}

/// The slower direction's per-lane speed; a direction that reports 0 is
/// unknown and left out.
pub fn lane_speed(link: &ThunderboltLink) -> u64 {
    match (link.rx_lane_bits_per_second, link.tx_lane_bits_per_second) {
        (0, tx) => tx,
        (rx, 0) => rx,
        (rx, tx) => rx.min(tx),
    }
}

/// The best a port negotiated this boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Best {
    /// Most lanes, both directions added.
    pub lanes: u32,
    /// Fastest lane speed (slower direction), bits per second.
    pub lane_bits_per_second: u64,
}

/// The verdict on one reading, given the port's best *including* it.
pub fn judge(link: &ThunderboltLink, best: Best) -> Downshift {
    let (lanes, speed) = (lanes(link), lane_speed(link));
    if lanes == 0 || speed == 0 {
        return Downshift::Unspecified;
    }
    let generation = generation(&link.generation, best.lane_bits_per_second);
    let below_capability =
        lanes < FULL_LANES || lane_capability(&generation).is_some_and(|cap| speed < cap);
    if below_capability {
        Downshift::BelowCapability
    } else if lanes < best.lanes || speed < best.lane_bits_per_second {
        Downshift::BelowBootBest
    } else {
        Downshift::Unspecified
    }
}

#[derive(Debug, Clone, Default)]
struct Port {
    best: Best,
    last: Option<ThunderboltPort>,
}

/// Every Thunderbolt port seen this boot: its best and the state last
/// reported.
#[derive(Debug, Clone, Default)]
pub struct Fabric {
    ports: BTreeMap<String, Port>,
}

impl Fabric {
    /// Judges a reading of `link.interface`. Returns the port's state when
    /// it differs from the one last returned for that port (the first
    /// reading always does): what a link event carries.
    pub fn observe(&mut self, link: &ThunderboltLink) -> Option<ThunderboltPort> {
        let port = self.ports.entry(link.interface.clone()).or_default();
        let (lanes, speed) = (lanes(link), lane_speed(link));
        if lanes > 0 && speed > 0 {
            port.best.lanes = port.best.lanes.max(lanes);
            port.best.lane_bits_per_second = port.best.lane_bits_per_second.max(speed);
        }
        let state = ThunderboltPort {
            rx_lanes: link.rx_lanes,
            tx_lanes: link.tx_lanes,
            rx_lane_bits_per_second: link.rx_lane_bits_per_second,
            tx_lane_bits_per_second: link.tx_lane_bits_per_second,
            generation: generation(&link.generation, port.best.lane_bits_per_second),
            downshift: judge(link, port.best) as i32,
            peer_name: link.peer_name.clone().unwrap_or_default(),
            peer_uid: link.peer_uid.clone().unwrap_or_default(),
        };
        if port.last.as_ref() == Some(&state) {
            return None;
        }
        port.last = Some(state.clone());
        Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(generation: &str, lanes: (u32, u32), gbps: (u64, u64)) -> ThunderboltLink {
        ThunderboltLink {
            interface: "tb0".into(),
            rx_lanes: lanes.0,
            tx_lanes: lanes.1,
            rx_lane_bits_per_second: gbps.0 * GBPS,
            tx_lane_bits_per_second: gbps.1 * GBPS,
            generation: generation.into(),
            ..ThunderboltLink::default()
        }
    }

    fn verdict(f: &mut Fabric, l: &ThunderboltLink) -> Option<Downshift> {
        f.observe(l)
            .map(|p| Downshift::try_from(p.downshift).unwrap())
    }

    #[test]
    fn healthy_links_are_not_downshifted() {
        for (why, l) in [
            ("TB3 2x20", link("3", (2, 2), (20, 20))),
            ("TB4 2x20", link("4", (2, 2), (20, 20))),
            ("TB5 2x40", link("4", (2, 2), (40, 40))),
            ("TB5 asymmetric 120/40", link("4", (3, 1), (40, 40))),
            ("TB1 2x10", link("1", (2, 2), (10, 10))),
        ] {
            let mut f = Fabric::default();
            assert_eq!(verdict(&mut f, &l), Some(Downshift::Unspecified), "{why}");
        }
    }

    #[test]
    fn one_lane_or_a_slow_lane_is_below_capability() {
        for (why, l) in [
            ("TB4 one lane", link("4", (1, 1), (20, 20))),
            ("TB4 at 10 Gb/s lanes", link("4", (2, 2), (10, 10))),
            ("TB3 slow transmit", link("3", (2, 2), (20, 10))),
        ] {
            let mut f = Fabric::default();
            assert_eq!(
                verdict(&mut f, &l),
                Some(Downshift::BelowCapability),
                "{why}"
            );
        }
    }

    #[test]
    fn a_tb5_port_that_drops_to_20_gbps_is_below_capability_and_reports_tb5() {
        let mut f = Fabric::default();
        let fast = f.observe(&link("4", (2, 2), (40, 40))).unwrap();
        assert_eq!(fast.generation, "5");
        let slow = f.observe(&link("4", (2, 2), (20, 20))).unwrap();
        assert_eq!(slow.downshift, Downshift::BelowCapability as i32);
        assert_eq!(slow.generation, "5", "the port showed it is TB5");
        // Back at full speed: no longer downshifted.
        let back = f.observe(&link("4", (2, 2), (40, 40))).unwrap();
        assert_eq!(back.downshift, Downshift::Unspecified as i32);
    }

    #[test]
    fn unknown_generation_is_judged_against_the_boots_best() {
        let mut f = Fabric::default();
        assert_eq!(
            verdict(&mut f, &link("", (2, 2), (20, 20))),
            Some(Downshift::Unspecified)
        );
        assert_eq!(
            verdict(&mut f, &link("", (2, 2), (10, 10))),
            Some(Downshift::BelowBootBest)
        );
        // A new maximum is the new best.
        assert_eq!(
            verdict(&mut f, &link("", (2, 2), (40, 40))),
            Some(Downshift::Unspecified)
        );
    }

    #[test]
    fn only_changes_are_reported_and_ports_are_apart() {
        let mut f = Fabric::default();
        let l = link("4", (2, 2), (20, 20));
        assert!(f.observe(&l).is_some(), "first sighting");
        assert!(f.observe(&l).is_none(), "same again");
        let other = ThunderboltLink {
            interface: "tb1".into(),
            ..link("4", (1, 1), (20, 20))
        };
        assert_eq!(verdict(&mut f, &other), Some(Downshift::BelowCapability));
        assert!(f.observe(&l).is_none(), "tb0 untouched by tb1");
    }

    #[test]
    fn a_port_without_a_peer_is_not_judged_and_keeps_its_best() {
        let mut f = Fabric::default();
        f.observe(&link("4", (2, 2), (20, 20))).unwrap();
        let gone = f.observe(&link("4", (0, 0), (0, 0))).unwrap();
        assert_eq!(gone.downshift, Downshift::Unspecified as i32);
        assert_eq!(
            verdict(&mut f, &link("4", (1, 1), (20, 20))),
            Some(Downshift::BelowCapability)
        );
    }
}
