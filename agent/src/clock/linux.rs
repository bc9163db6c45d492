//! Linux clocks for the timeline: `CLOCK_BOOTTIME` (monotonic, counts
//! suspend, slewed by NTP together with the wall clock) and
//! `CLOCK_REALTIME`.

use nix::time::{clock_gettime, ClockId};

/// The OS clocks.
#[derive(Debug, Default)]
pub struct Os;

impl Os {
    /// The clocks of this machine.
    pub fn new() -> Os {
        Os
    }
}

fn ns(id: ClockId) -> u64 {
    clock_gettime(id)
        .ok()
        .and_then(|t| u64::try_from(t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128).ok())
        .unwrap_or(0)
}

impl super::Source for Os {
    fn continuous_ns(&self) -> u64 {
        ns(ClockId::CLOCK_BOOTTIME)
    }

    fn wall_ns(&self) -> u64 {
        ns(ClockId::CLOCK_REALTIME)
    }
}
