//! The outage rules replayed on exact input sequences.

use super::*;

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

fn tracker() -> OutageTracker {
    OutageTracker::new("b", "tb0", DEFAULT_MISSING_PROBES, OutageIds::new())
}

fn cause(o: &Outage) -> OutageCause {
    OutageCause::try_from(o.cause).unwrap()
}

/// Probe `seq` sent at T0 + seq*10ms.
fn sent(seq: u64) -> u64 {
    T0 + seq * 10 * MS
}

/// `end` is the one end record of the carrier outage `start` opened,
/// spanning `(from, to)`.
fn assert_carrier_outage_ended(end: &[Outage], start: &Outage, (from, to): (u64, u64)) {
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0].outage_id, start.outage_id);
    assert_eq!(end[0].start_unix_ns, from);
    assert_eq!(end[0].end_unix_ns, Some(to));
    assert_eq!(cause(&end[0]), OutageCause::Carrier);
}

/// `end` closes an outage of both causes that started at `start`.
fn assert_both_from(end: &Outage, start: u64) {
    assert_eq!(cause(end), OutageCause::Both);
    assert_eq!(end.start_unix_ns, start);
}

#[test]
fn flap_gives_one_outage_from_down_to_first_reply_after_up() {
    let mut l = tracker();
    assert!(l.on_probe_reply(1, sent(1), sent(1) + 80_000).is_empty());
    let down_at = sent(1) + 5 * MS;
    let start = l.on_carrier("tb0", false, down_at);
    assert_eq!(start.len(), 1);
    assert_eq!(start[0].start_unix_ns, down_at);
    assert_eq!(start[0].end_unix_ns, None);
    assert_eq!(cause(&start[0]), OutageCause::Carrier);
    // Probes during the down period go missing: no second outage.
    for seq in 2..9 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
    }
    let up_at = sent(8) + 2 * MS;
    assert!(l.on_carrier("tb0", true, up_at).is_empty());
    assert!(l.in_outage(), "carrier up alone does not end it");
    let reply_at = sent(9) + 90_000;
    let end = l.on_probe_reply(9, sent(9), reply_at);
    assert_carrier_outage_ended(&end, &start[0], (down_at, reply_at));
    assert!(!l.in_outage());
    assert!(l.on_probe_reply(10, sent(10), sent(10) + 1).is_empty());
}

#[test]
fn three_missing_start_at_first_missing_send_time() {
    let mut l = tracker();
    assert!(l.on_probe_missing(5, sent(5), sent(6)).is_empty());
    assert!(l.on_probe_missing(6, sent(6), sent(7)).is_empty());
    let start = l.on_probe_missing(7, sent(7), sent(8));
    assert_eq!(start.len(), 1);
    assert_eq!(cause(&start[0]), OutageCause::ProbeLoss);
    assert_eq!(start[0].start_unix_ns, sent(5));
    assert_eq!(start[0].end_unix_ns, None);
    // More missing probes do not start another outage.
    assert!(l.on_probe_missing(8, sent(8), sent(9)).is_empty());
    let end = l.on_probe_reply(9, sent(9), sent(9) + 70_000);
    assert_eq!(end.len(), 1);
    assert_eq!(end[0].outage_id, start[0].outage_id);
    assert_eq!(end[0].end_unix_ns, Some(sent(9) + 70_000));
}

/// The kernel's carrier-down notification reaches a busy agent after the
/// probes sent since the drop have timed out: the loss was the carrier's.
#[test]
fn a_late_carrier_notification_explains_the_loss_it_caused() {
    let mut l = tracker();
    let down_at = sent(4) + 3 * MS;
    for seq in 5..=6 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
    }
    let start = l.on_probe_missing(7, sent(7), sent(8));
    assert_eq!(cause(&start[0]), OutageCause::ProbeLoss);
    assert!(l.on_carrier("tb0", false, down_at).is_empty());
    for seq in 8..=9 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
    }
    assert!(l.on_carrier("tb0", true, sent(9) + MS).is_empty());
    let end = l.on_probe_reply(10, sent(10), sent(10) + 70_000);
    assert_carrier_outage_ended(&end, &start[0], (down_at, sent(10) + 70_000));
}

