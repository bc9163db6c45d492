//! Per-minute rollups: what the store keeps of the dense payload kinds
//! (RTT summaries and interface counters, most of the rows) once their
//! raw records pass the raw retention. Pure: built from decoded records,
//! merged, encoded; the I/O is in [`super::retention`].
//!
//! A rollup covers one agent boot's records of one kind in one minute (by
//! the record's own time) and keeps what every reader of those records
//! needs, so a report over a pruned range reads the same numbers:
//! - RTT, per peer and interface: the windows' statistics merged (at rest
//!   and under load separately: probes, losses, exact min, max and sum,
//!   the schema-3 histogram), and each window's own figures the report
//!   charts and classifies (start, length, sum, replies, p50, p99). Only
//!   the per-window histograms and envelopes go: about a tenth of the
//!   bytes.
//! - Counters: the minute's newest record, whole (interface counters are
//!   cumulative, so the newest one carries the minute's totals).
//! - Both: how many records it replaced and their sequence numbers (as
//!   runs), so completeness and sequence-hole accounting stay exact and a
//!   replay of a pruned record is still recognised as a duplicate.

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, RttSummary};
use prost::Message;

/// Nanoseconds per minute: rollups start on these boundaries.
pub const MINUTE_NS: u64 = 60_000_000_000;

/// The start of the minute holding `unix_ns`.
pub fn minute_of(unix_ns: u64) -> u64 {
    unix_ns - unix_ns % MINUTE_NS
}

/// One minute of one boot's records of one dense kind.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Rollup {
    /// RTT: one entry per (peer, interface), in first-seen order.
    #[prost(message, repeated, tag = "1")]
    pub rtt: Vec<RttMinute>,
    /// Counters: the newest record of the minute, encoded whole.
    #[prost(bytes = "vec", tag = "2")]
    pub last_record: Vec<u8>,
    /// Its time.
    #[prost(uint64, tag = "3")]
    pub last_unix_ns: u64,
    /// The sequence numbers replaced, as (first, length) pairs, ascending
    /// and disjoint.
    #[prost(uint64, repeated, tag = "4")]
    pub seq_runs: Vec<u64>,
    /// Records replaced.
    #[prost(uint64, tag = "5")]
    pub records: u64,
}

/// RTT windows of one (peer, interface) in a rollup's minute.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RttMinute {
    /// Peer node.
    #[prost(string, tag = "1")]
    pub peer: String,
    /// Local interface.
    #[prost(string, tag = "2")]
    pub interface: String,
    /// The windows at rest merged (probe counts, min, max, sum, buckets).
    #[prost(message, optional, tag = "3")]
    pub rest: Option<RttSummary>,
    /// The windows under load merged.
    #[prost(message, optional, tag = "4")]
    pub load: Option<RttSummary>,
    /// Windows merged into `rest`.
    #[prost(uint64, tag = "5")]
    pub rest_windows: u64,
    /// Windows merged into `load`.
    #[prost(uint64, tag = "6")]
    pub load_windows: u64,
    /// The newest window (by start) without its histogram: what the live
    /// "newest window" gauges show after a restart.
    #[prost(message, optional, tag = "7")]
    pub newest: Option<RttSummary>,
    /// Per window, in the order added: start minus the minute's start.
    #[prost(sint64, repeated, tag = "8")]
    pub start_offset_ns: Vec<i64>,
    /// Per window: length.
    #[prost(uint64, repeated, tag = "9")]
    pub window_ns: Vec<u64>,
    /// Per window: sum of RTTs.
    #[prost(uint64, repeated, tag = "10")]
    pub sum_ns: Vec<u64>,
    /// Per window: replies.
    #[prost(uint64, repeated, tag = "11")]
    pub received: Vec<u64>,
    /// Per window: median.
    #[prost(uint64, repeated, tag = "12")]
    pub p50_ns: Vec<u64>,
    /// Per window: 99th percentile.
    #[prost(uint64, repeated, tag = "13")]
    pub p99_ns: Vec<u64>,
    /// Per window: probes sent (the report's errored-second rules need
    /// each window's losses; absent in rollups written before it).
    #[prost(uint64, repeated, tag = "14")]
    pub sent: Vec<u64>,
    /// Per window: probes lost.
    #[prost(uint64, repeated, tag = "15")]
    pub lost: Vec<u64>,
}

