//! The collector's own health: records stored by node and payload kind,
//! refused connections and streams, commit timings and the store's size.

use std::collections::BTreeMap;

use boltwatch_proto::v1::Record;
use boltwatch_proto::{KINDS, UNKNOWN_KIND};

use boltwatch_exposition::family::{families, labels, Exposition};
use boltwatch_exposition::histogram::CommitHistogram;
use boltwatch_exposition::{Domain, Subjects};

/// Labels of `boltwatch_ingest_errors_total`, all exported from the start.
pub const INGEST_ERROR_KINDS: [&str; 10] = [
    "no_hello",
    "bad_hello",
    "node_mismatch",
    "invalid_record",
    "store",
    "transport",
    // Refusals an agent retries or must fix (authentication, limits).
    "unauthenticated",
    "permission_denied",
    "rate_limited",
    "batch_too_large",
];

/// Labels of `boltwatch_http_refused_total`, all exported from the start.
pub const HTTP_REFUSED_KINDS: [&str; 4] = [
    "connection_limit",
    "header_timeout",
    "idle_timeout",
    "api_busy",
];

families! {
    RECORDS_RECEIVED = Counter("boltwatch_records_received_total", "", &["node", "kind"], "Records newly stored, by producing node and payload kind.");
    MALFORMED_CONNECTIONS = Counter("boltwatch_ingest_malformed_connections_total", "", labels::NONE, "Connections to the gRPC port that failed the TLS handshake (with TLS) or did not start with the HTTP/2 preface.");
    INGEST_ERRORS = Counter("boltwatch_ingest_errors_total", "", &["kind"], "Agent streams or batches rejected or failed, by reason.");
    COMMIT_SECONDS = Histogram("boltwatch_store_commit_seconds", "seconds", labels::NONE, "Time to store and commit one record batch.");
    SERIES_REFUSED = Counter("boltwatch_ingest_series_refused_total", "", &["kind"], "Records and Hello interfaces kept off /metrics (still stored) because they would give their node more than max_series_per_node label sets; kind is the first label of the refused set (peer for most records).");
    HTTP_REFUSED = Counter("boltwatch_http_refused_total", "", &["kind"], "HTTP connections and API requests turned away, by reason: connection_limit (over http_max_connections, closed at accept), header_timeout (a request head not whole within http_header_timeout; keep-alive connections it closes while quiet are not counted), idle_timeout (a request body or an answer that moved no byte for http_idle_timeout), api_busy (an API request over api_max_concurrent, answered 503).");
    STORE_RECORDS = Gauge("boltwatch_store_records", "", labels::NONE, "Records held in the store.");
    ROLLUP_RECORDS = Gauge("boltwatch_store_rollup_records", "", labels::NONE, "Raw RTT summaries and counters records the store holds as per-minute rollups (retention.raw).");
    PRUNED_UNTIL = Gauge("boltwatch_store_raw_pruned_until_timestamp_seconds", "seconds", labels::NONE, "Raw RTT summaries and counters recorded before this time are pruned into rollups; 0 before any pruning.");
}

/// The families of this domain whose series the records alone determine
/// (remote write pushes them, see [`super::Metrics::record_families`]);
/// the rest is the collector's own health, only scraped.
pub const FROM_RECORDS: &[boltwatch_exposition::family::Family] = &[RECORDS_RECEIVED];

/// Labels of `boltwatch_ingest_series_refused_total`.
pub const SERIES_LABELS: [&str; 4] = ["peer", "interface", "sensor", "service"];

/// State behind the collector's own families.
#[derive(Debug, Clone)]
pub struct HealthMetrics {
    /// node -> records per kind (by node first, so a known node's count
    /// is found without allocating its name for every record).
    records_received: BTreeMap<String, Received>,
    malformed_connections: u64,
    ingest_errors: BTreeMap<&'static str, u64>,
    series_refused: BTreeMap<&'static str, u64>,
    http_refused: BTreeMap<&'static str, u64>,
    commit: CommitHistogram,
    store_records: u64,
    rollup_records: u64,
    pruned_until_ns: u64,
}

impl Default for HealthMetrics {
    fn default() -> Self {
        HealthMetrics {
            records_received: BTreeMap::new(),
            malformed_connections: 0,
            ingest_errors: INGEST_ERROR_KINDS.iter().map(|k| (*k, 0)).collect(),
            series_refused: SERIES_LABELS.iter().map(|k| (*k, 0)).collect(),
            http_refused: HTTP_REFUSED_KINDS.iter().map(|k| (*k, 0)).collect(),
            commit: CommitHistogram::default(),
            store_records: 0,
            rollup_records: 0,
            pruned_until_ns: 0,
        }
    }
}

