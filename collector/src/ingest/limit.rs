//! Ingest rate limits: a token bucket of records per second for each node.
//! Pure: the caller passes the time, so tests need no clock.
//!
//! A batch that would overdraw the bucket is refused whole (gRPC
//! RESOURCE_EXHAUSTED) and nothing of it is stored; the agent backs off and
//! keeps the records in its spool, so a limit slows a replay down but never
//! loses data.

use std::time::Instant;

/// One node's bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Full bucket refilling at `rate` records/s, holding at most `burst`.
    pub fn new(rate: u32, burst: u32, now: Instant) -> Bucket {
        Bucket {
            rate: f64::from(rate),
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            at: now,
        }
    }

    /// Takes `n` tokens if the bucket holds them at `now`.
    pub fn take(&mut self, n: usize, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        self.at = now.max(self.at);
        if self.tokens >= n as f64 {
            self.tokens -= n as f64;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_refill_at_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(100, 200, t0);
        assert!(b.take(200, t0));
        assert!(!b.take(1, t0));
        // Half a second refills 50.
        let t1 = t0 + Duration::from_millis(500);
        assert!(!b.take(51, t1));
        assert!(b.take(50, t1));
        // Never more than the burst, however long the pause.
        let t2 = t1 + Duration::from_secs(3600);
        assert!(!b.take(201, t2));
        assert!(b.take(200, t2));
    }

    #[test]
    fn refused_batch_takes_nothing() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10, 10, t0);
        assert!(!b.take(11, t0));
        assert!(b.take(10, t0));
    }

    #[test]
    fn time_going_backwards_is_harmless() {
        let t1 = Instant::now() + Duration::from_secs(1);
        let mut b = Bucket::new(10, 10, t1);
        assert!(b.take(10, t1));
        assert!(!b.take(1, t1 - Duration::from_secs(1)));
    }
}