/// One window as a report reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Start (the record's time when the agent gave none).
    pub t: u64,
    /// Length.
    pub window_ns: u64,
    /// Sum of RTTs.
    pub sum_ns: u64,
    /// Replies.
    pub received: u64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Probes sent.
    pub sent: u64,
    /// Probes lost.
    pub lost: u64,
}

impl Window {
    /// Window `r`, recorded at `unix_ns`: the one rule for a window's
    /// start, shared by the report's raw records and the rollups.
    pub fn of(r: &RttSummary, unix_ns: u64) -> Window {
        Window {
            t: if r.window_start_unix_ns > 0 {
                r.window_start_unix_ns
            } else {
                unix_ns
            },
            window_ns: r.window_ns,
            sum_ns: r.sum_ns,
            received: r.received,
            p50_ns: r.p50_ns,
            p99_ns: r.p99_ns,
            sent: r.sent,
            lost: r.lost,
        }
    }
}

impl RttMinute {
    /// The windows, with absolute starts.
    pub fn windows(&self, minute: u64) -> impl Iterator<Item = Window> + '_ {
        (0..self.window_ns.len()).map(move |i| Window {
            t: (minute as i64 + self.start_offset_ns[i]) as u64,
            window_ns: self.window_ns[i],
            sum_ns: self.sum_ns[i],
            received: self.received[i],
            p50_ns: self.p50_ns[i],
            p99_ns: self.p99_ns[i],
            // A rollup from before these fields: every reply counted as
            // sent, no loss known.
            sent: self.sent.get(i).copied().unwrap_or(self.received[i]),
            lost: self.lost.get(i).copied().unwrap_or(0),
        })
    }

    fn add(&mut self, minute: u64, unix_ns: u64, r: &RttSummary) {
        let (merged, n) = if r.under_load {
            (&mut self.load, &mut self.load_windows)
        } else {
            (&mut self.rest, &mut self.rest_windows)
        };
        merge_summary(merged.get_or_insert_with(RttSummary::default), r);
        *n += 1;
        self.keep_newest(RttSummary {
            buckets: Vec::new(),
            ..r.clone()
        });
        let w = Window::of(r, unix_ns);
        self.start_offset_ns.push(w.t as i64 - minute as i64);
        self.window_ns.push(w.window_ns);
        self.sum_ns.push(w.sum_ns);
        self.received.push(w.received);
        self.p50_ns.push(w.p50_ns);
        self.p99_ns.push(w.p99_ns);
        self.sent.push(w.sent);
        self.lost.push(w.lost);
    }

    /// Keeps `n` as the newest window unless one that started later is
    /// kept already.
    fn keep_newest(&mut self, n: RttSummary) {
        if self
            .newest
            .as_ref()
            .is_none_or(|m| m.window_start_unix_ns <= n.window_start_unix_ns)
        {
            self.newest = Some(n);
        }
    }

    /// Records standing for this entry in a replay of the store (the
    /// `/metrics` rebuild): the merged windows at rest and under load, each
    /// with the newest window's start and figures, so cumulative counters
    /// and histograms continue and the newest-window gauges do not move.
    fn replay(&self) -> impl Iterator<Item = RttSummary> + '_ {
        let newest = self.newest.clone().unwrap_or_default();
        [&self.rest, &self.load]
            .into_iter()
            .flatten()
            .map(move |m| RttSummary {
                peer: self.peer.clone(),
                interface: self.interface.clone(),
                window_start_unix_ns: newest.window_start_unix_ns,
                window_ns: newest.window_ns,
                min_ns: newest.min_ns,
                mean_ns: newest.mean_ns,
                max_ns: newest.max_ns,
                p50_ns: newest.p50_ns,
                p99_ns: newest.p99_ns,
                ..m.clone()
            })
    }
}

