//! JSON shapes of the HTTP API, separate from the generated protobuf types
//! and from store rows so either can change without breaking API clients:
//! nodes, records and joined outages here, record payloads in [`payload`].
//! Enums are rendered by their protobuf names (`TIMESTAMP_SOURCE_KERNEL`),
//! unknown values as their number.

use boltwatch_proto::v1 as pb;
use serde::Serialize;

mod payload;

pub use payload::{IntervalDto, PayloadDto, SensorDto};

/// One node of `GET /api/v1/nodes` (a page of them, see `api`).
#[derive(Debug, Serialize)]
pub struct NodeDto {
    /// Node name.
    pub node: String,
    /// Whether an agent stream is open now.
    pub connected: bool,
    /// When the collector last heard from any of its boots.
    pub last_seen_unix_ns: u64,
    /// Its boots, oldest first.
    pub boots: Vec<BootDto>,
}

/// One agent boot of a node.
#[derive(Debug, Serialize)]
pub struct BootDto {
    /// Boot id.
    pub boot_id: String,
    /// Records stored.
    pub records: u64,
    /// Highest stored seq.
    pub highest_seq: u64,
    /// Sequence numbers below `highest_seq` never received.
    pub gaps: u64,
    /// Agent version from its Hello (empty if unknown).
    pub agent_version: String,
    /// OS from its Hello.
    pub os: String,
    /// First sight by the collector.
    pub first_seen_unix_ns: u64,
    /// Last sight by the collector.
    pub last_seen_unix_ns: u64,
}

/// `GET /api/v1/records`.
#[derive(Debug, Serialize)]
pub struct RecordsDto {
    /// Matching records, oldest first.
    pub records: Vec<RecordDto>,
}

/// One stored record.
#[derive(Debug, Serialize)]
pub struct RecordDto {
    /// Producing node.
    pub node: String,
    /// Producing boot.
    pub boot_id: String,
    /// Sequence number.
    pub seq: u64,
    /// Agent timestamp.
    pub unix_ns: u64,
    /// Payload kind as stored.
    pub kind: String,
    /// The decoded payload; absent for kinds this collector does not know.
    pub payload: Option<PayloadDto>,
}

/// `GET /api/v1/outages`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct OutagesDto {
    /// One entry per outage, by start time.
    pub outages: Vec<OutageDto>,
}

/// One outage, its start and end records joined by (node, boot, outage id).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct OutageDto {
    /// Node whose agent recorded it.
    pub node: String,
    /// That agent's boot.
    pub boot_id: String,
    /// Outage id, unique within the boot.
    pub outage_id: u64,
    /// Peer that was unreachable.
    pub peer: String,
    /// Interface the peer is reached through.
    pub interface: String,
    /// `carrier`, `probe_loss`, `both`, `sleep` or `service` (the end record's, when
    /// it has ended).
    pub cause: String,
    /// Service name for `service` outages, else null.
    pub service: Option<String>,
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// End, unix ns; null while open.
    pub end_unix_ns: Option<u64>,
    /// `end - start` in ns; null while open.
    pub duration_ns: Option<u64>,
}

/// The API name of an outage cause.
pub fn cause_name(cause: i32) -> String {
    match pb::OutageCause::try_from(cause) {
        Ok(pb::OutageCause::Carrier) => "carrier".into(),
        Ok(pb::OutageCause::ProbeLoss) => "probe_loss".into(),
        Ok(pb::OutageCause::Both) => "both".into(),
        Ok(pb::OutageCause::Service) => "service".into(),
        Ok(pb::OutageCause::Sleep) => "sleep".into(),
        _ => cause.to_string(),
    }
}

