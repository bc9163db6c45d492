//! What a thermal reading's [`Throttle`] says about the interval that ended
//! with it, read the same way by the agent (stamping a bandwidth test with
//! its thermals) and the collector (judging a test by the peer's readings).

use crate::v1::Throttle;

/// Whether the node was throttled in the interval that ended with this
/// reading: the level where the agent reports one (`level_known`: the
/// whole episode, on cpufreq-only machines too), else the older per-reading
/// flag or a macOS pressure level of Moderate or above.
pub fn reading_throttled(t: &Throttle) -> bool {
    if t.level_known {
        t.in_episode
    } else {
        t.throttled || t.pressure_level >= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_readings_and_older_flags() {
        let t = |throttled, pressure_level, level_known, in_episode| Throttle {
            throttled,
            pressure_level,
            level_known,
            in_episode,
            ..Default::default()
        };
        assert!(reading_throttled(&t(false, 0, true, true)));
        assert!(
            !reading_throttled(&t(true, 1, true, false)),
            "the level rules"
        );
        assert!(reading_throttled(&t(true, 0, false, false)));
        assert!(
            reading_throttled(&t(false, 2, false, false)),
            "macOS pressure"
        );
        assert!(!reading_throttled(&t(false, 0, false, false)));
    }
}
