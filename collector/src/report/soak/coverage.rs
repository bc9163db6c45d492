//! Completeness: which RTT windows the schedule implies and which are
//! stored (per link, and the gaps between them), and per agent boot the
//! sequence numbers stored and the records it dropped.

use std::collections::BTreeMap;

use super::{Completeness, Coverage, Gap, Link, Win};

/// The most common value (zeros ignored): a link's window length.
pub(super) fn mode(v: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for x in v.filter(|x| *x > 0) {
        *counts.entry(x).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(x, n)| (*n, *x))
        .map(|(x, _)| x)
}

/// Expected, stored and missing RTT windows of a link (windows sorted).
pub(super) fn of_link(w: &[Win], window: Option<u64>, from: u64, to: u64) -> Coverage {
    let Some(win) = window else {
        return Coverage::default();
    };
    let mut c = Coverage {
        window_ns: win,
        expected: (to - from) / win,
        stored: w.len() as u64,
        gaps: Vec::new(),
    };
    let mut gap = |start: u64, end: u64| {
        // Rounded: real windows drift around the grid by scheduling jitter.
        let missing = (end.saturating_sub(start) + win / 2) / win;
        if missing > 0 {
            c.gaps.push(Gap {
                start_unix_ns: start,
                end_unix_ns: end,
                missing,
            });
        }
    };
    let mut next = from;
    for x in w {
        gap(next, x.t);
        next = x.t + win;
    }
    if to > next && (to - next) >= win {
        gap(next, next + (to - next) / win * win);
    }
    c
}

/// The coverage of all links together: their windows added up, no gaps
/// (those are per link).
pub(super) fn overall(links: &[Link], window: Option<u64>) -> Coverage {
    Coverage {
        window_ns: window.unwrap_or(0),
        expected: links.iter().map(|l| l.coverage.expected).sum(),
        stored: links.iter().map(|l| l.coverage.stored).sum(),
        gaps: Vec::new(),
    }
}

/// One agent boot's records in range.
#[derive(Debug, Default)]
pub(super) struct BootAcc {
    min_seq: u64,
    max_seq: u64,
    count: u64,
    /// The agent's dropped-records counter: (lowest, highest) seen.
    drops: Option<(u64, u64)>,
}

impl BootAcc {
    /// `count` records with sequence numbers `min_seq..=max_seq`.
    pub fn note(&mut self, min_seq: u64, max_seq: u64, count: u64) {
        if self.count == 0 || min_seq < self.min_seq {
            self.min_seq = min_seq;
        }
        self.max_seq = self.max_seq.max(max_seq);
        self.count += count;
    }

    /// The agent's dropped-records counter read `v`.
    pub fn note_drops(&mut self, v: u64) {
        self.drops = Some(self.drops.map_or((v, v), |(f, l)| (f.min(v), l.max(v))));
    }

    /// Sequence numbers missing inside the stored range.
    fn holes(&self) -> u64 {
        (self.max_seq - self.min_seq + 1).saturating_sub(self.count)
    }

    /// Records dropped in range: the counter's growth.
    fn drops(&self) -> u64 {
        match self.drops {
            // A boot that began inside the range dropped its first figure
            // inside it too.
            Some((_, last)) if self.min_seq == 1 => last,
            Some((first, last)) => last - first,
            None => 0,
        }
    }
}

/// The report's completeness: the links' windows (`overall` their sum),
/// `records` in range, and the boots' holes and drops.
pub(super) fn completeness<'a>(
    overall: &Coverage,
    links: &[Link],
    records: u64,
    boots: impl Iterator<Item = &'a BootAcc>,
) -> Completeness {
    let mut c = Completeness {
        expected_windows: overall.expected,
        stored_windows: overall.stored,
        percent: (overall.expected > 0)
            .then(|| 100.0 * overall.stored.min(overall.expected) as f64 / overall.expected as f64),
        gaps: links.iter().map(|l| l.coverage.gaps.len() as u64).sum(),
        records,
        ..Default::default()
    };
    for b in boots {
        c.sequence_holes += b.holes();
        c.spool_drops += b.drops();
    }
    c
}
