//! When a probe is late: the bound on the wait for its reply, derived from
//! the link's own recent round trips. Pure: the caller feeds round trips.
//!
//! A path that dies with carrier up shows only as replies that stop
//! coming. Waiting for `probe_timeout` (1 s) to call a probe missing makes
//! such a death take over a second to see; a Thunderbolt link answers in
//! tens of microseconds, so a reply that has not come in several times the
//! link's recent p99 is already news. The bound is `multiplier` x the p99
//! of the last [`HISTORY`] round trips, never below `floor` (a link that
//! answers in 40 us must not be called late by a scheduler hiccup of a
//! millisecond) and never above the timeout (late comes before lost).
//! Until [`MIN_SAMPLES`] round trips are known the bound is the timeout:
//! a link whose distribution is unknown is judged by the fixed rule.
//!
//! Nor is a probe late while the peer has been silent for less than what
//! its own scheduling costs: a peer that stalls (a busy or oversubscribed
//! machine, a VM whose vCPU waits) silences the link for as long, whatever
//! the link. Each stall of the peer's reflector, a probe held between its
//! receipt and the reply (its turnaround, t3 - t2), sets the *silence* to
//! [`STALL_MULTIPLIER`] times the stall for [`STALL_HOLD`]: no probe sent
//! after the newest answer is called late until the oldest of them has
//! waited that long ([`super::probe`]). This host's own stalls need no
//! such allowance: the session judges lateness as of before it reads the
//! replies, and counts a probe's wait from after its send returned, so a
//! sender that was off the CPU finds the replies that came meanwhile. The
//! stall bounds the whole silence, not each probe's wait: a stall of S
//! delays every probe sent in it by up to S, so waiting S for each of `k`
//! probes in a row would make detection pay `k - 1` intervals on top. A
//! host that stalls now and then is judged on what it has shown it does;
//! a quiet one keeps the link's bound. Without it, three probes caught in
//! one 40 ms stall were an outage.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Round trips the p99 is taken over.
pub const HISTORY: usize = 512;

/// Round trips needed before the bound leaves the timeout.
pub const MIN_SAMPLES: usize = 32;

/// The p99 is recomputed after this many new round trips, not on every
/// reply: at 100 Hz that is three times a second, and a sort of
/// [`HISTORY`] values each time costs far less than one probe.
const RECOMPUTE_EVERY: usize = 32;

/// Default multiple of the recent p99 (`probe_late_multiplier`).
pub const DEFAULT_MULTIPLIER: f64 = 4.0;

/// Default floor of the bound (`probe_late_floor`).
pub const DEFAULT_FLOOR: Duration = Duration::from_millis(5);

/// How long a stall keeps the bound up.
pub const STALL_HOLD: Duration = Duration::from_secs(60);

/// A scheduling delay shorter than this is noise, not a stall.
pub const STALL_MIN: Duration = Duration::from_millis(1);

/// The silence covers this many times the longest stall held: a host
/// that stalls now and then stalls longer now and then than in the last
/// minute, and each stall on a VM is also one of the packet path (the
/// reflector's vCPU carries the veth's delivery), which its turnaround
/// does not show.
pub const STALL_MULTIPLIER: u32 = 3;

/// Stalls held at most: the longest in the hold window is kept first, so
/// a flood of small ones costs only the smallest.
const MAX_STALLS: usize = 64;

/// How the bound follows the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LateRule {
    /// Multiple of the recent p99 round trip.
    pub multiplier: f64,
    /// The bound is never below this.
    pub floor: Duration,
}

impl Default for LateRule {
    fn default() -> Self {
        LateRule {
            multiplier: DEFAULT_MULTIPLIER,
            floor: DEFAULT_FLOOR,
        }
    }
}

impl LateRule {
    /// The bound for a link whose recent p99 round trip is `p99_ns`, given
    /// probe timeout `timeout`: `multiplier x p99`, at least `floor`, at
    /// most `timeout`.
    pub fn bound(&self, p99_ns: u64, timeout: Duration) -> Duration {
        let scaled = (p99_ns as f64 * self.multiplier).min(u64::MAX as f64);
        let scaled = Duration::from_nanos(scaled as u64);
        scaled.max(self.floor).min(timeout)
    }
}

