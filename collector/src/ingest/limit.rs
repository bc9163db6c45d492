//! Ingest rate limits: token buckets of records, bytes and Hellos per
//! second for each node. Pure: the caller passes the time, so tests need no
//! clock.
//!
//! Records alone are not enough: 30 single-record batches of 7.9 MiB each
//! passed a records-per-second limit in 2 s. Hellos cost a store write and a
//! watermark query each, so a reconnect loop is limited too.
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

    /// Full bucket refilling at `rate` units/s, holding at most `burst`
    /// (for bytes, whose rates do not fit a `u32`).
    pub fn wide(rate: u64, burst: u64, now: Instant) -> Bucket {
        let burst = burst.max(1) as f64;
        Bucket {
            rate: rate as f64,
            burst,
            tokens: burst,
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

/// Hellos a node may send at once.
pub const HELLO_BURST: u64 = 10;
/// Hellos per second a node may send, sustained (one every 2 s).
pub const HELLOS_PER_SECOND: f64 = 0.5;

/// One node's buckets.
#[derive(Debug, Clone)]
pub struct NodeLimits {
    /// Records.
    pub records: Bucket,
    /// Encoded record bytes.
    pub bytes: Bucket,
    /// Stream openings.
    pub hellos: Bucket,
}

impl NodeLimits {
    /// Full buckets at `now`.
    pub fn new(p: &super::policy::Policy, now: Instant) -> NodeLimits {
        let burst = p.records_burst.max(p.max_batch_records as u32);
        let hellos = Bucket {
            rate: HELLOS_PER_SECOND,
            burst: HELLO_BURST as f64,
            tokens: HELLO_BURST as f64,
            at: now,
        };
        NodeLimits {
            records: Bucket::new(p.records_per_second, burst, now),
            // A burst below one largest record could never pass.
            bytes: Bucket::wide(
                p.bytes_per_second,
                p.bytes_burst.max(p.max_record_bytes as u64),
                now,
            ),
            hellos,
        }
    }

    /// Takes `records` records of `bytes` bytes, both or neither.
    pub fn take_batch(&mut self, records: usize, bytes: usize, now: Instant) -> Result<(), Over> {
        let (saved_records, saved_bytes) = (self.records.clone(), self.bytes.clone());
        if !self.records.take(records, now) {
            return Err(Over::Records);
        }
        if !self.bytes.take(bytes, now) {
            self.records = saved_records;
            self.bytes = saved_bytes;
            return Err(Over::Bytes);
        }
        Ok(())
    }
}

/// Which budget a batch overdrew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// Records per second.
    Records,
    /// Bytes per second.
    Bytes,
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_budget_throttles_and_refunds_records() {
        let t0 = Instant::now();
        let p = crate::ingest::Policy {
            records_per_second: 1000,
            records_burst: 1000,
            max_batch_records: 1000,
            bytes_per_second: 1000,
            bytes_burst: 5000,
            max_record_bytes: 1024,
            ..Default::default()
        };
        let mut l = NodeLimits::new(&p, t0);
        assert_eq!(l.take_batch(10, 5000, t0), Ok(()));
        assert_eq!(l.take_batch(10, 1, t0), Err(Over::Bytes));
        // The refused batch took no records either: 990 are left.
        assert_eq!(l.take_batch(990, 0, t0), Ok(()));
        assert_eq!(l.take_batch(1, 0, t0), Err(Over::Records));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(l.take_batch(1, 1000, t1), Ok(()));
        assert_eq!(l.take_batch(1, 1, t1), Err(Over::Bytes));
    }

    #[test]
    fn hellos_are_limited() {
        let t0 = Instant::now();
        let mut l = NodeLimits::new(&crate::ingest::Policy::default(), t0);
        for _ in 0..HELLO_BURST {
            assert!(l.hellos.take(1, t0));
        }
        assert!(!l.hellos.take(1, t0));
        assert!(l.hellos.take(1, t0 + Duration::from_secs(2)));
    }

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
