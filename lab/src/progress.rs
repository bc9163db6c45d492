//! The lab's status line: elapsed of total, probes, loss, p50 so far and
//! records stored, read from the store the collector is writing (so it
//! shows what a report would see, not what the agents believe they sent).
//!
//! On a terminal the line is rewritten in place every second; otherwise
//! (a log file, a CI job) plain lines follow at a period that keeps a
//! long run's log short. [`Tally`] is the pure part: records in, a line
//! out.

use std::io::Write;
use std::time::Duration;

use boltwatch_collector::report::summary::LinkStats;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::Record;
use boltwatch_store::StoreReader;

/// How the status is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One line rewritten in place (`\r`), every second.
    Terminal,
    /// A plain line every `period`.
    Lines {
        /// Time between lines.
        period: Duration,
    },
}

impl Style {
    /// Terminal when `tty`, otherwise plain lines about twenty times per
    /// run, at least a second and at most a minute apart.
    pub fn for_output(tty: bool, duration: Duration) -> Style {
        if tty {
            Style::Terminal
        } else {
            Style::Lines {
                period: (duration / 20).clamp(Duration::from_secs(1), Duration::from_secs(60)),
            }
        }
    }

    /// Time between updates.
    pub fn period(self) -> Duration {
        match self {
            Style::Terminal => Duration::from_secs(1),
            Style::Lines { period } => period,
        }
    }
}

/// Running totals over the RTT records stored so far, all links merged.
#[derive(Debug, Default)]
pub struct Tally {
    rtt: LinkStats,
    /// The directed links (node, peer) seen.
    links: std::collections::BTreeSet<(String, String)>,
    records: u64,
    /// Arrival-order position of the last record read: the next read
    /// starts after it.
    cursor: i64,
}

impl Tally {
    /// Merges one stored RTT record (other kinds only move the cursor).
    pub fn add(&mut self, r: &Record) {
        if let Some(Payload::Rtt(s)) = &r.payload {
            self.rtt.add(s);
            if !self.links.contains(&(r.node.clone(), s.peer.clone())) {
                self.links.insert((r.node.clone(), s.peer.clone()));
            }
        }
    }

    /// How many directed links have an RTT window stored.
    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// The status line for `elapsed` of `total`.
    pub fn line(&self, elapsed: Duration, total: Duration) -> String {
        let loss = 100.0 * self.rtt.loss_ratio();
        let p50 = match self.rtt.quantile_ns(0.5) {
            Some(ns) => format!("{:.3} ms", ns / 1e6),
            None => "-".to_string(),
        };
        format!(
            "{} / {}  probes {}  loss {loss:.2}%  p50 {p50}  records stored {}",
            clock(elapsed),
            clock(total),
            self.rtt.merged.sent,
            self.records
        )
    }

    /// Reads what the store gained since the last call. A store the
    /// collector has not created yet reads as empty.
    pub async fn refresh(&mut self, store: &StoreReader) {
        let after = self.cursor;
        // Arrival order, not record time: a record stamped before one
        // already read (another node's, or an agent's last window flushed
        // at shutdown) still arrives after it, and a cursor on record time
        // would skip it.
        let read = store
            .read(move |c| {
                let mut logged = Vec::new();
                let mut pos = after;
                loop {
                    let chunk = c.log_after(pos, boltwatch_store::LOG_CHUNK)?;
                    let Some(last) = chunk.last() else { break };
                    pos = last.pos;
                    logged.extend(chunk);
                }
                Ok((logged, c.total_records()?))
            })
            .await;
        let Ok((logged, total)) = read else { return };
        self.records = total;
        for l in logged {
            if let Some(r) = &l.record {
                self.add(r);
            }
            self.cursor = l.pos;
        }
    }
}

/// `h:mm:ss`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Writes one update: in place on a terminal, a plain line otherwise.
pub fn show(out: &mut impl Write, style: Style, line: &str) {
    let _ = match style {
        // \x1b[K clears what a longer previous line left behind.
        Style::Terminal => write!(out, "\r{line}\x1b[K"),
        Style::Lines { .. } => writeln!(out, "{line}"),
    };
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{HistogramBucket, RttSummary};

    fn rtt(sent: u64, lost: u64, bucket: i32) -> Record {
        let received = sent - lost;
        Record {
            payload: Some(Payload::Rtt(RttSummary {
                sent,
                received,
                lost,
                min_ns: 20_000,
                max_ns: 40_000,
                sum_ns: 30_000 * received,
                buckets: vec![HistogramBucket {
                    index: bucket,
                    count: received,
                }],
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn line_sums_every_link_and_reads_p50_from_the_merged_histogram() {
        let mut t = Tally::default();
        assert_eq!(
            t.line(Duration::ZERO, Duration::from_secs(60)),
            "0:00:00 / 0:01:00  probes 0  loss 0.00%  p50 -  records stored 0"
        );
        t.add(&rtt(100, 2, -120));
        t.add(&rtt(100, 0, -120));
        t.records = 7;
        let line = t.line(Duration::from_secs(3725), Duration::from_secs(72 * 3600));
        assert!(
            line.starts_with("1:02:05 / 72:00:00  probes 200  loss 1.00%  p50 0.0"),
            "{line}"
        );
        assert!(line.ends_with(" ms  records stored 7"), "{line}");
    }

    #[test]
    fn styles_update_in_place_only_on_a_terminal() {
        let mut out = Vec::new();
        show(&mut out, Style::Terminal, "a");
        show(
            &mut out,
            Style::Lines {
                period: Duration::from_secs(1),
            },
            "b",
        );
        assert_eq!(out, b"\ra\x1b[Kb\n");
        assert_eq!(
            Style::for_output(false, Duration::from_secs(72 * 3600)).period(),
            Duration::from_secs(60)
        );
        assert_eq!(
            Style::for_output(false, Duration::from_secs(4)).period(),
            Duration::from_secs(1)
        );
        assert_eq!(
            Style::for_output(true, Duration::from_secs(4)),
            Style::Terminal
        );
    }
}