/// The late bound of one session, fed with its round trips.
#[derive(Debug, Clone)]
pub struct LateBound {
    rule: LateRule,
    timeout: Duration,
    recent: VecDeque<u64>,
    since_recompute: usize,
    /// The bound the link's round trips give (the timeout until known).
    bound: Duration,
    /// How long the peer may be silent before a probe is called late.
    silence: Duration,
    scratch: Vec<u64>,
    /// Stalls within the hold, `(when, how long)`: each longer than every
    /// later one (a later, longer stall outlasts and outweighs it).
    stalls: VecDeque<(Instant, Duration)>,
}

impl LateBound {
    /// A bound following `rule` for probes lost after `timeout`.
    pub fn new(rule: LateRule, timeout: Duration) -> LateBound {
        LateBound {
            rule,
            timeout,
            recent: VecDeque::with_capacity(HISTORY),
            since_recompute: 0,
            bound: timeout,
            silence: Duration::ZERO,
            scratch: Vec::with_capacity(HISTORY),
            stalls: VecDeque::new(),
        }
    }

    /// The current bound: a probe unanswered this long after its send is
    /// late (once the silence has passed too).
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// The current silence: no probe sent after the newest answer is late
    /// before the oldest of them has waited this long (zero without a
    /// stall held; at most the timeout).
    pub fn silence(&self) -> Duration {
        self.silence
    }

    /// Takes one reply's round trip (t4 - t1, reflector time included:
    /// lateness is judged on the whole wait). Returns true when the bound
    /// changed.
    pub fn observe(&mut self, round_trip_ns: u64) -> bool {
        if self.recent.len() == HISTORY {
            self.recent.pop_front();
        }
        self.recent.push_back(round_trip_ns);
        self.since_recompute += 1;
        let due = self.since_recompute >= RECOMPUTE_EVERY || self.recent.len() == MIN_SAMPLES;
        if self.recent.len() < MIN_SAMPLES || !due {
            return false;
        }
        self.since_recompute = 0;
        self.scratch.clear();
        self.scratch.extend(self.recent.iter().copied());
        let old = self.bound;
        self.bound = self.rule.bound(p99(&mut self.scratch), self.timeout);
        old != self.bound
    }

    /// Takes one scheduling delay seen at `now`: how long the peer's
    /// reflector held a probe. Returns true
    /// when the silence changed (a stall lengthened it, or one's hold ran
    /// out).
    pub fn observe_stall(&mut self, delay: Duration, now: Instant) -> bool {
        while self
            .stalls
            .front()
            .is_some_and(|&(at, _)| now.saturating_duration_since(at) >= STALL_HOLD)
        {
            self.stalls.pop_front();
        }
        if delay >= STALL_MIN {
            while self.stalls.back().is_some_and(|&(_, d)| d <= delay) {
                self.stalls.pop_back();
            }
            if self.stalls.len() == MAX_STALLS {
                self.stalls.pop_back();
            }
            self.stalls.push_back((now, delay));
        }
        let longest = self.stalls.front().map_or(Duration::ZERO, |&(_, d)| d);
        let old = self.silence;
        self.silence = longest.saturating_mul(STALL_MULTIPLIER).min(self.timeout);
        old != self.silence
    }
}

