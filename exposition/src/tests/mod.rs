//! Unit tests of the record domains, through [`RecordMetrics`]: records
//! in, exposition text out. One file per domain; the collector's tests
//! check its exposition as a whole.

pub(crate) use crate::testing::{agent_info, rec, sample, window};
pub(crate) use boltwatch_proto::v1::record::Payload;
pub(crate) use boltwatch_proto::v1::Record;

use crate::RecordMetrics as Metrics;

mod agent;
mod bandwidth;
mod cabling;
mod fabric;
mod kinds;
mod link;
mod mtu;
mod outage_service;
mod path;
mod power;
mod rdma;
mod rtt;
mod thermal;

/// The value of the sample whose name and labels are exactly `series`.
fn value(m: &Metrics, series: &str) -> Option<String> {
    sample(&m.render(), series)
}
