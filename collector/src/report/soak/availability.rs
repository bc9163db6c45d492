//! Availability of a directed link in RTT-window seconds: each window
//! classified against the link's outages and its own losses, the classes
//! tallied (per link, per hour, per quarter hour), and the link's
//! availability, error budget, MTBF and MTTR read off the tally.
//!
//! A window is unavailable (UAS) when it overlaps an outage of its link;
//! otherwise errored (ES) when it lost a probe, and severely errored (SES,
//! a subset of ES) when it lost at least 30 % of the probes it sent. All
//! three are counted in window seconds.

use std::collections::BTreeMap;

use super::{secs, Availability, OutageItem, Win};

/// What one RTT window was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// No outage, no loss.
    Good,
    /// Lost a probe, under 30 % of those sent.
    Errored,
    /// Lost at least 30 % of the probes sent (also errored).
    Severe,
    /// Overlaps an outage of its link.
    Unavailable,
}

/// The outages' spans, sorted and merged where they overlap or touch (a
/// carrier loss and the probe loss it causes are one outage).
pub(super) fn spans(outages: &[OutageItem]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = outages
        .iter()
        .map(|o| (o.start_unix_ns, o.end_unix_ns))
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The class of window `w` against the merged, sorted `spans`.
pub(super) fn class(w: &Win, spans: &[(u64, u64)]) -> Class {
    // The first span ending after the window starts; a zero-length window
    // is the instant it names.
    let i = spans.partition_point(|s| s.1 <= w.t);
    if spans.get(i).is_some_and(|s| s.0 < w.t + w.window_ns.max(1)) {
        return Class::Unavailable;
    }
    match (w.lost, w.sent) {
        (0, _) => Class::Good,
        // 30 % in integers: lost / sent >= 3 / 10.
        (l, s) if l * 10 >= s * 3 => Class::Severe,
        _ => Class::Errored,
    }
}

/// Window seconds by class (ns), and the highest window p99 among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub uas_ns: u64,
    pub es_ns: u64,
    pub ses_ns: u64,
    pub p99_max_ns: u64,
}

impl Tally {
    /// Counts window `w` of class `c`.
    pub fn add(&mut self, w: &Win, c: Class) {
        match c {
            Class::Good => {}
            Class::Errored => self.es_ns += w.window_ns,
            Class::Severe => {
                self.es_ns += w.window_ns;
                self.ses_ns += w.window_ns;
            }
            Class::Unavailable => self.uas_ns += w.window_ns,
        }
        if w.received > 0 {
            self.p99_max_ns = self.p99_max_ns.max(w.p99_ns);
        }
    }

    /// Adds another tally (another link's, the same bin).
    pub fn merge(&mut self, o: &Tally) {
        self.uas_ns += o.uas_ns;
        self.es_ns += o.es_ns;
        self.ses_ns += o.ses_ns;
        self.p99_max_ns = self.p99_max_ns.max(o.p99_max_ns);
    }

    /// The order of "worse": most UAS, then SES, then ES, then p99.
    pub fn severity(&self) -> (u64, u64, u64, u64) {
        (self.uas_ns, self.ses_ns, self.es_ns, self.p99_max_ns)
    }
}

/// The windows (sorted) tallied per bin of `bin_ns` aligned to the unix
/// epoch (UTC), keyed by the bin's start; a window belongs to the bin of
/// its start.
pub(super) fn by_bin(windows: &[Win], classes: &[Class], bin_ns: u64) -> BTreeMap<u64, Tally> {
    let mut bins: BTreeMap<u64, Tally> = BTreeMap::new();
    for (w, c) in windows.iter().zip(classes) {
        bins.entry(w.t - w.t % bin_ns).or_default().add(w, *c);
    }
    bins
}

/// The link's availability over a range of `range_ns` with the
/// `min_percent` SLO: `total` its windows' tally, `spans` its merged
/// outages.
pub(super) fn availability(
    total: &Tally,
    spans: &[(u64, u64)],
    range_ns: u64,
    min_percent: f64,
) -> Availability {
    let down: u64 = spans.iter().map(|(s, e)| e - s).sum();
    of(
        total.uas_ns,
        (total.es_ns, total.ses_ns),
        (
            spans.len() as u64,
            down,
            spans.iter().map(|(s, e)| e - s).max(),
        ),
        range_ns,
        min_percent,
    )
}

/// All links together: their seconds added up over `links` times the
/// range.
pub(super) fn overall<'a>(
    links: impl Iterator<Item = (&'a Tally, &'a [(u64, u64)])>,
    range_ns: u64,
    min_percent: f64,
) -> Availability {
    let (mut total, mut n, mut count, mut down, mut longest) = (Tally::default(), 0, 0, 0, None);
    for (t, spans) in links {
        total.merge(t);
        n += 1;
        count += spans.len() as u64;
        down += spans.iter().map(|(s, e)| e - s).sum::<u64>();
        longest = longest.max(spans.iter().map(|(s, e)| e - s).max());
    }
    of(
        total.uas_ns,
        (total.es_ns, total.ses_ns),
        (count, down, longest),
        range_ns * n,
        min_percent,
    )
}

