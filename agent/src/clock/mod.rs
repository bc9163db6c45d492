//! The agent's one clock, through sleep, clock steps and weeks of uptime.
//!
//! Every time the agent compares or subtracts (probe t1..t4, window
//! bounds, carrier events, outage starts and ends, bandwidth load marks,
//! service checks) is a reading of the **timeline**: nanoseconds of a clock
//! that never steps and keeps counting while the machine sleeps (Linux
//! `CLOCK_BOOTTIME`, macOS `mach_continuous_time`), offset once at start
//! so that it reads as unix time. A duration on it is exact through a
//! night's sleep and through any `date -s`.
//!
//! Records carry wall-clock time: [`Reading::to_unix`] adds the
//! *correction* (wall clock minus timeline). [`read`] measures it afresh
//! and the clock holds it, re-anchoring when the measure moves more than
//! [`REANCHOR_NS`] from what it holds (drift over days, a step, a clock
//! restored at wake): a record's time stays within that of NTP's, and
//! between re-anchorings the held value does not move, so RTT windows stay
//! aligned to whole seconds and two Linux kernel stamps converted under it
//! ([`from_wall`]) differ by exactly what the kernel measured, with no read
//! noise. One reading converts every time of one record (an outage's start
//! and end), so the durations a record states stay exact too.
//!
//! A correction that moves faster than NTP can slew is a step
//! ([`steps::Steps`], counted); every change of the held correction bumps
//! the reading's generation, and a probe whose send and reply were
//! converted under different generations is discarded (its RTT would mix
//! two corrections).
//!
//! [`Clock`] is generic over where readings come from ([`Source`]), so the
//! tests drive the very code the agent runs with a synthetic clock that
//! sleeps 8 hours or steps 30 seconds; [`now_ns`] and friends use the
//! process's one [`Clock`] over the OS clocks (`linux.rs`, `macos.rs`).

use std::sync::{Mutex, OnceLock};

mod steps;

pub use steps::{Reading, Steps, MAX_SLEW_PPM, STEP_FLOOR_NS};

crate::platform::os_module!(pub(crate) mod imp);

/// Where a [`Clock`]'s readings come from.
pub trait Source {
    /// The clock that counts sleep and never steps, ns from any origin.
    fn continuous_ns(&self) -> u64;
    /// The wall clock, unix ns.
    fn wall_ns(&self) -> u64;
}

/// A wall-clock read is kept only when the two timeline reads around it
/// are at most this far apart (a preempted read is retried).
pub const PAIR_SPREAD_NS: u64 = 20_000;

/// The held correction is re-anchored when the measured one is this far
/// from it: the most a record's time is off the wall clock (a few ms, as
/// NTP itself is on a LAN).
pub const REANCHOR_NS: u64 = 2_000_000;

/// Tries at a tight pair before the tightest so far is taken.
const PAIR_TRIES: usize = 4;

/// The timeline over a [`Source`], and the steps of its wall clock.
#[derive(Debug)]
pub struct Clock<S> {
    source: S,
    anchor_unix: u64,
    anchor_continuous: u64,
    state: Mutex<State>,
}

/// What a [`Clock`] holds between reads.
#[derive(Debug, Default)]
struct State {
    steps: Steps,
    held: i64,
    generation: u64,
}

impl<S: Source> Clock<S> {
    /// A timeline that reads as the wall clock does now: anchored on the
    /// tightest pair of reads, so the corrections measured later start at
    /// 0 give or take the reads' noise (an anchor read across a preemption
    /// would offset every Linux kernel stamp from userspace reads by as
    /// much, for the agent's life).
    pub fn new(source: S) -> Clock<S> {
        let (_, anchor_continuous, anchor_unix) = tightest_pair(&source);
        Clock {
            source,
            anchor_unix,
            anchor_continuous,
            state: Mutex::new(State::default()),
        }
    }

    /// The source (for tests that move a synthetic clock).
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Now on the timeline.
    pub fn now_ns(&self) -> u64 {
        self.at(self.source.continuous_ns())
    }

    /// The timeline reading of continuous-clock time `continuous_ns` (a
    /// macOS `SCM_TIMESTAMP_CONTINUOUS` stamp, in ns).
    pub fn at(&self, continuous_ns: u64) -> u64 {
        let since = continuous_ns as i128 - self.anchor_continuous as i128;
        u64::try_from((self.anchor_unix as i128 + since).max(0)).unwrap_or(u64::MAX)
    }

    /// Measures the correction now, tells a step from drift, and
    /// re-anchors the held correction when the two are apart.
    pub fn read(&self) -> Reading {
        let (timeline, wall, spread) = self.pair();
        let measured =
            (wall as i128 - timeline as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let mut st = self.state();
        let step = st.steps.observe(timeline, measured, spread / 2);
        if step || measured.abs_diff(st.held) > REANCHOR_NS {
            st.held = measured;
            st.generation += 1;
        }
        Reading {
            correction_ns: st.held,
            generation: st.generation,
        }
    }

    /// Wall-clock steps seen so far.
    pub fn steps(&self) -> u64 {
        self.state().steps.count()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A timeline reading, the wall clock read with it and the spread of
    /// the pair ([`tightest_pair`]).
    fn pair(&self) -> (u64, u64, u64) {
        let (spread, continuous, wall) = tightest_pair(&self.source);
        (self.at(continuous), wall, spread)
    }
}

/// A wall-clock read between two continuous reads at most
/// [`PAIR_SPREAD_NS`] apart (else the tightest of [`PAIR_TRIES`]), as
/// `(spread, continuous time at their middle, wall)`.
fn tightest_pair(source: &impl Source) -> (u64, u64, u64) {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..PAIR_TRIES {
        let a = source.continuous_ns();
        let wall = source.wall_ns();
        let b = source.continuous_ns();
        let spread = b.saturating_sub(a);
        if best.is_none_or(|(s, _, _)| spread < s) {
            best = Some((spread, a + spread / 2, wall));
        }
        if spread <= PAIR_SPREAD_NS {
            break;
        }
    }
    best.unwrap_or_default()
}

/// The process's clock over the OS clocks, anchored at first use.
pub fn clock() -> &'static Clock<imp::Os> {
    static CLOCK: OnceLock<Clock<imp::Os>> = OnceLock::new();
    CLOCK.get_or_init(|| Clock::new(imp::Os::new()))
}

/// Now on the agent's timeline.
pub fn now_ns() -> u64 {
    clock().now_ns()
}

/// The correction now, and the steps so far.
pub fn read() -> Reading {
    clock().read()
}

/// Wall-clock now for a record: the timeline now, corrected.
pub fn unix_now() -> u64 {
    let c = clock();
    let t = c.now_ns();
    c.read().to_unix(t)
}

/// A wall-clock stamp (Linux kernel packet stamps) on the timeline, and the
/// generation it was converted under.
pub fn from_wall(wall_ns: u64) -> (u64, u64) {
    let r = read();
    (r.from_wall(wall_ns), r.generation)
}

#[cfg(test)]
pub(crate) mod synthetic;
#[cfg(test)]
mod tests;
