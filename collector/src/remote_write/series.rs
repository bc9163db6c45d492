//! Samples from records: the same families and values `/metrics` exposes,
//! each stamped with the time of the record that produced it. Pure.
//!
//! A [`Deriver`] holds its own fresh exporter state ([`Metrics`]) and
//! applies records to it in store order, exactly as ingest applies them to
//! the shared state. After each record it renders the exposition and emits
//! the series whose value changed, at the record's timestamp. Going through
//! the exposition text (rather than a second per-domain hook) means every
//! family a domain adds is pushed with no change here, with exactly the
//! value `/metrics` would show after that record.
//!
//! A series that keeps its value is re-sent at most once per
//! [`HEARTBEAT_MS`] of record time, on a record of its own node, so an
//! instant query within Prometheus's 5-minute lookback finds it, as a
//! scrape would. Within one series timestamps only increase (Prometheus
//! refuses out-of-order samples): a record older than the series' last
//! sample (a spool replayed while the node's live records already arrived)
//! leaves that series for a later record to carry.
//!
//! Only the families records alone determine are pushed
//! ([`Metrics::record_families`], derived from the declarations): not
//! stream state, the collector's own ingest and store health, soaks,
//! remote write itself or build info. Each sample belongs to the family of
//! the `# TYPE` line before it, so a histogram's `_bucket`, `_sum` and
//! `_count` go with their family.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use boltwatch_proto::v1::Record;

use crate::export::Metrics;

/// Re-send an unchanged series this often (record time, milliseconds).
pub const HEARTBEAT_MS: i64 = 60_000;

/// A series' labels, `__name__` first then sorted by name (the order remote
/// write wants), external labels included.
pub type Labels = Arc<LabelPairs>;

/// (name, value) pairs.
pub type LabelPairs = Vec<(String, String)>;

/// One sample to push.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The series.
    pub labels: Labels,
    /// Value.
    pub value: f64,
    /// Unix milliseconds of the record.
    pub ts_ms: i64,
}

#[derive(Debug)]
struct Last {
    labels: Labels,
    node: Option<String>,
    value: f64,
    ts_ms: i64,
    /// (batch, index in its `out`) of the last sample pushed.
    at: Option<(u64, usize)>,
}

/// Per-endpoint exporter state and the last sample sent per series.
#[derive(Debug)]
pub struct Deriver {
    metrics: Metrics,
    /// The names of the families pushed.
    pushed: HashSet<&'static str>,
    external: Vec<(String, String)>,
    last: HashMap<String, Last>,
    /// Newest time of records skipped since the last settle, per node.
    skipped: HashMap<String, i64>,
    /// Current batch, see [`Deriver::begin`].
    epoch: u64,
}

impl Deriver {
    /// Fresh state; `external` labels are added to every series (a series'
    /// own label of the same name wins).
    pub fn new(external: Vec<(String, String)>) -> Deriver {
        Deriver {
            metrics: Metrics::new(),
            pushed: Metrics::record_families().iter().map(|f| f.name).collect(),
            external,
            last: HashMap::new(),
            skipped: HashMap::new(),
            epoch: 0,
        }
    }

    /// Applies a record without emitting: state before the endpoint's
    /// position (already delivered before a restart), or records dropped
    /// from the backlog. Cheap: the exposition is rendered once, by the next
    /// [`Deriver::apply`].
    pub fn skip(&mut self, r: &Record) {
        self.metrics.apply_record(r);
        let t = self.skipped.entry(r.node.clone()).or_insert(0);
        *t = (*t).max(ms(r));
    }

    /// Takes skipped records as sent: each series' value as of now, at the
    /// newest skipped time of its node (of any node for node-less series).
    fn settle(&mut self) {
        if self.skipped.is_empty() {
            return;
        }
        let newest = self.skipped.values().copied().max().unwrap_or(0);
        let text = self.metrics.render();
        for (id, family, value) in parse(&text) {
            if !self.pushed.contains(family) {
                continue;
            }
            if !self.last.contains_key(id) {
                let Some((labels, node)) = labels_of(id, &self.external) else {
                    continue;
                };
                let last = Last {
                    labels: Arc::new(labels),
                    node,
                    value: f64::NAN,
                    ts_ms: i64::MIN,
                    at: None,
                };
                self.last.insert(id.to_string(), last);
            }
            let l = self.last.get_mut(id).expect("inserted above");
            let ts = match &l.node {
                Some(n) => self.skipped.get(n).copied().unwrap_or(i64::MIN),
                None => newest,
            };
            if ts > l.ts_ms {
                l.value = value;
                l.ts_ms = ts;
            }
        }
        self.skipped.clear();
    }

    /// Starts a new batch: samples from now on go to a fresh `out`.
    pub fn begin(&mut self) {
        self.epoch += 1;
    }