/// A carrier that drops after probes were already missing does not explain
/// them: both causes.
#[test]
fn a_carrier_drop_after_the_loss_began_is_both() {
    let mut l = tracker();
    for seq in 5..=7 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    assert!(l.on_carrier("tb0", false, sent(6)).is_empty());
    for seq in 8..=9 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    assert!(l.on_carrier("tb0", true, sent(9)).is_empty());
    let end = l.on_probe_reply(10, sent(10), sent(10) + 70_000);
    assert_both_from(&end[0], sent(5));
}

/// Late probes open the outage within milliseconds of a drop whose
/// notification the kernel holds back: a loss that began within the
/// notification's lag before it is the drop's own (the probe sent just
/// before the drop, in flight, included); one that began longer before is
/// both.
#[test]
fn a_drop_notified_within_its_lag_explains_a_loss_just_before_it() {
    let lagging = || tracker().notification_lag(std::time::Duration::from_secs(1));
    let mut l = lagging();
    for seq in 5..=7 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    // Notified 300 ms after the loss began, well within the 1 s lag.
    let down_at = sent(5) + 300 * MS;
    assert!(l.on_carrier("tb0", false, down_at).is_empty());
    assert!(l.on_carrier("tb0", true, down_at + 500 * MS).is_empty());
    let end = l.on_probe_reply(8, down_at + 501 * MS, down_at + 502 * MS);
    assert_eq!(cause(&end[0]), OutageCause::Carrier);
    // From the drop's earliest sign, the first lost probe: the stamp came
    // 300 ms after it.
    assert_eq!(end[0].start_unix_ns, sent(5));

    let mut l = lagging();
    for seq in 5..=7 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    let down_at = sent(5) + 1_500 * MS;
    assert!(l.on_carrier("tb0", false, down_at).is_empty());
    assert!(l.on_carrier("tb0", true, down_at + 500 * MS).is_empty());
    let end = l.on_probe_reply(8, down_at + 501 * MS, down_at + 502 * MS);
    assert_both_from(&end[0], sent(5));
}

#[test]
fn two_missing_then_reply_is_no_outage() {
    let mut l = tracker();
    assert!(l.on_probe_missing(1, sent(1), sent(2)).is_empty());
    assert!(l.on_probe_missing(2, sent(2), sent(3)).is_empty());
    assert!(l.on_probe_reply(3, sent(3), sent(3) + 1).is_empty());
    // The run was broken: two more missing are again not enough.
    assert!(l.on_probe_missing(4, sent(4), sent(5)).is_empty());
    assert!(l.on_probe_missing(5, sent(5), sent(6)).is_empty());
    assert!(!l.in_outage());
    assert_eq!(l.on_probe_missing(6, sent(6), sent(7)).len(), 1);
}

#[test]
fn stale_reply_while_carrier_down_does_not_end_it() {
    let mut l = tracker();
    let down_at = sent(2);
    assert_eq!(l.on_carrier("tb0", false, down_at).len(), 1);
    // Replies to probes sent before (or at) the drop arrive while the
    // carrier is down, and after it is back: they end nothing.
    assert!(l.on_probe_reply(1, sent(1), sent(2) + MS).is_empty());
    assert!(l.on_probe_reply(2, sent(2), sent(3)).is_empty());
    assert!(l.in_outage());
    assert!(l.on_carrier("tb0", true, sent(5)).is_empty());
    assert!(l.on_probe_reply(1, sent(1), sent(5) + MS).is_empty());
    assert!(l.in_outage());
    // Probes 3..=5 went out while the link was down (5 as it came back).
    for seq in 3..=5 {
        assert!(l
            .on_probe_missing(seq, sent(seq), sent(seq) + 1000 * MS)
            .is_empty());
    }
    let end = l.on_probe_reply(6, sent(6), sent(6) + MS);
    assert_eq!(end.len(), 1);
    assert_eq!(end[0].end_unix_ns, Some(sent(6) + MS));
}

