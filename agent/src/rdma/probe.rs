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

use super::frame::{self, Kind, PAGE, SMALL};
use super::port::{Completion, Port, QpState, VerbsError};

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

#[derive(Debug, Clone, Copy)]
struct Outstanding {
    seq: u64,
    size: usize,
    sent: Duration,
}

/// One link's probe.
#[derive(Debug)]
pub struct Probe {
    s: Settings,
    phase: Phase,
    next_seq: u64,
    last_ping: u64,
    outstanding: Option<Outstanding>,
    next_send: Duration,
    peer_dead: bool,
    sent_frames: u64,
    recv_frames: u64,
}

impl Probe {
    /// A probe not yet set up.
    pub fn new(s: Settings) -> Self {
        Self {
            s,
            phase: Phase::Down,
            next_seq: 1,
            last_ping: 0,
            outstanding: None,
            next_send: Duration::ZERO,
            peer_dead: false,
            sent_frames: 0,
            recv_frames: 0,
        }
    }

    /// Where the set-up is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Pings asked for so far (one per due interval that was not skipped,
    /// a refused post included): the `sent` of the windows.
    pub fn pings(&self) -> u64 {
        self.next_seq - 1
    }

    /// Frames this side sent and received (pings and pongs).
    pub fn frames(&self) -> (u64, u64) {
        (self.sent_frames, self.recv_frames)
    }

    /// Advances the probe; never blocks and never spins (one call per tick).
    pub fn tick(&mut self, port: &mut dyn Port, now: Duration, cx: Context) -> Vec<Outcome> {
        match self.phase {
            Phase::Wedged | Phase::Failed(_) => Vec::new(),
            Phase::Down => self.set_up(port, now),
            Phase::Transition { to, since } => self.transition(port, to, since, now),
            Phase::Ready => self.ready(port, now, cx),
        }
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
            QpState::Rts => return self.arm(port, now),
        };
        // Receive frames must be posted before RTR so the peer's first
        // frame has somewhere to land.
        let r = match next {
            QpState::Rtr => port.post_recv(RECV_DEPTH),
            _ => Ok(()),
        };
        let r = r.and_then(|()| port.start_transition(next));
        self.after_start(r, next, now)
    }

    fn arm(&mut self, _port: &mut dyn Port, now: Duration) -> Vec<Outcome> {
        self.phase = Phase::Ready;
        self.next_send = now;
        Vec::new()
    }

    fn ready(&mut self, port: &mut dyn Port, now: Duration, cx: Context) -> Vec<Outcome> {
        let mut out = Vec::new();
        for c in port.poll() {
            self.completion(port, c, now, &mut out);
        }
        if let Some(o) = self.outstanding {
            if now.saturating_sub(o.sent) > self.s.pong_timeout {
                out.push(Outcome::Lost { seq: o.seq });
                self.outstanding = None;
            }
        }
        if !self.peer_alive(now, cx, &mut out) || now < self.next_send {
            return out;
        }
        if let Some(skip) = self.skip(port, cx) {
            self.next_send = now + self.s.interval;
            out.push(Outcome::Skipped(skip));
            return out;
        }
        if self.outstanding.is_none() {
            self.ping(port, now, &mut out);
        }
        out
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

    fn ping(&mut self, port: &mut dyn Port, now: Duration, out: &mut Vec<Outcome>) {
        let seq = self.next_seq;
        let size = if seq % 2 == 1 { SMALL } else { PAGE };
        self.next_seq += 1;
        self.next_send = now + self.s.interval;
        match port.post_send(&frame::encode(Kind::Ping, seq, size)) {
            Ok(()) => {
                self.sent_frames += 1;
                self.outstanding = Some(Outstanding {
                    seq,
                    size,
                    sent: now,
                });
            }
            Err(e) => out.push(Outcome::Error(ErrorClass::of(&e))),
        }
    }

    fn completion(
        &mut self,
        port: &mut dyn Port,
        c: Completion,
        now: Duration,
        out: &mut Vec<Outcome>,
    ) {
        match c {
            // A successful send completion proves nothing: only the pong does.
            Completion::Send { ok: true } => {}
            Completion::Send { ok: false } | Completion::Recv { ok: false, .. } => {
                out.push(Outcome::Error(ErrorClass::CompletionStatus));
            }
            Completion::Recv { ok: true, data } => {
                self.recv_frames += 1;
                // Keep the posted count equal to what the peer may send.
                if let Err(e) = port.post_recv(1) {
                    out.push(Outcome::Error(ErrorClass::of(&e)));
                }
                self.received(port, &data, now, out);
            }
        }
    }

    fn received(
        &mut self,
        port: &mut dyn Port,
        data: &[u8],
        now: Duration,
        out: &mut Vec<Outcome>,
    ) {
        let f = match frame::decode(data) {
            Ok(f) => f,
            Err(_) => return out.push(Outcome::Error(ErrorClass::CrcMismatch)),
        };
        match f.kind {
            Kind::Ping => {
                self.ping_seen(f.seq, out);
                self.pong_back(port, f, out);
            }
            Kind::Pong => self.pong(f.seq, now, out),
        }
    }

    fn pong_back(&mut self, port: &mut dyn Port, f: frame::Frame, out: &mut Vec<Outcome>) {
        match port.post_send(&frame::encode(Kind::Pong, f.seq, f.size)) {
            Ok(()) => self.sent_frames += 1,
            Err(e) => out.push(Outcome::Error(ErrorClass::of(&e))),
        }
    }

    fn pong(&mut self, seq: u64, now: Duration, out: &mut Vec<Outcome>) {
        // A late pong (its ping already counted lost) is not a measurement.
        let Some(o) = self.outstanding.filter(|o| o.seq == seq) else {
            return;
        };
        self.outstanding = None;
        out.push(Outcome::Rtt {
            size: o.size,
            rtt: now.saturating_sub(o.sent),
        });
    }

    /// The peer's pings come one per interval with consecutive numbers: a
    /// jump means frames vanished on the way in with no error anywhere.
    fn ping_seen(&mut self, seq: u64, out: &mut Vec<Outcome>) {
        if seq > self.last_ping + 1 && self.last_ping != 0 {
            out.push(Outcome::Error(ErrorClass::SequenceGap));
        }
        self.last_ping = self.last_ping.max(seq);
    }
}
