//! When to test which peer: each peer every `interval` (default 5 min) for
//! `duration` (default 10 s), start times jittered so a cluster's agents do
//! not line up, a duty-cycle cap (default 5 % of wall time) so bandwidth
//! probes never starve real traffic, and a jittered retry when the peer's
//! server answers "busy" (it serves one test at a time).
//!
//! Pure: the caller passes `now` and the random source, so tests drive the
//! clock by hand. The agent runs one test at a time: [`Planner::poll`]
//! hands out at most one test until [`Planner::finish`] reports it.

use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Schedule knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanConfig {
    /// How often each peer is tested.
    pub interval: Duration,
    /// Length of each test.
    pub duration: Duration,
    /// Jitter on each next start, as a fraction of `interval` (±).
    pub jitter: f64,
    /// Largest share of wall time spent testing, measured over `duty_window`.
    pub duty_cycle: f64,
    /// Window over which the duty cycle is measured.
    pub duty_window: Duration,
    /// Shortest wait before retrying a busy peer.
    pub busy_retry_min: Duration,
    /// Longest wait before retrying a busy peer.
    pub busy_retry_max: Duration,
    /// Busy retries before waiting for the peer's next regular slot.
    pub max_busy_retries: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            interval: Duration::from_secs(300),
            duration: Duration::from_secs(10),
            jitter: 0.1,
            duty_cycle: 0.05,
            duty_window: Duration::from_secs(600),
            busy_retry_min: Duration::from_secs(15),
            busy_retry_max: Duration::from_secs(60),
            max_busy_retries: 4,
        }
    }
}

/// A configuration that cannot schedule anything.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    /// A field is out of range.
    #[error("invalid bandwidth plan: {0}")]
    Invalid(&'static str),
}

impl PlanConfig {
    /// Checks the ranges; a test must fit in the duty-cycle budget.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.duration.is_zero() || self.interval.is_zero() {
            return Err(PlanError::Invalid("interval and duration must be > 0"));
        }
        if !(0.0..0.5).contains(&self.jitter) {
            return Err(PlanError::Invalid("jitter must be in [0, 0.5)"));
        }
        if !(self.duty_cycle > 0.0 && self.duty_cycle <= 1.0) {
            return Err(PlanError::Invalid("duty_cycle must be in (0, 1]"));
        }
        if self.duty_window.mul_f64(self.duty_cycle) < self.duration {
            return Err(PlanError::Invalid(
                "duty_cycle × duty_window must fit one test",
            ));
        }
        if self.busy_retry_min > self.busy_retry_max {
            return Err(PlanError::Invalid("busy_retry_min > busy_retry_max"));
        }
        Ok(())
    }
}

/// How a test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Results obtained.
    Done,
    /// The peer's server was running another test.
    Busy,
    /// Anything else (unreachable, protocol error).
    Failed,
}

/// What the caller should do now.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Test `peer` for `duration`, then call [`Planner::finish`].
    Run {
        /// Peer to test.
        peer: String,
        /// Test length.
        duration: Duration,
    },
    /// Nothing to do before `until` (or a finish call).
    Wait {
        /// When to poll again.
        until: Instant,
    },
}

#[derive(Debug, Clone)]
struct PeerState {
    due: Instant,
    busy_retries: u32,
}

/// The schedule for one agent.
#[derive(Debug)]
pub struct Planner<R> {
    cfg: PlanConfig,
    rng: R,
    peers: BTreeMap<String, PeerState>,
    /// Tests run: (start, length), oldest first.
    history: VecDeque<(Instant, Duration)>,
    running: Option<(String, Instant)>,
}

impl<R: Rng> Planner<R> {
    /// A planner with no peers yet.
    pub fn new(cfg: PlanConfig, rng: R) -> Result<Self, PlanError> {
        cfg.validate()?;
        Ok(Planner {
            cfg,
            rng,
            peers: BTreeMap::new(),
            history: VecDeque::new(),
            running: None,
        })
    }

    /// Replaces the peer set. New peers get a first slot spread uniformly
    /// over one interval from `now`; known peers keep theirs.
    pub fn set_peers<I: IntoIterator<Item = String>>(&mut self, peers: I, now: Instant) {
        let mut next = BTreeMap::new();
        for p in peers {
            let st = match self.peers.remove(&p) {
                Some(st) => st,
                None => PeerState {
                    due: now + self.cfg.interval.mul_f64(self.rng.random_range(0.0..1.0)),
                    busy_retries: 0,
                },
            };
            next.insert(p, st);
        }
        self.peers = next;
    }

    /// When `peer` is next due, if known.
    pub fn due(&self, peer: &str) -> Option<Instant> {
        self.peers.get(peer).map(|s| s.due)
    }

    /// Testing time counted against the cap at `now`.
    pub fn used(&self, now: Instant) -> Duration {
        let from = now.checked_sub(self.cfg.duty_window);
        self.history
            .iter()
            .map(|&(start, len)| {
                let end = start + len;
                let lo = match from {
                    Some(f) if f > start => f,
                    _ => start,
                };
                end.min(now).saturating_duration_since(lo)
            })
            .sum()
    }

