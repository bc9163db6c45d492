//! Soak runs (no payload kind: the state comes from the soaks table, set by
//! [`crate::soak::live`] every few seconds and after every soak change): a
//! running soak's info, elapsed time and current verdict per SLO line, so a
//! dashboard and an alert can follow a 72-hour run live. Lines without a
//! threshold (not judged) have no series.

use super::family::{families, Exposition};
use super::{Domain, Snapshot, Subjects};

families! {
    INFO = Gauge("boltwatch_soak_info", "", &["soak", "nodes"], "A running soak; always 1.");
    ELAPSED = Gauge("boltwatch_soak_elapsed_seconds", "seconds", &["soak"], "Time since the running soak started, as of the last verdict refresh.");
    PASS = Gauge("boltwatch_soak_pass", "", &["soak"], "1 while every judged SLO line of the running soak passes.");
    SLO_PASS = Gauge("boltwatch_soak_slo_pass", "", &["soak", "slo"], "1 when the SLO line passes so far, 0 when it fails.");
}

/// A running soak as `/metrics` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSoak {
    /// Name.
    pub name: String,
    /// Its nodes, comma-separated (empty: all).
    pub nodes: String,
    /// Elapsed at the refresh, s.
    pub elapsed_seconds: f64,
    /// The verdict so far.
    pub pass: bool,
    /// (SLO key, passes) of the judged lines.
    pub lines: Vec<(&'static str, bool)>,
}

/// State behind the soak families: the running soaks.
pub type SoakMetrics = Snapshot<Vec<LiveSoak>>;

impl Domain for SoakMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let s = self.get();
        e.family(
            &INFO,
            s.iter()
                .map(|x| ([x.name.as_str(), x.nodes.as_str()], 1u64)),
        );
        e.family(
            &ELAPSED,
            s.iter().map(|x| ([x.name.as_str()], x.elapsed_seconds)),
        );
        e.family(&PASS, s.iter().map(|x| ([x.name.as_str()], x.pass)));
        e.family(
            &SLO_PASS,
            s.iter().flat_map(|x| {
                x.lines
                    .iter()
                    .map(move |(k, p)| ([x.name.as_str(), *k], *p))
            }),
        );
    }
}
