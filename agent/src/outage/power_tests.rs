//! The sleep rule: a link outage whose span overlaps a sleep of this node
//! has cause `SLEEP`; one that does not keeps its own cause.

use super::*;
use crate::power::{PowerKind, PowerSource};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
const HOUR: u64 = 3_600 * SEC;
const T0: u64 = 1_700_000_000_000_000_000;

fn tracker() -> OutageTracker {
    OutageTracker::new("b", "tb0", DEFAULT_MISSING_PROBES, OutageIds::new())
}

fn cause(o: &Outage) -> OutageCause {
    OutageCause::try_from(o.cause).unwrap()
}

fn power(kind: PowerKind, at: u64, slept: u64, source: PowerSource) -> PowerEvent {
    PowerEvent {
        kind,
        at_unix_ns: at,
        slept_ns: slept,
        source,
    }
}

/// The probe-loss outage a sleep leaves behind on the sleeping node: the
/// probes sent just before it are lost (their timeouts run out after the
/// wake), the first probe after the wake is answered. Returns (start, end).
fn outage_across(l: &mut OutageTracker, sleep_at: u64, wake_at: u64) -> (Outage, Outage) {
    for seq in 1..=3 {
        assert!(l
            .on_probe_reply(seq, sleep_at - (10 - seq) * 100 * MS, sleep_at)
            .is_empty());
    }
    let mut start = Vec::new();
    for seq in 4..=6 {
        start.extend(l.on_probe_missing(seq, sleep_at - (7 - seq) * 100 * MS, wake_at));
    }
    assert_eq!(start.len(), 1, "{start:?}");
    let end = l.on_probe_reply(7, wake_at + 100 * MS, wake_at + 101 * MS);
    assert_eq!(end.len(), 1, "{end:?}");
    (start.remove(0), end.into_iter().next().unwrap())
}

#[test]
fn an_outage_across_a_sleep_found_by_the_clocks_ends_as_sleep() {
    let mut l = tracker();
    let sleep_at = T0 + 10 * SEC;
    let wake_at = sleep_at + 8 * HOUR;
    // The tracker learns of the sleep (from its clock reading) before the
    // fates of the probes it swallowed.
    l.on_power(&power(PowerKind::Sleep, sleep_at, 0, PowerSource::ClockGap));
    l.on_power(&power(
        PowerKind::Wake,
        wake_at,
        8 * HOUR,
        PowerSource::ClockGap,
    ));
    let (start, end) = outage_across(&mut l, sleep_at, wake_at);
    // Its first lost probe went out before the sleep: the start record
    // cannot tell; the end record, authoritative, can.
    assert_eq!(start.start_unix_ns, sleep_at - 300 * MS);
    assert_eq!(cause(&end), OutageCause::Sleep);
    assert_eq!(end.outage_id, start.outage_id);
    assert_eq!(end.start_unix_ns, start.start_unix_ns);
}

#[test]
fn an_announced_sleep_marks_outages_that_end_before_the_wake_is_known() {
    let mut l = tracker();
    let sleep_at = T0 + 10 * SEC;
    let wake_at = sleep_at + HOUR;
    l.on_power(&power(
        PowerKind::Sleep,
        sleep_at,
        0,
        PowerSource::Notification,
    ));
    let (start, end) = outage_across(&mut l, sleep_at, wake_at);
    assert_eq!(cause(&end), OutageCause::Sleep);
    // The carrier drops during the sleep: a carrier outage starting while
    // asleep is a sleep outage from its start record on.
    let down = l.on_carrier("tb0", false, sleep_at + SEC);
    assert_eq!(down.len(), 1);
    assert_eq!(cause(&down[0]), OutageCause::Sleep);
    assert_ne!(down[0].outage_id, start.outage_id);
    // The wake closes the sleep: an outage after it is the link's again.
    l.on_power(&power(
        PowerKind::Wake,
        wake_at,
        HOUR,
        PowerSource::ClockGap,
    ));
    assert!(l.on_carrier("tb0", true, wake_at + SEC).is_empty());
    let end = l.on_probe_reply(8, wake_at + 2 * SEC, wake_at + 2 * SEC + MS);
    assert_eq!(cause(&end[0]), OutageCause::Sleep, "it began asleep");
    let later = wake_at + HOUR;
    let down = l.on_carrier("tb0", false, later);
    assert_eq!(cause(&down[0]), OutageCause::Carrier);
    let end = l.on_probe_reply(9, later + SEC, later + SEC + MS);
    assert_eq!(cause(&end[0]), OutageCause::Carrier);
}

#[test]
fn outages_beside_a_sleep_keep_their_cause_and_services_stay_services() {
    let mut l = tracker();
    let sleep_at = T0 + HOUR;
    let wake_at = sleep_at + HOUR;
    l.on_power(&power(
        PowerKind::Wake,
        wake_at,
        HOUR,
        PowerSource::ClockGap,
    ));
    // Before the sleep, and after it.
    for (seq, at) in [(1, T0), (2, wake_at + SEC)] {
        let down = l.on_carrier("tb0", false, at);
        assert_eq!(cause(&down[0]), OutageCause::Carrier);
        assert!(l.on_carrier("tb0", true, at + SEC).is_empty());
        let end = l.on_probe_reply(seq, at + 2 * SEC, at + 2 * SEC + MS);
        assert_eq!(cause(&end[0]), OutageCause::Carrier, "at {at}");
    }
    // A service outage across the sleep is still the service's: its cause
    // is how the API and the metrics tell service outages from link ones.
    l.on_service("ssh", false, sleep_at - SEC);
    let end = l.on_service("ssh", true, wake_at + SEC);
    assert_eq!(cause(&end[0]), OutageCause::Service);
}

#[test]
fn told_twice_a_sleep_is_still_one_and_routes_to_every_peer() {
    let ids = OutageIds::new();
    let mut all = OutageTrackers::new(vec![
        OutageTracker::new("b", "tb0", 3, ids.clone()),
        OutageTracker::new("c", "tb1", 3, ids),
    ]);
    let sleep_at = T0 + SEC;
    let wake_at = sleep_at + HOUR;
    let told = [
        power(PowerKind::Sleep, sleep_at, 0, PowerSource::ClockGap),
        power(PowerKind::Wake, wake_at, HOUR, PowerSource::ClockGap),
        // The power role's copy, placed a few ms apart.
        power(
            PowerKind::Sleep,
            sleep_at + 5 * MS,
            0,
            PowerSource::ClockGap,
        ),
        power(
            PowerKind::Wake,
            wake_at + 5 * MS,
            HOUR,
            PowerSource::ClockGap,
        ),
    ];
    for e in told {
        assert!(all.apply(OutageInput::Power(e), wake_at).is_empty());
    }
    // Not left asleep by the repeated sleep: an outage a day later is the
    // link's, on either peer.
    let later = wake_at + 24 * HOUR;
    for (i, interface) in ["tb0", "tb1"].into_iter().enumerate() {
        let change = LinkChange {
            interface: interface.into(),
            carrier: false,
            at_unix_ns: later,
            carrier_changed: true,
            missed_flaps: 0,
            source: boltwatch_proto::v1::LinkEventSource::Netlink,
        };
        let down = all.apply(OutageInput::Link(change), later);
        assert_eq!(down.len(), 1, "peer {i}");
        assert_eq!(cause(&down[0]), OutageCause::Carrier);
    }
}
