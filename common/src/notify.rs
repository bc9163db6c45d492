//! systemd's service notification protocol (sd_notify(3)), shared by both
//! binaries, for units of `Type=notify` with `WatchdogSec=`.
//!
//! - [`ready`]: `READY=1`, sent once the listeners are bound and the work
//!   loops started, so `systemctl start` returns when the service answers.
//! - [`watchdog`]: `WATCHDOG=1`, but only when a liveness check says the
//!   work loops moved since the previous `WATCHDOG=1`. A timer alone would
//!   keep a wedged process alive for ever (the runtime ticks while the
//!   thread that matters is stuck in a read); withholding the message lets
//!   systemd kill and restart it after `WatchdogSec`.
//! - [`Progress`]: the pure part of such a check over work-loop counters.
//!
//! Without `NOTIFY_SOCKET` (run by hand, launchd, tests) every message is a
//! no-op, and without `WATCHDOG_USEC` (or with a `WATCHDOG_PID` naming
//! another process) there is no watchdog. systemd exists only on Linux:
//! elsewhere this module compiles to the same no-ops without the crate.

use std::future::Future;
use std::time::Duration;

/// How often the liveness check runs, as a share of the watchdog timeout:
/// a quarter, so a loop that progresses at least once per half timeout is
/// never killed even when a check lands just before its turn.
pub const CHECKS_PER_TIMEOUT: u32 = 4;

/// Sends `READY=1` with a human-readable `STATUS=`.
pub fn ready(status: &str) {
    send(&Message::Ready(status));
}

/// Sends `STOPPING=1`: a shutdown was asked for and the drain began.
pub fn stopping() {
    send(&Message::Stopping);
}

/// The watchdog timeout systemd set for this process (`WATCHDOG_USEC`, when
/// `WATCHDOG_PID` is unset or names this process); `None` runs no watchdog.
pub fn watchdog_timeout() -> Option<Duration> {
    imp::watchdog_timeout().filter(|d| !d.is_zero())
}

/// Runs the watchdog until the future is dropped: every
/// `timeout / CHECKS_PER_TIMEOUT` it awaits `check`; `Ok` sends
/// `WATCHDOG=1`, `Err(why)` logs why and sends nothing. A check that hangs
/// sends nothing until it returns, which is the point. Without a watchdog
/// ([`watchdog_timeout`] is `None`) it logs so and waits for ever.
pub async fn watchdog<F, Fut>(mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let Some(timeout) = watchdog_timeout() else {
        tracing::info!("systemd watchdog off (no WATCHDOG_USEC for this process)");
        return std::future::pending().await;
    };
    let every = timeout / CHECKS_PER_TIMEOUT;
    tracing::info!(
        timeout_ms = timeout.as_millis() as u64,
        check_every_ms = every.as_millis() as u64,
        "systemd watchdog on: WATCHDOG=1 only while the work loops progress"
    );
    // The first check one period after READY=1, not at once: the loops
    // have had no time to turn yet.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // A late tick is not made up for with a burst: one check per period.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match check().await {
            Ok(()) => send(&Message::Watchdog),
            Err(why) => {
                tracing::warn!(reason = %why, "withholding WATCHDOG=1: a work loop made no progress")
            }
        }
    }
}

/// Work-loop counters between two watchdog messages: each must have moved
/// since the last check that passed. Pure: the caller reads the counters.
#[derive(Debug, Default, Clone)]
pub struct Progress {
    at_last_pass: Vec<(&'static str, u64)>,
}

impl Progress {
    /// A check that passes once every counter moved from 0.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// `Ok` when every counter in `now` is above its value at the last
    /// passing check (0 for a counter not seen before), and then remembers
    /// `now`; otherwise the names of those that did not move, and the
    /// baseline stays, so slow progress still passes once it happens.
    pub fn check(&mut self, now: &[(&'static str, u64)]) -> Result<(), String> {
        let before = |name: &str| {
            self.at_last_pass
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, v)| *v)
        };
        let stuck: Vec<&str> = now
            .iter()
            .filter(|(name, v)| *v <= before(name))
            .map(|(name, _)| *name)
            .collect();
        if stuck.is_empty() {
            self.at_last_pass = now.to_vec();
            Ok(())
        } else {
            Err(format!(
                "no progress since the last WATCHDOG=1: {}",
                stuck.join(", ")
            ))
        }
    }
}

// Without systemd (not Linux) nothing reads the status text.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Message<'a> {
    Ready(&'a str),
    Stopping,
    Watchdog,
}

/// A failed send is logged, not fatal: the service manager may be gone
/// (it restarts), and the process still does its work.
fn send(m: &Message) {
    if let Err(e) = imp::send(m) {
        tracing::warn!(error = %e, "cannot notify the service manager (NOTIFY_SOCKET)");
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use super::Message;
    use sd_notify::NotifyState;

    pub(super) fn send(m: &Message) -> std::io::Result<()> {
        match m {
            Message::Ready(status) => {
                sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)])
            }
            Message::Stopping => sd_notify::notify(&[NotifyState::Stopping]),
            Message::Watchdog => sd_notify::notify(&[NotifyState::Watchdog]),
        }
    }

    pub(super) fn watchdog_timeout() -> Option<std::time::Duration> {
        sd_notify::watchdog_enabled()
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Message;

    pub(super) fn send(_: &Message) -> std::io::Result<()> {
        Ok(())
    }

    pub(super) fn watchdog_timeout() -> Option<std::time::Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Progress;

    #[test]
    fn passes_only_when_every_counter_moved_since_the_last_pass() {
        let mut p = Progress::new();
        assert!(p.check(&[("sampler", 0), ("windows", 0)]).is_err());
        assert_eq!(p.check(&[("sampler", 3), ("windows", 1)]), Ok(()));
        // The sampler moved, the windows did not: named, not passed.
        let err = p.check(&[("sampler", 9), ("windows", 1)]).unwrap_err();
        assert!(err.contains("windows") && !err.contains("sampler"), "{err}");
        // The baseline stayed at the last pass: the sampler's earlier move
        // still counts once the windows catch up.
        assert_eq!(p.check(&[("sampler", 9), ("windows", 2)]), Ok(()));
        assert!(p.check(&[("sampler", 9), ("windows", 2)]).is_err());
    }

    #[test]
    fn no_counters_is_always_alive() {
        let mut p = Progress::new();
        assert_eq!(p.check(&[]), Ok(()));
        assert_eq!(p.check(&[]), Ok(()));
    }

    #[test]
    fn a_counter_that_appears_later_starts_from_zero() {
        let mut p = Progress::new();
        assert_eq!(p.check(&[("a", 1)]), Ok(()));
        assert!(p.check(&[("a", 2), ("b", 0)]).is_err());
        assert_eq!(p.check(&[("a", 2), ("b", 1)]), Ok(()));
    }
}
