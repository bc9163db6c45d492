//! Jittered, capped exponential backoff for reconnecting to the collector.
//!
//! "Full jitter" (a uniform draw below the exponential ceiling) keeps a
//! cluster of agents from reconnecting in lockstep after a collector restart.
//! The random source is passed in so tests are deterministic.

use std::time::Duration;

/// Backoff state.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starts at `base`, never waits more than `cap`.
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The next wait; `unit` is a uniform draw from [0, 1).
    pub fn next_delay(&mut self, unit: f64) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        // Never less than half the ceiling, so a fast-failing collector is not
        // hammered, and never above it.
        ceiling.mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
    }

    /// The current ceiling: base * 2^attempt, capped.
    pub fn ceiling(&self) -> Duration {
        let factor = 2u32.saturating_pow(self.attempt.min(20));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A connection succeeded: start over.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_doubles_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let ceilings: Vec<_> = (0..10)
            .map(|_| {
                let c = b.ceiling();
                b.next_delay(0.0);
                c
            })
            .collect();
        assert_eq!(ceilings[0], Duration::from_millis(100));
        assert_eq!(ceilings[1], Duration::from_millis(200));
        assert_eq!(ceilings[5], Duration::from_millis(3200));
        assert_eq!(ceilings[9], Duration::from_secs(5));
    }

    #[test]
    fn jitter_stays_within_half_to_full_ceiling() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        assert_eq!(b.next_delay(0.0), Duration::from_millis(50));
        assert_eq!(b.next_delay(0.999_999).as_millis(), 199);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(100));
    }
}
