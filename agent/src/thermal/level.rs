//! Throttling as a level with a duration (pure): every reading taken while
//! the node is throttled says so (not only the one that saw an episode
//! begin), and the seconds throttled add up per agent boot.
//!
//! What "throttled during the interval" means is the OS reader's: on Linux
//! the kernel's `thermal_throttle` event count or total throttled time grew
//! since the previous read; on machines with cpufreq only, the frequency
//! was held below [`CPUFREQ_THROTTLED_SHARE`] of the maximum for
//! [`CPUFREQ_HOLD_READS`] reads in a row ([`ThrottleLevel::cpufreq_held`];
//! idle cores clock down too, so one low read is not enough, and a machine
//! whose governor parks it low while idle will read as throttled: prefer
//! `thermal_throttle` where the CPU has it); on macOS the pressure level is
//! Heavy or above at the read (`boltwatch_proto::throttle`). The seconds of an interval count as
//! throttled when its reading is.

use std::time::Instant;

use super::Throttle;

/// Below this share of the maximum frequency a cpufreq-only machine may be
/// throttled.
pub const CPUFREQ_THROTTLED_SHARE: f64 = 0.6;
/// Consecutive reads below the share that make it throttled.
pub const CPUFREQ_HOLD_READS: u32 = 3;

/// One node's throttle level and seconds.
#[derive(Debug, Default, Clone)]
pub struct ThrottleLevel {
    seconds: f64,
    last: Option<Instant>,
    below: u32,
}

impl ThrottleLevel {
    /// A tracker with nothing seen.
    pub fn new() -> ThrottleLevel {
        ThrottleLevel::default()
    }

    /// Whether a cpufreq-only machine counts as throttled after a read of
    /// `ratio` (current over maximum frequency).
    pub fn cpufreq_held(&mut self, ratio: f64) -> bool {
        if ratio < CPUFREQ_THROTTLED_SHARE {
            self.below = self.below.saturating_add(1);
        } else {
            self.below = 0;
        }
        self.below >= CPUFREQ_HOLD_READS
    }

    /// A reading at `now`, throttled or not during the interval since the
    /// previous one: sets the level fields of `t`.
    pub fn stamp(&mut self, t: &mut Throttle, now: Instant, throttled: bool) {
        let elapsed = self
            .last
            .map_or(0.0, |l| now.saturating_duration_since(l).as_secs_f64());
        self.last = Some(now);
        if throttled {
            self.seconds += elapsed;
        }
        t.level_known = true;
        t.in_episode = throttled;
        t.throttled_seconds = self.seconds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn level_holds_for_the_episode_and_seconds_add_up() {
        let mut l = ThrottleLevel::new();
        let t0 = Instant::now();
        let mut t = Throttle::default();
        let reads = [false, true, true, true, false, true];
        let mut seen = Vec::new();
        for (i, throttled) in reads.into_iter().enumerate() {
            l.stamp(&mut t, t0 + Duration::from_secs(5 * i as u64), throttled);
            seen.push((t.in_episode, t.throttled_seconds));
        }
        assert!(t.level_known);
        assert_eq!(
            seen,
            [
                (false, 0.0),
                (true, 5.0),
                (true, 10.0),
                (true, 15.0),
                (false, 15.0),
                (true, 20.0)
            ]
        );
    }

    /// A node throttled in 3 of every 4 read intervals for 40 minutes:
    /// every throttled reading says so and 75 % of the time is counted.
    #[test]
    fn throttled_three_quarters_of_the_time_reads_as_such() {
        let mut l = ThrottleLevel::new();
        let t0 = Instant::now();
        let mut t = Throttle::default();
        l.stamp(&mut t, t0, false);
        let reads = 40 * 60 / 5;
        let mut throttled_reads = 0;
        for i in 1..=reads {
            let throttled = i % 4 != 0;
            l.stamp(&mut t, t0 + Duration::from_secs(5 * i), throttled);
            assert_eq!(t.in_episode, throttled, "read {i}");
            throttled_reads += u64::from(t.in_episode);
        }
        assert_eq!(throttled_reads * 4, reads * 3);
        assert_eq!(t.throttled_seconds, 0.75 * 2400.0);
    }

    #[test]
    fn cpufreq_must_be_held_low() {
        let mut l = ThrottleLevel::new();
        let got: Vec<bool> = [0.4, 0.5, 0.9, 0.3, 0.3, 0.3, 0.59, 0.6]
            .into_iter()
            .map(|r| l.cpufreq_held(r))
            .collect();
        assert_eq!(got, [false, false, false, false, false, true, true, false]);
    }

    /// The real sysfs reader over a fixture: one long episode adds one
    /// event and then only throttled time; every reading of it is throttled.
    #[cfg(target_os = "linux")]
    #[test]
    fn sysfs_episode_without_new_events_stays_throttled() {
        use crate::thermal::{SysfsThermal, ThermalSource};
        let dir = tempfile::tempdir().unwrap();
        let tt = dir.path().join("devices/system/cpu/cpu0/thermal_throttle");
        std::fs::create_dir_all(&tt).unwrap();
        let set = |count: u64, ms: u64| {
            std::fs::write(tt.join("core_throttle_count"), format!("{count}\n")).unwrap();
            std::fs::write(tt.join("core_throttle_total_time_ms"), format!("{ms}\n")).unwrap();
        };
        let mut src = SysfsThermal::new(dir.path());
        let mut levels = Vec::new();
        for (count, ms) in [(0, 0), (1, 400), (1, 1400), (1, 2400), (1, 2400)] {
            set(count, ms);
            let t = src.read().unwrap().throttle.unwrap();
            assert!(t.level_known);
            levels.push(t.in_episode);
        }
        assert_eq!(levels, [false, true, true, true, false]);
    }
}