/// The figures of `uas_ns` and the errored seconds over `range_ns`, with
/// `(outages, down ns, longest ns)`.
fn of(
    uas_ns: u64,
    (es_ns, ses_ns): (u64, u64),
    (count, down, longest): (u64, u64, Option<u64>),
    range_ns: u64,
    min_percent: f64,
) -> Availability {
    let range = secs(range_ns);
    let uas = secs(uas_ns);
    let allowed = (1.0 - min_percent / 100.0) * range;
    let per = |v: u64| (count > 0).then(|| secs(v) / count as f64);
    Availability {
        uas_seconds: uas,
        es_seconds: secs(es_ns),
        ses_seconds: secs(ses_ns),
        availability_percent: (range > 0.0).then(|| 100.0 * (1.0 - uas / range)),
        budget_consumed_percent: if allowed > 0.0 {
            Some(100.0 * uas / allowed)
        } else {
            // No budget at all: nothing spent, or blown without a figure.
            (uas_ns == 0).then_some(0.0)
        },
        outages: count,
        longest_outage_seconds: secs(longest.unwrap_or(0)),
        mtbf_seconds: per(range_ns.saturating_sub(down)),
        mttr_seconds: per(down),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn win(t: u64, sent: u64, lost: u64) -> Win {
        Win {
            t: t * S,
            window_ns: S,
            sum_ns: 0,
            received: sent - lost,
            p50_ns: 1,
            p99_ns: 2,
            sent,
            lost,
        }
    }

    fn outage(s: u64, e: u64) -> OutageItem {
        OutageItem {
            node: "a".into(),
            peer: "b".into(),
            cause: "probe_loss".into(),
            service: None,
            start_unix_ns: s,
            end_unix_ns: e,
            open: false,
            seconds: secs(e - s),
        }
    }

    #[test]
    fn classes_follow_the_definitions() {
        // An outage from 10.5 s to 13 s: windows 10, 11, 12 overlap it.
        let spans = spans(&[outage(10 * S + S / 2, 13 * S)]);
        let c = |t, sent, lost| class(&win(t, sent, lost), &spans);
        assert_eq!(c(9, 10, 10), Class::Severe);
        assert_eq!(c(10, 10, 0), Class::Unavailable);
        assert_eq!(c(12, 10, 10), Class::Unavailable);
        assert_eq!(c(13, 10, 0), Class::Good);
        assert_eq!(c(14, 10, 1), Class::Errored);
        assert_eq!(c(14, 10, 2), Class::Errored);
        assert_eq!(c(14, 10, 3), Class::Severe);
        assert_eq!(c(14, 3, 1), Class::Severe);
        assert_eq!(c(14, 7, 2), Class::Errored);
    }

    #[test]
    fn overlapping_outages_merge() {
        let s = spans(&[outage(5, 9), outage(1, 3), outage(2, 6), outage(20, 30)]);
        assert_eq!(s, vec![(1, 9), (20, 30)]);
    }

    #[test]
    fn availability_budget_mtbf_mttr() {
        // 3600 s, 99.99 %: a budget of 0.36 s; 36 s unavailable spends it
        // 100 times over.
        let total = Tally {
            uas_ns: 36 * S,
            es_ns: 4 * S,
            ses_ns: S,
            p99_max_ns: 0,
        };
        let spans = [(100 * S, 130 * S), (200 * S, 206 * S)];
        let a = availability(&total, &spans, 3600 * S, 99.99);
        assert_eq!(a.uas_seconds, 36.0);
        assert_eq!((a.es_seconds, a.ses_seconds), (4.0, 1.0));
        assert!((a.availability_percent.unwrap() - 99.0).abs() < 1e-9);
        assert!((a.budget_consumed_percent.unwrap() - 10_000.0).abs() < 1e-6);
        assert_eq!(a.outages, 2);
        assert_eq!(a.longest_outage_seconds, 30.0);
        assert_eq!(a.mttr_seconds, Some(18.0));
        assert_eq!(a.mtbf_seconds, Some(1782.0));
        let clean = availability(&Tally::default(), &[], 3600 * S, 100.0);
        assert_eq!(clean.budget_consumed_percent, Some(0.0));
        assert_eq!((clean.mtbf_seconds, clean.mttr_seconds), (None, None));
        let blown = availability(&total, &spans, 3600 * S, 100.0);
        assert_eq!(blown.budget_consumed_percent, None);
    }

    #[test]
    fn bins_take_windows_by_start() {
        let w = [win(899, 10, 1), win(900, 10, 5), win(901, 10, 0)];
        let spans = spans(&[]);
        let c: Vec<Class> = w.iter().map(|w| class(w, &spans)).collect();
        let b = by_bin(&w, &c, 900 * S);
        assert_eq!(b[&0].es_ns, S);
        assert_eq!((b[&(900 * S)].es_ns, b[&(900 * S)].ses_ns), (S, S));
        let both = overall(
            [(&b[&0], &[(0, S)][..]), (&b[&(900 * S)], &[][..])].into_iter(),
            10 * S,
            99.0,
        );
        assert_eq!((both.es_seconds, both.outages), (2.0, 1));
        assert_eq!(both.mttr_seconds, Some(1.0));
    }
}