impl HealthMetrics {
    /// A batch was committed in `seconds`; the store holds `total_records`.
    pub fn on_commit(&mut self, total_records: u64, seconds: f64) {
        self.store_records = total_records;
        self.commit.observe(seconds);
    }

    /// Sets the stored-records gauge.
    pub fn set_store_records(&mut self, n: u64) {
        self.store_records = n;
    }

    /// What raw retention has done so far: the pruning mark and the records
    /// held as rollups.
    pub fn set_retention(&mut self, pruned_until_ns: u64, rollup_records: u64) {
        self.pruned_until_ns = pruned_until_ns;
        self.rollup_records = rollup_records;
    }

    /// A connection without the HTTP/2 preface.
    pub fn on_malformed_connection(&mut self) {
        self.malformed_connections += 1;
    }

    /// `n` records or interfaces kept off `/metrics` over the series
    /// budget, `label` the first of the refused label set.
    pub fn on_series_refused(&mut self, label: &'static str, n: u64) {
        *self.series_refused.entry(label).or_default() += n;
    }

    /// An ingest failure of the given kind.
    pub fn on_ingest_error(&mut self, kind: &'static str) {
        *self.ingest_errors.entry(kind).or_default() += 1;
    }

    /// An HTTP connection or API request turned away, by reason.
    pub fn on_http_refused(&mut self, kind: &'static str) {
        *self.http_refused.entry(kind).or_default() += 1;
    }
}

/// One node's records per payload kind, indexed by `Payload::kind_index`
/// (then one slot for kinds this build cannot name): a kind's series
/// exists once it was counted, even by 0.
#[derive(Debug, Clone, Default)]
struct Received([Option<u64>; KINDS.len() + 1]);

impl Received {
    /// The slot of `r`'s kind.
    fn slot(r: &Record) -> usize {
        r.payload.as_ref().map_or(KINDS.len(), |p| p.kind_index())
    }

    /// (kind, records) of the kinds counted, ordered by kind name.
    fn by_name(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        let mut names: Vec<(&'static str, usize)> = KINDS.iter().copied().zip(0..).collect();
        names.push((UNKNOWN_KIND, KINDS.len()));
        names.sort_unstable();
        names
            .into_iter()
            .filter_map(|(kind, i)| Some((kind, self.0[i]?)))
    }
}

impl HealthMetrics {
    /// A newly stored record, counted by node and kind.
    pub fn on_record(&mut self, r: &Record) {
        self.count_received(r, 1);
    }

    /// Counts `n` records of `r`'s node and kind as received.
    pub fn count_received(&mut self, r: &Record, n: u64) {
        let kinds = match self.records_received.get_mut(r.node.as_str()) {
            Some(k) => k,
            None => self.records_received.entry(r.node.clone()).or_default(),
        };
        *kinds.0[Received::slot(r)].get_or_insert(0) += n;
    }
}

impl Domain for HealthMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        e.family(
            &RECORDS_RECEIVED,
            self.records_received.iter().flat_map(|(node, kinds)| {
                kinds.by_name().map(|(kind, n)| ([node.as_str(), kind], n))
            }),
        );
        e.family(
            &MALFORMED_CONNECTIONS,
            [(labels::NONE, self.malformed_connections)],
        );
        e.family(
            &INGEST_ERRORS,
            self.ingest_errors.iter().map(|(k, n)| ([*k], *n)),
        );
        e.histograms(&COMMIT_SECONDS, [(labels::NONE, self.commit.buckets())]);
        e.family(
            &SERIES_REFUSED,
            self.series_refused.iter().map(|(k, n)| ([*k], *n)),
        );
        e.family(
            &HTTP_REFUSED,
            self.http_refused.iter().map(|(k, n)| ([*k], *n)),
        );
        e.family(&STORE_RECORDS, [(labels::NONE, self.store_records)]);
        e.family(&ROLLUP_RECORDS, [(labels::NONE, self.rollup_records)]);
        e.family(
            &PRUNED_UNTIL,
            [(labels::NONE, self.pruned_until_ns as f64 / 1e9)],
        );
    }
}