#[test]
fn reply_to_probe_sent_after_drop_ends_it_before_the_late_up_event() {
    let mut l = tracker();
    let down_at = sent(2) + MS;
    let start = l.on_carrier("tb0", false, down_at);
    assert_eq!(start.len(), 1);
    // Probes 3..5 go out during the down period and are lost.
    for seq in 3..6 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
    }
    // The link is back; probe 6 is answered before the kernel's
    // carrier-up notification arrives.
    let reply_at = sent(6) + 50_000;
    let end = l.on_probe_reply(6, sent(6), reply_at);
    assert_carrier_outage_ended(&end, &start[0], (down_at, reply_at));
    assert!(!l.in_outage());
    // Late overdue reports of probes sent while down start nothing.
    for seq in 3..6 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(9)).is_empty());
    }
    // The late up event changes nothing, and no outage reopens.
    assert!(l.on_carrier("tb0", true, sent(8)).is_empty());
    assert!(!l.in_outage());
    assert!(l.on_probe_reply(9, sent(9), sent(9) + 1).is_empty());
    // The next drop is a new outage.
    assert_eq!(l.on_carrier("tb0", false, sent(10)).len(), 1);
}

#[test]
fn probe_loss_then_carrier_down_is_both() {
    let mut l = tracker();
    for seq in 1..=3 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    assert!(l.in_outage());
    assert!(l.on_carrier("tb0", false, sent(4)).is_empty());
    assert!(l.on_carrier("tb0", true, sent(6)).is_empty());
    for seq in 4..=6 {
        l.on_probe_missing(seq, sent(seq), sent(seq) + 1000 * MS);
    }
    let end = l.on_probe_reply(7, sent(7), sent(7) + MS);
    assert_eq!(end.len(), 1);
    assert_both_from(&end[0], sent(1));
}

#[test]
fn carrier_back_but_probes_still_lost_is_both() {
    let mut l = tracker();
    l.on_carrier("tb0", false, sent(1));
    l.on_carrier("tb0", true, sent(2) + MS);
    for seq in 3..=5 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(seq + 1)).is_empty());
    }
    let end = l.on_probe_reply(6, sent(6), sent(6) + MS);
    assert_both_from(&end[0], sent(1));
}

#[test]
fn probes_sent_during_down_do_not_count_after_up() {
    let mut l = tracker();
    l.on_carrier("tb0", false, sent(1));
    l.on_carrier("tb0", true, sent(4));
    // Missing reports for probes 1..3 arrive after the carrier returned.
    for seq in 1..4 {
        assert!(l.on_probe_missing(seq, sent(seq), sent(4) + MS).is_empty());
    }
    // Probe 4, sent as the carrier came back, was lost too: one lost probe
    // is no probe-loss outage.
    assert!(l
        .on_probe_missing(4, sent(4), sent(4) + 1000 * MS)
        .is_empty());
    let end = l.on_probe_reply(5, sent(5), sent(5) + MS);
    assert_eq!(cause(&end[0]), OutageCause::Carrier);
}

#[test]
fn reply_to_probe_sent_before_outage_start_does_not_end_it() {
    let mut l = tracker();
    for seq in 2..=4 {
        l.on_probe_missing(seq, sent(seq), sent(seq + 1));
    }
    // A late answer to probe 1 (sent before the run) arrives.
    assert!(l.on_probe_reply(1, sent(1), sent(5)).is_empty());
    assert!(l.in_outage());
}

#[test]
fn other_interface_and_repeated_down_are_ignored() {
    let mut l = tracker();
    assert!(l.on_carrier("en9", false, sent(1)).is_empty());
    assert!(!l.in_outage());
    assert_eq!(l.on_carrier("tb0", false, sent(1)).len(), 1);
    assert!(l.on_carrier("tb0", false, sent(2)).is_empty());
    l.on_carrier("tb0", true, sent(3));
    let end = l.on_probe_reply(4, sent(4), sent(4) + 1);
    assert_eq!(end[0].start_unix_ns, sent(1));
}

#[test]
fn ids_are_unique_across_peers_and_outages() {
    let ids = OutageIds::new();
    let mut a = OutageTracker::new("a", "tb0", 3, ids.clone());
    let mut b = OutageTracker::new("b", "tb1", 3, ids);
    let a1 = a.on_carrier("tb0", false, sent(1))[0].outage_id;
    let b1 = b.on_carrier("tb1", false, sent(1))[0].outage_id;
    a.on_carrier("tb0", true, sent(2));
    a.on_probe_reply(3, sent(3), sent(3) + 1);
    let a2 = a.on_carrier("tb0", false, sent(4))[0].outage_id;
    assert_eq!((a1, b1, a2), (1, 2, 3));
}

