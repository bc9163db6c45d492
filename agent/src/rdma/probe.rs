//! The probe's state machine for one link, pure: the caller owns the clock
//! (`now`, time since agent start) and the [`Port`], and gets [`Outcome`]s.
//!
//! One UC queue pair per link, set up once per agent start: a failed or
//! timed-out set-up is not retried, because Apple's ports wedge after too
//! many set-ups. Every state transition runs under a watchdog; one that
//! does not finish in time marks the port wedged and the probe never calls
//! the port again.

use std::time::Duration;

use boltwatch_proto::rdma::class_label;
use boltwatch_proto::v1::RdmaErrorClass;

use super::burst::{BurstResult, Receiving, Sending};
use super::frame::{self, Kind, PAGE, SMALL};
use super::port::{Port, QpState, VerbsError};

/// Receive frames kept posted: one pong for our ping plus one ping of the
/// peer's, so a sender never sends into a receive queue with no frame.
pub const RECV_DEPTH: usize = 2;

/// The error classes of `boltwatch_rdma_errors_total{class}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorClass {
    /// Port down, or no verbs library.
    PortDown,
    /// PD allocation (or QP creation) failed.
    PdAlloc,
    /// RTR failed with errno 22: Thunderbolt Bridge is on.
    RtrBridgeOn,
    /// RTR failed with errno 60: the peer's GID did not answer.
    RtrGidUnreachable,
    /// RTR failed with errno 16: stale resources.
    RtrStale,
    /// A work completion's status was not success.
    CompletionStatus,
    /// A received frame failed its CRC.
    CrcMismatch,
    /// The peer's pings skipped a number.
    SequenceGap,
    /// A QP transition outlived the watchdog: the port is wedged.
    WatchdogTimeout,
}

impl ErrorClass {
    /// The class on the wire (`RdmaErrorCount.class`); every class has
    /// its own, so the match has no `_`.
    pub fn wire(self) -> RdmaErrorClass {
        match self {
            Self::PortDown => RdmaErrorClass::PortDown,
            Self::PdAlloc => RdmaErrorClass::PdAlloc,
            Self::RtrBridgeOn => RdmaErrorClass::RtrBridgeOn,
            Self::RtrGidUnreachable => RdmaErrorClass::RtrGidUnreachable,
            Self::RtrStale => RdmaErrorClass::RtrStale,
            Self::CompletionStatus => RdmaErrorClass::CompletionStatus,
            Self::CrcMismatch => RdmaErrorClass::CrcMismatch,
            Self::SequenceGap => RdmaErrorClass::SequenceGap,
            Self::WatchdogTimeout => RdmaErrorClass::WatchdogTimeout,
        }
    }

    /// The `class` label value (owned by `boltwatch_proto::rdma`, which
    /// the exporters label with).
    pub fn label(self) -> &'static str {
        class_label(self.wire()).expect("every probe class is a known wire class")
    }

    /// Classifies a set-up error. errno 60 is macOS's ETIMEDOUT (110 on
    /// Linux): the GID did not answer.
    pub fn of(e: &VerbsError) -> Self {
        match e {
            VerbsError::PortDown | VerbsError::Library(_) => Self::PortDown,
            VerbsError::PdAlloc | VerbsError::QpBudget => Self::PdAlloc,
            VerbsError::Modify(22) => Self::RtrBridgeOn,
            VerbsError::Modify(60 | 110) => Self::RtrGidUnreachable,
            VerbsError::Modify(16) => Self::RtrStale,
            VerbsError::Modify(_) | VerbsError::Post(_) => Self::CompletionStatus,
        }
    }
}

/// Why a due ping was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A configured window says a job owns the link.
    JobWindow,
    /// The device's QP budget is nearly used by applications.
    QpBudget,
}

/// What one tick produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A pong came back: round trip of a `size`-byte frame.
    Rtt {
        /// Frame size in bytes.
        size: usize,
        /// Ping sent to pong received.
        rtt: Duration,
    },
    /// No pong within `pong_timeout` (the send completion notwithstanding).
    Lost {
        /// The lost ping's sequence number.
        seq: u64,
    },
    /// A send-bandwidth burst ended (the peer's tally, or none in time).
    Burst(BurstResult),
    /// An error, counted in its class.
    Error(ErrorClass),
    /// The port was just marked wedged.
    Wedged,
    /// A due ping was not sent.
    Skipped(Skip),
    /// The side channel went silent: RDMA outage, cause peer.
    PeerDead,
    /// The side channel answers again.
    PeerBack,
}