    /// The next thing to do at `now`.
    pub fn poll(&mut self, now: Instant) -> Decision {
        let far = now + self.cfg.interval;
        if self.running.is_some() {
            return Decision::Wait { until: far };
        }
        self.prune(now);
        let Some((peer, due)) = self
            .peers
            .iter()
            .min_by_key(|(_, s)| s.due)
            .map(|(p, s)| (p.clone(), s.due))
        else {
            return Decision::Wait { until: far };
        };
        if due > now {
            return Decision::Wait { until: due };
        }
        let budget = self.cfg.duty_window.mul_f64(self.cfg.duty_cycle);
        if self.used(now) + self.cfg.duration > budget {
            return Decision::Wait {
                until: self.budget_frees_at(now, budget),
            };
        }
        self.running = Some((peer.clone(), now));
        Decision::Run {
            peer,
            duration: self.cfg.duration,
        }
    }

    /// Reports the end of the test [`Planner::poll`] handed out.
    pub fn finish(&mut self, peer: &str, outcome: Outcome, now: Instant) {
        let Some((running, started)) = self.running.take() else {
            return;
        };
        if running != peer {
            self.running = Some((running, started));
            return;
        }
        self.history
            .push_back((started, now.saturating_duration_since(started)));
        let regular = self.jittered(started, self.cfg.interval);
        let (min, max) = (self.cfg.busy_retry_min, self.cfg.busy_retry_max);
        let retry = now + min + (max - min).mul_f64(self.rng.random_range(0.0..=1.0));
        let max_retries = self.cfg.max_busy_retries;
        let Some(st) = self.peers.get_mut(peer) else {
            return;
        };
        match outcome {
            Outcome::Busy if st.busy_retries < max_retries => {
                st.busy_retries += 1;
                st.due = retry;
            }
            _ => {
                st.busy_retries = 0;
                st.due = regular.max(now);
            }
        }
    }

    fn jittered(&mut self, from: Instant, interval: Duration) -> Instant {
        let j = self.cfg.jitter;
        let f = if j > 0.0 {
            1.0 + self.rng.random_range(-j..=j)
        } else {
            1.0
        };
        from + interval.mul_f64(f)
    }

    /// The earliest time the window has room for one more test, assuming
    /// nothing else runs meanwhile.
    fn budget_frees_at(&self, now: Instant, budget: Duration) -> Instant {
        let need = self.cfg.duration;
        // Walk forward over the moments history entries slide out.
        let mut t = now;
        for &(start, len) in &self.history {
            let out = start + len + self.cfg.duty_window;
            if out <= t {
                continue;
            }
            t = out;
            if self.used(t) + need <= budget {
                break;
            }
        }
        // Partial overlap can free room before a whole entry ages out; the
        // entry boundary is a safe upper bound, never earlier than needed.
        if t == now {
            now + Duration::from_secs(1)
        } else {
            t
        }
    }