#[test]
fn service_outage_starts_and_ends() {
    let mut l = tracker();
    assert!(l.on_service("ssh", true, sent(1)).is_empty());
    let start = l.on_service("ssh", false, sent(2));
    assert_eq!(start.len(), 1);
    assert_eq!(cause(&start[0]), OutageCause::Service);
    assert_eq!(start[0].service, "ssh");
    assert!(l.on_service("ssh", false, sent(3)).is_empty());
    // A second service is independent.
    assert_eq!(l.on_service("http", false, sent(3)).len(), 1);
    let end = l.on_service("ssh", true, sent(4));
    assert_eq!(end[0].outage_id, start[0].outage_id);
    assert_eq!(end[0].start_unix_ns, sent(2));
    assert_eq!(end[0].end_unix_ns, Some(sent(4)));
    assert!(!l.in_outage(), "service outages are not link outages");
}

#[test]
fn link_changes_drive_the_carrier_rules() {
    use boltwatch_proto::v1::LinkEventSource;
    let change = |carrier, at, changed| crate::link::LinkChange {
        interface: "tb0".into(),
        at_unix_ns: at,
        carrier,
        carrier_changed: changed,
        missed_flaps: 0,
        source: LinkEventSource::Netlink,
    };
    let mut l = tracker();
    // Startup sighting with the carrier down: an outage from then.
    let start = l.on_link_change(&change(false, sent(1), false));
    assert_eq!(start.len(), 1);
    assert!(l.on_link_change(&change(true, sent(2), true)).is_empty());
    assert_eq!(
        l.on_probe_reply(3, sent(3), sent(3) + 1)[0].start_unix_ns,
        sent(1)
    );
    // A counters-only report with the carrier up changes nothing.
    assert!(l.on_link_change(&change(true, sent(4), false)).is_empty());
    assert!(!l.in_outage());
}

#[test]
fn k_of_one_starts_at_first_missing() {
    let mut l = OutageTracker::new("b", "tb0", 1, OutageIds::new());
    assert_eq!(l.on_probe_missing(1, sent(1), sent(2)).len(), 1);
}

#[test]
fn inputs_reach_the_peer_they_name() {
    use crate::stamp::ProbeEvent;
    let ids = OutageIds::new();
    let mut all = OutageTrackers::new(vec![
        OutageTracker::new("a", "tb0", 1, ids.clone()),
        OutageTracker::new("b", "tb1", 1, ids),
    ]);
    let missing = |peer, seq: u32| OutageInput::Probe {
        peer,
        event: ProbeEvent::Lost {
            seq,
            sent_unix_ns: sent(u64::from(seq)),
        },
    };
    let out = all.apply(missing(1, 1), sent(2));
    assert_eq!((out.len(), out[0].peer.as_str()), (1, "b"));
    assert!(all.apply(missing(7, 1), sent(2)).is_empty(), "unknown peer");
    let reply = OutageInput::Probe {
        peer: 1,
        event: ProbeEvent::Reply {
            seq: 2,
            sent_unix_ns: sent(2),
            received_unix_ns: sent(2) + 40_000,
            rtt_ns: 1,
            late: false,
        },
    };
    // The outage ends when the reply arrived, not when the tracker read it
    // (a whole interval later here).
    assert_eq!(
        all.apply(reply, sent(3))[0].end_unix_ns,
        Some(sent(2) + 40_000)
    );
    let down = OutageInput::Service {
        peer: 0,
        change: crate::service::ServiceChange {
            service: "ssh".into(),
            up: false,
            at_unix_ns: sent(4),
        },
    };
    let out = all.apply(down, sent(4));
    assert_eq!(
        (out[0].peer.as_str(), out[0].service.as_str()),
        ("a", "ssh")
    );
    // A link change goes to every peer; only tb1's tracker cares.
    let change = crate::link::LinkChange {
        interface: "tb1".into(),
        at_unix_ns: sent(5),
        carrier: false,
        carrier_changed: true,
        missed_flaps: 0,
        source: boltwatch_proto::v1::LinkEventSource::Netlink,
    };
    let out = all.apply(OutageInput::Link(change), sent(5));
    assert_eq!((out.len(), out[0].peer.as_str()), (1, "b"));
}