    /// Applies a record and appends the samples it produced to `out`.
    pub fn apply(&mut self, r: &Record, out: &mut Vec<Point>) {
        self.apply_group(std::slice::from_ref(r), out);
    }

    /// Applies records that share one timestamp (consecutive in store
    /// order) and renders once: one sample per series and timestamp, as
    /// Prometheus requires, at a fraction of the cost of one render each.
    pub fn apply_group(&mut self, group: &[Record], out: &mut Vec<Point>) {
        let Some(first) = group.first() else { return };
        self.settle();
        for r in group {
            self.metrics.apply_record(r);
        }
        let ts = ms(first);
        let epoch = self.epoch;
        let text = self.metrics.render();
        for (id, family, value) in parse(&text) {
            if !self.pushed.contains(family) {
                continue;
            }
            match self.last.get_mut(id) {
                Some(l) => {
                    let changed = l.value.to_bits() != value.to_bits();
                    let own = |n: &str| group.iter().any(|r| r.node == n);
                    let due = l.node.as_deref().is_some_and(own) && ts - l.ts_ms >= HEARTBEAT_MS;
                    if ts > l.ts_ms && (changed || due) {
                        l.value = value;
                        l.ts_ms = ts;
                        l.at = Some((epoch, out.len()));
                        out.push(Point {
                            labels: l.labels.clone(),
                            value,
                            ts_ms: ts,
                        });
                    } else if ts == l.ts_ms && changed {
                        // A later record at the same time (another node's in
                        // between): amend the unsent sample, or leave the
                        // series for the next record when it was sent.
                        if let Some((e, i)) = l.at {
                            if e == epoch && out.get(i).is_some_and(|p| p.ts_ms == ts) {
                                out[i].value = value;
                                l.value = value;
                            }
                        }
                    }
                }
                None => {
                    let Some((labels, node)) = labels_of(id, &self.external) else {
                        continue;
                    };
                    let labels = Arc::new(labels);
                    let at = Some((epoch, out.len()));
                    out.push(Point {
                        labels: labels.clone(),
                        value,
                        ts_ms: ts,
                    });
                    self.last.insert(
                        id.to_string(),
                        Last {
                            labels,
                            node,
                            value,
                            ts_ms: ts,
                            at,
                        },
                    );
                }
            }
        }
    }

    /// Series known so far.
    pub fn series(&self) -> usize {
        self.last.len()
    }
}

fn ms(r: &Record) -> i64 {
    (r.unix_ns / 1_000_000) as i64
}

/// Sample lines of an exposition: (series id, family name, value), the
/// family being the one the last `# TYPE` line named.
fn parse(text: &str) -> impl Iterator<Item = (&str, &str, f64)> {
    let mut family = "";
    text.lines().filter_map(move |l| {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            family = rest.split(' ').next().unwrap_or_default();
        }
        if l.starts_with('#') {
            return None;
        }
        let (id, v) = l.rsplit_once(' ')?;
        let value = match v {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().ok()?,
        };
        Some((id, family, value))
    })
}

