//! Per-window accounting of one session's probes into `RttSummary` records.
//!
//! Pure. A probe belongs to the window (by default one second, aligned to
//! the unix epoch) in which it was *sent*; a window is complete once its end
//! has passed and every probe in it was answered or lost, so every record
//! satisfies `sent == received + lost`. A reply whose RTT was discarded
//! (negative: clock step or a broken reflector) counts as received and
//! discarded but adds no sample, so the histogram sums to
//! `received - discarded`. A duplicate that arrives after its window was
//! emitted is dropped (returned as `false`).

use std::collections::BTreeMap;

use boltwatch_proto::v1::{RttSummary, TimestampClock, TimestampSource};

use super::stats::Accumulator;

#[derive(Debug, Default)]
struct Window {
    sent: u64,
    received: u64,
    lost: u64,
    duplicates: u64,
    discarded: u64,
    userspace_rx: bool,
    samples: Accumulator,
}

/// The open RTT windows of one session, each counting the probes sent in
/// it until it can be emitted as an `RttSummary`.
#[derive(Debug)]
pub struct RttWindows {
    window_ns: u64,
    template: RttSummary,
    kernel_rx: bool,
    windows: BTreeMap<u64, Window>,
}

impl RttWindows {
    /// Windows `window_ns` long whose records copy `peer`,
    /// `peer_address` and `interface` from `template`. `kernel_rx` says
    /// whether the platform gives kernel RX timestamps at all.
    ///
    /// # Panics
    /// If `window_ns` is zero.
    pub fn new(window_ns: u64, template: RttSummary, kernel_rx: bool) -> RttWindows {
        assert!(window_ns > 0, "window length must be positive");
        RttWindows {
            window_ns,
            template,
            kernel_rx,
            windows: BTreeMap::new(),
        }
    }

    fn start_of(&self, unix_ns: u64) -> u64 {
        unix_ns - unix_ns % self.window_ns
    }

    fn window(&mut self, sent_unix_ns: u64) -> &mut Window {
        let start = self.start_of(sent_unix_ns);
        self.windows.entry(start).or_default()
    }

    /// A probe was sent at `sent_unix_ns`.
    pub fn sent(&mut self, sent_unix_ns: u64) {
        self.window(sent_unix_ns).sent += 1;
    }

    /// The probe sent at `sent_unix_ns` was answered; `rtt_ns` is `None`
    /// when the RTT was discarded; `kernel_rx` says whether t4 came from the
    /// kernel.
    pub fn received(&mut self, sent_unix_ns: u64, rtt_ns: Option<u64>, kernel_rx: bool) {
        let w = self.window(sent_unix_ns);
        w.received += 1;
        w.userspace_rx |= !kernel_rx;
        match rtt_ns {
            Some(r) => w.samples.add(r),
            None => w.discarded += 1,
        }
    }

    /// The probe sent at `sent_unix_ns` was lost.
    pub fn lost(&mut self, sent_unix_ns: u64) {
        self.window(sent_unix_ns).lost += 1;
    }

    /// A duplicate answer to the probe sent at `sent_unix_ns`. Returns
    /// false when that window was already emitted.
    pub fn duplicate(&mut self, sent_unix_ns: u64) -> bool {
        let start = self.start_of(sent_unix_ns);
        match self.windows.get_mut(&start) {
            Some(w) => {
                w.duplicates += 1;
                true
            }
            None => false,
        }
    }

    /// Removes and returns every complete window as `(window end unix ns,
    /// record)`, oldest first, setting `under_load` on each record for
    /// which `under_load(window start, window end)` (unix ns, end
    /// exclusive) says a bandwidth test overlapped it.
    pub fn drain_complete(
        &mut self,
        now_unix_ns: u64,
        under_load: impl Fn(u64, u64) -> bool,
    ) -> Vec<(u64, RttSummary)> {
        let done: Vec<u64> = self
            .windows
            .iter()
            .filter(|(&start, w)| {
                now_unix_ns >= start + self.window_ns && w.sent == w.received + w.lost
            })
            .map(|(&start, _)| start)
            .collect();
        let mut out = Vec::with_capacity(done.len());
        for start in done {
            if let Some(w) = self.windows.remove(&start) {
                let end = start + self.window_ns;
                let mut r = self.record(start, w);
                r.under_load = under_load(start, end);
                out.push((end, r));
            }
        }
        out
    }

    /// Windows not yet emitted.
    pub fn open_windows(&self) -> usize {
        self.windows.len()
    }

