//! Which observations of a link become records: the dedupe and
//! reconciliation rules shared by every OS and by events and polls alike.
//! Pure; the watchers feed it what the kernel or a poll said.
//!
//! An observation is reported when carrier or admin state changed, or when
//! the kernel's carrier counters moved without a visible change (a flap too
//! short for any event or poll: the kernel coalesces a down and up less
//! than a second apart into one `RTM_NEWLINK`). Repeats (MTU changes,
//! statistics, operstate catching up) are dropped. An observation whose
//! counters are older than what is already known is stale (a queued event
//! that a poll overtook) and is dropped too, so a poll racing the event
//! socket never reports a change twice or out of order.
//!
//! An observation whose carrier is unknown (macOS `SIOCGIFMEDIA` failed)
//! keeps the carrier last known: a poll that cannot read the media status
//! never undoes a `KEV_DL_LINK_OFF`, and is never read as carrier up. An
//! interface first seen with an unknown carrier is not reported until its
//! carrier is known (or it is admin down, which means no carrier).

use std::collections::HashMap;

use boltwatch_proto::v1::{LinkEvent, LinkEventSource};

use super::state::{LinkChange, LinkState};

/// What an accepted observation means.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The record to emit.
    pub event: LinkEvent,
    /// What the outage ledger needs to know.
    pub change: LinkChange,
}

/// Last known state of every interface seen.
#[derive(Debug, Default)]
pub struct Tracker {
    known: HashMap<String, LinkState>,
}

impl Tracker {
    /// An empty tracker: the first observation of each interface is reported.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// The last accepted state of `interface`.
    pub fn get(&self, interface: &str) -> Option<&LinkState> {
        self.known.get(interface)
    }

    /// Forgets `interface` (it disappeared); its next sighting is reported.
    pub fn forget(&mut self, interface: &str) {
        self.known.remove(interface);
    }