/// The nearest-rank 99th percentile of `samples` (reordered); 0 if empty.
pub fn p99(samples: &mut [u64]) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    // Nearest rank: ceil(0.99 n), 1-based.
    let rank = (samples.len() * 99).div_ceil(100).max(1);
    *samples.select_nth_unstable(rank - 1).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    const MS: Duration = Duration::from_millis(1);
    const US: u64 = 1_000;

    #[test]
    fn p99_is_the_nearest_rank() {
        assert_eq!(p99(&mut []), 0);
        assert_eq!(p99(&mut [7]), 7);
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(p99(&mut v), 99);
        let mut v: Vec<u64> = (1..=200).collect();
        assert_eq!(p99(&mut v), 198);
        let mut v: Vec<u64> = (1..=10).collect();
        assert_eq!(p99(&mut v), 10);
    }

    #[test]
    fn rule_clamps_between_floor_and_timeout() {
        let r = LateRule::default();
        // 40 us links: the floor.
        assert_eq!(r.bound(40 * US, Duration::from_secs(1)), 5 * MS);
        // 3 ms p99 under load: 12 ms.
        assert_eq!(r.bound(3_000 * US, Duration::from_secs(1)), 12 * MS);
        // Never past the timeout, even when the floor is.
        assert_eq!(r.bound(900_000 * US, Duration::from_secs(1)), 1000 * MS);
        assert_eq!(r.bound(1, 2 * MS), 2 * MS);
    }

    #[test]
    fn the_timeout_until_the_link_is_known() {
        let mut b = LateBound::new(LateRule::default(), Duration::from_secs(1));
        for _ in 0..MIN_SAMPLES - 1 {
            assert!(!b.observe(50 * US));
            assert_eq!(b.bound(), Duration::from_secs(1));
        }
        assert!(b.observe(50 * US));
        assert_eq!(b.bound(), 5 * MS);
    }

    #[test]
    fn the_bound_follows_the_link_up_and_back_down() {
        let mut b = LateBound::new(LateRule::default(), Duration::from_secs(1));
        for _ in 0..HISTORY {
            b.observe(50 * US);
        }
        assert_eq!(b.bound(), 5 * MS);
        // A bandwidth test queues replies at 4 ms for a while: the bound
        // rises to 16 ms once they pass 1 % of the history.
        for _ in 0..HISTORY {
            b.observe(4_000 * US);
        }
        assert_eq!(b.bound(), 16 * MS);
        for _ in 0..HISTORY {
            b.observe(50 * US);
        }
        assert_eq!(b.bound(), 5 * MS);
    }

    #[test]
    fn one_slow_reply_in_a_hundred_does_not_move_it() {
        let mut b = LateBound::new(LateRule::default(), Duration::from_secs(1));
        for i in 0..HISTORY * 3 {
            // Below 1 %: 1 in 128.
            b.observe(if i % 128 == 0 { 200_000 * US } else { 60 * US });
        }
        assert_eq!(b.bound(), 5 * MS);
    }

    /// A known quiet link at the floor.
    fn learnt() -> LateBound {
        let mut b = LateBound::new(LateRule::default(), Duration::from_secs(1));
        for _ in 0..HISTORY {
            b.observe(50 * US);
        }
        b
    }

    #[test]
    fn a_stall_sets_the_silence_for_its_hold_and_leaves_the_bound() {
        let t0 = Instant::now();
        let mut b = learnt();
        assert_eq!((b.bound(), b.silence()), (5 * MS, Duration::ZERO));
        // Scheduling noise under a millisecond: no stall.
        assert!(!b.observe_stall(Duration::from_micros(900), t0));
        assert_eq!(b.silence(), Duration::ZERO);
        // The peer's reflector held a probe 40 ms: three times that, at
        // once; each probe's own bound stays the link's.
        assert!(b.observe_stall(40 * MS, t0));
        assert_eq!((b.bound(), b.silence()), (5 * MS, 120 * MS));
        // A shorter stall later changes nothing while the longer one holds.
        assert!(!b.observe_stall(10 * MS, t0 + Duration::from_secs(30)));
        assert_eq!(b.silence(), 120 * MS);
        // The 40 ms hold ends; the 10 ms one, seen later, still holds.
        assert!(b.observe_stall(Duration::ZERO, t0 + STALL_HOLD));
        assert_eq!(b.silence(), 30 * MS);
        // And ends in turn: no silence.
        assert!(b.observe_stall(Duration::ZERO, t0 + Duration::from_secs(30) + STALL_HOLD));
        assert_eq!(b.silence(), Duration::ZERO);
        // Never past the timeout.
        b.observe_stall(Duration::from_secs(3), t0 + 3 * STALL_HOLD);
        assert_eq!(b.silence(), Duration::from_secs(1));
        assert_eq!(b.bound(), 5 * MS);
    }

    #[test]
    fn the_link_and_the_stalls_move_independently() {
        let t0 = Instant::now();
        let mut b = learnt();
        b.observe_stall(4 * MS, t0);
        assert_eq!((b.bound(), b.silence()), (5 * MS, 12 * MS));
        for _ in 0..HISTORY {
            b.observe(4_000 * US);
        }
        assert_eq!((b.bound(), b.silence()), (16 * MS, 12 * MS));
    }

    /// Seeded: any stalls at any times: the silence is three times the
    /// longest stall within the hold (at most the timeout), the link's
    /// bound is untouched, and memory is bounded.
    #[test]
    fn prop_the_silence_covers_the_longest_stall_held() {
        let strategy = prop::collection::vec((0u64..5_000, 0u64..200_000), 0..400);
        runner(21)
            .run(&strategy, |steps| {
                let t0 = Instant::now();
                let mut b = learnt();
                let mut seen: Vec<(Instant, Duration)> = Vec::new();
                let mut now = t0;
                for (gap_ms, delay_us) in steps {
                    now += Duration::from_millis(gap_ms * 40);
                    let delay = Duration::from_micros(delay_us);
                    b.observe_stall(delay, now);
                    seen.push((now, delay));
                    let held = seen
                        .iter()
                        .filter(|(at, d)| now.duration_since(*at) < STALL_HOLD && *d >= STALL_MIN)
                        .map(|(_, d)| *d)
                        .max()
                        .unwrap_or_default();
                    prop_assert!(b.stalls.len() <= MAX_STALLS);
                    prop_assert_eq!(b.bound(), 5 * MS);
                    if b.stalls.len() < MAX_STALLS {
                        let want = (held * STALL_MULTIPLIER).min(Duration::from_secs(1));
                        prop_assert_eq!(b.silence(), want);
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    fn runner(seed: u8) -> TestRunner {
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
        TestRunner::new_with_rng(
            Config {
                cases: 256,
                failure_persistence: None,
                ..Config::default()
            },
            rng,
        )
    }

    /// Seeded: any round trips, any rule: the bound stays within
    /// `[min(floor, timeout), timeout]` and, once known, covers the
    /// multiplier times the history's p99 (up to the timeout).
    #[test]
    fn prop_bound_within_floor_timeout_and_covers_the_p99() {
        let strategy = (
            prop::collection::vec(0u64..2_000_000_000, 0..1500),
            1.0f64..16.0,
            0u64..50_000_000,
            1u64..3_000_000_000,
        );
        runner(27)
            .run(&strategy, |(rtts, multiplier, floor_ns, timeout_ns)| {
                let rule = LateRule {
                    multiplier,
                    floor: Duration::from_nanos(floor_ns),
                };
                let timeout = Duration::from_nanos(timeout_ns);
                let mut b = LateBound::new(rule, timeout);
                for (i, &r) in rtts.iter().enumerate() {
                    b.observe(r);
                    let bound = b.bound();
                    prop_assert!(bound <= timeout);
                    prop_assert!(bound >= rule.floor.min(timeout));
                    if i + 1 < MIN_SAMPLES {
                        prop_assert_eq!(bound, timeout);
                    }
                }
                if rtts.len() >= MIN_SAMPLES
                    && (rtts.len() - MIN_SAMPLES).is_multiple_of(RECOMPUTE_EVERY)
                {
                    // Just recomputed: exactly the rule over the history.
                    let start = rtts.len().saturating_sub(HISTORY);
                    let mut h = rtts[start..].to_vec();
                    let want = rule.bound(p99(&mut h), timeout);
                    prop_assert_eq!(b.bound(), want);
                    let scaled = (p99(&mut h) as f64 * multiplier) as u64;
                    prop_assert!(b.bound().as_nanos() as u64 >= scaled.min(timeout_ns));
                }
                Ok(())
            })
            .unwrap();
    }

    /// Seeded: at most 1 % of the history above the rest never lifts the
    /// bound off what the rest gives.
    #[test]
    fn prop_outliers_under_one_percent_are_ignored() {
        let strategy = (
            prop::collection::vec(10_000u64..100_000, HISTORY),
            prop::collection::vec(0usize..HISTORY, 0..=(HISTORY / 100)),
        );
        runner(99)
            .run(&strategy, |(mut rtts, spikes)| {
                for &i in &spikes {
                    rtts[i] = 500_000_000;
                }
                let mut b = LateBound::new(LateRule::default(), Duration::from_secs(1));
                for &r in &rtts {
                    b.observe(r);
                }
                // 100 us at most, x4: under the 5 ms floor.
                prop_assert_eq!(b.bound(), DEFAULT_FLOOR);
                Ok(())
            })
            .unwrap();
    }
}
