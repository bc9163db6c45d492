//! Power on Linux: the clock gap only. `CLOCK_BOOTTIME` counts time
//! suspended and `CLOCK_MONOTONIC` does not (clock_gettime(2)); nothing
//! else moves one against the other. Sleep notifications (logind's
//! `PrepareForSleep` over D-Bus) are not read, and `prevent_sleep` is not
//! supported: a Linux node is kept awake by its own policy (`systemctl
//! mask sleep.target suspend.target`, or `systemd-inhibit`).

use std::io;
use std::time::Duration;

use nix::time::{clock_gettime, ClockId};

use super::{ClockReading, Notice};

/// The two clocks, read back to back, and the timeline of the second.
pub fn read_clocks() -> io::Result<ClockReading> {
    let ns = |id: ClockId| -> io::Result<u64> {
        let t = clock_gettime(id).map_err(io::Error::from)?;
        Ok((t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64))
    };
    let awake_ns = ns(ClockId::CLOCK_MONOTONIC)?;
    let suspend_ns = ns(ClockId::CLOCK_BOOTTIME)?;
    Ok(ClockReading {
        awake_ns,
        suspend_ns,
        // The timeline runs on this very clock (CLOCK_BOOTTIME): placing the
        // event from this read keeps it on the slept time it measured.
        unix_ns: crate::clock::clock().at(suspend_ns),
    })
}

/// Sleep notifications: none on Linux.
#[derive(Debug)]
pub enum Notifications {}

impl Notifications {
    /// Always fails: the clock gap finds Linux sleeps.
    pub fn open() -> io::Result<Notifications> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no sleep notifications on Linux; sleeps are found by the clock gap",
        ))
    }

    /// Never called: there is no value.
    pub fn wait(&mut self, _timeout: Duration) -> Vec<(Notice, u64)> {
        match *self {}
    }
}

/// The sleep-preventing assertion: not on Linux.
#[derive(Debug)]
pub enum Assertion {}

impl Assertion {
    /// Always fails, saying what to do instead.
    pub fn take(_name: &str) -> io::Result<Assertion> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "prevent_sleep is not supported on Linux: mask sleep.target and suspend.target, or run the agent under systemd-inhibit",
        ))
    }
}
