//! The send-bandwidth burst's bookkeeping on each side, pure. Apple's
//! equal-frame rule says a frame sent into a receive queue with no frame
//! posted is lost, so the sender sends only what the receiver granted:
//! `Ask(n)` → the receiver posts `n` receive frames and answers `Go(n)` →
//! `n` data frames and the next `Ask` (or `Done`) → ... → `Tally(good)`.
//! Completions do not mean delivery: the only figure reported is the
//! receiver's count of data frames that passed their CRC.

use std::ops::Range;
use std::time::Duration;

use super::frame::{control, Kind, PAGE};

/// Receive frames granted per round: the verbs port's 8 receive slots
/// less the probe's own 2 (`probe::RECV_DEPTH`).
pub const CREDITS: u64 = 6;
/// Hard cap on `rdma.burst_bytes` (4096 frames of 4 KiB).
pub const MAX_BYTES: u64 = 16 << 20;
/// A burst asks for no further round after this long, whatever is left.
pub const MAX_TIME: Duration = Duration::from_millis(50);

/// One finished burst, as the sender saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BurstResult {
    /// Bytes of data frames posted.
    pub sent_bytes: u64,
    /// Bytes of data frames the receiver counted with a good CRC.
    pub confirmed_bytes: u64,
    /// From the first grant to the receiver's tally (0 when none came).
    pub elapsed: Duration,
}

/// A frame the sender posts next.
pub type Send = (Kind, u64);

/// The sender's side of one burst.
#[derive(Debug, Clone)]
pub struct Sending {
    id: u64,
    frames: u64,
    sent: u64,
    started: Option<Duration>,
    /// When the last control frame left: its answer is due from here.
    pub asked: Duration,
    done: bool,
}

impl Sending {
    /// Burst `id` of `frames` data frames; its first `Ask` leaves `now`.
    pub fn new(id: u64, frames: u64, now: Duration) -> (Sending, Send) {
        let s = Sending {
            id,
            frames,
            sent: 0,
            started: None,
            asked: now,
            done: false,
        };
        let ask = (Kind::Ask, control(id, s.next_count()));
        (s, ask)
    }

    /// This burst's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn next_count(&self) -> u64 {
        CREDITS.min(self.frames - self.sent)
    }

    /// The receiver granted `count` frames: the data frames to send now
    /// (their indices) and the control frame behind them. Never more than
    /// asked for, never past the burst's size.
    pub fn go(&mut self, count: u64, now: Duration) -> (Range<u64>, Send) {
        let started = *self.started.get_or_insert(now);
        let n = count.min(self.next_count());
        let data = self.sent..self.sent + n;
        self.sent += n;
        self.asked = now;
        let out_of_time = now.saturating_sub(started) >= MAX_TIME;
        let next = if self.sent < self.frames && n > 0 && !out_of_time && !self.done {
            (Kind::Ask, control(self.id, self.next_count()))
        } else {
            self.done = true;
            (Kind::Done, control(self.id, self.sent))
        };
        (data, next)
    }

    /// The receiver's tally of good data frames.
    pub fn tally(&self, good: u64, now: Duration) -> BurstResult {
        BurstResult {
            sent_bytes: self.sent * PAGE as u64,
            confirmed_bytes: good.min(self.sent) * PAGE as u64,
            elapsed: self
                .started
                .map_or(Duration::ZERO, |s| now.saturating_sub(s)),
        }
    }

    /// No answer came in time: nothing is confirmed.
    pub fn abandon(&self) -> BurstResult {
        BurstResult {
            sent_bytes: self.sent * PAGE as u64,
            confirmed_bytes: 0,
            elapsed: Duration::ZERO,
        }
    }
}

/// The receiver's side: the peer's current burst.
#[derive(Debug, Clone, Default)]
pub struct Receiving {
    id: u64,
    good: u64,
    credit: u64,
}

impl Receiving {
    /// The peer asks for `count` frames of burst `id`: the grant (frames
    /// from an earlier round not come by now are lost, frames are in order).
    pub fn ask(&mut self, id: u64, count: u64) -> u64 {
        if id != self.id {
            self.id = id;
            self.good = 0;
        }
        self.credit = count.min(CREDITS);
        self.credit
    }

    /// A data frame passed its CRC.
    pub fn data(&mut self) {
        self.good += 1;
        self.credit = self.credit.saturating_sub(1);
    }

    /// The peer's burst `id` is over: the count of good frames, if it is
    /// the burst this side counted.
    pub fn done(&mut self, id: u64) -> Option<u64> {
        self.credit = 0;
        (id == self.id).then_some(self.good)
    }

    /// Receive frames granted and not yet used.
    pub fn credit(&self) -> usize {
        self.credit as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::frame::split;

    #[test]
    fn a_sender_sends_only_what_was_granted_and_ends_with_done() {
        let (mut s, ask) = Sending::new(7, 10, Duration::ZERO);
        assert_eq!((ask.0, split(ask.1)), (Kind::Ask, (7, 6)));
        // Granted fewer than asked: only those go.
        let (d, next) = s.go(4, Duration::from_micros(10));
        assert_eq!((d, next.0, split(next.1)), (0..4, Kind::Ask, (7, 6)));
        let (d, next) = s.go(6, Duration::from_micros(20));
        assert_eq!((d, next.0, split(next.1)), (4..10, Kind::Done, (7, 10)));
        // A stray grant after the end sends nothing.
        assert_eq!(s.go(6, Duration::from_micros(30)).0, 10..10);
        let r = s.tally(9, Duration::from_micros(40));
        assert_eq!(r.confirmed_bytes, 9 * 4096);
        assert_eq!(r.elapsed, Duration::from_micros(30));
        assert_eq!(s.tally(99, Duration::ZERO).confirmed_bytes, 10 * 4096);
    }

    #[test]
    fn a_burst_past_its_time_stops_asking() {
        let (mut s, _) = Sending::new(1, 1000, Duration::ZERO);
        s.go(6, Duration::ZERO);
        let (_, next) = s.go(6, MAX_TIME);
        assert_eq!((next.0, split(next.1)), (Kind::Done, (1, 12)));
    }

    #[test]
    fn a_receiver_counts_per_burst_and_caps_its_grant() {
        let mut r = Receiving::default();
        assert_eq!(r.ask(1, 100), CREDITS);
        r.data();
        r.data();
        assert_eq!(r.credit(), 4);
        assert_eq!(r.done(1), Some(2));
        assert_eq!(r.credit(), 0);
        r.ask(2, 3);
        assert_eq!(r.done(1), None, "a stale burst's done");
        assert_eq!(r.done(2), Some(0));
    }
}