    fn prune(&mut self, now: Instant) {
        while let Some(&(start, len)) = self.history.front() {
            if start + len + self.cfg.duty_window <= now {
                self.history.pop_front();
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn planner(cfg: PlanConfig) -> Planner<StdRng> {
        Planner::new(cfg, StdRng::seed_from_u64(1)).unwrap()
    }

    /// The defaults without a duty-cycle cap.
    fn uncapped() -> PlanConfig {
        PlanConfig {
            duty_cycle: 1.0,
            ..Default::default()
        }
    }

    /// Drives the planner with a fake clock: every test takes its full
    /// duration and ends with `outcome(peer)`. Returns (start, peer).
    fn simulate(
        p: &mut Planner<StdRng>,
        t0: Instant,
        horizon: Duration,
        mut outcome: impl FnMut(&str) -> Outcome,
    ) -> Vec<(Instant, String)> {
        let mut now = t0;
        let mut runs = Vec::new();
        for _ in 0..100_000 {
            if now >= t0 + horizon {
                break;
            }
            match p.poll(now) {
                Decision::Run { peer, duration } => {
                    runs.push((now, peer.clone()));
                    now += duration;
                    let o = outcome(&peer);
                    p.finish(&peer, o, now);
                }
                Decision::Wait { until } => {
                    assert!(until > now, "wait must move time forward");
                    now = until;
                }
            }
        }
        runs
    }

    #[test]
    fn default_config_is_valid_and_bad_ones_are_not() {
        PlanConfig::default().validate().unwrap();
        let bad = PlanConfig {
            duty_cycle: 0.01,
            duty_window: s(600),
            ..Default::default()
        };
        assert!(bad.validate().is_err()); // 6 s budget < 10 s test
        assert!(PlanConfig {
            jitter: 0.7,
            ..Default::default()
        }
        .validate()
        .is_err());
        assert!(PlanConfig {
            busy_retry_min: s(90),
            ..Default::default()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn first_slots_are_spread_over_one_interval() {
        let t0 = Instant::now();
        let mut p = planner(PlanConfig::default());
        p.set_peers((0..20).map(|i| format!("n{i}")), t0);
        let dues: Vec<Duration> = (0..20)
            .map(|i| p.due(&format!("n{i}")).unwrap() - t0)
            .collect();
        assert!(dues.iter().all(|d| *d < s(300)));
        let distinct: std::collections::BTreeSet<_> = dues.iter().collect();
        assert_eq!(distinct.len(), 20);
        // Re-setting keeps existing slots.
        let before = p.due("n3");
        p.set_peers((0..20).map(|i| format!("n{i}")), t0 + s(50));
        assert_eq!(p.due("n3"), before);
    }

    #[test]
    fn one_peer_is_tested_every_interval_with_jitter() {
        let t0 = Instant::now();
        let mut p = planner(PlanConfig::default());
        p.set_peers(["a".to_string()], t0);
        let runs = simulate(&mut p, t0, s(3600), |_| Outcome::Done);
        assert!((11..=14).contains(&runs.len()), "{}", runs.len());
        for w in runs.windows(2) {
            let gap = w[1].0 - w[0].0;
            assert!(gap >= s(270) && gap <= s(330), "{gap:?}");
        }
        let gaps: std::collections::BTreeSet<_> =
            runs.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(gaps.len() > 1, "jitter must vary the gaps");
    }

    #[test]
    fn duty_cycle_cap_holds_with_many_peers() {
        let t0 = Instant::now();
        let cfg = PlanConfig::default();
        let mut p = planner(cfg.clone());
        p.set_peers((0..10).map(|i| format!("n{i}")), t0);
        let runs = simulate(&mut p, t0, s(7200), |_| Outcome::Done);
        // 10 peers × 10 s every 5 min would be 33 %; the cap allows 5 %.
        let budget = cfg.duty_window.mul_f64(cfg.duty_cycle);
        for (i, (start, _)) in runs.iter().enumerate() {
            let in_window = runs[..=i]
                .iter()
                .filter(|(t, _)| *t + cfg.duty_window > *start)
                .count() as u32;
            assert!(cfg.duration * in_window <= budget, "window at run {i}");
        }
        let total = cfg.duration * runs.len() as u32;
        assert!(total <= s(7200).mul_f64(0.05) + cfg.duration);
        // Every peer still gets its turn.
        let peers: std::collections::BTreeSet<_> = runs.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(peers.len(), 10);
    }

    #[test]
    fn busy_peer_is_retried_soon_with_jitter_then_given_up() {
        let t0 = Instant::now();
        let cfg = uncapped();
        let mut p = planner(cfg.clone());
        p.set_peers(["a".to_string()], t0);
        let runs = simulate(&mut p, t0, s(1200), |_| Outcome::Busy);
        // First run, 4 busy retries 15-60 s after each end, then a regular slot.
        let gaps: Vec<Duration> = runs.windows(2).map(|w| w[1].0 - w[0].0).collect();
        for g in &gaps[..4] {
            assert!(*g >= s(25) && *g <= s(70), "{g:?}");
        }
        assert!(gaps[4] >= s(270), "{:?}", gaps[4]);
        let distinct: std::collections::BTreeSet<_> = gaps[..4].iter().collect();
        assert!(distinct.len() > 1);
    }

    #[test]
    fn one_test_at_a_time() {
        let t0 = Instant::now();
        let mut p = planner(uncapped());
        p.set_peers(["a".to_string(), "b".to_string()], t0);
        let now = t0 + s(400);
        let first = p.poll(now);
        assert!(matches!(first, Decision::Run { .. }));
        assert!(matches!(p.poll(now), Decision::Wait { .. }));
        let Decision::Run { peer, .. } = first else {
            unreachable!()
        };
        // A finish for the wrong peer changes nothing.
        let other = if peer == "a" { "b" } else { "a" };
        p.finish(other, Outcome::Done, now + s(10));
        assert!(matches!(p.poll(now + s(10)), Decision::Wait { .. }));
        p.finish(&peer, Outcome::Done, now + s(10));
        assert_eq!(
            p.poll(now + s(10)),
            Decision::Run {
                peer: other.to_string(),
                duration: s(10)
            }
        );
    }

    #[test]
    fn used_counts_only_the_window() {
        let t0 = Instant::now();
        let mut p = planner(uncapped());
        p.set_peers(["a".to_string()], t0);
        let Decision::Wait { until } = p.poll(t0) else {
            panic!("not due yet")
        };
        assert!(matches!(p.poll(until), Decision::Run { .. }));
        p.finish("a", Outcome::Done, until + s(10));
        assert_eq!(p.used(until + s(10)), s(10));
        assert_eq!(p.used(until + s(605)), s(5));
        assert_eq!(p.used(until + s(611)), s(0));
    }
}
