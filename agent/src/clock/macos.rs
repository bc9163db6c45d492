//! macOS clocks for the timeline: `mach_continuous_time` (monotonic,
//! counts sleep; `mach_absolute_time` stops while the Mac sleeps) through
//! the timebase, and the wall clock.

use crate::platform::xnu::Timebase;

/// The OS clocks.
#[derive(Debug)]
pub struct Os {
    timebase: Timebase,
}

impl Os {
    /// The clocks of this machine.
    pub fn new() -> Os {
        Os {
            timebase: crate::platform::macos::timebase(),
        }
    }

    /// `mach_continuous_time` ticks in ns.
    pub fn ticks_ns(&self, ticks: u64) -> u64 {
        self.timebase.ns(ticks)
    }

    /// One tick in ns, rounded up.
    pub fn resolution_ns(&self) -> u64 {
        self.timebase.resolution_ns()
    }
}

impl super::Source for Os {
    fn continuous_ns(&self) -> u64 {
        self.timebase
            .ns(crate::platform::macos::mach_continuous_ticks())
    }

    fn wall_ns(&self) -> u64 {
        boltwatch_common::clock::now_unix_ns()
    }
}
