//! The record ledger between the probes and the collector: assigns
//! contiguous sequence numbers, holds what is not yet acknowledged, and knows
//! what to (re)send. Pure: no sockets, no clocks.
//!
//! Invariants: sequence numbers start at 1 and are contiguous per boot;
//! records leave the queue only when the collector acknowledges them or when
//! the queue is full (oldest first, counted in `dropped`).

use std::collections::VecDeque;

use boltwatch_proto::v1::Record;

use crate::sink::Emitted;

/// Bounded queue of unacknowledged records for one boot.
#[derive(Debug)]
pub struct Queue {
    node: String,
    boot_id: String,
    capacity: usize,
    next_seq: u64,
    /// Highest seq the collector has acknowledged.
    acked: u64,
    /// Highest seq sent on the current stream.
    sent: u64,
    records: VecDeque<Record>,
    dropped: u64,
}

impl Queue {
    /// An empty queue; the first record gets seq 1.
    pub fn new(node: &str, boot_id: &str, capacity: usize) -> Queue {
        Queue {
            node: node.to_string(),
            boot_id: boot_id.to_string(),
            capacity: capacity.max(1),
            next_seq: 1,
            acked: 0,
            sent: 0,
            records: VecDeque::new(),
            dropped: 0,
        }
    }

    /// The boot this queue numbers records for.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Numbers and enqueues a record; drops the oldest unacknowledged one if
    /// full.
    pub fn push(&mut self, e: Emitted) {
        let rec = Record {
            node: self.node.clone(),
            boot_id: self.boot_id.clone(),
            seq: self.next_seq,
            unix_ns: e.unix_ns,
            payload: Some(e.payload),
        };
        self.next_seq += 1;
        if self.records.len() >= self.capacity {
            if let Some(old) = self.records.pop_front() {
                self.dropped += 1;
                // The dropped record can never be acked; move the watermarks
                // so resending starts after it.
                self.acked = self.acked.max(old.seq);
                self.sent = self.sent.max(old.seq);
            }
        }
        self.records.push_back(rec);
    }

    /// The collector stored everything up to `highest` for this boot.
    pub fn ack(&mut self, highest: u64) {
        if highest <= self.acked {
            return;
        }
        self.acked = highest.min(self.next_seq - 1);
        while self.records.front().is_some_and(|r| r.seq <= self.acked) {
            self.records.pop_front();
        }
        self.sent = self.sent.max(self.acked);
    }

    /// A new stream starts: everything not acknowledged will be sent again.
    pub fn rewind(&mut self) {
        self.sent = self.acked;
    }

    /// Up to `max` records not yet sent on this stream, marked as sent.
    pub fn take_unsent(&mut self, max: usize) -> Vec<Record> {
        let first = self.records.front().map(|r| r.seq).unwrap_or(self.next_seq);
        let skip = (self.sent + 1).saturating_sub(first) as usize;
        let out: Vec<Record> = self.records.iter().skip(skip).take(max).cloned().collect();
        if let Some(last) = out.last() {
            self.sent = last.seq;
        }
        out
    }

    /// True when some held record was not yet sent on this stream.
    pub fn has_unsent(&self) -> bool {
        self.sent + 1 < self.next_seq && !self.records.is_empty()
    }

    /// Records held (sent or not) awaiting acknowledgement.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when nothing awaits acknowledgement.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Highest acknowledged seq.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Seq the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::{record::Payload, AgentStats};

    fn emitted(n: u64) -> Emitted {
        Emitted {
            unix_ns: n,
            payload: Payload::AgentStats(AgentStats::default()),
        }
    }

    fn seqs(v: &[Record]) -> Vec<u64> {
        v.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn seqs_are_contiguous_from_one() {
        let mut q = Queue::new("a", "b1", 10);
        for i in 0..3 {
            q.push(emitted(i));
        }
        let out = q.take_unsent(10);
        assert_eq!(seqs(&out), vec![1, 2, 3]);
        assert!(out.iter().all(|r| r.node == "a" && r.boot_id == "b1"));
        assert!(q.take_unsent(10).is_empty());
    }

    #[test]
    fn ack_releases_and_rewind_resends_unacked() {
        let mut q = Queue::new("a", "b", 10);
        for i in 0..5 {
            q.push(emitted(i));
        }
        assert_eq!(seqs(&q.take_unsent(3)), vec![1, 2, 3]);
        q.ack(2);
        assert_eq!(q.len(), 3);
        q.rewind();
        assert_eq!(seqs(&q.take_unsent(10)), vec![3, 4, 5]);
        q.ack(5);
        assert!(q.is_empty());
        q.push(emitted(6));
        assert_eq!(seqs(&q.take_unsent(10)), vec![6]);
    }

    #[test]
    fn stale_or_future_acks_are_harmless() {
        let mut q = Queue::new("a", "b", 10);
        q.push(emitted(1));
        q.ack(7); // more than we ever made
        assert_eq!(q.acked(), 1);
        q.ack(0);
        assert_eq!(q.acked(), 1);
        q.push(emitted(2));
        assert_eq!(seqs(&q.take_unsent(10)), vec![2]);
    }

    #[test]
    fn full_queue_drops_oldest_and_counts() {
        let mut q = Queue::new("a", "b", 3);
        for i in 0..5 {
            q.push(emitted(i));
        }
        assert_eq!(q.dropped(), 2);
        assert_eq!(seqs(&q.take_unsent(10)), vec![3, 4, 5]);
    }

    #[test]
    fn batches_respect_max() {
        let mut q = Queue::new("a", "b", 100);
        for i in 0..25 {
            q.push(emitted(i));
        }
        assert_eq!(q.take_unsent(10).len(), 10);
        assert_eq!(q.take_unsent(10).len(), 10);
        assert_eq!(seqs(&q.take_unsent(10)), (21..=25).collect::<Vec<_>>());
    }
}
