//! The values the store takes and returns.

use prost::bytes::Bytes;

/// A record ready to store: the envelope fields it is keyed and filtered by,
/// plus its encoded bytes exactly as received.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    /// Producing node.
    pub node: String,
    /// Producing agent boot.
    pub boot_id: String,
    /// Sequence number in the boot (1..=i64::MAX).
    pub seq: u64,
    /// Agent timestamp (<= i64::MAX).
    pub unix_ns: u64,
    /// `Payload::kind()`, or `"unknown"` for a kind this build cannot name.
    pub kind: &'static str,
    /// The encoded `Record`.
    pub raw: Vec<u8>,
}

/// Records ready to store, as one stream's batch arrives: each distinct
/// (node, boot) named once, each record pointing at its own by index, its
/// bytes a slice of the received frame (no copy, no string per record).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewBatch {
    /// Distinct (node, boot_id) of the batch, in first-appearance order.
    pub boots: Vec<(String, String)>,
    /// The records, in arrival order.
    pub records: Vec<BatchRecord>,
}

/// One record of a [`NewBatch`].
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRecord {
    /// Index of its (node, boot) in [`NewBatch::boots`].
    pub boot: usize,
    /// Sequence number in the boot (1..=i64::MAX).
    pub seq: u64,
    /// Agent timestamp (<= i64::MAX).
    pub unix_ns: u64,
    /// `Payload::kind()`, or `"unknown"` for a kind this build cannot name.
    pub kind: &'static str,
    /// The encoded `Record`, exactly as received.
    pub raw: Bytes,
}

impl NewBatch {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The index of (node, boot_id) in [`NewBatch::boots`], added if new.
    /// A batch nearly always holds one boot, so the search is short.
    pub fn boot_index(&mut self, node: &str, boot_id: &str) -> usize {
        match self
            .boots
            .iter()
            .rposition(|(n, b)| n == node && b == boot_id)
        {
            Some(i) => i,
            None => {
                self.boots.push((node.to_string(), boot_id.to_string()));
                self.boots.len() - 1
            }
        }
    }
}

impl From<Vec<NewRecord>> for NewBatch {
    fn from(records: Vec<NewRecord>) -> NewBatch {
        let mut b = NewBatch::default();
        for r in records {
            let boot = b.boot_index(&r.node, &r.boot_id);
            b.records.push(BatchRecord {
                boot,
                seq: r.seq,
                unix_ns: r.unix_ns,
                kind: r.kind,
                raw: r.raw.into(),
            });
        }
        b
    }
}

/// A stored record as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    /// Producing node.
    pub node: String,
    /// Producing agent boot.
    pub boot_id: String,
    /// Sequence number.
    pub seq: u64,
    /// Agent timestamp.
    pub unix_ns: u64,
    /// Payload kind as stored.
    pub kind: String,
    /// The encoded `Record`.
    pub raw: Vec<u8>,
}

/// The highest stored sequence number of one boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    /// Agent boot id.
    pub boot_id: String,
    /// Highest stored seq.
    pub highest_seq: u64,
}

/// What a `Hello` tells the store about a boot.
#[derive(Debug, Clone, PartialEq)]
pub struct HelloRow {
    /// Node name.
    pub node: String,
    /// Agent boot id.
    pub boot_id: String,
    /// Agent version.
    pub agent_version: String,
    /// Operating system.
    pub os: String,
    /// Host name.
    pub hostname: String,
    /// Agent start, unix ns.
    pub started_unix_ns: u64,
    /// The encoded `Hello` (interfaces and peers included).
    pub hello: Vec<u8>,
}

/// One boot as listed by the API.
#[derive(Debug, Clone, PartialEq)]
pub struct BootRow {
    /// Node name.
    pub node: String,
    /// Agent boot id.
    pub boot_id: String,
    /// When the collector first saw the boot, unix ns.
    pub first_seen_unix_ns: u64,
    /// When the collector last heard from it, unix ns.
    pub last_seen_unix_ns: u64,
    /// Records stored for it.
    pub records: u64,
    /// Highest stored seq.
    pub highest_seq: u64,
    /// Agent version from its `Hello` (empty if only records were seen).
    pub agent_version: String,
    /// OS from its `Hello`.
    pub os: String,
    /// Agent start from its `Hello`, 0 if unknown.
    pub started_unix_ns: u64,
}

impl BootRow {
    /// Sequence numbers missing below the highest one. Records are unique
    /// per seq, so this is exact.
    pub fn gaps(&self) -> u64 {
        self.highest_seq.saturating_sub(self.records)
    }
}

/// Which records to read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordFilter {
    /// Only this node.
    pub node: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only records at or after this agent time.
    pub since_unix_ns: u64,
    /// At most this many.
    pub limit: u32,
}

/// The result of storing one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOutcome {
    /// Whether each input record was newly stored (same order as the input).
    pub inserted: Vec<bool>,
    /// Records that were already stored.
    pub duplicates: u64,
    /// Per boot id in the batch (first-appearance order): the highest
    /// stored seq after the commit.
    pub watermarks: Vec<Watermark>,
    /// Time spent in the transaction, commit included.
    pub commit_seconds: f64,
    /// Records in the whole store after the commit.
    pub total_records: u64,
    /// Of the records newly stored, those kept verbatim: their node or
    /// boot id field occurs twice or contradicts the boot, so they could
    /// not share the boot's head (stored larger, never packed).
    pub verbatim: u64,
}

/// `r` as the ingest path hands it to the store, for tests that store
/// real records.
#[cfg(test)]
pub fn encoded(r: &boltwatch_proto::v1::Record, kind: &'static str) -> NewRecord {
    use prost::Message;
    NewRecord {
        node: r.node.clone(),
        boot_id: r.boot_id.clone(),
        seq: r.seq,
        unix_ns: r.unix_ns,
        kind,
        raw: r.encode_to_vec(),
    }
}

/// A record of node `a` for the store's SQL tests: time `1000 + seq`, kind
/// `outage` at every 7th seq (a sparse kind) and `rtt` otherwise, the seq's
/// bytes as its body.
#[cfg(test)]
pub fn sample_record(boot: &str, seq: u64) -> NewRecord {
    NewRecord {
        node: "a".into(),
        boot_id: boot.into(),
        seq,
        unix_ns: 1_000 + seq,
        kind: if seq.is_multiple_of(7) {
            "outage"
        } else {
            "rtt"
        },
        raw: seq.to_le_bytes().to_vec(),
    }
}