/// Adds window `r` to `into` by the one merge rule
/// ([`boltwatch_proto::merge::rtt`]); the rollup keeps the newest window's
/// under-load flag.
pub fn merge_summary(into: &mut RttSummary, r: &RttSummary) {
    into.under_load = r.under_load;
    boltwatch_proto::merge::rtt(into, r);
}

/// A raw record going into a rollup: its sequence number, time and the
/// decoded record.
pub struct Raw<'a> {
    /// Sequence number.
    pub seq: u64,
    /// Record time.
    pub unix_ns: u64,
    /// The encoded record, whole.
    pub bytes: &'a [u8],
    /// The same, decoded.
    pub record: &'a Record,
}

impl Rollup {
    /// Folds `records` (one boot, one kind, the minute starting at
    /// `minute`) into this rollup.
    pub fn add(&mut self, minute: u64, records: &[Raw<'_>]) {
        let mut seqs: Vec<u64> = self.seqs().collect();
        for r in records {
            seqs.push(r.seq);
            self.records += 1;
            match &r.record.payload {
                Some(Payload::Rtt(s)) => {
                    let i = match self
                        .rtt
                        .iter()
                        .position(|m| m.peer == s.peer && m.interface == s.interface)
                    {
                        Some(i) => i,
                        None => {
                            self.rtt.push(RttMinute {
                                peer: s.peer.clone(),
                                interface: s.interface.clone(),
                                ..RttMinute::default()
                            });
                            self.rtt.len() - 1
                        }
                    };
                    self.rtt[i].add(minute, r.unix_ns, s);
                }
                _ => {
                    if self.last_record.is_empty() || r.unix_ns >= self.last_unix_ns {
                        self.last_record = r.bytes.to_vec();
                        self.last_unix_ns = r.unix_ns;
                    }
                }
            }
        }
        self.set_seqs(seqs);
    }

    /// Every sequence number replaced, ascending.
    pub fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.seq_runs
            .chunks_exact(2)
            .flat_map(|p| p[0]..p[0] + p[1])
    }

    /// Whether `seq` is one of the records this rollup replaced.
    #[cfg(test)]
    pub fn replaced(&self, seq: u64) -> bool {
        self.seq_runs
            .chunks_exact(2)
            .any(|p| (p[0]..p[0] + p[1]).contains(&seq))
    }

    /// The lowest and highest sequence numbers replaced.
    pub fn seq_bounds(&self) -> Option<(u64, u64)> {
        let first = *self.seq_runs.first()?;
        let last = self.seq_runs.chunks_exact(2).last()?;
        Some((first, last[0] + last[1] - 1))
    }

    fn set_seqs(&mut self, mut seqs: Vec<u64>) {
        seqs.sort_unstable();
        seqs.dedup();
        self.seq_runs.clear();
        for s in seqs {
            match self.seq_runs.len() {
                n if n >= 2 && self.seq_runs[n - 2] + self.seq_runs[n - 1] == s => {
                    self.seq_runs[n - 1] += 1
                }
                _ => self.seq_runs.extend([s, 1]),
            }
        }
    }

    /// Records that stand for this rollup in a replay of the store (see
    /// [`RttMinute`]'s replay), oldest first, for `node`'s boot `boot_id`.
    pub fn replay(&self, node: &str, boot_id: &str, minute: u64) -> Vec<Record> {
        let mut out = Vec::new();
        let (first, _) = self.seq_bounds().unwrap_or_default();
        for m in &self.rtt {
            for s in m.replay() {
                out.push(Record {
                    node: node.into(),
                    boot_id: boot_id.into(),
                    seq: first,
                    unix_ns: minute,
                    payload: Some(Payload::Rtt(s)),
                });
            }
        }
        if let Ok(r) = Record::decode(self.last_record.as_slice()) {
            if !self.last_record.is_empty() {
                out.push(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
