//! What the node's thermals were during a bandwidth test: throttled at any
//! sample, and the hottest sensor, stamped into the test's results so the
//! collector's alerts judge the test by its own conditions (a test run
//! while cool, followed by throttling later, is not blamed on heat).
//!
//! The scheduler reads its own [`ThermalSource`] (a second reader beside
//! the sampler's; each keeps its own throttle baseline) when a test starts,
//! once a second while it runs and when it ends. The start read is the
//! baseline: its temperatures count, its throttle verdict does not (it
//! says what happened since the previous read, before the test). Only the
//! local end is sampled here; the collector judges the peer's end from the
//! peer's own thermal readings over the test's window.

use std::sync::{Arc, Mutex};

use super::injected::Injected;

use boltwatch_proto::throttle::reading_throttled;
use boltwatch_proto::v1::{BandwidthResult, ThermalReading};

use crate::thermal::ThermalSource;

/// A shared handle on the scheduler's thermal source; `none()` samples
/// nothing and leaves results unstamped.
#[derive(Clone, Default, Debug)]
pub struct ThermalProbe(Injected<Mutex<Box<dyn ThermalSource>>>);

impl ThermalProbe {
    /// Samples `source`.
    pub fn new(source: Box<dyn ThermalSource>) -> ThermalProbe {
        ThermalProbe(Injected::new(Arc::new(Mutex::new(source))))
    }

    /// Samples nothing.
    pub fn none() -> ThermalProbe {
        ThermalProbe(Injected::none())
    }

    /// One reading (a few small sysfs reads, or one sysinfo refresh), or
    /// `None` when off or the read failed.
    pub fn read(&self) -> Option<ThermalReading> {
        let src = self.0.get()?;
        let mut src = src.lock().unwrap_or_else(|p| p.into_inner());
        src.read().ok()
    }
}

/// The thermals of one test so far (pure).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct DuringTest {
    samples: u32,
    throttled: bool,
    max_celsius: Option<f64>,
    max_pressure: u32,
}

impl DuringTest {
    /// Adds a reading; `baseline` for the one taken as the test starts.
    pub fn add(&mut self, r: &ThermalReading, baseline: bool) {
        self.samples += 1;
        for s in &r.sensors {
            self.max_celsius = Some(self.max_celsius.map_or(s.celsius, |m| m.max(s.celsius)));
        }
        if let Some(t) = &r.throttle {
            self.max_pressure = self.max_pressure.max(t.pressure_level);
        }
        if !baseline {
            if let Some(t) = &r.throttle {
                self.throttled |= reading_throttled(t);
            }
        }
    }

    /// Writes the verdict into a result of the test (nothing when no
    /// reading after the baseline was taken).
    pub fn stamp(&self, r: &mut BandwidthResult) {
        if self.samples < 2 {
            return;
        }
        r.thermals_sampled = true;
        r.throttled_during = self.throttled;
        r.max_celsius_during = self.max_celsius.unwrap_or(0.0);
        r.max_pressure_level_during = self.max_pressure;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{TemperatureSensor, Throttle};

    fn reading(celsius: f64, throttled: bool, pressure: u32) -> ThermalReading {
        ThermalReading {
            sensors: vec![TemperatureSensor {
                name: "cpu".into(),
                celsius,
                ..Default::default()
            }],
            throttle: Some(Throttle {
                throttled,
                pressure_level: pressure,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn baseline_throttle_is_before_the_test_its_temperature_counts() {
        let mut d = DuringTest::default();
        d.add(&reading(91.0, true, 1), true);
        let mut r = BandwidthResult::default();
        d.stamp(&mut r);
        assert!(!r.thermals_sampled, "a baseline alone says nothing");
        d.add(&reading(60.0, false, 0), false);
        d.stamp(&mut r);
        assert!(r.thermals_sampled && !r.throttled_during);
        assert_eq!(r.max_celsius_during, 91.0);
        // The pressure level is a level: the start's reading counts.
        assert_eq!(r.max_pressure_level_during, 1);
    }

    #[test]
    fn any_throttled_sample_or_pressure_marks_the_test() {
        for later in [reading(70.0, true, 0), reading(70.0, false, 2)] {
            let mut d = DuringTest::default();
            d.add(&reading(50.0, false, 0), true);
            d.add(&later, false);
            d.add(&reading(55.0, false, 0), false);
            let mut r = BandwidthResult::default();
            d.stamp(&mut r);
            assert!(r.throttled_during);
            assert_eq!(r.max_celsius_during, 70.0);
            let pressure = later.throttle.unwrap().pressure_level;
            assert_eq!(r.max_pressure_level_during, pressure);
        }
    }

    #[test]
    fn the_level_decides_where_the_reader_has_one() {
        // A cpufreq-only machine held low: no per-read flag, but the level.
        let mut held = reading(60.0, false, 0);
        let t = held.throttle.as_mut().unwrap();
        (t.level_known, t.in_episode) = (true, true);
        // A reader with a level that says the episode is over.
        let mut over = reading(60.0, true, 1);
        let t = over.throttle.as_mut().unwrap();
        (t.level_known, t.in_episode) = (true, false);
        for (r, want) in [(held, true), (over, false)] {
            let mut d = DuringTest::default();
            d.add(&reading(50.0, false, 0), true);
            d.add(&r, false);
            let mut b = BandwidthResult::default();
            d.stamp(&mut b);
            assert_eq!(b.throttled_during, want, "{r:?}");
        }
    }

    #[test]
    fn no_probe_reads_nothing() {
        assert_eq!(ThermalProbe::none().read(), None);
    }
}
