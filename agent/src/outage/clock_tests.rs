//! The outage ledger under the agent's clock ([`crate::clock`]) when the
//! machine sleeps for a night or its wall clock is stepped: every input is
//! stamped from a synthetic clock through the code the agent runs, and the
//! records through [`on_wall_clock`], as the outage tracker role does.

use super::*;
use crate::clock::synthetic::Synthetic;
use crate::clock::{Clock, Source};

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;
const HOUR: u64 = 3_600 * S;
/// 2026-12-01T00:00:00Z, and three weeks of uptime.
const WALL0: u64 = 1_796_083_200 * S;
const UP0: u64 = 21 * 24 * HOUR;

fn clock() -> Clock<Synthetic> {
    let c = Clock::new(Synthetic::new(UP0, WALL0));
    c.read();
    c
}

fn tracker() -> OutageTracker {
    OutageTracker::new("b", "en2", DEFAULT_MISSING_PROBES, OutageIds::new())
}

/// A probe sent now, answered `rtt` later.
fn probe(c: &Clock<Synthetic>, t: &mut OutageTracker, seq: u64, rtt: u64) -> Vec<Outage> {
    let sent = c.now_ns();
    c.source().run(rtt);
    t.on_probe_reply(seq, sent, c.now_ns())
}

#[test]
fn a_night_asleep_leaves_the_carrier_outage_exact() {
    let c = clock();
    let mut t = tracker();
    assert!(probe(&c, &mut t, 1, 60_000).is_empty());
    c.source().run(S);
    let wall_down = c.source().wall_ns();
    let start = t.on_carrier("en2", false, c.now_ns());
    assert_eq!(start.len(), 1);
    // Probes go out into the dead cable until the Mac sleeps for 8 h.
    for seq in 2..5 {
        let sent = c.now_ns();
        c.source().run(100 * MS);
        assert!(t.on_probe_missing(seq, sent, c.now_ns()).is_empty());
    }
    c.source().run(8 * HOUR);
    assert!(t.on_carrier("en2", true, c.now_ns()).is_empty());
    c.source().run(5 * MS);
    // The first reply after wake ends it: on one clock, it was sent after
    // the carrier went down (with a clock that stopped in sleep it looked
    // older than the drop, and the outage stayed open for hours).
    let end = probe(&c, &mut t, 5, 60_000);
    let wall_end = c.source().wall_ns();
    assert_eq!(end.len(), 1, "{end:?}");
    let rec = on_wall_clock(end[0].clone(), &c.read());
    assert_eq!(rec.start_unix_ns, wall_down);
    assert_eq!(rec.end_unix_ns, Some(wall_end));
    assert_eq!(
        wall_end - wall_down,
        300 * MS + 8 * HOUR + 5 * MS + 60_000,
        "the outage is as long as the wall clock says"
    );
    assert_eq!(OutageCause::try_from(rec.cause), Ok(OutageCause::Carrier));
}

#[test]
fn a_wall_clock_step_leaves_outage_lengths_exact() {
    for step in [30 * S as i64, -(30 * S as i64)] {
        let c = clock();
        let mut t = tracker();
        assert!(probe(&c, &mut t, 1, 60_000).is_empty());
        // Three probes lost with carrier up: a probe-loss outage.
        let first = c.now_ns();
        let mut opened = Vec::new();
        for seq in 2..5 {
            let sent = c.now_ns();
            c.source().run(100 * MS);
            opened.extend(t.on_probe_missing(seq, sent, c.now_ns()));
        }
        assert_eq!(opened.len(), 1);
        assert_eq!(opened[0].start_unix_ns, first);
        // NTP steps the wall clock while the path is dead.
        c.source().run(2 * S);
        c.source().step_wall(step);
        c.source().run(S);
        let end = probe(&c, &mut t, 5, 60_000);
        let wall = c.read();
        assert_eq!(wall.generation, 1);
        let rec = on_wall_clock(end[0].clone(), &wall);
        let length = rec.end_unix_ns.unwrap() - rec.start_unix_ns;
        assert_eq!(length, 300 * MS + 3 * S + 60_000, "step {step}");
        assert_eq!(
            rec.end_unix_ns,
            Some(c.source().wall_ns()),
            "record time is wall time"
        );
    }
}

#[test]
fn a_wall_clock_step_leaves_rtt_exact_or_discards_the_straddling_probe() {
    use crate::stamp::packet::{ErrorEstimate, NtpTimestamp, ReflectorPacket};
    use crate::stamp::probe::{ProbeTable, Verdict};
    let c = clock();
    let mut table = ProbeTable::new(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_secs(1),
    );
    let now = std::time::Instant::now();
    let reply = |seq: u32, t1: u64| ReflectorPacket {
        seq: 0,
        timestamp: NtpTimestamp::from_unix_ns(t1 + 20_000),
        error_estimate: ErrorEstimate::AGENT,
        ssid: 0,
        receive_timestamp: NtpTimestamp::from_unix_ns(t1 + 10_000),
        sender_seq: seq,
        sender_timestamp: NtpTimestamp::from_unix_ns(t1),
        sender_error_estimate: ErrorEstimate::AGENT,
        sender_ttl: 64,
    };
    // Linux: the kernel stamps on the wall clock; the session moves each
    // stamp onto the timeline under the correction read when handling it.
    let rx = |c: &Clock<Synthetic>| {
        let r = c.read();
        (r.from_wall(c.source().wall_ns()), r.generation)
    };
    for (seq, step) in [
        (0u32, 0i64),
        (1, 30 * S as i64),
        (2, 0),
        (3, -(30 * S as i64)),
        (4, 0),
    ] {
        let g = c.read().generation;
        let t1 = c.now_ns();
        table.sent(seq, NtpTimestamp::from_unix_ns(t1), t1, now, g);
        c.source().run(30_000);
        c.source().step_wall(step);
        c.source().run(30_000);
        let (t4, gen4) = rx(&c);
        let v = table.reply(&reply(seq, t1), t4, Some(gen4));
        let Verdict::Reply { rtt_ns, .. } = v else {
            panic!("{v:?}")
        };
        if step == 0 {
            // 60 us out and back, 10 us in the reflector.
            assert_eq!(rtt_ns, Some(50_000), "probe {seq}");
        } else {
            assert_eq!(rtt_ns, None, "probe {seq} straddles a step: discarded");
        }
        c.source().run(S);
    }
}
