//! Power on an OS without an implementation: every call fails, so no
//! sleep is ever claimed and the agent says why once.

use std::io;
use std::time::Duration;

use super::{ClockReading, Notice};

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("sleep detection is not supported on {}", std::env::consts::OS),
    )
}

/// Always fails.
pub fn read_clocks() -> io::Result<ClockReading> {
    Err(unsupported())
}

/// No notifications here.
#[derive(Debug)]
pub enum Notifications {}

impl Notifications {
    /// Always fails.
    pub fn open() -> io::Result<Notifications> {
        Err(unsupported())
    }

    /// Never called: there is no value.
    pub fn wait(&mut self, _timeout: Duration) -> Vec<(Notice, u64)> {
        match *self {}
    }
}

/// No assertion here.
#[derive(Debug)]
pub enum Assertion {}

impl Assertion {
    /// Always fails.
    pub fn take(_name: &str) -> io::Result<Assertion> {
        Err(unsupported())
    }
}
