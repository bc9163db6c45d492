//! When the spool's oldest unacknowledged record was made. Pure: no
//! files, no clocks.
//!
//! Per boot, checkpoints `(seq, unix_ns)`: a new one only when a record is
//! made at least [`GRAIN_NS`] after the last checkpoint, so memory stays
//! small however long the collector is away (a day of backlog is 8,640
//! checkpoints a boot), not one entry per record. The oldest unacknowledged
//! record of a boot is the one after its ack; its time is read off the last
//! checkpoint at or before it: at most one grain earlier than the truth and
//! never later, so an alert on the age errs early, not late.

use std::collections::{BTreeMap, VecDeque};

/// Record time between two checkpoints of one boot.
pub const GRAIN_NS: u64 = 10_000_000_000;

/// One boot's checkpoints and the last seq it was noted with.
#[derive(Debug, Default)]
struct Boot {
    /// `(seq, unix_ns)`, seqs ascending.
    checkpoints: VecDeque<(u64, u64)>,
    last_seq: u64,
}

/// The checkpoints of every boot with records in the spool.
#[derive(Debug, Default)]
pub struct Ages {
    boots: BTreeMap<String, Boot>,
}

impl Ages {
    /// An empty record of ages.
    pub fn new() -> Ages {
        Ages::default()
    }

    /// Notes record `seq` of `boot`, made at `unix_ns`.
    pub fn note(&mut self, boot: &str, seq: u64, unix_ns: u64) {
        let b = self.boots.entry(boot.to_string()).or_default();
        b.last_seq = b.last_seq.max(seq);
        let due = match b.checkpoints.back() {
            // A seq at or before the last checkpoint (a number given back
            // and reused) is covered by that older checkpoint.
            Some(&(s, t)) => seq > s && unix_ns >= t.saturating_add(GRAIN_NS),
            None => true,
        };
        if due {
            b.checkpoints.push_back((seq, unix_ns));
        }
    }

    /// Forgets what `acked` (the highest acknowledged seq of a boot) says
    /// no longer waits: boots acknowledged to their last record go, and of
    /// the others the checkpoints before the one that dates their oldest
    /// waiting record.
    pub fn prune(&mut self, acked: impl Fn(&str) -> u64) {
        self.boots.retain(|boot, b| {
            let next = acked(boot).saturating_add(1);
            while b.checkpoints.len() > 1 && b.checkpoints[1].0 <= next {
                b.checkpoints.pop_front();
            }
            next <= b.last_seq
        });
    }

    /// When the oldest record not acknowledged (per `acked`) was made, over
    /// every boot; `None` when nothing waits.
    pub fn oldest_unix_ns(&self, acked: impl Fn(&str) -> u64) -> Option<u64> {
        self.boots
            .iter()
            .filter_map(|(boot, b)| {
                let next = acked(boot).saturating_add(1);
                if next > b.last_seq {
                    return None;
                }
                let at = b.checkpoints.iter().take_while(|c| c.0 <= next).last();
                at.or(b.checkpoints.front()).map(|c| c.1)
            })
            .min()
    }

    /// Checkpoints held, all boots (what memory this costs).
    pub fn len(&self) -> usize {
        self.boots.values().map(|b| b.checkpoints.len()).sum()
    }

    /// True when no boot has a checkpoint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// One record a second from t=100 s, seqs 1..=n, of boot "a".
    fn steady(n: u64) -> Ages {
        let mut a = Ages::new();
        for seq in 1..=n {
            a.note("a", seq, (99 + seq) * S);
        }
        a
    }

    #[test]
    fn nothing_waits_when_all_is_acknowledged() {
        let a = steady(30);
        assert_eq!(a.oldest_unix_ns(|_| 30), None);
        assert_eq!(Ages::new().oldest_unix_ns(|_| 0), None);
    }

    #[test]
    fn the_oldest_waiting_record_is_dated_within_one_grain_never_later() {
        let a = steady(100);
        for acked in [0u64, 5, 9, 10, 11, 55, 99] {
            let truth = (100 + acked) * S;
            let got = a.oldest_unix_ns(|_| acked).unwrap();
            assert!(got <= truth, "acked {acked}: {got} after {truth}");
            assert!(truth - got < GRAIN_NS, "acked {acked}: {got} vs {truth}");
        }
        assert_eq!(a.oldest_unix_ns(|_| 0), Some(100 * S));
    }

    #[test]
    fn checkpoints_are_one_a_grain_and_pruned_by_acks() {
        let mut a = steady(1000);
        assert_eq!(a.len(), 100);
        a.prune(|_| 500);
        assert!(a.len() <= 51, "{}", a.len());
        let got = a.oldest_unix_ns(|_| 500).unwrap();
        assert!(got <= 600 * S && 600 * S - got < GRAIN_NS);
        a.prune(|_| 1000);
        assert!(a.is_empty());
    }

    #[test]
    fn the_oldest_over_boots_is_the_earliest() {
        let mut a = steady(20);
        a.note("b", 1, 50 * S);
        a.note("b", 2, 51 * S);
        assert_eq!(a.oldest_unix_ns(|_| 0), Some(50 * S));
        assert_eq!(
            a.oldest_unix_ns(|b| if b == "b" { 2 } else { 0 }),
            Some(100 * S)
        );
    }

    #[test]
    fn a_reused_seq_keeps_the_older_checkpoint() {
        // Checkpoints at seqs 1 and 11; seq 11 given back and made again.
        let mut a = steady(11);
        a.note("a", 11, 500 * S);
        assert_eq!(a.oldest_unix_ns(|_| 10), Some(110 * S));
    }
}
