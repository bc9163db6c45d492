//! `doctor` on an OS without platform sources: one row saying so; the
//! portable kernel-timestamp row still runs.

use super::{Captures, Row, Verdict};

pub(super) fn rows(_cap: &Captures, _only: &[String]) -> Vec<Row> {
    vec![Row {
        source: "platform",
        subject: std::env::consts::OS.into(),
        agent: format!("unsupported: {:?}", crate::support::unsupported_sources()),
        os_tool: "-".into(),
        verdict: Verdict::NotApplicable("no per-OS sources on this target".into()),
    }]
}
