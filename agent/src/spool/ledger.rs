//! What the spool holds and what the collector has acknowledged: per segment,
//! the range of sequence numbers of each boot in it; per boot, the highest
//! acknowledged sequence number. Pure: no files, no clocks.
//!
//! Sequence numbers are contiguous per boot and appended in order, so a
//! segment's records of one boot are exactly `first..=last`, and a segment
//! can go once every boot in it is acknowledged up to its `last`.

use std::collections::{BTreeMap, VecDeque};

/// The sequence numbers one boot has in one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRange {
    /// First seq of the boot in the segment.
    pub first: u64,
    /// Last seq of the boot in the segment.
    pub last: u64,
}

/// One segment file's bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// File number (names sort by it).
    pub id: u64,
    /// Size on disk.
    pub bytes: u64,
    /// Boot id → its records in this segment.
    pub boots: BTreeMap<String, SeqRange>,
}

/// Segments in file order plus the collector's acknowledgements.
#[derive(Debug, Default)]
pub struct Ledger {
    acked: BTreeMap<String, u64>,
    segments: VecDeque<SegmentInfo>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Starts a new (last) segment.
    pub fn open_segment(&mut self, id: u64) {
        self.segments.push_back(SegmentInfo {
            id,
            bytes: 0,
            boots: BTreeMap::new(),
        });
    }

    /// Forgets the last segment (found empty at startup).
    pub fn discard_last(&mut self) {
        self.segments.pop_back();
    }

    /// Notes a record of `frame_bytes` appended to the last segment.
    pub fn note(&mut self, boot: &str, seq: u64, frame_bytes: u64) {
        let Some(seg) = self.segments.back_mut() else {
            return;
        };
        seg.bytes += frame_bytes;
        seg.boots
            .entry(boot.to_string())
            .and_modify(|r| {
                r.first = r.first.min(seq);
                r.last = r.last.max(seq);
            })
            .or_insert(SeqRange {
                first: seq,
                last: seq,
            });
    }

    /// The collector stored everything of `boot` up to `seq`.
    pub fn ack(&mut self, boot: &str, seq: u64) {
        let a = self.acked.entry(boot.to_string()).or_insert(0);
        *a = (*a).max(seq);
    }

    /// Highest acknowledged seq of `boot` (0 when none).
    pub fn acked(&self, boot: &str) -> u64 {
        self.acked.get(boot).copied().unwrap_or(0)
    }

    /// True when the collector holds `boot`'s record `seq`.
    pub fn is_acked(&self, boot: &str, seq: u64) -> bool {
        seq <= self.acked(boot)
    }

    fn unacked_in(&self, seg: &SegmentInfo) -> u64 {
        seg.boots
            .iter()
            .map(|(b, r)| {
                let done = self.acked(b).max(r.first.saturating_sub(1));
                r.last.saturating_sub(done)
            })
            .sum()
    }

    /// Records not yet acknowledged, over all segments.
    pub fn unacked(&self) -> u64 {
        self.segments.iter().map(|s| self.unacked_in(s)).sum()
    }

    /// Bytes of all segments.
    pub fn total_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// Segments, oldest first.
    pub fn segments(&self) -> impl Iterator<Item = &SegmentInfo> {
        self.segments.iter()
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// True when no segment exists.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Removes fully acknowledged segments from the front, never the last
    /// (it is being written); returns their ids.
    pub fn take_acked(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        while self.segments.len() > 1 {
            let front = &self.segments[0];
            if self.unacked_in(front) > 0 {
                break;
            }
            out.push(front.id);
            self.segments.pop_front();
        }
        out
    }

    /// Removes the oldest segment (never the last) to make room: its id and
    /// how many unacknowledged records went with it. The lost records count
    /// as acknowledged from now on, so nothing waits for them.
    pub fn drop_oldest(&mut self) -> Option<(u64, u64)> {
        if self.segments.len() < 2 {
            return None;
        }
        let seg = self.segments.pop_front()?;
        let lost = self.unacked_in(&seg);
        for (b, r) in &seg.boots {
            self.ack(b, r.last);
        }
        Some((seg.id, lost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(segs: &[&[(&str, u64)]]) -> Ledger {
        let mut l = Ledger::new();
        for (i, recs) in segs.iter().enumerate() {
            l.open_segment(i as u64 + 1);
            for (b, s) in recs.iter() {
                l.note(b, *s, 10);
            }
        }
        l
    }

    #[test]
    fn acks_release_whole_segments_only() {
        let mut l = ledger(&[&[("a", 1), ("a", 2)], &[("a", 3), ("a", 4)], &[("a", 5)]]);
        assert_eq!(l.unacked(), 5);
        l.ack("a", 3);
        assert_eq!(l.take_acked(), vec![1]);
        assert_eq!(l.unacked(), 2);
        l.ack("a", 5);
        assert_eq!(l.take_acked(), vec![2], "the last segment stays");
        assert_eq!(l.unacked(), 0);
        assert_eq!(l.total_bytes(), 10);
    }

    #[test]
    fn boots_are_acked_independently() {
        let mut l = ledger(&[&[("old", 7), ("old", 8), ("new", 1)], &[("new", 2)]]);
        l.ack("new", 2);
        assert!(l.take_acked().is_empty(), "old boot still unacked");
        assert_eq!(l.unacked(), 2);
        assert!(!l.is_acked("old", 7));
        l.ack("old", 8);
        assert_eq!(l.take_acked(), vec![1]);
    }

    #[test]
    fn stale_ack_does_not_move_back() {
        let mut l = ledger(&[&[("a", 1), ("a", 2)]]);
        l.ack("a", 2);
        l.ack("a", 1);
        assert_eq!(l.acked("a"), 2);
    }

    #[test]
    fn ack_before_a_segments_range_counts_from_its_first() {
        // The segment holds 5..=6 (1..=4 were in a removed segment).
        let l = ledger(&[&[("a", 5), ("a", 6)]]);
        assert_eq!(l.unacked(), 2);
    }

    #[test]
    fn drop_oldest_counts_only_unacked_and_keeps_last() {
        let mut l = ledger(&[&[("a", 1), ("a", 2), ("a", 3)], &[("a", 4)]]);
        l.ack("a", 1);
        assert_eq!(l.drop_oldest(), Some((1, 2)));
        assert!(l.is_acked("a", 3));
        assert_eq!(l.drop_oldest(), None);
        assert_eq!(l.len(), 1);
    }
}