    /// Feeds one observation of `interface` made at `at_unix_ns`; returns
    /// the record to emit, if any.
    pub fn observe(
        &mut self,
        interface: &str,
        bridge: &str,
        state: LinkState,
        source: LinkEventSource,
        at_unix_ns: u64,
    ) -> Option<Accepted> {
        let mut state = state;
        let prev = self.known.get(interface);
        state.carrier = match (state.carrier, prev) {
            _ if !state.admin_up => Some(false),
            (Some(c), _) => Some(c),
            (None, Some(p)) => p.carrier,
            (None, None) => return None,
        };
        let (carrier_changed, missed) = match prev {
            None => (false, 0),
            Some(p) => {
                if state.counter_sum() < p.counter_sum() {
                    return None;
                }
                let changed = state.carrier != p.carrier || state.admin_up != p.admin_up;
                let counters_moved = state.counter_sum() != p.counter_sum();
                if !changed && !counters_moved {
                    return None;
                }
                // Each visible carrier transition accounts for one count; the
                // rest are down transitions nobody saw.
                let downs = state.carrier_down_count - p.carrier_down_count;
                let seen_down = u64::from(p.carrier == Some(true) && state.carrier == Some(false));
                (state.carrier != p.carrier, downs.saturating_sub(seen_down))
            }
        };
        let first = prev.is_none();
        let carrier = state.carrier == Some(true);
        let event = LinkEvent {
            interface: interface.to_owned(),
            carrier,
            admin_up: state.admin_up,
            oper_state: state.oper_state.clone(),
            carrier_up_count: state.carrier_up_count,
            carrier_down_count: state.carrier_down_count,
            source: source as i32,
            bridge: bridge.to_owned(),
            thunderbolt: None,
            bridge_loop: None,
        };
        let change = LinkChange {
            interface: interface.to_owned(),
            at_unix_ns,
            carrier,
            carrier_changed: carrier_changed && !first,
            missed_flaps: missed,
            source,
        };
        self.known.insert(interface.to_owned(), state);
        Some(Accepted { event, change })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(carrier: bool, admin: bool, up: u64, down: u64) -> LinkState {
        LinkState {
            carrier: Some(carrier),
            admin_up: admin,
            oper_state: if carrier { "up" } else { "down" }.into(),
            carrier_up_count: up,
            carrier_down_count: down,
        }
    }

    const NL: LinkEventSource = LinkEventSource::Netlink;

    #[test]
    fn first_sighting_is_reported_without_a_change() {
        let mut t = Tracker::new();
        let a = t
            .observe("tb0", "", st(true, true, 1, 0), LinkEventSource::Startup, 5)
            .unwrap();
        assert_eq!(a.event.source, LinkEventSource::Startup as i32);
        assert!(!a.change.carrier_changed);
        assert_eq!(a.change.missed_flaps, 0);
    }

    #[test]
    fn repeats_are_dropped_and_changes_reported() {
        let mut t = Tracker::new();
        t.observe("tb0", "", st(true, true, 1, 0), NL, 1).unwrap();
        assert!(t.observe("tb0", "", st(true, true, 1, 0), NL, 2).is_none());
        let down = t.observe("tb0", "", st(false, true, 1, 1), NL, 3).unwrap();
        assert!(down.change.carrier_changed && !down.change.carrier);
        assert_eq!(down.change.missed_flaps, 0);
        assert_eq!(down.event.carrier_down_count, 1);
        assert!(t.observe("tb0", "", st(false, true, 1, 1), NL, 4).is_none());
        let up = t.observe("tb0", "", st(true, true, 2, 1), NL, 5).unwrap();
        assert!(up.change.carrier_changed && up.change.carrier);
    }

    #[test]
    fn admin_change_is_reported() {
        let mut t = Tracker::new();
        t.observe("tb0", "", st(false, false, 0, 0), NL, 1).unwrap();
        let a = t.observe("tb0", "", st(false, true, 0, 0), NL, 2).unwrap();
        assert!(a.event.admin_up);
        assert!(!a.change.carrier_changed);
    }

    #[test]
    fn coalesced_flap_is_reported_through_counters() {
        let mut t = Tracker::new();
        t.observe("tb0", "br0", st(true, true, 2, 2), NL, 1)
            .unwrap();
        let a = t
            .observe("tb0", "br0", st(true, true, 5, 5), LinkEventSource::Poll, 2)
            .unwrap();
        assert_eq!(a.change.missed_flaps, 3);
        assert!(!a.change.carrier_changed);
        assert_eq!(a.event.bridge, "br0");
        assert_eq!(a.event.source, LinkEventSource::Poll as i32);
    }

    #[test]
    fn missed_flaps_beside_a_seen_down() {
        let mut t = Tracker::new();
        t.observe("tb0", "", st(true, true, 1, 1), NL, 1).unwrap();
        // Two downs counted, one of them is the visible transition.
        let a = t.observe("tb0", "", st(false, true, 2, 3), NL, 2).unwrap();
        assert_eq!(a.change.missed_flaps, 1);
    }

    #[test]
    fn stale_observation_is_dropped() {
        let mut t = Tracker::new();
        t.observe("tb0", "", st(true, true, 1, 0), NL, 1).unwrap();
        // A poll sees the flap first ...
        t.observe("tb0", "", st(true, true, 2, 1), LinkEventSource::Poll, 2)
            .unwrap();
        // ... then the queued netlink messages of that flap arrive.
        assert!(t.observe("tb0", "", st(false, true, 1, 1), NL, 3).is_none());
        assert!(t.observe("tb0", "", st(true, true, 2, 1), NL, 4).is_none());
        assert_eq!(t.get("tb0").unwrap().carrier_up_count, 2);
    }

    #[test]
    fn forget_makes_the_next_sighting_new() {
        let mut t = Tracker::new();
        t.observe("tb0", "", st(true, true, 1, 0), NL, 1).unwrap();
        t.forget("tb0");
        let a = t.observe("tb0", "", st(true, true, 0, 0), NL, 2).unwrap();
        assert!(!a.change.carrier_changed);
    }

    /// macOS: a poll whose `SIOCGIFMEDIA` failed (no media status, so
    /// carrier unknown, never "up" from `IFF_RUNNING`).
    fn unknown_media(admin: bool) -> LinkState {
        LinkState {
            carrier: None,
            admin_up: admin,
            oper_state: "unknown".into(),
            carrier_up_count: 0,
            carrier_down_count: 0,
        }
    }

    #[test]
    fn link_off_then_polls_with_unknown_media_stays_down() {
        // The kernel event as the macOS watcher receives it.
        let bytes = crate::link::fixtures::read("macos/kev/link_off_en2.bin");
        let ev = super::super::kev::parse(&bytes).unwrap().remove(0);
        let carrier = super::super::kev::announced_carrier(ev.kind);
        assert_eq!(carrier, Some(Some(false)));
        let mut t = Tracker::new();
        let mac = |c: bool| LinkState {
            carrier: Some(c),
            ..unknown_media(true)
        };
        let ke = LinkEventSource::KernelEvent;
        let poll = LinkEventSource::Poll;
        t.observe(&ev.interface, "", mac(true), LinkEventSource::Startup, 1)
            .unwrap();
        let down = t.observe(&ev.interface, "", mac(false), ke, 2).unwrap();
        assert!(down.change.carrier_changed && !down.change.carrier);
        for at in 3..10 {
            assert!(
                t.observe(&ev.interface, "", unknown_media(true), poll, at)
                    .is_none(),
                "a poll that cannot read the media status changed the state"
            );
        }
        assert_eq!(t.get("en2").unwrap().carrier, Some(false));
        // A real media reading of "up" (or KEV_DL_LINK_ON) ends it.
        let up = t.observe("en2", "", mac(true), poll, 10).unwrap();
        assert!(up.change.carrier_changed && up.change.carrier);
    }

    #[test]
    fn unknown_carrier_is_not_reported_until_known() {
        let mut t = Tracker::new();
        let poll = LinkEventSource::Poll;
        assert!(t.observe("lo0", "", unknown_media(true), poll, 1).is_none());
        assert!(t.get("lo0").is_none());
        // Admin down is known to have no carrier.
        let a = t.observe("lo0", "", unknown_media(false), poll, 2).unwrap();
        assert!(!a.event.carrier && !a.event.admin_up);
        // Admin up again, media still unknown: the admin change is
        // reported, the carrier stays the known "down".
        let b = t.observe("lo0", "", unknown_media(true), poll, 3).unwrap();
        assert!(b.event.admin_up && !b.event.carrier);
    }
}
