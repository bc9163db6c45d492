//! Targets without a known sleep-counting clock: the timeline is the
//! process's monotonic clock (`Instant`), which may stop in sleep.

use std::time::Instant;

/// The OS clocks.
#[derive(Debug)]
pub struct Os(Instant);

impl Os {
    /// The clocks of this machine.
    pub fn new() -> Os {
        Os(Instant::now())
    }
}

impl super::Source for Os {
    fn continuous_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }

    fn wall_ns(&self) -> u64 {
        boltwatch_common::clock::now_unix_ns()
    }
}
