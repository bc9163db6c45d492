//! The session-sender's table of probes: which are in flight, which replies
//! match, and when a probe becomes overdue or lost.
//!
//! Pure: the caller passes instants and timestamps. A reply matches a probe
//! by the copied Session-Sender sequence number *and* the copied t1, so a
//! stale reply from an earlier run of the agent (same port, same sequence
//! numbers) is foreign, not a sample. Settled probes (answered or lost) are
//! remembered for two timeouts so a second answer is a duplicate and an
//! answer after the loss is late, rather than foreign.
//!
//! A probe sent after the newest answer is overdue only once the oldest of
//! those has waited the *silence* ([`super::late::LateBound::silence`]) as
//! well as its own bound: a stall of either host silences the link for as
//! long, and it is the silence, not each probe, that a stall bounds.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::packet::{NtpTimestamp, ReflectorPacket};

/// What a reply turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first answer to an in-flight probe, within the timeout.
    Reply {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
        /// `(t4 - t1) - (t3 - t2)`, or `None` when it came out negative
        /// (clock step, broken reflector) and is discarded as a sample.
        rtt_ns: Option<u64>,
        /// t1 was the kernel's TX timestamp rather than a userspace read.
        kernel_tx: bool,
        /// The probe had been called overdue (late) before this answer.
        late: bool,
    },
    /// A further answer to a probe already answered.
    Duplicate {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
    },
    /// An answer to a probe already declared lost, or one that arrived
    /// after the timeout. The probe stays lost.
    Late {
        /// Sequence number.
        seq: u32,
    },
    /// Not an answer to any probe of this session.
    Foreign,
}

/// A deadline that passed for an in-flight probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Still unanswered one overdue period after sending (fires once).
    Overdue {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
    },
    /// Unanswered at the timeout: lost.
    Lost {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    sent_unix_ns: u64,
    /// The clock-step generation at the send ([`crate::clock`]).
    generation: u64,
    kernel_t1: Option<u64>,
    t1: NtpTimestamp,
    sent_at: Instant,
    overdue_fired: bool,
}

#[derive(Debug, Clone, Copy)]
struct Settled {
    sent_unix_ns: u64,
    t1: NtpTimestamp,
    sent_at: Instant,
    lost: bool,
}

/// Probes in flight and recently settled.
#[derive(Debug)]
pub struct ProbeTable {
    overdue_after: Duration,
    /// How long the probes after the newest answer wait, counted from the
    /// oldest of them, before any is overdue.
    silence_after: Duration,
    timeout: Duration,
    /// When the newest probe answered within the timeout was sent (send
    /// order, not sequence numbers, which wrap).
    newest_answered: Option<Instant>,
    in_flight: BTreeMap<u32, InFlight>,
    settled: BTreeMap<u32, Settled>,
    /// When [`ProbeTable::expire`] next forgets old settled probes.
    next_prune: Option<Instant>,
}

/// A probe sent at `sent_at` was sent after the newest answer (sent at
/// `newest_answered`), so the silence applies to it.
fn after_answer(newest_answered: Option<Instant>, sent_at: Instant) -> bool {
    newest_answered.is_none_or(|n| sent_at > n)
}

/// Settled probes remembered at most (bounds memory at very high rates).
const MAX_SETTLED: usize = 65_536;

impl ProbeTable {
    /// A table whose probes become overdue after `overdue_after` and lost
    /// after `timeout`.
    pub fn new(overdue_after: Duration, timeout: Duration) -> ProbeTable {
        ProbeTable {
            overdue_after: overdue_after.min(timeout),
            silence_after: Duration::ZERO,
            timeout,
            newest_answered: None,
            in_flight: BTreeMap::new(),
            settled: BTreeMap::new(),
            next_prune: None,
        }
    }

    /// From now on probes, those in flight included, become overdue after
    /// `overdue_after` (at most the timeout): the late bound moves with the
    /// link ([`super::late`]). One already called overdue stays so.
    pub fn set_overdue_after(&mut self, overdue_after: Duration) {
        self.overdue_after = overdue_after.min(self.timeout);
    }

