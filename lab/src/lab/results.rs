//! The end of a lab: the records read back from the store the collector
//! wrote (the way a report would) and the tables printed from them.

use std::io::Write;
use std::path::Path;

use boltwatch_collector::report::summary;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;
use prost::Message;

use super::error::LabError;

/// Every RTT, thermal and bandwidth record of the store in `data_dir`.
pub(super) async fn stored_records(data_dir: &Path) -> Result<Vec<Record>, LabError> {
    let store =
        boltwatch_store::Store::open(data_dir).map_err(|e| LabError::Results(e.to_string()))?;
    let mut records = Vec::new();
    for kind in ["rtt", "thermal", "bandwidth"] {
        let rows = store
            .handle()
            .records(boltwatch_store::RecordFilter {
                kind: Some(kind.into()),
                limit: u32::MAX,
                ..Default::default()
            })
            .await
            .map_err(|e| LabError::Results(e.to_string()))?;
        for row in rows {
            let r = Record::decode(row.raw.as_slice())
                .map_err(|e| LabError::Results(format!("stored record: {e}")))?;
            records.push(r);
        }
    }
    store.close().await;
    Ok(records)
}

/// The link and sensor table, then (when the lab ran bandwidth tests) the
/// bandwidth table.
pub(super) fn write_tables(out: &mut impl Write, records: &[Record], bandwidth: bool) {
    let rtt = by_node(records, |p| match p {
        Payload::Rtt(s) => Some(s),
        _ => None,
    });
    let thermal = by_node(records, |p| match p {
        Payload::Thermal(t) => Some(t),
        _ => None,
    });
    let links = summary::link_stats(rtt);
    let sensors = summary::sensor_stats(thermal);
    let _ = writeln!(out, "\n{}", summary::render_table(&links, &sensors));
    if bandwidth {
        let results = records.iter().filter_map(|r| match &r.payload {
            Some(Payload::Bandwidth(b)) => Some((r.node.as_str(), b)),
            _ => None,
        });
        let _ = writeln!(out, "{}", bandwidth_table(results));
    }
}

/// One row per node, peer and direction: tests, failures, mean and
/// slowest Gbit/s of the successful ones.
fn bandwidth_table<'a>(
    results: impl Iterator<Item = (&'a str, &'a boltwatch_proto::v1::BandwidthResult)>,
) -> String {
    use std::collections::BTreeMap;
    /// Tests, failures, Gbit/s of each success.
    type Row = (u64, u64, Vec<f64>);
    let mut rows: BTreeMap<(String, String, i32), Row> = BTreeMap::new();
    for (node, b) in results {
        let row = rows
            .entry((node.to_string(), b.peer.clone(), b.direction))
            .or_default();
        row.0 += 1;
        if b.error.is_empty() {
            row.2.push(b.bits_per_second / 1e9);
        } else {
            row.1 += 1;
        }
    }
    let mut t = format!(
        "{:<24} {:<9} {:>6} {:>6} {:>10} {:>10}\n",
        "bandwidth", "direction", "tests", "failed", "mean Gb/s", "min Gb/s"
    );
    if rows.is_empty() {
        t.push_str("(no bandwidth tests ran; is the lab longer than the interval?)\n");
    }
    for ((node, peer, dir), (n, failed, gbps)) in rows {
        let dir = boltwatch_proto::v1::Direction::try_from(dir)
            .map(|d| {
                d.as_str_name()
                    .trim_start_matches("DIRECTION_")
                    .to_lowercase()
            })
            .unwrap_or_else(|_| dir.to_string());
        let mean = gbps.iter().sum::<f64>() / gbps.len().max(1) as f64;
        let min = gbps.iter().copied().fold(f64::INFINITY, f64::min);
        let fmt = |v: f64| {
            if gbps.is_empty() {
                "-".to_string()
            } else {
                format!("{v:.2}")
            }
        };
        t.push_str(&format!(
            "{:<24} {:<9} {:>6} {:>6} {:>10} {:>10}\n",
            format!("{node} -> {peer}"),
            dir,
            n,
            failed,
            fmt(mean),
            fmt(min)
        ));
    }
    t
}

/// `(node, payload)` of every record whose payload `pick` selects.
fn by_node<'r, T>(
    records: &'r [Record],
    pick: impl Fn(&'r Payload) -> Option<&'r T>,
) -> Vec<(&'r str, &'r T)> {
    records
        .iter()
        .filter_map(|r| Some((r.node.as_str(), pick(r.payload.as_ref()?)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_table_counts_failures_apart() {
        use boltwatch_proto::v1::{BandwidthResult, Direction};
        let ok = BandwidthResult {
            peer: "lab-2".into(),
            direction: Direction::Upload as i32,
            bits_per_second: 20e9,
            ..Default::default()
        };
        let bad = BandwidthResult {
            error: "refused".into(),
            ..ok.clone()
        };
        let t = bandwidth_table([("lab-1", &ok), ("lab-1", &bad)].into_iter());
        let row = t.lines().find(|l| l.starts_with("lab-1 -> lab-2")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[3..], ["upload", "2", "1", "20.00", "20.00"], "{t}");
    }
}