/// Losses become known a timeout after sending, replies at once: a run of
/// lost probes is told after the reply that ends it. It is still one
/// outage, from the first lost probe to that reply.
#[test]
fn losses_told_after_the_reply_that_ends_them_make_one_outage() {
    let mut l = tracker();
    assert!(l.on_probe_reply(1, sent(1), sent(1) + 50_000).is_empty());
    // Probes 2..=5 vanish; 6 is answered at once.
    let answered_at = sent(6) + 60_000;
    assert!(l.on_probe_reply(6, sent(6), answered_at).is_empty());
    assert!(l
        .on_probe_missing(2, sent(2), sent(2) + 1000 * MS)
        .is_empty());
    assert!(l
        .on_probe_missing(3, sent(3), sent(3) + 1000 * MS)
        .is_empty());
    let out = l.on_probe_missing(4, sent(4), sent(4) + 1000 * MS);
    let more = l.on_probe_missing(5, sent(5), sent(5) + 1000 * MS);
    let all: Vec<_> = out.into_iter().chain(more).collect();
    assert_eq!(all.len(), 2, "a start and an end: {all:?}");
    assert_eq!(all[0].end_unix_ns, None);
    assert_eq!(all[1].outage_id, all[0].outage_id);
    assert_eq!(all[1].start_unix_ns, sent(2));
    assert_eq!(all[1].end_unix_ns, Some(answered_at));
    assert_eq!(cause(&all[1]), OutageCause::ProbeLoss);
    assert!(!l.in_outage());
}

/// A reflector (or this sender) starved of CPU answers probes late but
/// within the timeout: that is latency. Late replies are replies; no
/// outage, however many probe intervals they took.
#[test]
fn late_replies_within_the_timeout_are_no_outage() {
    let mut l = tracker();
    for seq in 1..=10 {
        // Each answered 95 ms after sending, 9 probe intervals late.
        assert!(l
            .on_probe_reply(seq, sent(seq), sent(seq) + 95 * MS)
            .is_empty());
    }
    assert!(!l.in_outage());
}

#[test]
fn k_late_probes_open_an_outage_backdated_and_a_late_reply_to_them_ends_it() {
    let mut l = tracker();
    assert!(l.on_probe_reply(0, sent(0), sent(0) + 50_000).is_empty());
    // Probes 1-3 pass their late bound unanswered: an outage from probe 1.
    assert!(l.on_probe_missing(1, sent(1), sent(1) + 5 * MS).is_empty());
    assert!(l.on_probe_missing(2, sent(2), sent(2) + 5 * MS).is_empty());
    let start = l.on_probe_missing(3, sent(3), sent(3) + 5 * MS);
    assert_eq!(start.len(), 1);
    assert_eq!(start[0].start_unix_ns, sent(1));
    assert_eq!(cause(&start[0]), OutageCause::ProbeLoss);
    // Their losses at the timeout are news of fates already counted.
    assert!(l.on_probe_missing(1, sent(1), sent(100)).is_empty());
    // A late reply to probe 2 (sent inside the outage) ends it when it came.
    let end = l.on_probe_late_reply(2, sent(2), sent(4));
    assert_eq!(end.len(), 1);
    assert_eq!(end[0].outage_id, start[0].outage_id);
    assert_eq!(end[0].end_unix_ns, Some(sent(4)));
    // The late replies of 1 and 3 after it close nothing more.
    assert!(l.on_probe_late_reply(3, sent(3), sent(4) + 1).is_empty());
    assert!(l.on_probe_late_reply(1, sent(1), sent(4) + 2).is_empty());
    assert!(!l.in_outage());
}

#[test]
fn a_late_reply_breaks_the_run_it_was_counted_in() {
    let mut l = tracker();
    assert!(l.on_probe_missing(1, sent(1), 0).is_empty());
    assert!(l.on_probe_missing(2, sent(2), 0).is_empty());
    // Probe 2 did get through: 1 and 2 are no run any more.
    assert!(l.on_probe_late_reply(2, sent(2), sent(3)).is_empty());
    assert!(l.on_probe_missing(3, sent(3), 0).is_empty());
    assert!(l.on_probe_missing(4, sent(4), 0).is_empty());
    assert!(!l.in_outage(), "1 and 2 no longer count");
    let start = l.on_probe_missing(5, sent(5), 0);
    assert_eq!(start.len(), 1);
    assert_eq!(start[0].start_unix_ns, sent(3));
}