    /// From now on no probe sent after the newest answer is overdue before
    /// the oldest of them was sent `silence_after` ago (at most the
    /// timeout): a stall held ([`super::late`]).
    pub fn set_silence_after(&mut self, silence_after: Duration) {
        self.silence_after = silence_after.min(self.timeout);
    }

    /// Records probe `seq` sent at `t1` (`sent_at` on the monotonic clock)
    /// under clock-step generation `generation`.
    pub fn sent(
        &mut self,
        seq: u32,
        t1: NtpTimestamp,
        sent_unix_ns: u64,
        sent_at: Instant,
        generation: u64,
    ) {
        self.settled.remove(&seq);
        self.in_flight.insert(
            seq,
            InFlight {
                sent_unix_ns,
                generation,
                kernel_t1: None,
                t1,
                sent_at,
                overdue_fired: false,
            },
        );
    }

    /// Records the kernel's TX timestamp of probe `seq`, put on the
    /// timeline under clock-step generation `generation`, used as t1 in
    /// place of the userspace read. Ignored unless it is at or after the
    /// userspace read, within the timeout of it, and converted under the
    /// send's generation (else a clock step came between; the userspace
    /// read, on the timeline already, stays t1).
    pub fn kernel_sent(&mut self, seq: u32, tx_unix_ns: u64, generation: u64) {
        if let Some(p) = self.in_flight.get_mut(&seq) {
            let d = tx_unix_ns as i128 - p.sent_unix_ns as i128;
            if d >= 0 && d < self.timeout.as_nanos() as i128 && generation == p.generation {
                p.kernel_t1 = Some(tx_unix_ns);
            }
        }
    }

    /// Classifies a reply that arrived at `t4_unix_ns`, put on the timeline
    /// under clock-step generation `generation` where that took a
    /// wall-clock correction: a reply converted under another generation
    /// than its probe's send straddles a step, and its RTT is discarded.
    pub fn reply(
        &mut self,
        pkt: &ReflectorPacket,
        t4_unix_ns: u64,
        generation: Option<u64>,
    ) -> Verdict {
        let seq = pkt.sender_seq;
        if let Some(p) = self.in_flight.get(&seq) {
            if p.t1 != pkt.sender_timestamp {
                return Verdict::Foreign;
            }
            let out_and_back = t4_unix_ns as i128 - p.sent_unix_ns as i128;
            if out_and_back > self.timeout.as_nanos() as i128 {
                // Read before the expiry pass ran, but it arrived too late;
                // `expire` declares the probe lost.
                return Verdict::Late { seq };
            }
            let turnaround = pkt.turnaround_ns() as i128;
            let t1 = p.kernel_t1.unwrap_or(p.sent_unix_ns);
            let rtt = t4_unix_ns as i128 - t1 as i128 - turnaround;
            let straddles = generation.is_some_and(|g| g != p.generation);
            let rtt_ns = if turnaround >= 0 && rtt >= 0 && !straddles {
                Some(rtt as u64)
            } else {
                None
            };
            let p = self.in_flight.remove(&seq).expect("present above");
            self.settle(seq, p, false);
            self.newest_answered = self.newest_answered.max(Some(p.sent_at));
            return Verdict::Reply {
                seq,
                sent_unix_ns: p.sent_unix_ns,
                rtt_ns,
                kernel_tx: p.kernel_t1.is_some(),
                late: p.overdue_fired,
            };
        }
        match self.settled.get(&seq) {
            Some(s) if s.t1 == pkt.sender_timestamp => {
                if s.lost {
                    Verdict::Late { seq }
                } else {
                    Verdict::Duplicate {
                        seq,
                        sent_unix_ns: s.sent_unix_ns,
                    }
                }
            }
            _ => Verdict::Foreign,
        }
    }