/// The probe's knobs (from `[rdma]`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Time between pings.
    pub interval: Duration,
    /// Longest a QP state transition may take.
    pub watchdog: Duration,
    /// A ping with no pong after this is lost.
    pub pong_timeout: Duration,
    /// Side-channel silence after which the peer is dead.
    pub peer_dead_after: Duration,
    /// Queue pairs per device (Apple: 10).
    pub qp_cap: u32,
    /// Skip while at most this many QPs are left.
    pub qp_headroom: u32,
    /// Longest the caller polls without pause after a frame that expects
    /// a prompt answer ([`Probe::spin_until`]); longer than the caller's
    /// tick, so the peer's echo of a warm-up ping lands inside it.
    pub spin: Duration,
    /// Time between send-bandwidth bursts; `None`: no burst.
    pub burst_interval: Option<Duration>,
    /// 4 KiB data frames per burst (at most `burst::MAX_BYTES` / 4 KiB).
    pub burst_frames: u64,
}

/// What the caller knows beside the port: the TCP side channel and the
/// job windows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// When the peer's agent last answered on the TCP side channel.
    pub peer_heard: Option<Duration>,
    /// A configured window says a job owns the link now.
    pub job_owns_link: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Where one link's set-up is.
pub enum Phase {
    /// Not set up yet (port not active so far).
    Down,
    /// Waiting for the QP to reach `to`.
    Transition {
        /// The state asked for.
        to: QpState,
        /// When it was asked for.
        since: Duration,
    },
    /// Set up: probing.
    Ready,
    /// A transition outlived the watchdog: untouched until restart.
    Wedged,
    /// Set-up failed: not retried until restart.
    Failed(ErrorClass),
}

/// The ping in flight: the warm-up ping, or the measured one behind it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outstanding {
    pub(super) seq: u64,
    pub(super) size: usize,
    pub(super) sent: Duration,
    pub(super) warm: bool,
}

/// One link's probe. Its frame exchange (pings, pongs, bursts) is in
/// `exchange.rs`.
#[derive(Debug)]
pub struct Probe {
    pub(super) s: Settings,
    phase: Phase,
    pub(super) next_seq: u64,
    pub(super) last_ping: u64,
    pub(super) outstanding: Option<Outstanding>,
    next_send: Duration,
    peer_dead: bool,
    pub(super) sent_frames: u64,
    pub(super) recv_frames: u64,
    /// Probes started (one per due interval not skipped).
    pub(super) probes: u64,
    /// Receive frames posted, by this side's count.
    pub(super) posted: usize,
    /// Poll without pause until then (see [`Probe::spin_until`]).
    pub(super) spin_until: Duration,
    /// The peer's measured ping is right behind the warm-up just echoed.
    pub(super) awaiting_ping: bool,
    pub(super) burst: Option<Sending>,
    next_burst: Duration,
    bursts: u64,
    pub(super) rx: Receiving,
}

impl Probe {
    /// A probe not yet set up.
    pub fn new(s: Settings) -> Self {
        Self {
            next_burst: s.burst_interval.unwrap_or_default(),
            s,
            phase: Phase::Down,
            next_seq: 1,
            last_ping: 0,
            outstanding: None,
            next_send: Duration::ZERO,
            peer_dead: false,
            sent_frames: 0,
            recv_frames: 0,
            probes: 0,
            posted: 0,
            spin_until: Duration::ZERO,
            awaiting_ping: false,
            burst: None,
            bursts: 0,
            rx: Receiving::default(),
        }
    }

    /// Where the set-up is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Probes started so far (one per due interval that was not skipped,
    /// a refused post included): the `sent` of the windows.
    pub fn pings(&self) -> u64 {
        self.probes
    }

    /// Frames this side sent and received (pings, pongs, burst frames).
    pub fn frames(&self) -> (u64, u64) {
        (self.sent_frames, self.recv_frames)
    }

