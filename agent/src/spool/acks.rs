//! The spool's ack book: what the spool holds and what the collector has
//! acknowledged. Per segment, the range of sequence numbers of each boot in
//! it; per boot, the highest acknowledged sequence number. Pure: no files,
//! no clocks.
//!
//! Sequence numbers are contiguous per boot and appended in order, so a
//! segment's records of one boot are runs `first..=last`: one run, unless a
//! damaged frame was skipped when the segment was indexed (the run breaks
//! there, so the lost record is never counted as waiting, nor counted again
//! if the segment is dropped). A segment can go once every boot in it is
//! acknowledged up to its last run's `last`.

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
    /// Boot id → its records in this segment, as ascending runs.
    pub boots: BTreeMap<String, Vec<SeqRange>>,
}

/// Segments in file order plus the collector's acknowledgements.
#[derive(Debug, Default)]
pub struct AckBook {
    acked: BTreeMap<String, u64>,
    segments: VecDeque<SegmentInfo>,
}

impl AckBook {
    /// An empty book.
    pub fn new() -> AckBook {
        AckBook::default()
    }

    /// Every boot with records in a segment still held, in name order.
    pub fn boots(&self) -> Vec<String> {
        let all: std::collections::BTreeSet<&String> =
            self.segments.iter().flat_map(|s| s.boots.keys()).collect();
        all.into_iter().cloned().collect()
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
        let runs = seg.boots.entry(boot.to_string()).or_default();
        match runs.last_mut() {
            Some(r) if seq == r.last + 1 => r.last = seq,
            // Out of order or repeated (never written so, but found on
            // disk): widen the run rather than invent a hole.
            Some(r) if seq <= r.last => r.first = r.first.min(seq),
            _ => runs.push(SeqRange {
                first: seq,
                last: seq,
            }),
        }
    }

    /// Notes bytes of the last segment that hold no record (a damaged
    /// stretch kept on disk), so the cap counts them.
    pub fn add_bytes(&mut self, bytes: u64) {
        if let Some(seg) = self.segments.back_mut() {
            seg.bytes += bytes;
        }
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
            .flat_map(|(b, runs)| runs.iter().map(move |r| (b, r)))
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
        for (b, runs) in &seg.boots {
            if let Some(r) = runs.last() {
                self.ack(b, r.last);
            }
        }
        Some((seg.id, lost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(segs: &[&[(&str, u64)]]) -> AckBook {
        let mut l = AckBook::new();
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
        let mut l = book(&[&[("a", 1), ("a", 2)], &[("a", 3), ("a", 4)], &[("a", 5)]]);
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
        let mut l = book(&[&[("old", 7), ("old", 8), ("new", 1)], &[("new", 2)]]);
        l.ack("new", 2);
        assert!(l.take_acked().is_empty(), "old boot still unacked");
        assert_eq!(l.unacked(), 2);
        assert!(!l.is_acked("old", 7));
        l.ack("old", 8);
        assert_eq!(l.take_acked(), vec![1]);
    }

    #[test]
    fn stale_ack_does_not_move_back() {
        let mut l = book(&[&[("a", 1), ("a", 2)]]);
        l.ack("a", 2);
        l.ack("a", 1);
        assert_eq!(l.acked("a"), 2);
    }

    #[test]
    fn ack_before_a_segments_range_counts_from_its_first() {
        // The segment holds 5..=6 (1..=4 were in a removed segment).
        let l = book(&[&[("a", 5), ("a", 6)]]);
        assert_eq!(l.unacked(), 2);
    }

    #[test]
    fn a_skipped_record_is_neither_waiting_nor_dropped_again() {
        // 3 was damaged on disk (counted when found): 1, 2, 4, 5 remain.
        let mut l = book(&[&[("a", 1), ("a", 2), ("a", 4), ("a", 5)], &[("a", 6)]]);
        assert_eq!(l.unacked(), 5);
        l.ack("a", 1);
        assert_eq!(l.drop_oldest(), Some((1, 3)));
        assert!(l.is_acked("a", 5));
        assert_eq!(l.unacked(), 1);
    }

    #[test]
    fn drop_oldest_counts_only_unacked_and_keeps_last() {
        let mut l = book(&[&[("a", 1), ("a", 2), ("a", 3)], &[("a", 4)]]);
        l.ack("a", 1);
        assert_eq!(l.drop_oldest(), Some((1, 2)));
        assert!(l.is_acked("a", 3));
        assert_eq!(l.drop_oldest(), None);
        assert_eq!(l.len(), 1);
    }
}
