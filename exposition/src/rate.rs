//! Passive interface throughput from consecutive counter records.
//!
//! A rate needs two readings of an interface, so the gauge appears with the
//! second record. Kernel counters are 64-bit and do not wrap in practice
//! (80 Gbit/s takes 58 years), so a smaller value is a reset (interface
//! re-created, driver reloaded): the new value counts from zero, as
//! Prometheus' `rate()` assumes. A record not newer than the last one seen
//! for its interface (a replayed spool, a reordered batch) is ignored, so
//! the rate is always over forward time.

/// Receive and transmit rates from successive 64-bit byte counters.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CounterRate {
    last: Option<(u64, [u64; 2])>,
    rate: Option<[f64; 2]>,
}

impl CounterRate {
    /// A reading of `[receive_bytes, transmit_bytes]` taken at `unix_ns`.
    /// Returns false (and changes nothing) when it is not newer than the
    /// last reading.
    pub fn update(&mut self, unix_ns: u64, bytes: [u64; 2]) -> bool {
        let Some((t0, b0)) = self.last else {
            self.last = Some((unix_ns, bytes));
            return true;
        };
        if unix_ns <= t0 {
            return false;
        }
        let secs = (unix_ns - t0) as f64 / 1e9;
        let rate = |new: u64, old: u64| {
            // Smaller means reset: the counter restarted from zero.
            let delta = if new >= old { new - old } else { new };
            delta as f64 / secs
        };
        self.rate = Some([rate(bytes[0], b0[0]), rate(bytes[1], b0[1])]);
        self.last = Some((unix_ns, bytes));
        true
    }

    /// `[receive, transmit]` bytes per second between the last two readings.
    pub fn bytes_per_second(&self) -> Option<[f64; 2]> {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn rate_needs_two_readings_and_counts_bytes() {
        let mut r = CounterRate::default();
        assert!(r.update(10 * S, [1_000, 0]));
        assert_eq!(r.bytes_per_second(), None);
        // 1 GB received and 0.5 GB sent in 2 s.
        assert!(r.update(12 * S, [1_000 + 1_000_000_000, 500_000_000]));
        assert_eq!(r.bytes_per_second(), Some([5e8, 2.5e8]));
    }

    #[test]
    fn full_64_bit_range_without_overflow() {
        let mut r = CounterRate::default();
        let big = u64::MAX - 10_000_000_000;
        r.update(S, [big, big]);
        r.update(2 * S, [big + 10_000_000_000, big]);
        assert_eq!(r.bytes_per_second(), Some([10e9, 0.0]));
    }

    #[test]
    fn smaller_value_is_a_reset_not_a_wrap() {
        let mut r = CounterRate::default();
        r.update(S, [5_000_000, 7_000_000]);
        // The interface was re-created: counters restart near zero.
        r.update(2 * S, [1_000, 7_000_125]);
        assert_eq!(r.bytes_per_second(), Some([1_000.0, 125.0]));
    }

    #[test]
    fn replayed_and_out_of_order_readings_are_ignored() {
        let mut r = CounterRate::default();
        r.update(10 * S, [0, 0]);
        r.update(11 * S, [125, 0]);
        let before = r.clone();
        assert!(!r.update(11 * S, [999_999, 0]), "same time: replay");
        assert!(!r.update(5 * S, [0, 0]), "older");
        assert_eq!(r, before);
        r.update(12 * S, [250, 0]);
        assert_eq!(r.bytes_per_second(), Some([125.0, 0.0]));
    }
}
