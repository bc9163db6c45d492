//! Temperatures and throttling: each node's readings accumulated, its
//! sensors' figures and throttle episodes, and the questions the rest of
//! the report asks of them (was either end of a link throttled at `t`,
//! how hot was a node at `t`).

use std::collections::BTreeMap;

use boltwatch_proto::v1::ThermalReading;

use super::{secs, Episode, Sensor, Thermal};

/// Distinct sensors a node's report keeps at most (a Mac reports tens);
/// readings of further names count towards the hottest sensor only.
pub(super) const MAX_SENSORS: usize = 1024;

/// One node's thermal readings.
#[derive(Debug, Default)]
pub(super) struct NodeAcc {
    /// (time, hottest sensor, throttled).
    pub readings: Vec<(u64, Option<f64>, bool)>,
    /// sensor -> (readings, sum, max).
    pub sensors: BTreeMap<String, (u64, f64, f64)>,
}

impl NodeAcc {
    /// Reading `th`, recorded at `unix_ns`.
    pub fn add(&mut self, th: &ThermalReading, unix_ns: u64) {
        let mut hottest: Option<f64> = None;
        for s in &th.sensors {
            hottest = Some(hottest.map_or(s.celsius, |h: f64| h.max(s.celsius)));
            let full = self.sensors.len() >= MAX_SENSORS;
            let e = match self.sensors.get_mut(&s.name) {
                Some(e) => e,
                None if full => continue,
                None => self
                    .sensors
                    .entry(s.name.clone())
                    .or_insert((0, 0.0, f64::NEG_INFINITY)),
            };
            e.0 += 1;
            e.1 += s.celsius;
            e.2 = e.2.max(s.celsius);
        }
        let throttled = th
            .throttle
            .as_ref()
            .is_some_and(boltwatch_proto::throttle::reading_throttled);
        self.readings.push((unix_ns, hottest, throttled));
    }

    /// The hottest-sensor reading at or before `t` (the first one if none);
    /// readings sorted.
    pub fn reading_at(&self, t: u64) -> Option<f64> {
        let r = &self.readings;
        let i = r.partition_point(|x| x.0 <= t);
        r.get(i.saturating_sub(1)).and_then(|x| x.1)
    }

    /// The hottest sensor's readings that have one, `(t, celsius)`.
    pub fn hottest(&self) -> Vec<(u64, f64)> {
        self.readings
            .iter()
            .filter_map(|r| Some((r.0, r.1?)))
            .collect()
    }
}

/// Temperatures and throttle episodes per node (an episode still open runs
/// to `to`); sorts the readings.
pub(super) fn per_node(nodes: &mut BTreeMap<String, NodeAcc>, to: u64) -> Vec<Thermal> {
    let mut out = Vec::new();
    for (node, acc) in nodes.iter_mut() {
        acc.readings.sort_by_key(|r| r.0);
        let episodes = episodes(&acc.readings, to);
        let sensors: Vec<Sensor> = acc
            .sensors
            .iter()
            .map(|(name, (n, sum, max))| Sensor {
                sensor: name.clone(),
                readings: *n,
                mean_celsius: sum / *n as f64,
                worst_celsius: *max,
            })
            .collect();
        let hottest = sensors
            .iter()
            .max_by(|a, b| a.worst_celsius.total_cmp(&b.worst_celsius));
        out.push(Thermal {
            node: node.clone(),
            sensor: hottest.map(|s| s.sensor.clone()),
            mean_celsius: hottest.map(|s| s.mean_celsius),
            worst_celsius: hottest.map(|s| s.worst_celsius),
            throttle_episodes: episodes.len() as u64,
            throttled_seconds: episodes
                .iter()
                .map(|e| secs(e.end_unix_ns - e.start_unix_ns))
                .fold(0.0, |a, b| a + b),
            episodes,
            sensors,
        });
    }
    out
}

/// Throttle episodes of sorted readings: from the first reading that says
/// throttled to the first that does not (or `to`).
fn episodes(readings: &[(u64, Option<f64>, bool)], to: u64) -> Vec<Episode> {
    let mut episodes: Vec<Episode> = Vec::new();
    let mut open: Option<u64> = None;
    for &(t, _, th) in readings {
        match (open, th) {
            (None, true) => open = Some(t),
            (Some(s), false) => {
                episodes.push(Episode {
                    start_unix_ns: s,
                    end_unix_ns: t,
                });
                open = None;
            }
            _ => {}
        }
    }
    if let Some(s) = open {
        episodes.push(Episode {
            start_unix_ns: s,
            end_unix_ns: to,
        });
    }
    episodes
}

/// Each node's throttle episodes, to ask whether a link was throttled.
pub(super) struct Throttling<'a>(BTreeMap<&'a str, &'a [Episode]>);

impl<'a> Throttling<'a> {
    /// The episodes of `thermal`.
    pub fn of(thermal: &'a [Thermal]) -> Throttling<'a> {
        Throttling(
            thermal
                .iter()
                .map(|t| (t.node.as_str(), t.episodes.as_slice()))
                .collect(),
        )
    }

    /// Whether node `a` or node `b` was throttled at `t`.
    pub fn either(&self, a: &str, b: &str, t: u64) -> bool {
        [a, b]
            .iter()
            .any(|n| self.0.get(n).is_some_and(|e| inside(e, t)))
    }

    /// The episodes of `a`, then of `b`, as `(start, end)`.
    pub fn spans(&self, a: &str, b: &str) -> Vec<(u64, u64)> {
        [a, b]
            .iter()
            .flat_map(|n| self.0.get(n).copied().unwrap_or_default())
            .map(|e| (e.start_unix_ns, e.end_unix_ns))
            .collect()
    }
}

/// Whether `t` falls in one of the (sorted) episodes.
fn inside(e: &[Episode], t: u64) -> bool {
    let i = e.partition_point(|e| e.start_unix_ns <= t);
    i > 0 && t < e[i - 1].end_unix_ns
}

#[cfg(test)]
mod tests {
    use boltwatch_proto::v1::{ThermalReading, Throttle};

    use super::NodeAcc;

    /// The report judges throttling by the one rule
    /// (`boltwatch_proto::throttle`): an older macOS agent that flagged
    /// Moderate pressure as throttled was not throttled; Heavy was.
    #[test]
    fn macos_moderate_is_not_throttling_in_the_report() {
        let reading = |level, throttled| ThermalReading {
            throttle: Some(Throttle {
                throttled,
                pressure_level: level,
                source: boltwatch_proto::throttle::NOTIFY_SOURCE.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut acc = NodeAcc::default();
        acc.add(&reading(1, true), 1);
        acc.add(&reading(2, true), 2);
        acc.add(&reading(0, false), 3);
        let throttled: Vec<bool> = acc.readings.iter().map(|r| r.2).collect();
        assert_eq!(throttled, [false, true, false]);
    }
}
