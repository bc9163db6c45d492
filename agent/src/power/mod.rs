//! System sleep and wake. A headless Mac mini on default energy settings
//! may sleep; Thunderbolt has no wake-on-LAN, so the node goes dark until
//! something wakes it. This module finds every sleep so that the records
//! say "slept 02:10-08:40" and the outages it caused have cause `sleep`.
//!
//! Two ways to know, combined by [`SleepDetector`] (pure, no clock reads):
//! - **The clock gap**, on every OS: a clock that counts suspend minus one
//!   that does not (Linux `CLOCK_BOOTTIME` - `CLOCK_MONOTONIC`; macOS
//!   `CLOCK_MONOTONIC_RAW` - `CLOCK_UPTIME_RAW`, which are
//!   `mach_continuous_time` and `mach_absolute_time` in ns) grows by exactly
//!   the time slept and by nothing else. Read every
//!   [`READ_INTERVAL`], it finds every sleep, even one a notification
//!   missed, but only after the wake.
//! - **Notifications** (macOS `IORegisterForSystemPower`): will-sleep comes
//!   before the node goes dark, so its record is spooled before the sleep;
//!   has-powered-on comes 1-5 s after the wake.
//!
//! The per-OS files (chosen as [`crate::platform`] describes) read the
//! clocks, wait for notifications and hold the sleep-preventing assertion
//! (`prevent_sleep`); [`message`] says what each IOKit message means and
//! is tested on every OS; [`pmset`] reads `pmset -g` for the fabric checks.

use std::time::Duration;

use boltwatch_proto::v1::{PowerEventKind, PowerEventSource};

pub mod message;
pub mod pmset;

crate::platform::os_module!(mod imp);

pub use imp::{read_clocks, Assertion, Notifications};

/// How often the clocks are read (and, on macOS, how long the run loop
/// waits for a notification in one turn). It bounds how late a clock-gap
/// wake is placed, and how long the power thread takes to see the stop.
pub const READ_INTERVAL: Duration = Duration::from_millis(100);

/// The least growth of the clock gap taken as a sleep. The two clocks are
/// read one after the other, so a thread preempted between the reads sees
/// the gap off by the preemption (milliseconds on a loaded machine); a
/// second is far above that, and a real sleep and wake of a Mac takes
/// longer than that by itself.
pub const MIN_SLEEP: Duration = Duration::from_secs(1);

/// The name of the `prevent_sleep` assertion, as `pmset -g assertions`
/// lists it (and `doctor` looks for it).
pub const ASSERTION_NAME: &str = "boltwatch-agent probing";

/// One reading of the clocks, all in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// The agent's timeline ([`crate::clock`]): where events are placed,
    /// on the clock the outage tracker compares them with.
    pub unix_ns: u64,
    /// A clock that counts time asleep (`CLOCK_BOOTTIME`, `CLOCK_MONOTONIC_RAW`).
    pub suspend_ns: u64,
    /// A clock that stops while asleep (`CLOCK_MONOTONIC`, `CLOCK_UPTIME_RAW`).
    pub awake_ns: u64,
}

impl ClockReading {
    /// Time asleep since the clocks started, plus a constant offset.
    fn gap(&self) -> i128 {
        i128::from(self.suspend_ns) - i128::from(self.awake_ns)
    }
}

/// What the OS said about power (macOS; see [`message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// `kIOMessageSystemWillSleep`: the system goes to sleep now.
    WillSleep,
    /// `kIOMessageSystemHasPoweredOn`: the wake is complete.
    HasPoweredOn,
}

/// Sleep or wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerKind {
    /// The system went to sleep at `at_unix_ns`.
    Sleep,
    /// The system woke at `at_unix_ns`, having slept `slept_ns`.
    Wake,
}

/// How a sleep or wake became known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerSource {
    /// An OS notification.
    Notification,
    /// The clock gap grew.
    ClockGap,
}

/// A sleep or wake of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerEvent {
    /// Sleep or wake.
    pub kind: PowerKind,
    /// When, on the agent's timeline ([`crate::clock`]); the record gets
    /// the wall-clock time ([`PowerEvent::to_proto`]).
    pub at_unix_ns: u64,
    /// For a wake: how long the system slept (0: under [`MIN_SLEEP`]).
    pub slept_ns: u64,
    /// How it became known.
    pub source: PowerSource,
}