    fn record(&self, start: u64, w: Window) -> RttSummary {
        let source = if self.kernel_rx && !w.userspace_rx {
            TimestampSource::Kernel
        } else {
            TimestampSource::Userspace
        };
        let s = w.samples.finish();
        // The template carries the OS's kernel clock; a window with a
        // userspace t4 was read from userspace.
        let clock = match source {
            TimestampSource::Kernel => self.template.timestamp_clock,
            _ => TimestampClock::UserSpace as i32,
        };
        s.into_rtt(RttSummary {
            window_start_unix_ns: start,
            window_ns: self.window_ns,
            sent: w.sent,
            received: w.received,
            lost: w.lost,
            duplicates: w.duplicates,
            timestamp_source: source as i32,
            timestamp_clock: clock,
            discarded: w.discarded,
            ..self.template.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_764_470_000 * S;

    /// No bandwidth test ever overlaps.
    fn idle(_: u64, _: u64) -> bool {
        false
    }

    fn windows() -> RttWindows {
        RttWindows::new(
            S,
            RttSummary {
                peer: "b".into(),
                peer_address: "10.0.0.2:862".into(),
                interface: "tb0".into(),
                timestamp_clock: TimestampClock::KernelMonotonicMach as i32,
                timestamp_resolution_ns: 42,
                ..Default::default()
            },
            true,
        )
    }

    #[test]
    fn window_waits_for_its_end_and_its_probes() {
        let mut l = windows();
        l.sent(T0 + 100);
        l.sent(T0 + S / 2);
        l.received(T0 + 100, Some(40_000), true);
        assert!(
            l.drain_complete(T0 + S + 1, idle).is_empty(),
            "one still in flight"
        );
        l.lost(T0 + S / 2);
        assert!(
            l.drain_complete(T0 + S - 1, idle).is_empty(),
            "window not over"
        );
        let out = l.drain_complete(T0 + S, idle);
        assert_eq!(out.len(), 1);
        let (end, r) = &out[0];
        assert_eq!(*end, T0 + S);
        assert_eq!(r.window_start_unix_ns, T0);
        assert_eq!(r.window_ns, S);
        assert_eq!((r.sent, r.received, r.lost), (2, 1, 1));
        assert_eq!((r.min_ns, r.p50_ns, r.max_ns), (40_000, 40_000, 40_000));
        assert_eq!(r.peer, "b");
        assert_eq!(r.interface, "tb0");
        assert_eq!(r.timestamp_source, TimestampSource::Kernel as i32);
        assert_eq!(
            r.timestamp_clock,
            TimestampClock::KernelMonotonicMach as i32
        );
        assert_eq!(r.timestamp_resolution_ns, 42);
        assert_eq!(l.open_windows(), 0);
        assert!(!l.duplicate(T0 + 100), "window already emitted");
    }

    #[test]
    fn probes_go_to_the_window_they_were_sent_in() {
        let mut l = windows();
        l.sent(T0 + S - 1);
        l.sent(T0 + S);
        l.sent(T0 + S + 5);
        // The first probe's answer comes in the second window.
        l.received(T0 + S, Some(10), true);
        l.received(T0 + S - 1, Some(20), false);
        assert!(l.duplicate(T0 + S));
        l.received(T0 + S + 5, None, true);
        let out = l.drain_complete(T0 + 3 * S, idle);
        assert_eq!(out.len(), 2);
        let (a, b) = (&out[0].1, &out[1].1);
        assert_eq!((a.sent, a.received, a.min_ns), (1, 1, 20));
        assert_eq!(a.timestamp_source, TimestampSource::Userspace as i32);
        assert_eq!(a.timestamp_clock, TimestampClock::UserSpace as i32);
        assert_eq!(
            b.timestamp_clock,
            TimestampClock::KernelMonotonicMach as i32
        );
        assert_eq!((b.sent, b.received, b.duplicates), (2, 2, 1));
        assert_eq!(b.discarded, 1);
        assert_eq!(b.buckets.iter().map(|x| x.count).sum::<u64>(), 1);
    }

    #[test]
    fn windows_overlapping_a_test_are_tagged() {
        let mut l = windows();
        for i in 0..4 {
            l.sent(T0 + i * S);
            l.received(T0 + i * S, Some(50_000), true);
        }
        // A test from 1.5 s to 2.2 s touches windows 1 and 2 only.
        let test = (T0 + 3 * S / 2, T0 + 22 * S / 10);
        let out = l.drain_complete(T0 + 4 * S, |s, e| test.0 < e && test.1 >= s);
        let tags: Vec<bool> = out.iter().map(|(_, r)| r.under_load).collect();
        assert_eq!(tags, [false, true, true, false]);
        l.sent(T0 + 5 * S);
        l.received(T0 + 5 * S, Some(1), true);
        assert!(!l.drain_complete(T0 + 6 * S, idle)[0].1.under_load);
    }

    #[test]
    fn all_lost_window_has_zero_stats() {
        let mut l = windows();
        for i in 0..10 {
            l.sent(T0 + i * 100_000_000);
            l.lost(T0 + i * 100_000_000);
        }
        let out = l.drain_complete(T0 + S, idle);
        let r = &out[0].1;
        assert_eq!((r.sent, r.received, r.lost), (10, 0, 10));
        assert_eq!((r.min_ns, r.max_ns, r.sum_ns), (0, 0, 0));
        assert!(r.buckets.is_empty());
    }
}