    /// Until when the caller should call [`Probe::tick`] again at once,
    /// polling the completion queue without sleeping: set for at most
    /// `Settings::spin` after a frame whose answer is due promptly (a
    /// warm-up or measured ping, a warm-up echoed, a burst round), ended
    /// as soon as nothing is awaited. In the past: tick at the caller's
    /// pace.
    pub fn spin_until(&self) -> Duration {
        self.spin_until
    }

    /// Advances the probe; never blocks and never loops (one call per
    /// tick, or per poll while spinning).
    pub fn tick(&mut self, port: &mut dyn Port, now: Duration, cx: Context) -> Vec<Outcome> {
        let out = match self.phase {
            Phase::Wedged | Phase::Failed(_) => Vec::new(),
            Phase::Down => self.set_up(port, now),
            Phase::Transition { to, since } => self.transition(port, to, since, now),
            Phase::Ready => self.ready(port, now, cx),
        };
        if !self.awaits() {
            self.spin_until = Duration::ZERO;
        }
        out
    }

    /// Whether an answer is due promptly: our ping's pong, the peer's
    /// measured ping, a burst's next frames either way.
    fn awaits(&self) -> bool {
        self.outstanding.is_some()
            || self.awaiting_ping
            || self.burst.is_some()
            || self.rx.credit() > 0
    }

    fn set_up(&mut self, port: &mut dyn Port, now: Duration) -> Vec<Outcome> {
        if !port.active() {
            return vec![Outcome::Error(ErrorClass::PortDown)];
        }
        let started = port
            .create_uc_qp()
            .and_then(|()| port.start_transition(QpState::Init));
        self.after_start(started, QpState::Init, now)
    }

    fn after_start(
        &mut self,
        r: Result<(), VerbsError>,
        to: QpState,
        now: Duration,
    ) -> Vec<Outcome> {
        match r {
            Ok(()) => {
                self.phase = Phase::Transition { to, since: now };
                Vec::new()
            }
            Err(e) => {
                let class = ErrorClass::of(&e);
                self.phase = Phase::Failed(class);
                vec![Outcome::Error(class)]
            }
        }
    }

    fn transition(
        &mut self,
        port: &mut dyn Port,
        to: QpState,
        since: Duration,
        now: Duration,
    ) -> Vec<Outcome> {
        if port.qp_state() < to {
            if now.saturating_sub(since) > self.s.watchdog {
                self.phase = Phase::Wedged;
                return vec![Outcome::Error(ErrorClass::WatchdogTimeout), Outcome::Wedged];
            }
            return Vec::new();
        }
        let next = match to {
            QpState::Reset | QpState::Init => QpState::Rtr,
            QpState::Rtr => QpState::Rts,
            QpState::Rts => return self.arm(now),
        };
        // Receive frames must be posted before RTR so the peer's first
        // frame has somewhere to land.
        let r = match next {
            QpState::Rtr => port
                .post_recv(RECV_DEPTH)
                .map(|()| self.posted = RECV_DEPTH),
            _ => Ok(()),
        };
        let r = r.and_then(|()| port.start_transition(next));
        self.after_start(r, next, now)
    }

    fn arm(&mut self, now: Duration) -> Vec<Outcome> {
        self.phase = Phase::Ready;
        self.next_send = now;
        self.next_burst = now + self.s.burst_interval.unwrap_or_default();
        Vec::new()
    }

    fn ready(&mut self, port: &mut dyn Port, now: Duration, cx: Context) -> Vec<Outcome> {
        let mut out = Vec::new();
        for c in port.poll() {
            self.completion(port, c, now, &mut out);
        }
        self.expire(now, &mut out);
        if !self.peer_alive(now, cx, &mut out) {
            return out;
        }
        let ping_due = now >= self.next_send;
        let burst_due = self.s.burst_interval.is_some() && now >= self.next_burst;
        // One exchange at a time: a due ping waits for the burst, and the
        // other way round.
        if !(ping_due || burst_due) || self.outstanding.is_some() || self.burst.is_some() {
            return out;
        }
        if let Some(skip) = self.skip(port, cx) {
            if ping_due {
                self.next_send = now + self.s.interval;
                out.push(Outcome::Skipped(skip));
            }
            if burst_due {
                self.next_burst = now + self.s.burst_interval.unwrap_or_default();
            }
            return out;
        }
        if ping_due {
            self.ping(port, now, &mut out);
        } else {
            self.start_burst(port, now, &mut out);
        }
        out
    }

