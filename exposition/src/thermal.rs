//! Thermals (`thermal` records): each sensor's temperature and the node's
//! throttling state, newest reading by agent time.
//!
//! `boltwatch_cpu_frequency_ratio` appears once a reading carries the
//! ratio; a reading without it (macOS, Linux without cpufreq) leaves the
//! gauge as it was, never at 0.
//!
//! `boltwatch_thermal_throttled` is a level: agents that report one
//! (`Throttle.level_known`) say 1 in every reading of a throttle episode;
//! older agents' per-reading flag is shown as it is. macOS readings are
//! judged by their pressure level, throttled from Heavy up
//! ([`reading_throttled`]), also those of agents that still flagged
//! Moderate; `boltwatch_thermal_pressure_level` keeps the level itself.
//! `boltwatch_thermal_throttled_seconds_total` sums, over the node's agent
//! boots, each boot's newest cumulative throttled seconds.

use std::collections::BTreeMap;

use boltwatch_proto::throttle::reading_throttled;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, Throttle};

use crate::domain::{Domain, Subjects};
use crate::family::{families, labels::NODE, At, Exposition, Newest};
use crate::key;

/// The payload kinds [`ThermalMetrics`]'s `apply` reads.
pub const KINDS: &[&str] = &["thermal"];

families! {
    TEMPERATURE = Gauge("boltwatch_temperature_celsius", "celsius", &["node", "sensor"], "Temperature of a sensor, newest reading.");
    THROTTLED = Gauge("boltwatch_thermal_throttled", "", NODE, "1 while the node is thermally throttled: every reading of a throttle episode, newest reading.");
    THROTTLED_SECONDS = Counter("boltwatch_thermal_throttled_seconds_total", "seconds", NODE, "Seconds the node was thermally throttled, summed over its agent boots.");
    PRESSURE = Gauge("boltwatch_thermal_pressure_level", "", NODE, "Thermal pressure level: macOS 0 nominal, 1 moderate (not throttled), 2 heavy, 3 trapping, 4 sleeping; Linux 0, or 1 while throttled.");
    FREQUENCY_RATIO = Gauge("boltwatch_cpu_frequency_ratio", "", NODE, "Current over maximum CPU frequency, averaged over frequency domains.");
}

/// A node's throttling, from the readings that carried a throttle signal.
#[derive(Debug, Default, Clone)]
struct ThrottleState {
    /// Throttled during the newest reading's interval.
    throttled: Newest<bool>,
    /// Newest pressure level.
    pressure: Newest<u32>,
    /// Newest known current-over-maximum frequency.
    ratio: Newest<f64>,
    /// Per agent boot: (seq, cumulative throttled seconds) of its newest
    /// reading.
    seconds: BTreeMap<String, (u64, f64)>,
}

impl ThrottleState {
    fn update(&mut self, r: &Record, t: &Throttle) {
        let (boot, seq, at) = (r.boot_id.as_str(), r.seq, At::of(r));
        self.throttled.update(at, reading_throttled(t));
        if t.level_known {
            key::with(
                &mut self.seconds,
                boot,
                || boot.to_string(),
                |slot| {
                    if seq >= slot.0 {
                        *slot = (seq, t.throttled_seconds);
                    }
                },
            );
        }
        self.pressure.update(at, t.pressure_level);
        if let Some(ratio) = t.cpu_frequency_ratio {
            self.ratio.update(at, ratio);
        }
    }
}

/// State behind the thermal families.
#[derive(Debug, Default, Clone)]
pub struct ThermalMetrics {
    /// (node, sensor).
    temperatures: BTreeMap<(String, String), Newest<f64>>,
    throttle: BTreeMap<String, ThrottleState>,
}

impl Domain for ThermalMetrics {
    fn apply(&mut self, r: &Record, _: &mut Subjects) {
        let Some(Payload::Thermal(t)) = &r.payload else {
            return;
        };
        for s in &t.sensors {
            let k = (r.node.as_str(), s.name.as_str());
            let make = || (r.node.clone(), s.name.clone());
            key::with(&mut self.temperatures, key::pair(&k), make, |v| {
                v.update(At::of(r), s.celsius)
            });
        }
        if let Some(th) = &t.throttle {
            let make = || r.node.clone();
            key::with(&mut self.throttle, r.node.as_str(), make, |s| {
                s.update(r, th)
            });
        }
    }

    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.family(
            &TEMPERATURE,
            self.temperatures
                .iter()
                .filter_map(|((n, s), v)| Some(([n.as_str(), s.as_str()], *v.get()?))),
        );
        let th = &self.throttle;
        e.family(
            &THROTTLED,
            th.iter()
                .filter_map(|(n, s)| Some(([n.as_str()], *s.throttled.get()?))),
        );
        e.family(
            &THROTTLED_SECONDS,
            th.iter().map(|(n, s)| {
                let total: f64 = s.seconds.values().map(|(_, secs)| secs).sum();
                ([n.as_str()], total)
            }),
        );
        e.family(
            &PRESSURE,
            th.iter()
                .filter_map(|(n, s)| Some(([n.as_str()], *s.pressure.get()?))),
        );
        e.family(
            &FREQUENCY_RATIO,
            th.iter()
                .filter_map(|(n, s)| Some(([n.as_str()], *s.ratio.get()?))),
        );
    }

    fn forget(&mut self, node: &str) {
        // The throttled-seconds counter stays; the gauges go.
        self.temperatures.retain(|(n, _), _| n != node);
        if let Some(s) = self.throttle.get_mut(node) {
            s.throttled = Newest::default();
            s.pressure = Newest::default();
            s.ratio = Newest::default();
        }
    }
}
