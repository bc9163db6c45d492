//! The node's own Prometheus `/metrics` (`--metrics-listen`), for teams
//! that scrape every node directly, with or without a collector.
//!
//! The series come from the records this agent produces, tapped where the
//! spool numbers them ([`NodeMetrics::tap`]), so what the agent serves is
//! what it sends, and they go through the collector's own record domains
//! ([`boltwatch_exposition::RecordMetrics`]): every family has the
//! collector's name, type, help and label names, `node` is this node, and
//! there is no `cluster` label (the scrape config adds it, as for the
//! collector). Beside them: `boltwatch_agent_build_info` and `process_*`.
//!
//! Absent, because only the collector knows them: `boltwatch_agent_up`,
//! `boltwatch_records_duplicate_total`, `boltwatch_records_received_total`,
//! the ingest and store health, soaks and remote write. The counters
//! start at 0 with each agent process (Prometheus' `rate()` takes the
//! reset), where the collector's continue over agent boots.
//!
//! [`server`] is the HTTP edge; everything else here is pure.

pub mod late;
pub mod server;

use std::sync::{Arc, Mutex, MutexGuard};

use boltwatch_exposition::agent::AgentInfo;
use boltwatch_exposition::family::{families, Exposition, Family};
use boltwatch_exposition::process::{self, ProcessMetrics, ProcessStats};
use boltwatch_exposition::{Domain, RecordMetrics, Subjects};
use boltwatch_proto::v1::{Hello, Record};

families! {
    BUILD_INFO = Gauge("boltwatch_agent_build_info", "", &["version"], "The agent's version (on the agent's own /metrics); always 1.");
}

/// Every family the agent's `/metrics` declares, in exposition order.
pub fn families() -> Vec<Family> {
    [
        &RecordMetrics::families(),
        FAMILIES,
        late::FAMILIES,
        process::FAMILIES,
    ]
    .concat()
}

/// The node's series, shared by the spool's tap (writes) and the server
/// (reads), and the senders' late-reply counters.
#[derive(Debug, Clone, Default)]
pub struct NodeMetrics(Arc<Mutex<RecordMetrics>>, late::LateReplies);

impl NodeMetrics {
    /// The series of the agent `hello` describes: its info and the
    /// interfaces it watches exist before their first record.
    pub fn new(hello: &Hello) -> NodeMetrics {
        let mut m = RecordMetrics::new();
        let info = AgentInfo {
            version: hello.agent_version.clone(),
            os: hello.os.clone(),
            boot_id: hello.boot_id.clone(),
        };
        m.on_node(&hello.node, Some(info));
        m.on_hello_interfaces(&hello.node, &hello.interfaces);
        m.on_hello_links(hello);
        NodeMetrics(Arc::new(Mutex::new(m)), late::LateReplies::default())
    }

    /// These metrics with the senders' late-reply counters.
    pub fn with_late_replies(self, late: late::LateReplies) -> NodeMetrics {
        NodeMetrics(self.0, late)
    }

    /// The senders' late-reply counters.
    pub fn late_replies(&self) -> &late::LateReplies {
        &self.1
    }

    fn lock(&self) -> MutexGuard<'_, RecordMetrics> {
        // A panic elsewhere must not stop the exporter.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A record as the spool numbered it.
    pub fn apply(&self, r: &Record) {
        self.lock().apply_record(r);
    }

    /// The function the spool calls with every record it numbers.
    pub fn tap(&self) -> crate::spool::Tap {
        let m = self.clone();
        crate::spool::Tap::new(move |r| m.apply(r))
    }

    /// A copy to render outside the lock.
    pub fn snapshot(&self) -> RecordMetrics {
        self.lock().clone()
    }
}

/// The text exposition of `records` with this build's info, the late
/// replies and the process figures (`None`: no procfs, the families stay
/// empty).
pub fn render(
    records: &RecordMetrics,
    late: &late::LateReplies,
    process: Option<ProcessStats>,
) -> String {
    let mut e = Exposition::new();
    records.render_into(&mut e);
    e.family(&BUILD_INFO, [([env!("CARGO_PKG_VERSION")], 1u64)]);
    late.render_into(&mut e);
    let mut p = ProcessMetrics::default();
    p.set(process);
    p.render(&mut e, &Subjects::default());
    e.finish()
}

#[cfg(test)]
mod tests;