#[test]
fn a_late_reply_to_a_probe_before_the_outage_or_the_drop_ends_nothing() {
    let mut l = tracker();
    assert!(l.on_probe_missing(1, sent(1), 0).is_empty());
    for seq in 2..5 {
        l.on_probe_missing(seq, sent(seq), 0);
    }
    assert!(l.in_outage());
    // An outage from probe 2: 1's run was broken by nothing, so it started
    // at 1; a reply to a probe before 1 (0, never reported) ends nothing.
    assert!(l.on_probe_late_reply(0, sent(0), sent(5)).is_empty());
    assert!(l.in_outage());
    // A carrier drop: a late reply to a probe sent before it is stale.
    let mut l = tracker();
    l.on_probe_missing(1, sent(1), 0);
    let down = sent(1) + MS;
    assert_eq!(l.on_carrier("tb0", false, down).len(), 1);
    assert!(l.on_probe_late_reply(1, sent(1), sent(3)).is_empty());
    assert!(l.in_outage());
}

#[test]
fn a_late_reply_held_behind_an_earlier_fate_counts_as_an_answer() {
    let mut l = tracker();
    assert!(l.on_probe_reply(0, sent(0), sent(0) + 1).is_empty());
    // 2 is late and answered before 1's fate is known.
    assert!(l.on_probe_missing(2, sent(2), 0).is_empty());
    assert!(l.on_probe_late_reply(2, sent(2), sent(3)).is_empty());
    assert!(l.on_probe_missing(1, sent(1), 0).is_empty());
    assert!(l.on_probe_missing(3, sent(3), 0).is_empty());
    assert!(l.on_probe_missing(4, sent(4), 0).is_empty());
    assert!(!l.in_outage(), "2 answered breaks 1 from 3 and 4");
}

/// Seeded: a path that always answers, however late, opens outages only
/// where `k` probes in a row were called late before any of them was
/// answered, and every outage it opens is ended by a reply (none stays
/// open, none ends before it starts).
#[test]
fn prop_late_answers_close_every_outage_they_open() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[27; 32]);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: 256,
            failure_persistence: None,
            ..Config::default()
        },
        rng,
    );
    // Per probe: answered on time, or late and answered after `d` probes.
    let strategy = prop::collection::vec(prop::option::of(1u64..8), 1..200);
    runner
        .run(&strategy, |fates| {
            let mut l = tracker();
            let mut events: Vec<(u64, u8, u64)> = Vec::new();
            for (i, f) in fates.iter().enumerate() {
                let seq = i as u64;
                match f {
                    None => events.push((sent(seq) + 100_000, 0, seq)),
                    Some(d) => {
                        events.push((sent(seq) + 5 * MS, 1, seq));
                        events.push((sent(seq + d) + 7 * MS, 2, seq));
                    }
                }
            }
            events.sort();
            let mut open: Option<Outage> = None;
            for (at, kind, seq) in events {
                let out = match kind {
                    0 => l.on_probe_reply(seq, sent(seq), at),
                    1 => l.on_probe_missing(seq, sent(seq), at),
                    _ => l.on_probe_late_reply(seq, sent(seq), at),
                };
                for o in out {
                    match (&open, o.end_unix_ns) {
                        (None, None) => open = Some(o),
                        (Some(s), Some(end)) => {
                            prop_assert_eq!(s.outage_id, o.outage_id);
                            prop_assert!(end >= o.start_unix_ns);
                            open = None;
                        }
                        _ => prop_assert!(false, "unpaired record {:?}", o),
                    }
                }
            }
            prop_assert!(open.is_none(), "an answered path left {:?} open", open);
            Ok(())
        })
        .unwrap();
}

