//! Soak runs (no payload kind: the state comes from the soaks table, set by
//! [`crate::soak::live`] every minute and, for the soak written, after every write): a
//! running soak's info, elapsed time and current verdict per SLO line, so a
//! dashboard and an alert can follow a 72-hour run live. Lines without a
//! threshold (not judged) have no series.

use boltwatch_exposition::family::{families, Exposition};
use boltwatch_exposition::{Domain, Snapshot, Subjects};

families! {
    INFO = Gauge("boltwatch_soak_info", "", &["soak", "nodes"], "A running soak; always 1.");
    ELAPSED = Gauge("boltwatch_soak_elapsed_seconds", "seconds", &["soak"], "Time since the running soak started, as of the last verdict refresh.");
    PASS = Gauge("boltwatch_soak_pass", "", &["soak"], "1 while every judged SLO line of the running soak passes.");
    SLO_PASS = Gauge("boltwatch_soak_slo_pass", "", &["soak", "slo"], "1 when the SLO line passes so far, 0 when it fails.");
    WORST_LINK = Gauge("boltwatch_soak_slo_worst_link_info", "", &["soak", "slo", "node", "peer"], "The link (node measuring, peer measured) with the worst figure of a judged link-scoped SLO line of the running soak (rtt_worst, rtt_p99, interruptions, bandwidth_mean, error_budget): the failing link when the line fails; always 1, one series per soak and line.");
    MARK = Gauge("boltwatch_soak_mark_timestamp_seconds", "seconds", &["soak", "mark", "edge"], "Start (edge=start) and end (edge=end) of the running soak's latest workload marks, unix seconds; the dashboard's annotation query uses the value as the time.");
}

/// Workload marks a running soak shows on `/metrics`: the latest ones
/// (marks are rare, tens per soak; the bound keeps a scripted marker from
/// growing the exposition).
pub const MARKS_SHOWN: usize = 64;

/// Longest mark text used as a label value (the rest of a 1 KiB mark is
/// in the report); cut at a character boundary.
pub const MARK_LABEL_BYTES: usize = 128;

/// One workload mark of a running soak.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveMark {
    /// Its text, at most [`MARK_LABEL_BYTES`].
    pub text: String,
    /// Start, unix seconds.
    pub start_seconds: f64,
    /// End, unix seconds, for a mark that spans time.
    pub end_seconds: Option<f64>,
}

impl LiveMark {
    /// The mark as `/metrics` shows it: text cut to a label's length.
    pub fn new(text: &str, at_unix_ns: u64, until_unix_ns: Option<u64>) -> LiveMark {
        let mut cut = text.len().min(MARK_LABEL_BYTES);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        LiveMark {
            text: text[..cut].to_string(),
            start_seconds: at_unix_ns as f64 / 1e9,
            end_seconds: until_unix_ns.map(|u| u as f64 / 1e9),
        }
    }
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
    /// (SLO key, node, peer): the link setting each judged link-scoped
    /// line's figure.
    pub worst_links: Vec<(&'static str, String, String)>,
    /// The latest workload marks, at most [`MARKS_SHOWN`].
    pub marks: Vec<LiveMark>,
}

/// State behind the soak families: the running soaks.
#[derive(Debug, Default, Clone)]
pub struct SoakMetrics(Snapshot<Vec<LiveSoak>>);

impl SoakMetrics {
    /// The running soaks the next render shows.
    pub fn set(&mut self, running: Vec<LiveSoak>) {
        self.0.set(running);
    }

    /// Replaces soak `name`'s entry by `soak`, or removes it (`None`),
    /// keeping every other soak's as it is.
    pub fn put(&mut self, name: &str, soak: Option<LiveSoak>) {
        let mut all = self.0.get().clone();
        all.retain(|s| s.name != name);
        all.extend(soak);
        self.0.set(all);
    }

    /// Sets soak `name`'s marks, if it is shown.
    pub fn set_marks(&mut self, name: &str, marks: Vec<LiveMark>) {
        let mut all = self.0.get().clone();
        if let Some(s) = all.iter_mut().find(|s| s.name == name) {
            s.marks = marks;
            self.0.set(all);
        }
    }
}

/// The latest [`MARKS_SHOWN`] of a soak's marks as `/metrics` shows them,
/// oldest first, each with a label of its own: marks whose (cut) texts
/// are equal get ` #2`, ` #3`... in order, so none hides another (a
/// series is its labels).
pub fn live_marks<'a>(
    marks: impl DoubleEndedIterator<Item = (&'a str, u64, Option<u64>)>,
) -> Vec<LiveMark> {
    let mut latest: Vec<LiveMark> = marks
        .rev()
        .take(MARKS_SHOWN)
        .map(|(text, at, until)| LiveMark::new(text, at, until))
        .collect();
    latest.reverse();
    let mut seen: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    for m in &mut latest {
        let n = seen.entry(m.text.clone()).or_default();
        *n += 1;
        if *n > 1 {
            m.text = format!("{} #{n}", m.text);
        }
    }
    latest
}

impl Domain for SoakMetrics {
    fn render(&self, e: &mut Exposition, _: &Subjects) {
        let s = self.0.get();
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
        e.family(
            &WORST_LINK,
            s.iter().flat_map(|x| {
                x.worst_links
                    .iter()
                    .map(move |(k, n, p)| ([x.name.as_str(), *k, n.as_str(), p.as_str()], 1u64))
            }),
        );
        e.family(
            &MARK,
            s.iter().flat_map(|x| {
                x.marks.iter().flat_map(move |m| {
                    let start = ([x.name.as_str(), m.text.as_str(), "start"], m.start_seconds);
                    let end = m
                        .end_seconds
                        .map(|t| ([x.name.as_str(), m.text.as_str(), "end"], t));
                    std::iter::once(start).chain(end)
                })
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_labels_are_cut_at_a_character_boundary() {
        let long = "é".repeat(100); // 200 bytes
        let m = LiveMark::new(
            &long,
            1_500_000_000_000_000_000,
            Some(1_500_000_060_000_000_000),
        );
        assert_eq!(m.text.len(), 128);
        assert_eq!(m.text, "é".repeat(64));
        assert_eq!(m.start_seconds, 1_500_000_000.0);
        assert_eq!(m.end_seconds, Some(1_500_000_060.0));
        let short = LiveMark::new("xcode build", 1_000_000_000, None);
        let shown = live_marks(
            [
                ("xcode build", 1, None),
                ("x", 2, None),
                ("xcode build", 3, None),
            ]
            .into_iter(),
        );
        let texts: Vec<_> = shown.iter().map(|m| m.text.as_str()).collect();
        assert_eq!(texts, ["xcode build", "x", "xcode build #2"]);
        assert_eq!(
            (short.text.as_str(), short.end_seconds),
            ("xcode build", None)
        );
    }
}
