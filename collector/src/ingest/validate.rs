//! Checks of a stream's `Hello` and of each batch's records before anything
//! is stored. Pure: bytes in, checked records or a reason out.
//!
//! A batch is all-or-nothing: one bad record rejects the batch, so a
//! misconfigured agent (wrong node name) never leaves half a batch behind.
//!
//! One check is per record and refuses no batch: a record stamped further
//! ahead of the collector's clock than `max_clock_skew` ([`too_far_ahead`])
//! is stored like the rest but kept off `/metrics`. Refusing its batch
//! would stall the agent, which retries the batch from its spool, until
//! its clock caught up; storing it loses nothing the agent spooled.
//!
//! Every string that becomes a Prometheus label (node, peer, interface,
//! sensor, service; the Hello's version, OS, boot id, interface kind and
//! generation) is bounded in length and may not hold control characters:
//! one 1 MiB peer name would otherwise be copied into every series of the
//! peer on every scrape.

use std::collections::{BTreeSet, HashMap};

use boltwatch_proto::v1::{Hello, Record};
use prost::Message;

use super::decode::Decoded;
use super::series;

use boltwatch_store::{BatchRecord, HelloRow, NewBatch};
use prost::bytes::Bytes;

/// Why a `Hello` or a batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// `Hello.node` is empty.
    #[error("Hello.node is empty")]
    HelloNoNode,
    /// `Hello.boot_id` is empty.
    #[error("Hello.boot_id is empty")]
    HelloNoBoot,
    /// A record speaks for another node than the stream's `Hello`.
    #[error("record {index}: node `{found}` differs from the Hello's node `{expected}`")]
    NodeMismatch {
        /// Position in the batch.
        index: usize,
        /// The Hello's node.
        expected: String,
        /// The record's node.
        found: String,
    },
    /// A record did not decode as a `Record`.
    #[error("record {index}: does not decode: {message}")]
    Undecodable {
        /// Position in the batch.
        index: usize,
        /// The decoder's message.
        message: String,
    },
    /// A record has no boot id.
    #[error("record {index}: boot_id is empty")]
    NoBoot {
        /// Position in the batch.
        index: usize,
    },
    /// A sequence number outside 1..=2^63-1.
    #[error("record {index}: seq {seq} is outside 1..=9223372036854775807")]
    BadSeq {
        /// Position in the batch.
        index: usize,
        /// The value.
        seq: u64,
    },
    /// A label value too long or with control characters.
    #[error("record {index}: {field} {reason}")]
    BadLabel {
        /// Position in the batch (0 for the Hello).
        index: usize,
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A `Hello` label value too long or with control characters.
    #[error("Hello.{field} {reason}")]
    HelloLabel {
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An encoded record over the size cap.
    #[error("record {index}: {bytes} bytes; the limit is {max}")]
    TooLarge {
        /// Position in the batch.
        index: usize,
        /// Its encoded size.
        bytes: usize,
        /// The cap.
        max: usize,
    },
    /// A boot id that is neither the stream's own nor one its Welcome
    /// listed.
    #[error(
        "record {index}: boot `{boot_id}` is neither this stream's boot nor one the Welcome listed"
    )]
    UnknownBoot {
        /// Position in the batch.
        index: usize,
        /// The boot id (already checked for length).
        boot_id: String,
    },
    /// A timestamp beyond what the store can hold (year 2262).
    #[error("record {index}: unix_ns {unix_ns} is out of range")]
    BadTime {
        /// Position in the batch.
        index: usize,
        /// The value.
        unix_ns: u64,
    },
}

impl Invalid {
    /// The `boltwatch_ingest_errors_total{kind}` label for this failure.
    pub fn kind(&self) -> &'static str {
        match self {
            Invalid::HelloNoNode | Invalid::HelloNoBoot => "bad_hello",
            Invalid::NodeMismatch { .. } => "node_mismatch",
            Invalid::BadLabel { .. } | Invalid::HelloLabel { .. } => "bad_label",
            Invalid::TooLarge { .. } => "record_too_large",
            Invalid::UnknownBoot { .. } => "unknown_boot",
            _ => "invalid_record",
        }
    }
}