/// Parses `name{k="v",...}` into sorted labels with `__name__`, plus the
/// value of its `node` label.
fn labels_of(id: &str, external: &[(String, String)]) -> Option<(LabelPairs, Option<String>)> {
    let (name, rest) = match id.split_once('{') {
        Some((n, r)) => (n, r.strip_suffix('}')?),
        None => (id, ""),
    };
    let mut labels = vec![("__name__".to_string(), name.to_string())];
    let mut chars = rest.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((key.trim_start_matches(',').to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    for (k, v) in external {
        if !labels.iter().any(|(n, _)| n == k) {
            labels.push((k.clone(), v.clone()));
        }
    }
    labels[1..].sort();
    let node = labels
        .iter()
        .find(|(k, _)| k == "node")
        .map(|(_, v)| v.clone());
    Some((labels, node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::{TemperatureSensor, ThermalReading};

    fn thermal(node: &str, seq: u64, unix_ns: u64, celsius: f64) -> Record {
        Record {
            node: node.into(),
            boot_id: "b".into(),
            seq,
            unix_ns,
            payload: Some(Payload::Thermal(ThermalReading {
                sensors: vec![TemperatureSensor {
                    name: "cpu".into(),
                    celsius,
                    ..Default::default()
                }],
                ..Default::default()
            })),
        }
    }

    fn find<'a>(out: &'a [Point], name: &str) -> Vec<&'a Point> {
        out.iter().filter(|p| p.labels[0].1 == name).collect()
    }

    #[test]
    fn only_the_families_records_determine_are_pushed() {
        use crate::export::{build, connection, health, remote_write, soak};
        use boltwatch_exposition::{agent, process};
        let mut d = Deriver::new(Vec::new());
        let mut out = Vec::new();
        for (p, seq) in Payload::defaults().into_iter().zip(1..) {
            let r = Record {
                node: "a".into(),
                boot_id: "b".into(),
                seq,
                unix_ns: seq * 1_000_000_000,
                payload: Some(p),
            };
            d.apply(&r, &mut out);
        }
        let declared = Metrics::new().families();
        let declared: HashSet<&str> = declared.iter().map(|f| f.name).collect();
        let family = |p: &Point| {
            let name = p.labels[0].1.as_str();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|base| declared.contains(base));
            base.unwrap_or(name).to_string()
        };
        let pushed: HashSet<String> = out.iter().map(family).collect();
        // A histogram's series go with their family.
        assert!(pushed.contains("boltwatch_rtt_seconds"), "{pushed:?}");
        assert!(pushed.contains("boltwatch_records_received_total"));
        let own = [
            connection::FAMILIES,
            soak::FAMILIES,
            remote_write::FAMILIES,
            build::FAMILIES,
            process::FAMILIES,
            &[agent::INFO],
        ];
        let health = health::FAMILIES
            .iter()
            .filter(|f| !health::FROM_RECORDS.contains(f));
        for f in own.concat().iter().chain(health) {
            assert!(!pushed.contains(f.name), "{} is pushed", f.name);
        }
    }

    #[test]
    fn labels_parse_with_escapes_and_external_labels() {
        let (l, node) = labels_of(
            r#"boltwatch_x{node="a\"b",peer="c\\d",le="+Inf"}"#,
            &[
                ("cluster".into(), "east".into()),
                ("node".into(), "ignored".into()),
            ],
        )
        .unwrap();
        let want: Vec<(String, String)> = [
            ("__name__", "boltwatch_x"),
            ("cluster", "east"),
            ("le", "+Inf"),
            ("node", "a\"b"),
            ("peer", "c\\d"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(l, want);
        assert_eq!(node.as_deref(), Some("a\"b"));
    }

    #[test]
    fn emits_changed_series_at_the_records_time_and_never_backwards() {
        let mut d = Deriver::new(vec![("cluster".into(), "c1".into())]);
        let mut out = Vec::new();
        d.apply(&thermal("a", 1, 1_000_000_000_000, 40.0), &mut out);
        let temp = find(&out, "boltwatch_temperature_celsius");
        assert_eq!(temp.len(), 1, "{out:?}");
        assert_eq!((temp[0].value, temp[0].ts_ms), (40.0, 1_000_000));
        assert!(temp[0].labels.contains(&("cluster".into(), "c1".into())));
        let received = find(&out, "boltwatch_records_received_total");
        assert_eq!(received[0].value, 1.0);
        assert!(find(&out, "boltwatch_store_records").is_empty());

        // Same value 1 s later: only the counter moves.
        out.clear();
        d.apply(&thermal("a", 2, 1_001_000_000_000, 40.0), &mut out);
        assert!(find(&out, "boltwatch_temperature_celsius").is_empty());
        assert_eq!(find(&out, "boltwatch_records_received_total")[0].value, 2.0);

        // An older record (late spool) does not go back in time.
        out.clear();
        d.apply(&thermal("a", 3, 999_000_000_000, 41.0), &mut out);
        assert!(out.iter().all(|p| p.ts_ms > 1_001_000), "{out:?}");

        // Unchanged for a heartbeat: re-sent.
        out.clear();
        d.apply(&thermal("a", 4, 1_062_000_000_000, 41.0), &mut out);
        let temp = find(&out, "boltwatch_temperature_celsius");
        assert_eq!((temp[0].value, temp[0].ts_ms), (41.0, 1_062_000));

        // Skipped records move the state without emitting; the next
        // record carries only what it changed.
        d.skip(&thermal("a", 5, 1_063_000_000_000, 50.0));
        out.clear();
        d.apply(&thermal("a", 6, 1_064_000_000_000, 50.0), &mut out);
        assert!(
            find(&out, "boltwatch_temperature_celsius").is_empty(),
            "{out:?}"
        );
        assert_eq!(find(&out, "boltwatch_records_received_total")[0].value, 6.0);

        // Another node's record, then one more of `a` at the same time:
        // the unsent sample of `a`'s counter is amended, not duplicated.
        d.begin();
        out.clear();
        d.apply(&thermal("a", 7, 1_065_000_000_000, 50.0), &mut out);
        d.apply(&thermal("b", 1, 1_065_000_000_000, 20.0), &mut out);
        d.apply(&thermal("a", 8, 1_065_000_000_000, 50.0), &mut out);
        let received: Vec<(f64, i64)> = find(&out, "boltwatch_records_received_total")
            .iter()
            .filter(|p| p.labels.contains(&("node".into(), "a".into())))
            .map(|p| (p.value, p.ts_ms))
            .collect();
        assert_eq!(received, vec![(8.0, 1_065_000)]);
    }
}
