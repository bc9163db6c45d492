//! Unit tests of the exporter, through [`Metrics`]: records in, exposition
//! text out: the collector's own domains, the exposition as a whole (the
//! record domains are tested in the exposition crate).

pub(crate) use boltwatch_exposition::testing::{agent_info, rec, sample, window};
pub(crate) use boltwatch_proto::v1::record::Payload;

use super::Metrics;

mod agent;
mod exposition;
mod sequence;
mod stale;

/// The value of the sample whose name and labels are exactly `series`.
fn value(m: &Metrics, series: &str) -> Option<String> {
    sample(&m.render(), series)
}