/// `Hello.spooled_boots` entries considered.
pub const MAX_SPOOLED_BOOTS: usize = 256;

/// Longest name (node, peer, interface, sensor, service, boot id), bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// Longest descriptive label (agent version, OS, interface kind), bytes.
pub const MAX_TEXT_BYTES: usize = 256;

/// Why `v` cannot be a label value at most `max` bytes long, if it cannot.
pub fn label_problem(v: &str, max: usize) -> Option<String> {
    if v.len() > max {
        return Some(format!("is {} bytes; the limit is {max}", v.len()));
    }
    // Printable ASCII, nearly every label, holds no control character;
    // only other text needs the per-character check.
    let printable = |b: &u8| (0x20..0x7f).contains(b);
    if !v.as_bytes().iter().all(printable) && v.chars().any(char::is_control) {
        return Some("holds a control character".into());
    }
    None
}

fn hello_labels(h: &Hello) -> Result<(), Invalid> {
    let name = MAX_NAME_BYTES;
    let text = MAX_TEXT_BYTES;
    let mut fields: Vec<(&'static str, &str, usize)> = vec![
        ("node", &h.node, name),
        ("boot_id", &h.boot_id, name),
        ("agent_version", &h.agent_version, text),
        ("os", &h.os, text),
        ("hostname", &h.hostname, text),
    ];
    for i in &h.interfaces {
        fields.push(("interfaces.name", &i.name, name));
        fields.push(("interfaces.kind", &i.kind, text));
        fields.push(("interfaces.generation", &i.generation, text));
        // Not labels, but kept per node and shown in the report.
        fields.push(("interfaces.remote_name", &i.remote_name, text));
        fields.push(("interfaces.remote_uid", &i.remote_uid, text));
        fields.push(("interfaces.local_uid", &i.local_uid, text));
        for m in &i.members {
            fields.push(("interfaces.members", m, name));
        }
    }
    for p in &h.peers {
        fields.push(("peers.name", &p.name, name));
    }
    for b in h.spooled_boots.iter().take(MAX_SPOOLED_BOOTS) {
        fields.push(("spooled_boots", b, name));
    }
    for (field, v, max) in fields {
        if let Some(reason) = label_problem(v, max) {
            return Err(Invalid::HelloLabel { field, reason });
        }
    }
    Ok(())
}

/// A known node that `node` is not but differs from only by ASCII case
/// or trailing dots (`NODE-A`, `node-a.` beside `node-a`). Node names are
/// compared exactly (byte for byte, as mutual TLS compares them), so such
/// a twin would be a second node of the same machine: the Hello is
/// refused instead.
pub fn twin<'a>(node: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let fold = |n: &str| n.trim_end_matches('.').to_ascii_lowercase();
    let mine = fold(node);
    known.into_iter().find(|k| *k != node && fold(k) == mine)
}

/// Checks a `Hello` and turns it into the store's boot row.
pub fn hello(h: &Hello) -> Result<HelloRow, Invalid> {
    if h.node.trim().is_empty() {
        return Err(Invalid::HelloNoNode);
    }
    if h.boot_id.trim().is_empty() {
        return Err(Invalid::HelloNoBoot);
    }
    hello_labels(h)?;
    Ok(HelloRow {
        node: h.node.clone(),
        boot_id: h.boot_id.clone(),
        agent_version: h.agent_version.clone(),
        os: h.os.clone(),
        hostname: h.hostname.clone(),
        started_unix_ns: h.started_unix_ns.min(i64::MAX as u64),
        hello: h.encode_to_vec(),
    })
}

/// A batch that passed the checks: each record decoded (for metrics) and
/// the batch ready to store (with each record's bytes as received). A
/// stream uses [`batch_into`] instead, which keeps the decoded records in
/// storage reused from batch to batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The decoded records, in order; a payload is `None` for kinds unknown
    /// here.
    pub records: Vec<Record>,
    /// What the store keeps.
    pub batch: NewBatch,
}

