//! What a thermal reading's [`Throttle`] says about the interval that ended
//! with it, read the same way by the agent (stamping a bandwidth test with
//! its thermals, deciding a macOS reading's level) and the collector
//! (judging a test by the peer's readings, the throttled gauge).
//!
//! macOS pressure levels (`libkern/OSThermalNotification.h`,
//! `com.apple.system.thermalpressurelevel`): 0 Nominal, 1 Moderate, 2 Heavy,
//! 3 Trapping, 4 Sleeping. Apple's public `NSProcessInfoThermalState` maps
//! Moderate to `Fair` ("slightly elevated", no action asked of apps) and
//! Heavy to `Serious` ("system performance is reduced"), so throttling
//! counts from Heavy up; the level itself is kept as a gauge.

use crate::v1::Throttle;

/// macOS pressure level Moderate (`NSProcessInfoThermalStateFair`).
pub const PRESSURE_MODERATE: u32 = 1;
/// macOS pressure level Heavy (`NSProcessInfoThermalStateSerious`): the
/// lowest level that counts as throttled.
pub const PRESSURE_HEAVY: u32 = 2;
/// `Throttle.source` of macOS readings (the notify(3) pressure level).
pub const NOTIFY_SOURCE: &str = "notify";

/// Whether a macOS pressure level means throttling: Heavy or above.
pub fn pressure_throttled(level: u32) -> bool {
    level >= PRESSURE_HEAVY
}

/// Whether the node was throttled in the interval that ended with this
/// reading. A macOS reading (source [`NOTIFY_SOURCE`]) is judged by its
/// pressure level, whatever its flags say: agents before this rule set
/// them from Moderate up, and the level is what they measured. Otherwise
/// the level where the agent reports one (`level_known`: the whole
/// episode, on cpufreq-only machines too), else the older per-reading
/// flag.
pub fn reading_throttled(t: &Throttle) -> bool {
    if t.source == NOTIFY_SOURCE {
        pressure_throttled(t.pressure_level)
    } else if t.level_known {
        t.in_episode
    } else {
        t.throttled || pressure_throttled(t.pressure_level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(throttled: bool, pressure_level: u32, level_known: bool, in_episode: bool) -> Throttle {
        Throttle {
            throttled,
            pressure_level,
            level_known,
            in_episode,
            source: "thermal_throttle".into(),
            ..Default::default()
        }
    }

    #[test]
    fn level_readings_and_older_flags() {
        assert!(reading_throttled(&t(false, 0, true, true)));
        assert!(
            !reading_throttled(&t(true, 1, true, false)),
            "the level rules"
        );
        assert!(reading_throttled(&t(true, 0, false, false)));
        assert!(
            reading_throttled(&t(false, 2, false, false)),
            "a Heavy pressure level"
        );
        assert!(!reading_throttled(&t(false, 0, false, false)));
    }

    #[test]
    fn macos_pressure_counts_from_heavy() {
        let levels: Vec<bool> = (0..=4).map(pressure_throttled).collect();
        assert_eq!(levels, [false, false, true, true, true]);
        assert!(!pressure_throttled(PRESSURE_MODERATE));
        assert!(pressure_throttled(PRESSURE_HEAVY));
    }

    /// A macOS reading from an agent that still counted Moderate: its
    /// flags say throttled, its level says Moderate, and the level wins;
    /// at Heavy it is throttled whatever the flags say.
    #[test]
    fn macos_readings_are_judged_by_their_level() {
        let mac = |level, flags| Throttle {
            source: NOTIFY_SOURCE.into(),
            ..t(flags, level, true, flags)
        };
        assert!(!reading_throttled(&mac(PRESSURE_MODERATE, true)));
        assert!(!reading_throttled(&mac(0, false)));
        assert!(reading_throttled(&mac(PRESSURE_HEAVY, false)));
        assert!(reading_throttled(&mac(4, true)));
    }
}