    /// Fires the deadlines that passed by `now`, in sequence order, and
    /// forgets settled probes older than two timeouts.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<Expiry>) {
        let mut lost = Vec::new();
        let silence_ends = self.silence_ends();
        let newest_answered = self.newest_answered;
        for (&seq, p) in self.in_flight.iter_mut() {
            let age = now.saturating_duration_since(p.sent_at);
            let due = p.sent_at + self.overdue_after;
            let due = match silence_ends {
                Some(ends) if after_answer(newest_answered, p.sent_at) => due.max(ends),
                _ => due,
            };
            if !p.overdue_fired && (now >= due || age >= self.timeout) {
                p.overdue_fired = true;
                out.push(Expiry::Overdue {
                    seq,
                    sent_unix_ns: p.sent_unix_ns,
                });
            }
            if age >= self.timeout {
                lost.push(seq);
                out.push(Expiry::Lost {
                    seq,
                    sent_unix_ns: p.sent_unix_ns,
                });
            }
        }
        for seq in lost {
            if let Some(p) = self.in_flight.remove(&seq) {
                self.settle(seq, p, true);
            }
        }
        // Forgetting scans every settled probe (two timeouts' worth, 200 at
        // 100 Hz), and this runs at every wake-up, several per probe: perf
        // found it the sender's largest cost of its own. A tenth of a
        // timeout later is as good (they are kept to call late answers late).
        if self.next_prune.is_none_or(|t| now >= t) {
            let keep = self.timeout * 2;
            self.settled
                .retain(|_, s| now.saturating_duration_since(s.sent_at) < keep);
            self.next_prune = Some(now + self.timeout / 10);
        }
    }

    /// When the silence ends, counted from the send of the oldest probe in
    /// flight sent after the newest answer: no probe sent after that answer
    /// is overdue before then. `None` when there is no such probe.
    fn silence_ends(&self) -> Option<Instant> {
        let first = self
            .in_flight
            .values()
            .map(|p| p.sent_at)
            .filter(|&at| after_answer(self.newest_answered, at))
            .min()?;
        Some(first + self.silence_after)
    }

    /// The earliest instant at which [`ProbeTable::expire`] has work.
    pub fn next_deadline(&self) -> Option<Instant> {
        let silence_ends = self.silence_ends();
        self.in_flight
            .values()
            .map(|p| {
                let lost = p.sent_at + self.timeout;
                if p.overdue_fired {
                    return lost;
                }
                let due = p.sent_at + self.overdue_after;
                match silence_ends {
                    Some(ends) if after_answer(self.newest_answered, p.sent_at) => {
                        due.max(ends).min(lost)
                    }
                    _ => due,
                }
            })
            .min()
    }

    /// Probes sent and not yet answered or lost.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn settle(&mut self, seq: u32, p: InFlight, lost: bool) {
        if self.settled.len() >= MAX_SETTLED {
            self.settled.pop_first();
        }
        self.settled.insert(
            seq,
            Settled {
                sent_unix_ns: p.sent_unix_ns,
                t1: p.t1,
                sent_at: p.sent_at,
                lost,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::packet::ErrorEstimate;

    const T0: u64 = 1_764_470_000_000_000_000;
    const MS: Duration = Duration::from_millis(1);

    fn reply(seq: u32, t1: u64, t2: u64, t3: u64) -> ReflectorPacket {
        ReflectorPacket {
            seq,
            timestamp: NtpTimestamp::from_unix_ns(t3),
            error_estimate: ErrorEstimate::AGENT,
            ssid: 0,
            receive_timestamp: NtpTimestamp::from_unix_ns(t2),
            sender_seq: seq,
            sender_timestamp: NtpTimestamp::from_unix_ns(t1),
            sender_error_estimate: ErrorEstimate::AGENT,
            sender_ttl: 64,
        }
    }

    fn table_with(seqs: &[(u32, u64)], at: Instant) -> ProbeTable {
        let mut t = ProbeTable::new(10 * MS, 100 * MS);
        for &(seq, t1) in seqs {
            t.sent(seq, NtpTimestamp::from_unix_ns(t1), t1, at, 0);
        }
        t
    }

    #[test]
    fn rtt_subtracts_turnaround() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0)], now);
        // Out 30 us, turnaround 25 us, back 20 us: t4 - t1 = 75 us, RTT 50 us.
        let v = t.reply(&reply(0, T0, T0 + 30_000, T0 + 55_000), T0 + 75_000, None);
        assert_eq!(
            v,
            Verdict::Reply {
                seq: 0,
                sent_unix_ns: T0,
                rtt_ns: Some(50_000),
                kernel_tx: false,
                late: false,
            }
        );
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn a_probe_straddling_a_clock_step_is_answered_but_not_measured() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0), (1, T0), (2, T0)], now);
        // A TX stamp converted after a step (generation 1) is not t1.
        t.kernel_sent(0, T0 + 4_000, 1);
        let v = t.reply(
            &reply(0, T0, T0 + 30_000, T0 + 55_000),
            T0 + 75_000,
            Some(0),
        );
        assert!(matches!(
            v,
            Verdict::Reply {
                rtt_ns: Some(50_000),
                kernel_tx: false,
                ..
            }
        ));
        // A reply converted after the step: answered, RTT discarded.
        let v = t.reply(
            &reply(1, T0, T0 + 30_000, T0 + 55_000),
            T0 + 75_000,
            Some(1),
        );
        assert!(matches!(
            v,
            Verdict::Reply {
                seq: 1,
                rtt_ns: None,
                ..
            }
        ));
        // A userspace t4 needs no correction: the timeline never steps.
        let v = t.reply(&reply(2, T0, T0 + 30_000, T0 + 55_000), T0 + 75_000, None);
        assert!(matches!(
            v,
            Verdict::Reply {
                rtt_ns: Some(50_000),
                ..
            }
        ));
    }

    #[test]
    fn kernel_tx_timestamp_replaces_userspace_t1() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0), (1, T0)], now);
        // The kernel stamped the send 4 us after the userspace read.
        t.kernel_sent(0, T0 + 4_000, 0);
        // A stamp before the userspace read is a clock step: ignored.
        t.kernel_sent(1, T0 - 1, 0);
        let v = t.reply(&reply(0, T0, T0 + 30_000, T0 + 55_000), T0 + 75_000, None);
        assert_eq!(
            v,
            Verdict::Reply {
                seq: 0,
                sent_unix_ns: T0,
                rtt_ns: Some(46_000),
                kernel_tx: true,
                late: false,
            }
        );
        let v = t.reply(&reply(1, T0, T0, T0), T0 + 75_000, None);
        assert!(matches!(
            v,
            Verdict::Reply {
                rtt_ns: Some(75_000),
                kernel_tx: false,
                ..
            }
        ));
    }

    #[test]
    fn reordered_duplicate_foreign() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0), (1, T0 + 10), (2, T0 + 20)], now);
        // 2 before 1 before 0.
        for seq in [2u32, 1, 0] {
            let t1 = T0 + 10 * seq as u64;
            let v = t.reply(&reply(seq, t1, t1 + 1, t1 + 2), t1 + 1_000, None);
            assert!(matches!(v, Verdict::Reply { seq: s, rtt_ns: Some(999), .. } if s == seq));
        }
        assert_eq!(
            t.reply(&reply(1, T0 + 10, 0, 0), T0 + 2_000, None),
            Verdict::Duplicate {
                seq: 1,
                sent_unix_ns: T0 + 10
            }
        );
        // Unknown sequence number.
        assert_eq!(t.reply(&reply(7, T0, 0, 0), T0 + 1, None), Verdict::Foreign);
        // Right sequence number, wrong t1 (another session's packet).
        let mut t = table_with(&[(5, T0)], now);
        assert_eq!(
            t.reply(&reply(5, T0 + 1, 0, 0), T0 + 9, None),
            Verdict::Foreign
        );
        assert_eq!(t.in_flight(), 1);
    }

    #[test]
    fn overdue_then_late_reply_still_counts() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0)], now);
        let mut out = Vec::new();
        t.expire(now + 5 * MS, &mut out);
        assert!(out.is_empty());
        assert_eq!(t.next_deadline(), Some(now + 10 * MS));
        t.expire(now + 10 * MS, &mut out);
        assert_eq!(
            out,
            vec![Expiry::Overdue {
                seq: 0,
                sent_unix_ns: T0
            }]
        );
        assert_eq!(t.next_deadline(), Some(now + 100 * MS));
        out.clear();
        t.expire(now + 50 * MS, &mut out);
        assert!(out.is_empty(), "overdue fires once");
        let v = t.reply(&reply(0, T0, T0, T0), T0 + 50_000_000, None);
        assert!(matches!(
            v,
            Verdict::Reply {
                rtt_ns: Some(50_000_000),
                late: true,
                ..
            }
        ));
    }

    #[test]
    fn a_moved_bound_applies_to_probes_in_flight() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0), (1, T0 + 1)], now);
        let mut out = Vec::new();
        t.set_overdue_after(3 * MS);
        assert_eq!(t.next_deadline(), Some(now + 3 * MS));
        t.expire(now + 3 * MS, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        // Past the timeout it is clamped: late always comes before lost.
        t.set_overdue_after(Duration::from_secs(5));
        assert_eq!(t.overdue_after, 100 * MS);
        // Called late, then answered in time: a reply, marked late.
        let v = t.reply(&reply(1, T0 + 1, T0, T0), T0 + 4_000_000, None);
        assert!(matches!(
            v,
            Verdict::Reply {
                seq: 1,
                late: true,
                rtt_ns: Some(_),
                ..
            }
        ));
    }

    /// Probes 0-4 sent 10 ms apart with a 5 ms bound and a 30 ms silence.
    fn silenced(now: Instant) -> ProbeTable {
        let mut t = ProbeTable::new(5 * MS, 100 * MS);
        t.set_silence_after(30 * MS);
        for seq in 0..5u32 {
            let t1 = T0 + u64::from(seq) * 10_000_000;
            let at = now + u32::from(seq as u16) * 10 * MS;
            t.sent(seq, NtpTimestamp::from_unix_ns(t1), t1, at, 0);
        }
        t
    }

    fn overdue_seqs(out: &[Expiry]) -> Vec<u32> {
        out.iter()
            .filter_map(|e| match e {
                Expiry::Overdue { seq, .. } => Some(*seq),
                Expiry::Lost { .. } => None,
            })
            .collect()
    }

    #[test]
    fn no_probe_is_late_before_the_silence_then_all_past_their_bound_are() {
        let now = Instant::now();
        let mut t = silenced(now);
        let mut out = Vec::new();
        // Probe 0's own bound passed at 5 ms; the silence runs to 30 ms.
        assert_eq!(t.next_deadline(), Some(now + 30 * MS));
        t.expire(now + 29 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // At 30 ms: 0, 1 and 2 are past their bounds (sent at 0, 10, 20).
        t.expire(now + 30 * MS, &mut out);
        assert_eq!(overdue_seqs(&out), [0, 1, 2]);
        // Then each of the rest at its own bound.
        assert_eq!(t.next_deadline(), Some(now + 35 * MS));
        out.clear();
        t.expire(now + 45 * MS, &mut out);
        assert_eq!(overdue_seqs(&out), [3, 4]);
    }

    #[test]
    fn an_answer_restarts_the_silence_from_the_probes_after_it() {
        let now = Instant::now();
        let mut t = silenced(now);
        let mut out = Vec::new();
        // A stall ends: probe 1 is answered at 25 ms.
        let v = t.reply(&reply(1, T0 + 10_000_000, T0, T0), T0 + 25_000_000, None);
        assert!(matches!(
            v,
            Verdict::Reply {
                seq: 1,
                late: false,
                ..
            }
        ));
        // Probe 0 was overtaken by the answer: only its own bound holds it
        // (it breaks no run: the answer after it does).
        t.expire(now + 25 * MS, &mut out);
        assert_eq!(overdue_seqs(&out), [0]);
        // Probes 2-4 wait the silence from probe 2's send (20 ms): 50 ms.
        assert_eq!(t.next_deadline(), Some(now + 50 * MS));
        out.clear();
        t.expire(now + 49 * MS, &mut out);
        assert!(out.is_empty(), "{out:?}");
        t.expire(now + 50 * MS, &mut out);
        assert_eq!(overdue_seqs(&out), [2, 3, 4]);
    }

    #[test]
    fn without_a_silence_each_probe_is_late_at_its_own_bound() {
        let now = Instant::now();
        let mut t = silenced(now);
        t.set_silence_after(Duration::ZERO);
        let mut out = Vec::new();
        assert_eq!(t.next_deadline(), Some(now + 5 * MS));
        t.expire(now + 15 * MS, &mut out);
        assert_eq!(overdue_seqs(&out), [0, 1]);
    }

    #[test]
    fn a_silence_past_the_timeout_still_calls_late_before_lost() {
        let now = Instant::now();
        let mut t = silenced(now);
        t.set_silence_after(Duration::from_secs(5));
        assert_eq!(t.silence_after, 100 * MS);
        assert_eq!(t.next_deadline(), Some(now + 100 * MS));
        let mut out = Vec::new();
        t.expire(now + 100 * MS, &mut out);
        assert_eq!(
            out[..2],
            [
                Expiry::Overdue {
                    seq: 0,
                    sent_unix_ns: T0
                },
                Expiry::Lost {
                    seq: 0,
                    sent_unix_ns: T0
                },
            ]
        );
        assert_eq!(overdue_seqs(&out), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn lost_at_timeout_and_late_afterwards() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0), (1, T0 + 1)], now);
        let mut out = Vec::new();
        t.expire(now + 100 * MS, &mut out);
        assert_eq!(out.len(), 4);
        assert!(out.contains(&Expiry::Lost {
            seq: 1,
            sent_unix_ns: T0 + 1
        }));
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.next_deadline(), None);
        assert_eq!(
            t.reply(&reply(0, T0, 0, 0), T0 + 200_000_000, None),
            Verdict::Late { seq: 0 }
        );
        // Forgotten after two timeouts: then it is foreign.
        t.expire(now + 201 * MS, &mut out);
        assert_eq!(t.reply(&reply(0, T0, 0, 0), T0, None), Verdict::Foreign);
    }

    #[test]
    fn reply_read_after_timeout_is_late_and_then_lost() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0)], now);
        let v = t.reply(&reply(0, T0, T0, T0), T0 + 100_000_001, None);
        assert_eq!(v, Verdict::Late { seq: 0 });
        let mut out = Vec::new();
        t.expire(now + 100 * MS, &mut out);
        assert!(out.contains(&Expiry::Lost {
            seq: 0,
            sent_unix_ns: T0
        }));
    }

    #[test]
    fn negative_rtt_is_discarded_not_lost() {
        let now = Instant::now();
        let mut t = table_with(&[(0, T0)], now);
        // Turnaround (t3 - t2) larger than t4 - t1: the clocks lie.
        let v = t.reply(&reply(0, T0, T0, T0 + 9_000), T0 + 1_000, None);
        assert_eq!(
            v,
            Verdict::Reply {
                seq: 0,
                sent_unix_ns: T0,
                rtt_ns: None,
                kernel_tx: false,
                late: false,
            }
        );
        let mut t = table_with(&[(0, T0)], now);
        // t3 before t2.
        let v = t.reply(&reply(0, T0, T0 + 500, T0 + 100), T0 + 1_000, None);
        assert!(matches!(v, Verdict::Reply { rtt_ns: None, .. }));
    }
}
