//! The power role: one thread reads the clocks every
//! [`power::READ_INTERVAL`] and, on macOS, waits on the system power
//! notifications in between; each sleep and wake becomes a `power` record
//! and goes to the outage tracker. It also holds the sleep-preventing
//! assertion (`prevent_sleep`) for the agent's life.
//!
//! The outage tracker reads the clocks itself before each input as well
//! (see [`super::outage_tracker`]): the wake shows in the clocks at once,
//! while this thread's event can reach the tracker behind the first reply
//! after the wake, too late for the outage that reply ends.

use boltwatch_proto::v1::record::Payload;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::crew::Crew;
use super::outage_tracker::Tracker;
use crate::config::Config;
use crate::error::Error;
use crate::power::{self, Assertion, Notice, Notifications, PowerEvent, SleepDetector};
use crate::sink::{Observer, Sink};

pub(super) fn start(crew: &mut Crew, config: &Config, outage: &Tracker) -> Result<(), Error> {
    let launchd = std::env::var(power::LAUNCHD_VAR).ok();
    let prevent = power::prevent_sleep_wanted(config.prevent_sleep, launchd.as_deref());
    let role = Role {
        sink: crew.sink.clone(),
        tracker: outage.power(),
    };
    let stop = crew.stop.clone();
    let spawned = std::thread::Builder::new()
        .name("power".into())
        .spawn(move || role.run(prevent, &stop));
    crew.thread("power", spawned)
}

struct Role {
    sink: Sink,
    tracker: Observer<PowerEvent>,
}

impl Role {
    fn run(self, prevent: bool, stop: &CancellationToken) {
        // Held until this thread ends, at the agent's stop.
        let _assertion = prevent.then(hold).flatten();
        // Opened on this thread: the notifications come on its run loop.
        let mut notifications = Notifications::open()
            .map_err(|e| debug!(error = %e, "no sleep notifications"))
            .ok();
        let mut detector = SleepDetector::new();
        let mut clocks_failed = false;
        while !stop.is_cancelled() {
            let notices = match &mut notifications {
                Some(n) => n.wait(power::READ_INTERVAL),
                None => {
                    std::thread::sleep(power::READ_INTERVAL);
                    Vec::new()
                }
            };
            // In time order: a will-sleep came before the sleep the
            // reading may show, a has-powered-on seconds after the wake.
            let (before, after): (Vec<_>, Vec<_>) = notices
                .into_iter()
                .partition(|(n, _)| *n == Notice::WillSleep);
            let mut events = Vec::new();
            for (n, at) in before {
                events.extend(detector.on_notice(n, at));
            }
            match power::read_clocks() {
                Ok(r) => events.extend(detector.on_reading(r)),
                Err(e) if !clocks_failed => {
                    clocks_failed = true;
                    warn!(error = %e, "cannot read the clocks: sleeps are not detected");
                }
                Err(_) => {}
            }
            for (n, at) in after {
                events.extend(detector.on_notice(n, at));
            }
            for e in events {
                self.report(e);
            }
        }
    }

    fn report(&self, e: PowerEvent) {
        info!(kind = ?e.kind, at_unix_ns = e.at_unix_ns, slept_s = e.slept_ns as f64 / 1e9,
            source = ?e.source, "system power");
        self.sink
            .emit(Payload::Power(e.to_proto(&crate::clock::read())));
        self.tracker.observe(e);
    }
}

/// Takes the assertion, or says why not.
fn hold() -> Option<Assertion> {
    match Assertion::take(power::ASSERTION_NAME) {
        Ok(a) => {
            info!("holding a PreventUserIdleSystemSleep assertion (prevent_sleep)");
            Some(a)
        }
        Err(e) => {
            warn!(error = %e, "prevent_sleep: cannot keep the system awake");
            None
        }
    }
}
