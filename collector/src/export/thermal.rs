//! Thermals (`thermal` records): each sensor's temperature and the node's
//! throttling state, newest reading by agent time.
//!
//! `boltwatch_cpu_frequency_ratio` appears once a reading knows the ratio
//! (a ratio of 0 means unknown in the schema).

use std::collections::BTreeMap;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, Throttle};

use super::family::{families, labels::NODE, Exposition, Family, Newest};
use super::{Domain, Subjects};

families! {
    TEMPERATURE = Gauge("boltwatch_temperature_celsius", "celsius", &["node", "sensor"], "Temperature of a sensor, newest reading.");
    THROTTLED = Gauge("boltwatch_thermal_throttled", "", NODE, "1 when the node was thermally throttled during the newest reading interval.");
    PRESSURE = Gauge("boltwatch_thermal_pressure_level", "", NODE, "Thermal pressure level (0 nominal; macOS levels, 1 on Linux while throttled).");
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
}

impl ThrottleState {
    fn update(&mut self, unix_ns: u64, t: &Throttle) {
        self.throttled.update(unix_ns, t.throttled);
        self.pressure.update(unix_ns, t.pressure_level);
        if t.cpu_frequency_ratio > 0.0 {
            self.ratio.update(unix_ns, t.cpu_frequency_ratio);
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
            self.temperatures
                .entry((r.node.clone(), s.name.clone()))
                .or_default()
                .update(r.unix_ns, s.celsius);
        }
        if let Some(th) = &t.throttle {
            let s = self.throttle.entry(r.node.clone()).or_default();
            s.update(r.unix_ns, th);
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

    fn families(&self) -> &'static [Family] {
        FAMILIES
    }
}
