//! One link's probe with its window: each tick advances the [`Probe`] and
//! folds its outcomes into the open [`Window`], which closes every
//! [`WINDOW`] into an `rdma_probe` record. Pure: the caller owns the clocks
//! and the port (a thread per link over the verbs port; the fake in tests).

use std::time::Duration;

use boltwatch_proto::v1::RdmaProbe;

use super::port::Port;
use super::probe::{Context, Outcome, Phase, Probe, Settings};
use super::window::{LinkId, Window};

/// Length of one `rdma_probe` window: ten pings at the default interval.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One link's probe and its open window.
#[derive(Debug)]
pub struct Driver {
    link: LinkId,
    probe: Probe,
    window: Window,
    opened: Duration,
    pings: u64,
}

impl Driver {
    /// A link's driver whose first window opens at `now` (agent time) and
    /// `unix_ns`.
    pub fn new(link: LinkId, s: Settings, now: Duration, unix_ns: u64) -> Driver {
        Driver {
            link,
            probe: Probe::new(s),
            window: Window::new(unix_ns),
            opened: now,
            pings: 0,
        }
    }

    /// The link.
    pub fn link(&self) -> &LinkId {
        &self.link
    }

    /// Where the link's set-up is.
    pub fn phase(&self) -> Phase {
        self.probe.phase()
    }

    /// Until when the caller should tick again at once (see
    /// [`Probe::spin_until`]).
    pub fn spin_until(&self) -> Duration {
        self.probe.spin_until()
    }

    /// One tick: the probe's outcomes, and the window's record when it
    /// closed (none for a window in which nothing happened).
    pub fn step(
        &mut self,
        port: &mut dyn Port,
        now: Duration,
        unix_ns: u64,
        cx: Context,
    ) -> (Vec<Outcome>, Option<RdmaProbe>) {
        let out = self.probe.tick(port, now, cx);
        self.window.add(&out);
        let pings = self.probe.pings();
        self.window.sent(pings - self.pings);
        self.pings = pings;
        if now.saturating_sub(self.opened) < WINDOW {
            return (out, None);
        }
        self.opened = now;
        let closed = std::mem::replace(&mut self.window, Window::new(unix_ns));
        (out, closed.finish(&self.link, unix_ns))
    }
}
