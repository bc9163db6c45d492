//! The STAMP Session-Sender: probes one peer every `interval` on a
//! dedicated thread ([`Session`] does the probing), and emits one
//! `RttSummary` per one-second window through the [`Sink`]; per-probe
//! outcomes go to an optional [`Observer`] (the outage tracker), and windows
//! that overlap a bandwidth test are tagged `under_load`.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::RttSummary;
use rand::Rng;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::imp;
use super::late::LateRule;
use super::session::{Outcome, Session};
use super::target::Target;
use super::window::RttWindows;
use crate::bandwidth::load::LoadTag;
use crate::health::Health;
use crate::sink::{Observer, Sink};

/// Length of one `RttSummary` window.
pub const WINDOW: Duration = Duration::from_secs(1);

/// How one session-sender probes, and who besides the sink hears of it.
#[derive(Debug)]
pub struct SenderOptions {
    /// Time between probes.
    pub interval: Duration,
    /// A probe unanswered after this long is lost.
    pub timeout: Duration,
    /// When an unanswered probe is late ([`super::late`]).
    pub late: LateRule,
    /// Counts replies that came after their probe was called late.
    pub late_replies: Option<Arc<AtomicU64>>,
    /// Told every probe's fate (answered, late, lost).
    pub observer: Option<Observer<ProbeEvent>>,
    /// The peer's load marks: windows overlapping a bandwidth test are
    /// tagged `under_load`.
    pub load: Option<LoadTag>,
}

impl SenderOptions {
    /// Probes every `interval`, each lost when unanswered after `timeout`,
    /// reporting to no observer and tagging no load.
    pub fn every(interval: Duration, timeout: Duration) -> SenderOptions {
        SenderOptions {
            interval,
            timeout,
            late: LateRule::default(),
            late_replies: None,
            observer: None,
            load: None,
        }
    }
}

impl Default for SenderOptions {
    /// 10 probes a second, lost after 1 s.
    fn default() -> Self {
        SenderOptions::every(Duration::from_millis(100), Duration::from_secs(1))
    }
}

/// Per-probe outcomes, for an [`Observer`] (the outage tracker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeEvent {
    /// The first answer to a probe, within the timeout. `rtt_ns` is 0 when
    /// the RTT was discarded as negative (clock step): the peer did answer.
    Reply {
        /// Sequence number.
        seq: u32,
        /// t1, on the agent's timeline ([`crate::clock`]).
        sent_unix_ns: u64,
        /// t4, on the timeline: when the reply arrived (the kernel's RX timestamp
        /// where the OS gives one), not when a thread got round to it.
        received_unix_ns: u64,
        /// `(t4 - t1) - (t3 - t2)`.
        rtt_ns: u64,
        /// It came after the probe was reported [`ProbeEvent::Late`]: an
        /// answer all the same (its RTT counts), not a loss.
        late: bool,
    },
    /// Unanswered at the late bound ([`super::late`]): several times the
    /// link's recent p99 round trip, well before the timeout. Followed by
    /// a `Reply` (`late: true`) or a `Lost`.
    Late {
        /// Sequence number.
        seq: u32,
        /// t1, on the timeline.
        sent_unix_ns: u64,
    },
    /// Unanswered at the timeout: a reply that comes within the timeout is
    /// an answer, however starved the reflector or this thread was.
    Lost {
        /// Sequence number.
        seq: u32,
        /// t1, on the timeline.
        sent_unix_ns: u64,
    },
}

