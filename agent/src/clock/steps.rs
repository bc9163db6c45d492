//! Clock steps, told from drift (pure).
//!
//! The *correction* is the wall clock minus the agent's timeline
//! ([`super`]). Drift moves it slowly: the timeline's oscillator against
//! NTP's, which slews the wall clock by at most [`MAX_SLEW_PPM`] (ntpd's
//! and chrony's ceiling; on Linux `CLOCK_BOOTTIME` is slewed with the wall
//! clock, so there it does not move at all). Anything faster is a step
//! (`settimeofday`, `date -s`, NTP's first sync at boot, a macOS sleep
//! whose wall time the kernel restored): [`Steps::observe`] counts it and
//! tells the clock, which bumps its generation, so whoever stamped a probe
//! before the step and its reply after it knows not to mix the two.

/// Below this change (beyond the reads' own uncertainty) a correction is
/// read noise, not a step.
pub const STEP_FLOOR_NS: u64 = 50_000;

/// The fastest a time daemon slews the wall clock, in parts per million
/// (the kernel's `MAXPHASE`-era limit that ntpd and chrony keep to).
pub const MAX_SLEW_PPM: u64 = 500;

/// What one look at the clocks found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Wall clock minus timeline, ns, as the clock holds it: what turns a
    /// timeline reading into unix time for a record ([`Reading::to_unix`])
    /// and a wall-clock stamp into a timeline reading.
    pub correction_ns: i64,
    /// Changes of the held correction so far: equal generations mean the
    /// same correction, so stamps converted under them compare exactly.
    pub generation: u64,
}

impl Reading {
    /// The unix time of `timeline_ns` under this correction (saturating at
    /// 0 and `u64::MAX`).
    pub fn to_unix(&self, timeline_ns: u64) -> u64 {
        timeline_ns.saturating_add_signed(self.correction_ns)
    }

    /// The timeline reading of a wall-clock stamp `wall_ns` (a Linux kernel
    /// packet stamp), under this correction.
    pub fn from_wall(&self, wall_ns: u64) -> u64 {
        wall_ns.saturating_add_signed(self.correction_ns.saturating_neg())
    }
}

/// One correction measured, when, and give or take how much.
#[derive(Debug, Clone, Copy)]
struct Seen {
    timeline_ns: u64,
    correction_ns: i64,
    uncertainty_ns: u64,
}

/// The corrections seen and the steps among them.
#[derive(Debug, Clone, Default)]
pub struct Steps {
    last: Option<Seen>,
    count: u64,
}

impl Steps {
    /// Steps seen so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Takes the correction `correction_ns` measured at timeline time
    /// `timeline_ns`, good to `uncertainty_ns` (half the spread of the
    /// reads around it: a preempted read is less sure); a change from the
    /// previous one beyond both reads' uncertainty and what slewing
    /// explains over the time between them is a step: returns true.
    pub fn observe(&mut self, timeline_ns: u64, correction_ns: i64, uncertainty_ns: u64) -> bool {
        let mut step = false;
        if let Some(last) = self.last {
            let elapsed = timeline_ns.abs_diff(last.timeline_ns);
            let slew = (u128::from(elapsed) * u128::from(MAX_SLEW_PPM) / 1_000_000) as u64;
            let allowed = STEP_FLOOR_NS
                .saturating_add(slew)
                .saturating_add(uncertainty_ns)
                .saturating_add(last.uncertainty_ns);
            step = correction_ns.abs_diff(last.correction_ns) > allowed;
            self.count += u64::from(step);
        }
        // Readings from several threads may arrive out of order; the later
        // one on the timeline is the reference for the next.
        if self.last.is_none_or(|l| timeline_ns >= l.timeline_ns) {
            self.last = Some(Seen {
                timeline_ns,
                correction_ns,
                uncertainty_ns,
            });
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn drift_within_slew_is_not_a_step() {
        let mut s = Steps::default();
        assert!(!s.observe(100 * S, 5_000, 100));
        // 60 s later, 20 ms of slew (333 ppm): drift.
        assert!(!s.observe(160 * S, 20_005_000, 100));
        // Read noise right after.
        assert!(!s.observe(160 * S + 1_000, 20_040_000, 100));
        // A preempted read 0.5 ms off, but known to be unsure by as much.
        assert!(!s.observe(160 * S + 2_000, 20_540_000, 600_000));
        assert_eq!(s.count(), 0);
    }

    #[test]
    fn a_jump_beyond_slew_is_a_step_either_way() {
        let mut s = Steps::default();
        s.observe(10 * S, 0, 100);
        assert!(s.observe(11 * S, 30 * S as i64, 100));
        assert!(s.observe(12 * S, 0, 100), "and back");
        assert!(!s.observe(13 * S, 0, 100));
        // 100 us in 1 ms is no slew.
        assert!(s.observe(13 * S + 1_000_000, 100_000, 100));
        assert_eq!(s.count(), 3);
    }

    #[test]
    fn conversions_round_trip() {
        let r = Reading {
            correction_ns: -30 * S as i64,
            generation: 0,
        };
        assert_eq!(r.to_unix(100 * S), 70 * S);
        assert_eq!(r.from_wall(70 * S), 100 * S);
        assert_eq!(r.to_unix(S), 0, "saturates");
    }
}