impl PowerEvent {
    /// The record's payload, its time in wall-clock time under `wall`.
    pub fn to_proto(&self, wall: &crate::clock::Reading) -> boltwatch_proto::v1::PowerEvent {
        boltwatch_proto::v1::PowerEvent {
            kind: match self.kind {
                PowerKind::Sleep => PowerEventKind::Sleep,
                PowerKind::Wake => PowerEventKind::Wake,
            } as i32,
            at_unix_ns: wall.to_unix(self.at_unix_ns),
            slept_ns: self.slept_ns,
            source: match self.source {
                PowerSource::Notification => PowerEventSource::Notification,
                PowerSource::ClockGap => PowerEventSource::ClockGap,
            } as i32,
        }
    }
}

/// Turns clock readings and notifications into sleep and wake events:
/// every sleep yields one [`PowerKind::Sleep`] and then one
/// [`PowerKind::Wake`], whichever way it was found.
///
/// Feed a turn's notices in time order around its reading: will-sleep
/// notices before the reading, has-powered-on after it (it comes seconds
/// after the wake, which the reading has already seen).
#[derive(Debug, Default)]
pub struct SleepDetector {
    last_gap: Option<i128>,
    /// Will-sleep time of a sleep announced and not yet woken from.
    announced: Option<u64>,
}

impl SleepDetector {
    /// A detector that takes its first reading as the baseline.
    pub fn new() -> SleepDetector {
        SleepDetector::default()
    }

    /// A reading of the clocks. When the gap grew by [`MIN_SLEEP`] or more
    /// since the last one, the system slept that long and woke before this
    /// reading: a wake at the reading (late by at most the interval between
    /// readings), preceded by its sleep unless one was announced.
    pub fn on_reading(&mut self, r: ClockReading) -> Vec<PowerEvent> {
        let gap = r.gap();
        let Some(last) = self.last_gap.replace(gap) else {
            return Vec::new();
        };
        let grown = gap - last;
        if grown < MIN_SLEEP.as_nanos() as i128 {
            return Vec::new();
        }
        let slept = u64::try_from(grown).unwrap_or(u64::MAX);
        let mut out = Vec::with_capacity(2);
        if self.announced.take().is_none() {
            out.push(PowerEvent {
                kind: PowerKind::Sleep,
                at_unix_ns: r.unix_ns.saturating_sub(slept),
                slept_ns: 0,
                source: PowerSource::ClockGap,
            });
        }
        out.push(PowerEvent {
            kind: PowerKind::Wake,
            at_unix_ns: r.unix_ns,
            slept_ns: slept,
            source: PowerSource::ClockGap,
        });
        out
    }

    /// A notification received at `at_unix_ns`. A will-sleep is the sleep
    /// (once per sleep); a has-powered-on is the wake only when the clocks
    /// have not shown one since the will-sleep, which happens when the
    /// sleep was shorter than [`MIN_SLEEP`] (its length is then unknown, 0).
    pub fn on_notice(&mut self, notice: Notice, at_unix_ns: u64) -> Vec<PowerEvent> {
        let event = |kind| PowerEvent {
            kind,
            at_unix_ns,
            slept_ns: 0,
            source: PowerSource::Notification,
        };
        match notice {
            Notice::WillSleep if self.announced.is_none() => {
                self.announced = Some(at_unix_ns);
                vec![event(PowerKind::Sleep)]
            }
            Notice::WillSleep => Vec::new(),
            Notice::HasPoweredOn => match self.announced.take() {
                Some(_) => vec![event(PowerKind::Wake)],
                None => Vec::new(),
            },
        }
    }
}

/// The environment variable launchd sets for every job it runs.
pub const LAUNCHD_VAR: &str = "XPC_SERVICE_NAME";

/// Whether to hold the sleep-preventing assertion: as configured
/// (`prevent_sleep`), else on when running as a launchd job (`XPC_SERVICE_NAME`
/// set to the job's label, given here): a node agent under launchd is a
/// deployed node, and a node that sleeps is an outage. A terminal
/// session's agent (a test, a bench) leaves the Mac's energy settings
/// alone; Terminal's shells carry `XPC_SERVICE_NAME=0`, which is no job.
pub fn prevent_sleep_wanted(configured: Option<bool>, launchd_job: Option<&str>) -> bool {
    configured.unwrap_or_else(|| launchd_job.is_some_and(|v| !v.is_empty() && v != "0"))
}

#[cfg(test)]
mod tests;