impl Checked {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the batch was empty.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// What a stream's records must satisfy beyond being well formed.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Largest encoded record.
    pub max_record_bytes: usize,
    /// Boot ids records may carry: the stream's own and those its Welcome
    /// listed. Any other would make a boot row per record.
    pub boots: BTreeSet<String>,
}

impl Rules {
    /// Rules with no boot allowed yet and no size cap, for tests.
    pub fn any_size(boots: &[&str]) -> Rules {
        Rules {
            max_record_bytes: usize::MAX,
            boots: boots.iter().map(|b| b.to_string()).collect(),
        }
    }
}

/// Checks every record of a batch, given as the encoded `Record`s, against
/// the stream's node and `rules`.
pub fn batch<R: Into<Bytes>>(node: &str, raws: Vec<R>, rules: &Rules) -> Result<Checked, Invalid> {
    let mut decoded = Decoded::default();
    let batch = batch_into(node, raws, rules, &mut decoded)?;
    Ok(Checked {
        records: decoded.records().cloned().collect(),
        batch,
    })
}

/// [`batch`] for a stream: the records are decoded into `decoded` (cleared
/// first, its storage reused) and stay there, in order, for the metrics
/// once the batch is stored.
pub fn batch_into<R: Into<Bytes>>(
    node: &str,
    raws: Vec<R>,
    rules: &Rules,
    decoded: &mut Decoded,
) -> Result<NewBatch, Invalid> {
    decoded.clear();
    let mut boots = BatchBoots::default();
    let mut records = Vec::with_capacity(raws.len());
    for (index, raw) in raws.into_iter().enumerate() {
        let raw: Bytes = raw.into();
        if raw.len() > rules.max_record_bytes {
            return Err(Invalid::TooLarge {
                index,
                bytes: raw.len(),
                max: rules.max_record_bytes,
            });
        }
        let record = decoded
            .push(raw.as_ref())
            .map_err(|e| Invalid::Undecodable {
                index,
                message: e.to_string(),
            })?;
        if record.node != node {
            return Err(Invalid::NodeMismatch {
                index,
                expected: node.to_string(),
                found: record.node.clone(),
            });
        }
        let boot = boots.index_of(node, rules, index, &record.boot_id)?;
        record_fields(index, record)?;
        records.push(BatchRecord {
            boot,
            seq: record.seq,
            unix_ns: record.unix_ns,
            kind: boltwatch_proto::record_kind(record),
            raw,
        });
    }
    Ok(NewBatch {
        boots: boots.list,
        records,
    })
}

/// The boots of a batch, each listed once, in order of first use.
#[derive(Default)]
struct BatchBoots {
    /// `(node, boot id)`, as the store's batch lists them.
    list: Vec<(String, String)>,
    /// Position of each boot id in `list`.
    seen: HashMap<String, usize>,
}

impl BatchBoots {
    /// Position in the list of record `index`'s boot, added on its first
    /// use; refused when empty or not one of the stream's boots.
    fn index_of(
        &mut self,
        node: &str,
        rules: &Rules,
        index: usize,
        boot_id: &str,
    ) -> Result<usize, Invalid> {
        if boot_id.is_empty() {
            return Err(Invalid::NoBoot { index });
        }
        // The boot of the record before is nearly always this one's; else
        // `seen` finds it in one lookup, however many boots a batch mixes.
        if let Some((_, b)) = self.list.last() {
            if b == boot_id {
                return Ok(self.list.len() - 1);
            }
        }
        if let Some(i) = self.seen.get(boot_id) {
            return Ok(*i);
        }
        if !rules.boots.contains(boot_id) {
            let boot_id = if boot_id.len() > MAX_NAME_BYTES {
                format!("{}...", boot_id.chars().take(32).collect::<String>())
            } else {
                boot_id.to_string()
            };
            return Err(Invalid::UnknownBoot { index, boot_id });
        }
        let i = self.list.len();
        self.list.push((node.to_string(), boot_id.to_string()));
        self.seen.insert(boot_id.to_string(), i);
        Ok(i)
    }
}

