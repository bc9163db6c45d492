//! Remote write's own health, per endpoint (no payload kind): samples
//! delivered, refused, dropped for the backlog bound, waiting in the batch
//! being sent, how long the oldest undelivered record has waited, and the
//! time of the last delivery. The senders in
//! `crate::remote_write` update it; records never do.

use std::collections::BTreeMap;

use boltwatch_exposition::family::{families, Exposition};
use boltwatch_exposition::{Domain, Subjects};

const ENDPOINT: &[&str] = &["endpoint"];

families! {
    SENT = Counter("boltwatch_remote_write_samples_sent_total", "", ENDPOINT, "Samples the remote write endpoint accepted.");
    FAILED = Counter("boltwatch_remote_write_samples_failed_total", "", ENDPOINT, "Samples the endpoint refused with a 4xx other than 429 (not retried).");
    DROPPED = Counter("boltwatch_remote_write_samples_dropped_total", "", ENDPOINT, "Samples skipped because the endpoint's backlog exceeded its bound.");
    PENDING = Gauge("boltwatch_remote_write_pending_samples", "", ENDPOINT, "Samples of the batch being sent to the endpoint, 0 when caught up.");
    LAG = Gauge("boltwatch_remote_write_lag_seconds", "seconds", ENDPOINT, "How long the oldest stored record the endpoint has not received has been waiting (since its sender first saw it stored), 0 when caught up; grows while the endpoint refuses or is unreachable.");
    LAST_SUCCESS = Gauge("boltwatch_remote_write_last_success_timestamp_seconds", "seconds", ENDPOINT, "Unix time of the endpoint's last accepted batch, 0 before the first.");
}

/// One endpoint's counters.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct EndpointStats {
    /// Samples accepted.
    pub sent: u64,
    /// Samples refused (not retried).
    pub failed: u64,
    /// Samples dropped for the backlog bound.
    pub dropped: u64,
    /// Samples in the batch being sent.
    pub pending: u64,
    /// Unix seconds of the last accepted batch.
    pub last_success: f64,
    /// Seconds the oldest record not yet received has waited.
    pub lag: f64,
}

/// State behind the remote write families.
#[derive(Debug, Default, Clone)]
pub struct RemoteWriteMetrics {
    endpoints: BTreeMap<String, EndpointStats>,
}

impl RemoteWriteMetrics {
    /// The endpoint's counters, created at 0.
    pub fn endpoint(&mut self, url: &str) -> &mut EndpointStats {
        self.endpoints.entry(url.to_string()).or_default()
    }
}

impl Domain for RemoteWriteMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let ep = &self.endpoints;
        fn label(k: &str) -> [&str; 1] {
            [k]
        }
        e.family(&SENT, ep.iter().map(|(k, s)| (label(k), s.sent)));
        e.family(&FAILED, ep.iter().map(|(k, s)| (label(k), s.failed)));
        e.family(&DROPPED, ep.iter().map(|(k, s)| (label(k), s.dropped)));
        e.family(&PENDING, ep.iter().map(|(k, s)| (label(k), s.pending)));
        e.family(&LAG, ep.iter().map(|(k, s)| (label(k), s.lag)));
        e.family(
            &LAST_SUCCESS,
            ep.iter().map(|(k, s)| (label(k), s.last_success)),
        );
    }
}