/// Late probes open a probe-loss outage within ms of a drop whose
/// notification lags (linkwatch batching); the probes sent between the
/// drop and the notification's stamp go late one by one, some of them
/// only after the notification was taken: they are the drop's too, and
/// the outage stays a carrier outage (not `both`).
#[test]
fn late_fates_told_after_a_lagging_notification_are_the_drops() {
    let mut l = tracker().notification_lag(std::time::Duration::from_secs(1));
    assert!(l.on_probe_reply(4, sent(4), sent(4) + 80_000).is_empty());
    // The drop takes probes 5.. ; 5, 6, 7 are late: a probe-loss outage.
    for seq in 5..=7 {
        l.on_probe_missing(seq, sent(seq), sent(seq) + 5 * MS);
    }
    assert!(l.in_outage());
    // Notified 300 ms on; probes 31..=34, sent before the stamp, are
    // called late only after it was taken.
    let down_at = sent(5) + 300 * MS;
    for seq in 8..=30 {
        assert!(l
            .on_probe_missing(seq, sent(seq), sent(seq) + 5 * MS)
            .is_empty());
    }
    assert!(l.on_carrier("tb0", false, down_at).is_empty());
    for seq in 31..=40 {
        assert!(l
            .on_probe_missing(seq, sent(seq), sent(seq) + 5 * MS)
            .is_empty());
    }
    let up_at = down_at + 500 * MS;
    assert!(l.on_carrier("tb0", true, up_at).is_empty());
    // The late fates of probes sent during the drop, told after it ended.
    for seq in 41..=84 {
        assert!(l.on_probe_missing(seq, sent(seq), up_at + MS).is_empty());
    }
    let end = l.on_probe_reply(85, sent(85), sent(85) + MS);
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(cause(&end[0]), OutageCause::Carrier, "{end:?}");
    assert_eq!(end[0].start_unix_ns, sent(5));
    // After the drop, a loss of its own is news again.
    for seq in 86..=88 {
        l.on_probe_missing(seq, sent(seq), sent(seq) + 5 * MS);
    }
    assert!(
        l.in_outage(),
        "three late probes after the drop open an outage"
    );
}

/// The kernel stamps a carrier drop up to a second late (linkwatch
/// batching): the probes the drop took before the stamp are its earliest
/// sign, and the outage starts at the first of them, not at the stamp. A
/// probe lost earlier, with answers after it, is no sign of the drop.
#[test]
fn a_late_stamped_drop_starts_at_the_first_probe_it_took() {
    let mut l = tracker().notification_lag(std::time::Duration::from_secs(1));
    // A lone loss, then answers: the path worked after it.
    l.on_probe_missing(1, sent(1), sent(1) + 1000 * MS);
    for seq in 2..=4 {
        assert!(l.on_probe_reply(seq, sent(seq), sent(seq) + MS).is_empty());
    }
    // The drop takes probe 5 on; the stamp says 200 ms later.
    let down_at = sent(5) + 200 * MS;
    let start = l.on_carrier("tb0", false, down_at);
    assert_eq!(
        start[0].start_unix_ns, down_at,
        "the start record: all known then"
    );
    // Probes 5..=30 time out after the stamp: sent before it, the drop's.
    for seq in 5..=30 {
        assert!(l
            .on_probe_missing(seq, sent(seq), sent(seq) + 1000 * MS)
            .is_empty());
    }
    let up_at = down_at + 1000 * MS;
    assert!(l.on_carrier("tb0", true, up_at).is_empty());
    let reply = up_at + 11 * MS;
    let end = l.on_probe_reply(31, up_at + 10 * MS, reply);
    assert_carrier_outage_ended(&end, &start[0], (sent(5), reply));

    // Two probes missing before a late stamp, too few for an outage of
    // their own: the drop's too.
    let mut l = tracker().notification_lag(std::time::Duration::from_secs(1));
    assert!(l.on_probe_reply(4, sent(4), sent(4) + MS).is_empty());
    l.on_probe_missing(5, sent(5), sent(5) + 5 * MS);
    l.on_probe_missing(6, sent(6), sent(6) + 5 * MS);
    let down_at = sent(5) + 50 * MS;
    let start = l.on_carrier("tb0", false, down_at);
    assert!(l.on_carrier("tb0", true, down_at + 500 * MS).is_empty());
    let reply = down_at + 600 * MS;
    let end = l.on_probe_reply(7, down_at + 550 * MS, reply);
    assert_carrier_outage_ended(&end, &start[0], (sent(5), reply));
}