/// Checks of record `index`'s own fields: its label values, a sequence
/// number in 1..=2^63-1 and a timestamp the store can hold.
fn record_fields(index: usize, record: &Record) -> Result<(), Invalid> {
    let max = i64::MAX as u64;
    for (dim, v) in series::subjects(record) {
        if let Some(reason) = label_problem(v, MAX_NAME_BYTES) {
            let field = dim.label();
            return Err(Invalid::BadLabel {
                index,
                field,
                reason,
            });
        }
    }
    if record.seq == 0 || record.seq > max {
        return Err(Invalid::BadSeq {
            index,
            seq: record.seq,
        });
    }
    if record.unix_ns > max {
        return Err(Invalid::BadTime {
            index,
            unix_ns: record.unix_ns,
        });
    }
    Ok(())
}

/// Whether `record` is stamped more than `skew` ahead of `now_unix_ns`,
/// the collector's clock: then it is kept off `/metrics`, where one record
/// a day ahead would otherwise stand as the node's newest for a day.
pub fn too_far_ahead(record: &Record, now_unix_ns: u64, skew: std::time::Duration) -> bool {
    let skew = u64::try_from(skew.as_nanos()).unwrap_or(u64::MAX);
    record.unix_ns > now_unix_ns.saturating_add(skew)
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::AgentStats;
    use boltwatch_proto::UNKNOWN_KIND;

    #[test]
    fn a_node_name_differing_only_by_case_or_a_trailing_dot_is_a_twin() {
        let known = ["node-a", "mini-b"];
        assert_eq!(twin("NODE-A", known), Some("node-a"));
        assert_eq!(twin("node-a.", known), Some("node-a"));
        assert_eq!(twin("Mini-B..", known), Some("mini-b"));
        assert_eq!(twin("node-a", known), None);
        assert_eq!(twin("node-c", known), None);
    }

    fn enc(node: &str, boot: &str, seq: u64) -> Vec<u8> {
        Record {
            node: node.into(),
            boot_id: boot.into(),
            seq,
            unix_ns: 5,
            payload: Some(Payload::AgentStats(AgentStats::default())),
        }
        .encode_to_vec()
    }

    fn b(raws: Vec<Vec<u8>>) -> Result<Checked, Invalid> {
        batch("a", raws, &Rules::any_size(&["b"]))
    }

    fn rtt_to(peer: &str) -> Vec<u8> {
        Record {
            node: "a".into(),
            boot_id: "b".into(),
            seq: 1,
            unix_ns: 5,
            payload: Some(Payload::Rtt(boltwatch_proto::v1::RttSummary {
                peer: peer.into(),
                ..Default::default()
            })),
        }
        .encode_to_vec()
    }

    #[test]
    fn long_or_control_labels_are_refused() {
        assert!(b(vec![rtt_to(&"p".repeat(MAX_NAME_BYTES))]).is_ok());
        let e = b(vec![rtt_to(&"p".repeat(MAX_NAME_BYTES + 1))]).unwrap_err();
        assert_eq!(e.kind(), "bad_label");
        assert!(e.to_string().contains("peer is 129 bytes"), "{e}");
        let e = b(vec![rtt_to("a\nb")]).unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
        let h = Hello {
            node: "a".into(),
            boot_id: "b".into(),
            os: "x".repeat(MAX_TEXT_BYTES + 1),
            ..Default::default()
        };
        assert_eq!(hello(&h).unwrap_err().kind(), "bad_label");
    }

    #[test]
    fn oversized_records_and_foreign_boots_are_refused() {
        let rules = Rules {
            max_record_bytes: 64,
            boots: ["b".to_string()].into(),
        };
        assert!(batch("a", vec![enc("a", "b", 1)], &rules).is_ok());
        let e = batch("a", vec![rtt_to(&"p".repeat(100))], &rules).unwrap_err();
        assert_eq!(e.kind(), "record_too_large");
        let e = batch("a", vec![enc("a", "b", 1), enc("a", "other", 1)], &rules).unwrap_err();
        assert_eq!(e.kind(), "unknown_boot");
        assert!(e.to_string().contains("record 1: boot `other`"), "{e}");
    }

    #[test]
    fn good_batch_keeps_bytes_and_kind() {
        let raw = enc("a", "b", 1);
        let out = b(vec![raw.clone()]).unwrap();
        assert_eq!(out.batch.records[0].raw, raw);
        assert_eq!(out.batch.records[0].kind, "agent_stats");
        assert_eq!(out.records[0].seq, 1);
        assert_eq!(out.batch.boots, [("a".to_string(), "b".to_string())]);
    }

    #[test]
    fn unknown_payload_kind_is_kept_verbatim() {
        // Field 99 (a future payload kind), length-delimited, 2 bytes.
        let mut raw = enc("a", "b", 1);
        raw.truncate(raw.len() - 2); // drop the empty agent_stats field
        raw.extend_from_slice(&[0x9a, 0x06, 0x02, 0x08, 0x01]);
        let out = b(vec![raw.clone()]).unwrap();
        assert_eq!(out.batch.records[0].kind, UNKNOWN_KIND);
        assert_eq!(out.batch.records[0].raw, raw);
    }

    #[test]
    fn boots_are_listed_once_and_records_point_at_theirs() {
        let rules = Rules::any_size(&["b", "c"]);
        let raws = vec![
            enc("a", "b", 1),
            enc("a", "c", 1),
            enc("a", "b", 2),
            enc("a", "c", 2),
        ];
        let out = batch("a", raws, &rules).unwrap();
        let boots: Vec<&str> = out.batch.boots.iter().map(|(_, b)| b.as_str()).collect();
        assert_eq!(boots, ["b", "c"]);
        let at: Vec<usize> = out.batch.records.iter().map(|r| r.boot).collect();
        assert_eq!(at, [0, 1, 0, 1]);
    }

    #[test]
    fn foreign_node_rejects_the_batch() {
        let e = b(vec![enc("a", "b", 1), enc("x", "b", 2)]).unwrap_err();
        assert_eq!(e.kind(), "node_mismatch");
        assert!(e.to_string().contains("record 1"), "{e}");
    }

    #[test]
    fn bad_records_rejected() {
        assert!(matches!(
            b(vec![enc("a", "b", 0)]),
            Err(Invalid::BadSeq { .. })
        ));
        assert!(matches!(
            b(vec![enc("a", "b", u64::MAX)]),
            Err(Invalid::BadSeq { .. })
        ));
        assert!(matches!(
            b(vec![enc("a", "", 1)]),
            Err(Invalid::NoBoot { .. })
        ));
        assert!(matches!(
            b(vec![vec![0xff, 0xff]]),
            Err(Invalid::Undecodable { .. })
        ));
    }

    #[test]
    fn records_beyond_the_skew_are_too_far_ahead() {
        let skew = std::time::Duration::from_secs(300);
        let at = |unix_ns| Record {
            unix_ns,
            ..Default::default()
        };
        let now = 1_700_000_000_000_000_000;
        assert!(!too_far_ahead(&at(now), now, skew));
        assert!(!too_far_ahead(&at(now + 300_000_000_000), now, skew));
        assert!(too_far_ahead(&at(now + 300_000_000_001), now, skew));
        assert!(!too_far_ahead(&at(u64::MAX), now, std::time::Duration::MAX));
    }

    #[test]
    fn hello_needs_node_and_boot() {
        let mut h = Hello {
            node: "a".into(),
            boot_id: "b".into(),
            ..Default::default()
        };
        assert_eq!(hello(&h).unwrap().node, "a");
        h.boot_id.clear();
        assert_eq!(hello(&h).unwrap_err(), Invalid::HelloNoBoot);
        h.node.clear();
        assert_eq!(hello(&h).unwrap_err().kind(), "bad_hello");
    }
}
