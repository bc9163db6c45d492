//! A clock the tests move by hand: it runs, sleeps (the continuous clock
//! and the wall clock both go on, as `CLOCK_BOOTTIME` and
//! `mach_continuous_time` do) and has its wall clock stepped (`date -s`).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::Source;

/// A synthetic [`Source`].
#[derive(Debug)]
pub(crate) struct Synthetic {
    continuous: AtomicU64,
    /// Wall minus continuous.
    offset: AtomicI64,
}

impl Synthetic {
    /// Continuous time `continuous_ns`, wall clock `wall_ns`.
    pub(crate) fn new(continuous_ns: u64, wall_ns: u64) -> Synthetic {
        Synthetic {
            continuous: AtomicU64::new(continuous_ns),
            offset: AtomicI64::new(wall_ns as i64 - continuous_ns as i64),
        }
    }

    /// Time passes, awake or asleep alike for these two clocks.
    pub(crate) fn run(&self, ns: u64) {
        self.continuous.fetch_add(ns, Ordering::SeqCst);
    }

    /// The wall clock jumps by `delta_ns`; the continuous clock does not.
    pub(crate) fn step_wall(&self, delta_ns: i64) {
        self.offset.fetch_add(delta_ns, Ordering::SeqCst);
    }
}

impl Source for Synthetic {
    fn continuous_ns(&self) -> u64 {
        self.continuous.load(Ordering::SeqCst)
    }

    fn wall_ns(&self) -> u64 {
        (self.continuous_ns() as i64 + self.offset.load(Ordering::SeqCst)) as u64
    }
}