    /// A ping or a burst whose answer did not come in `pong_timeout`.
    fn expire(&mut self, now: Duration, out: &mut Vec<Outcome>) {
        if let Some(o) = self.outstanding {
            if now.saturating_sub(o.sent) > self.s.pong_timeout {
                out.push(Outcome::Lost { seq: o.seq });
                self.outstanding = None;
            }
        }
        if let Some(b) = &self.burst {
            if now.saturating_sub(b.asked) > self.s.pong_timeout {
                out.push(Outcome::Burst(b.abandon()));
                self.end_burst(now);
            }
        }
    }

    pub(super) fn end_burst(&mut self, now: Duration) {
        self.burst = None;
        self.next_burst = now + self.s.burst_interval.unwrap_or_default();
    }

    fn peer_alive(&mut self, now: Duration, cx: Context, out: &mut Vec<Outcome>) -> bool {
        let alive = cx
            .peer_heard
            .is_some_and(|t| now.saturating_sub(t) <= self.s.peer_dead_after);
        if alive == self.peer_dead {
            self.peer_dead = !alive;
            out.push(if alive {
                Outcome::PeerBack
            } else {
                Outcome::PeerDead
            });
            if !alive {
                // A dead peer's pong will not come: not a loss of the fabric.
                self.outstanding = None;
                self.awaiting_ping = false;
                if self.burst.is_some() {
                    self.end_burst(now);
                }
            }
        }
        alive
    }

    fn skip(&self, port: &dyn Port, cx: Context) -> Option<Skip> {
        if cx.job_owns_link {
            return Some(Skip::JobWindow);
        }
        let left = self.s.qp_cap.saturating_sub(port.qps_in_use());
        (left <= self.s.qp_headroom).then_some(Skip::QpBudget)
    }

    /// A due probe: the warm-up ping first. The peer answers it at its own
    /// tick and then polls closely, so the measured ping sent on its pong
    /// is echoed at once: its round trip is the fabric's, not two ticks.
    fn ping(&mut self, port: &mut dyn Port, now: Duration, out: &mut Vec<Outcome>) {
        self.probes += 1;
        self.next_send = now + self.s.interval;
        self.send_ping(port, Kind::Warm, SMALL, now, out);
    }

    /// The measured ping, on the warm-up's pong: 64 B and 4 KiB alternate.
    pub(super) fn measured(&mut self, port: &mut dyn Port, now: Duration, out: &mut Vec<Outcome>) {
        let size = if self.probes % 2 == 1 { SMALL } else { PAGE };
        self.send_ping(port, Kind::Ping, size, now, out);
    }

    fn send_ping(
        &mut self,
        port: &mut dyn Port,
        kind: Kind,
        size: usize,
        now: Duration,
        out: &mut Vec<Outcome>,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.send(port, kind, seq, size, out) {
            self.outstanding = Some(Outstanding {
                seq,
                size,
                sent: now,
                warm: kind == Kind::Warm,
            });
            self.spin(now);
        }
    }

    fn start_burst(&mut self, port: &mut dyn Port, now: Duration, out: &mut Vec<Outcome>) {
        self.bursts += 1;
        let (b, (kind, n)) = Sending::new(self.bursts, self.s.burst_frames, now);
        if self.send(port, kind, n, SMALL, out) {
            self.burst = Some(b);
            self.spin(now);
        } else {
            self.end_burst(now);
        }
    }

    /// Poll closely for `Settings::spin` from `now`.
    pub(super) fn spin(&mut self, now: Duration) {
        self.spin_until = now + self.s.spin;
    }

    /// Posts one frame; false (and the error counted) when refused.
    pub(super) fn send(
        &mut self,
        port: &mut dyn Port,
        kind: Kind,
        number: u64,
        size: usize,
        out: &mut Vec<Outcome>,
    ) -> bool {
        match port.post_send(&frame::encode(kind, number, size)) {
            Ok(()) => {
                self.sent_frames += 1;
                true
            }
            Err(e) => {
                out.push(Outcome::Error(ErrorClass::of(&e)));
                false
            }
        }
    }
}