/// Starts probing `target` on its own thread until `stop` is cancelled.
/// Records go to `sink`, one `RttSummary` per complete one-second window,
/// stamped with the window's end. The first probe goes out after a random
/// splay in `[0, interval)`.
pub fn spawn_sender(
    target: Target,
    opts: SenderOptions,
    sink: Sink,
    health: Arc<Health>,
    stop: CancellationToken,
) -> io::Result<JoinHandle<()>> {
    let windows_closed = health.clone();
    let mut session = Session::open(
        &target,
        opts.interval,
        opts.timeout,
        opts.late,
        health,
        true,
    )?;
    let splay_ns = rand::rng().random_range(0..opts.interval.as_nanos().max(1) as u64);
    let first = Instant::now() + Duration::from_nanos(splay_ns);
    std::thread::Builder::new()
        .name(format!("stamp-{}", target.peer))
        .spawn(move || {
            if let Err(e) = imp::prioritize_current_thread() {
                debug!(error = %e, "sender thread keeps its scheduling priority");
            }
            info!(peer = %target.peer, addr = %target.addr, interval = ?opts.interval,
                "STAMP session-sender started");
            let template = RttSummary {
                peer: target.peer.clone(),
                peer_address: target.addr.to_string(),
                interface: target.interface.clone(),
                timestamp_clock: imp::CLOCK as i32,
                timestamp_resolution_ns: imp::clock_resolution_ns(),
                ..Default::default()
            };
            let mut windows = RttWindows::new(
                WINDOW.as_nanos() as u64,
                template,
                imp::KERNEL_RX_TIMESTAMPS,
            );
            let mut relay = Relay::new(opts.observer);
            session.run(first, None, &stop, &mut |o| {
                if let (Outcome::Reply { late: true, .. }, Some(n)) = (o, &opts.late_replies) {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                let closed = record(&mut windows, &mut relay, &sink, opts.load.as_ref(), o);
                // What the systemd watchdog checks (see boltwatch_common::notify).
                windows_closed
                    .probe_windows
                    .fetch_add(closed, Ordering::Relaxed);
            });
            let open = windows.open_windows();
            info!(peer = %target.peer, open_windows = open, "STAMP session-sender stopped");
        })
}

/// Feeds one outcome to the open windows and the relay, and emits every
/// window that is complete; returns how many that was.
fn record(
    windows: &mut RttWindows,
    relay: &mut Relay,
    sink: &Sink,
    load: Option<&LoadTag>,
    o: Outcome,
) -> u64 {
    let mut closed = 0;
    let event = match o {
        Outcome::Sent { sent_unix_ns } => {
            windows.sent(sent_unix_ns);
            None
        }
        Outcome::Reply {
            seq,
            sent_unix_ns,
            received_unix_ns,
            rtt_ns,
            kernel_rx,
            late,
            ..
        } => {
            windows.received(sent_unix_ns, rtt_ns, kernel_rx);
            Some(ProbeEvent::Reply {
                seq,
                sent_unix_ns,
                received_unix_ns,
                rtt_ns: rtt_ns.unwrap_or(0),
                late,
            })
        }
        Outcome::Duplicate { sent_unix_ns, .. } => {
            if !windows.duplicate(sent_unix_ns) {
                debug!("duplicate STAMP reply after its window was emitted");
            }
            None
        }
        // Late is not lost: the windows wait for the timeout; the outage
        // tracker hears of it now.
        Outcome::Overdue { seq, sent_unix_ns } => Some(ProbeEvent::Late { seq, sent_unix_ns }),
        Outcome::Lost { seq, sent_unix_ns } => {
            windows.lost(sent_unix_ns);
            Some(ProbeEvent::Lost { seq, sent_unix_ns })
        }
        Outcome::Tick => {
            relay.tick(Instant::now());
            let tagged = |start, end| load.is_some_and(|l| l.overlaps(start, end));
            // Windows are on the timeline, as t1 is; so is the end they are
            // checked against. Their records get wall-clock times, both
            // through one correction, so a window stays one second long.
            let complete = windows.drain_complete(imp::now_ns(), tagged);
            if !complete.is_empty() {
                let wall = crate::clock::read();
                for (end, mut summary) in complete {
                    summary.window_start_unix_ns = wall.to_unix(summary.window_start_unix_ns);
                    sink.emit_at(wall.to_unix(end), Payload::Rtt(summary));
                    closed += 1;
                }
            }
            None
        }
    };
    if let Some(ev) = event {
        relay.push(ev, Instant::now());
    }
    closed
}

/// The longest a reply is held before the tracker hears of it.
pub const RELAY_HOLD: Duration = Duration::from_millis(100);

/// Paces one sender's probe events to its observer (the outage tracker):
/// a reply is news only for ending an outage, whose end is the reply's
/// own time however late it is told, so replies are held and handed over
/// together at most every [`RELAY_HOLD`]; a late or lost probe is what
/// detection waits on, so it goes at once, after the replies it follows.
/// At the fast profile (100 Hz) the tracker's thread then wakes about ten
/// times a second instead of once per probe.
#[derive(Debug)]
struct Relay {
    observer: Option<Observer<ProbeEvent>>,
    held: Vec<ProbeEvent>,
    oldest: Option<Instant>,
}

impl Relay {
    /// Relays to `observer`, if any.
    fn new(observer: Option<Observer<ProbeEvent>>) -> Relay {
        Relay {
            observer,
            held: Vec::new(),
            oldest: None,
        }
    }

    /// Takes `event`, seen at `now`: a reply is held, anything else goes
    /// at once with what is held before it.
    fn push(&mut self, event: ProbeEvent, now: Instant) {
        if self.observer.is_none() {
            return;
        }
        self.held.push(event);
        self.oldest.get_or_insert(now);
        if !matches!(event, ProbeEvent::Reply { .. }) {
            self.flush();
        } else {
            self.tick(now);
        }
    }

    /// Hands over what is held once the oldest has waited [`RELAY_HOLD`].
    fn tick(&mut self, now: Instant) {
        if self
            .oldest
            .is_some_and(|t| now.saturating_duration_since(t) >= RELAY_HOLD)
        {
            self.flush();
        }
    }

    /// Hands over everything held, in order.
    fn flush(&mut self) {
        self.oldest = None;
        let Some(obs) = self.observer.as_ref() else {
            self.held.clear();
            return;
        };
        let gone = self.held.drain(..).any(|event| !obs.observe(event));
        if gone {
            // The listener went away; stop feeding it.
            self.observer = None;
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn reply(seq: u32) -> ProbeEvent {
        ProbeEvent::Reply {
            seq,
            sent_unix_ns: u64::from(seq),
            received_unix_ns: u64::from(seq) + 1,
            rtt_ns: 1,
            late: false,
        }
    }

    #[test]
    fn replies_wait_a_late_probe_goes_at_once_after_them_in_order() {
        let (tx, rx) = mpsc::channel();
        let mut r = Relay::new(Some(tx.into()));
        let t0 = Instant::now();
        r.push(reply(1), t0);
        r.push(reply(2), t0 + Duration::from_millis(10));
        assert!(rx.try_recv().is_err(), "replies are held");
        let late = ProbeEvent::Late {
            seq: 3,
            sent_unix_ns: 3,
        };
        r.push(late, t0 + Duration::from_millis(20));
        let got: Vec<ProbeEvent> = rx.try_iter().collect();
        assert_eq!(got, vec![reply(1), reply(2), late]);
    }

    #[test]
    fn a_reply_goes_once_the_oldest_held_has_waited_the_hold() {
        let (tx, rx) = mpsc::channel();
        let mut r = Relay::new(Some(tx.into()));
        let t0 = Instant::now();
        r.push(reply(1), t0);
        r.tick(t0 + RELAY_HOLD - Duration::from_millis(1));
        assert!(rx.try_recv().is_err());
        r.tick(t0 + RELAY_HOLD);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![reply(1)]);
        // A reply arriving past the hold of nothing held waits its own.
        r.push(reply(2), t0 + 3 * RELAY_HOLD);
        assert!(rx.try_recv().is_err());
        drop(r);
        assert_eq!(
            rx.try_iter().collect::<Vec<_>>(),
            vec![reply(2)],
            "flushed on drop"
        );
    }

    #[test]
    fn a_gone_listener_stops_the_relay() {
        let (tx, rx) = mpsc::channel();
        let mut r = Relay::new(Some(tx.into()));
        drop(rx);
        r.push(
            ProbeEvent::Lost {
                seq: 1,
                sent_unix_ns: 1,
            },
            Instant::now(),
        );
        assert!(r.observer.is_none());
    }
}
