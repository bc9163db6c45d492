//! Checks of a stream's `Hello` and of each batch's records before anything
//! is stored. Pure: bytes in, checked records or a reason out.
//!
//! A batch is all-or-nothing: one bad record rejects the batch, so a
//! misconfigured agent (wrong node name) never leaves half a batch behind.

use boltwatch_proto::v1::{Hello, Record};
use prost::Message;

use crate::store::{HelloRow, NewRecord};

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
            _ => "invalid_record",
        }
    }
}

/// Checks a `Hello` and turns it into the store's boot row.
pub fn hello(h: &Hello) -> Result<HelloRow, Invalid> {
    if h.node.trim().is_empty() {
        return Err(Invalid::HelloNoNode);
    }
    if h.boot_id.trim().is_empty() {
        return Err(Invalid::HelloNoBoot);
    }
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

/// A record that passed the checks: decoded (for metrics) and ready to
/// store (with its bytes as received).
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The decoded record; its payload is `None` for kinds unknown here.
    pub record: Record,
    /// What the store keeps.
    pub new: NewRecord,
}

/// Checks every record of a batch, given as the encoded `Record`s, against
/// the stream's node.
pub fn batch(node: &str, raws: Vec<Vec<u8>>) -> Result<Vec<Checked>, Invalid> {
    let max = i64::MAX as u64;
    let mut out = Vec::with_capacity(raws.len());
    for (index, raw) in raws.into_iter().enumerate() {
        let record = Record::decode(raw.as_slice()).map_err(|e| Invalid::Undecodable {
            index,
            message: e.to_string(),
        })?;
        if record.node != node {
            return Err(Invalid::NodeMismatch {
                index,
                expected: node.to_string(),
                found: record.node,
            });
        }
        if record.boot_id.is_empty() {
            return Err(Invalid::NoBoot { index });
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
        let kind = boltwatch_proto::record_kind(&record);
        out.push(Checked {
            new: NewRecord {
                node: record.node.clone(),
                boot_id: record.boot_id.clone(),
                seq: record.seq,
                unix_ns: record.unix_ns,
                kind,
                raw,
            },
            record,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::AgentStats;
    use boltwatch_proto::UNKNOWN_KIND;

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

    #[test]
    fn good_batch_keeps_bytes_and_kind() {
        let raw = enc("a", "b", 1);
        let out = batch("a", vec![raw.clone()]).unwrap();
        assert_eq!(out[0].new.raw, raw);
        assert_eq!(out[0].new.kind, "agent_stats");
        assert_eq!(out[0].record.seq, 1);
    }

    #[test]
    fn unknown_payload_kind_is_kept_verbatim() {
        // Field 99 (a future payload kind), length-delimited, 2 bytes.
        let mut raw = enc("a", "b", 1);
        raw.truncate(raw.len() - 2); // drop the empty agent_stats field
        raw.extend_from_slice(&[0x9a, 0x06, 0x02, 0x08, 0x01]);
        let out = batch("a", vec![raw.clone()]).unwrap();
        assert_eq!(out[0].new.kind, UNKNOWN_KIND);
        assert_eq!(out[0].new.raw, raw);
    }

    #[test]
    fn foreign_node_rejects_the_batch() {
        let e = batch("a", vec![enc("a", "b", 1), enc("x", "b", 2)]).unwrap_err();
        assert_eq!(e.kind(), "node_mismatch");
        assert!(e.to_string().contains("record 1"), "{e}");
    }

    #[test]
    fn bad_records_rejected() {
        assert!(matches!(
            batch("a", vec![enc("a", "b", 0)]),
            Err(Invalid::BadSeq { .. })
        ));
        assert!(matches!(
            batch("a", vec![enc("a", "b", u64::MAX)]),
            Err(Invalid::BadSeq { .. })
        ));
        assert!(matches!(
            batch("a", vec![enc("a", "", 1)]),
            Err(Invalid::NoBoot { .. })
        ));
        assert!(matches!(
            batch("a", vec![vec![0xff, 0xff]]),
            Err(Invalid::Undecodable { .. })
        ));
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
