//! The clock over a synthetic source: what the agent's own code does when
//! the machine sleeps for a night or the wall clock is stepped.

use super::synthetic::Synthetic;
use super::*;

const S: u64 = 1_000_000_000;
const HOUR: u64 = 3_600 * S;
/// 2026-12-01T00:00:00Z.
const WALL0: u64 = 1_796_083_200 * S;
/// Continuous clock at agent start: three weeks of uptime.
const UP0: u64 = 21 * 24 * HOUR;

fn clock() -> Clock<Synthetic> {
    Clock::new(Synthetic::new(UP0, WALL0))
}

#[test]
fn the_timeline_reads_as_the_wall_clock_at_start() {
    let c = clock();
    assert_eq!(c.now_ns(), WALL0);
    let r = c.read();
    assert_eq!(r.correction_ns, 0);
    assert_eq!(r.generation, 0);
    assert_eq!(r.to_unix(c.now_ns()), WALL0);
}

#[test]
fn a_night_asleep_is_on_the_timeline_and_no_step() {
    let c = clock();
    let before = c.now_ns();
    c.read();
    c.source().run(8 * HOUR);
    let after = c.now_ns();
    assert_eq!(after - before, 8 * HOUR);
    let r = c.read();
    assert_eq!(r.generation, 0, "sleep is not a step");
    assert_eq!(r.to_unix(after), WALL0 + 8 * HOUR);
}

#[test]
fn a_step_moves_record_time_not_the_timeline() {
    for step in [30 * S as i64, -(30 * S as i64)] {
        let c = clock();
        c.read();
        c.source().run(S);
        let t = c.now_ns();
        c.source().step_wall(step);
        assert_eq!(c.now_ns(), t, "the timeline does not step");
        let r = c.read();
        assert_eq!(r.generation, 1, "{step}");
        assert_eq!(r.correction_ns, step);
        // A record stamped now says what the (stepped) wall clock says.
        assert_eq!(r.to_unix(t), c.source().wall_ns());
        // A kernel stamp of the wall clock lands back on the timeline.
        assert_eq!(r.from_wall(c.source().wall_ns()), t);
        c.source().run(S);
        assert_eq!(c.read().generation, 1, "once");
        assert_eq!(c.steps(), 1);
    }
}

#[test]
fn read_noise_leaves_the_held_correction_alone() {
    let c = clock();
    let first = c.read();
    // The wall clock read a few us early or late: conversions under the
    // held correction stay exact, and windows stay on whole seconds.
    for jitter in [3_000i64, -5_000, 4_000, -2_000] {
        c.source().step_wall(jitter);
        c.source().run(S);
        assert_eq!(c.read(), first);
    }
    assert_eq!(c.steps(), 0);
}

#[test]
fn drift_is_followed_without_a_step() {
    let c = clock();
    c.read();
    // An oscillator 20 ppm fast against NTP for a week, read every minute:
    // the held correction follows, never more than REANCHOR_NS behind.
    for _ in 0..7 * 24 * 60 {
        c.source().run(60 * S);
        c.source().step_wall(-1_200_000);
        let t = c.now_ns();
        let r = c.read();
        assert!(r.to_unix(t).abs_diff(c.source().wall_ns()) <= REANCHOR_NS);
    }
    assert_eq!(c.steps(), 0, "drift is no step");
    // The records keep to the wall clock, 12 s away from the timeline.
    let r = c.read();
    assert!(r.correction_ns.abs_diff(-12_096_000_000) <= REANCHOR_NS);
    assert!(r.generation > 1000, "re-anchored as it went");
}

#[test]
fn the_process_clock_runs_on_the_os_clocks() {
    let a = now_ns();
    let r = read();
    let b = now_ns();
    assert!(b >= a);
    // This machine's wall clock has not been stepped by a minute since
    // the process started.
    assert!(r.correction_ns.unsigned_abs() < 60 * S, "{r:?}");
    let wall = boltwatch_common::clock::now_unix_ns();
    assert!(unix_now().abs_diff(wall) < S);
    let (t, _) = from_wall(wall);
    assert!(t.abs_diff(now_ns()) < S);
}