/// Joins outage records `(node, boot_id, outage)` into one entry per
/// outage. The end record is authoritative (its cause and start include
/// what was learnt while the outage went on); an outage with only a start
/// is open. Keeps those that started at or after `since_unix_ns` or are
/// still open; sorted by start, then node, boot and id.
pub fn join_outages(
    records: impl IntoIterator<Item = (String, String, pb::Outage)>,
    since_unix_ns: u64,
) -> Vec<OutageDto> {
    let mut by_key: std::collections::HashMap<(String, String, u64), pb::Outage> =
        std::collections::HashMap::new();
    for (node, boot, o) in records {
        let key = (node, boot, o.outage_id);
        match by_key.get(&key) {
            Some(known) if known.end_unix_ns.is_some() && o.end_unix_ns.is_none() => {}
            _ => {
                by_key.insert(key, o);
            }
        }
    }
    let mut out: Vec<OutageDto> = by_key
        .into_iter()
        .filter(|(_, o)| o.start_unix_ns >= since_unix_ns || o.end_unix_ns.is_none())
        .map(|((node, boot_id, outage_id), o)| OutageDto {
            node,
            boot_id,
            outage_id,
            service: (o.cause == pb::OutageCause::Service as i32).then(|| o.service.clone()),
            cause: cause_name(o.cause),
            start_unix_ns: o.start_unix_ns,
            end_unix_ns: o.end_unix_ns,
            duration_ns: o.end_unix_ns.map(|e| e.saturating_sub(o.start_unix_ns)),
            peer: o.peer,
            interface: o.interface,
        })
        .collect();
    out.sort_by(|a, b| {
        (a.start_unix_ns, &a.node, &a.boot_id, a.outage_id).cmp(&(
            b.start_unix_ns,
            &b.node,
            &b.boot_id,
            b.outage_id,
        ))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage(id: u64, cause: pb::OutageCause, start: u64, end: Option<u64>) -> pb::Outage {
        pb::Outage {
            peer: "b".into(),
            interface: "tb0".into(),
            cause: cause as i32,
            start_unix_ns: start,
            end_unix_ns: end,
            service: if cause == pb::OutageCause::Service {
                "web".into()
            } else {
                String::new()
            },
            outage_id: id,
        }
    }

    #[test]
    fn outages_join_start_and_end_with_the_end_authoritative() {
        use pb::OutageCause::*;
        let r = |node: &str, boot: &str, o| (node.to_string(), boot.to_string(), o);
        let records = vec![
            r("a", "b1", outage(1, ProbeLoss, 100, None)),
            r("a", "b1", outage(2, Service, 150, None)),
            // The end widened the cause and moved the start earlier.
            r("a", "b1", outage(1, Both, 90, Some(300))),
            // Same id, other boot: another outage, still open.
            r("a", "b2", outage(1, Carrier, 50, None)),
            // A replayed start after its end does not reopen it.
            r("c", "b9", outage(4, Carrier, 400, Some(500))),
            r("c", "b9", outage(4, Carrier, 400, None)),
        ];
        let all = join_outages(records.clone(), 0);
        let got: Vec<_> = all
            .iter()
            .map(|o| (o.node.as_str(), o.boot_id.as_str(), o.outage_id))
            .collect();
        assert_eq!(
            got,
            [
                ("a", "b2", 1),
                ("a", "b1", 1),
                ("a", "b1", 2),
                ("c", "b9", 4)
            ]
        );
        let first = &all[1];
        assert_eq!(first.cause, "both");
        assert_eq!((first.start_unix_ns, first.end_unix_ns), (90, Some(300)));
        assert_eq!(first.duration_ns, Some(210));
        assert_eq!(first.service, None);
        assert_eq!(all[2].cause, "service");
        assert_eq!(all[2].service.as_deref(), Some("web"));
        assert_eq!(all[2].end_unix_ns, None);
        assert_eq!(all[3].end_unix_ns, Some(500));
        // since: started at or after, or still open.
        let recent = join_outages(records, 120);
        let got: Vec<_> = recent
            .iter()
            .map(|o| (o.boot_id.as_str(), o.outage_id))
            .collect();
        assert_eq!(got, [("b2", 1), ("b1", 2), ("b9", 4)]);
        let v = serde_json::to_value(&recent[0]).unwrap();
        assert!(v["end_unix_ns"].is_null());
        assert_eq!(v["cause"], "carrier");
    }
}
