//! How far an endpoint is behind, for `boltwatch_remote_write_lag_seconds`:
//! how long the oldest stored record it has not passed yet (delivered,
//! refused or dropped for the backlog bound) has been waiting, counted from
//! when its sender first saw the store hold it; 0 when caught up. The store
//! keeps no arrival time, so the sender's first sighting stands for it
//! (within one poll, 500 ms). Pure: times come in as arguments.

use std::collections::VecDeque;

/// Sightings of the store's newest position not yet passed.
#[derive(Debug, Default, Clone)]
pub struct Lag {
    /// (newest position seen, unix seconds when first seen), ascending.
    waiting: VecDeque<(i64, f64)>,
    /// Everything up to here has been passed.
    passed: i64,
}

impl Lag {
    /// The store's newest position at `now`.
    pub fn seen(&mut self, newest: i64, now: f64) {
        let known = self.waiting.back().map_or(self.passed, |(p, _)| *p);
        if newest > known {
            self.waiting.push_back((newest, now));
        }
    }

    /// Every record up to `pos` passed.
    pub fn passed(&mut self, pos: i64) {
        self.passed = self.passed.max(pos);
        while self.waiting.front().is_some_and(|(p, _)| *p <= pos) {
            self.waiting.pop_front();
        }
    }

    /// Seconds the oldest record not passed has waited as of `now`.
    pub fn seconds(&self, now: f64) -> f64 {
        self.waiting
            .front()
            .map_or(0.0, |(_, since)| (now - since).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caught_up_is_zero_and_a_stuck_batch_ages() {
        let mut l = Lag::default();
        assert_eq!(l.seconds(100.0), 0.0);
        l.seen(10, 100.0);
        l.passed(10);
        assert_eq!(l.seconds(101.0), 0.0);
        // Records 11..20 stored at 102, not delivered: the receiver is down.
        l.seen(20, 102.0);
        l.seen(20, 105.0);
        l.seen(25, 110.0);
        assert_eq!(l.seconds(130.0), 28.0);
        // Up to 20 delivered: the rest has waited since 110.
        l.passed(20);
        assert_eq!(l.seconds(130.0), 20.0);
        l.passed(25);
        assert_eq!(l.seconds(131.0), 0.0);
        // A position already passed is not waiting.
        l.seen(25, 140.0);
        assert_eq!(l.seconds(150.0), 0.0);
    }

    #[test]
    fn a_partial_delivery_keeps_the_sighting_it_did_not_cover() {
        let mut l = Lag::default();
        l.seen(100, 1.0);
        // A batch of 50 of the 100 went through.
        l.passed(50);
        assert_eq!(l.seconds(11.0), 10.0);
    }
}
