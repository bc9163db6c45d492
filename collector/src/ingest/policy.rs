//! [`Policy`]: who may send, and how much (the ingest limits of the
//! collector's config, in one value).

use super::auth;

/// Who may send, and how much.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Token table; `None` accepts every agent (no authentication).
    pub auth: Option<auth::AuthTokens>,
    /// Most records in one batch.
    pub max_batch_records: usize,
    /// Records per second per node, sustained.
    pub records_per_second: u32,
    /// Records a node may send at once after a quiet spell.
    pub records_burst: u32,
    /// Encoded record bytes per second per node, sustained.
    pub bytes_per_second: u64,
    /// Bytes a node may send at once after a quiet spell.
    pub bytes_burst: u64,
    /// Largest encoded record.
    pub max_record_bytes: usize,
    /// Distinct label sets (peer, interface, sensor, service) per node on
    /// `/metrics`.
    pub max_series_per_node: usize,
    /// How far ahead of the collector's clock a record may be stamped and
    /// still reach `/metrics`.
    pub max_clock_skew: std::time::Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            auth: None,
            max_batch_records: 4096,
            records_per_second: 20_000,
            records_burst: 100_000,
            bytes_per_second: 8 << 20,
            bytes_burst: 40 << 20,
            max_record_bytes: 256 << 10,
            max_series_per_node: 1024,
            max_clock_skew: std::time::Duration::from_secs(300),
        }
    }
}
