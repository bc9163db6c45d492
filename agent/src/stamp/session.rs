//! One STAMP session: a socket, the probe table and the send schedule; the
//! loop shared by the session-sender thread ([`super::sender`]) and `ping`.
//!
//! Probes go out on absolute deadlines (`start + k * interval`), so the
//! schedule does not drift; slots missed while the thread was not scheduled
//! are skipped, not sent in a burst. The thread never sleeps on a socket
//! timeout shorter than 8 ms, because Linux rounds `SO_RCVTIMEO` up to a
//! scheduler tick (4 ms at HZ=250); it sleeps with `nanosleep` for the last
//! stretch instead. That delays reading a reply a little but not its RTT: t4
//! is the kernel's RX timestamp.
//!
//! t1: on Linux the kernel's software TX timestamp (`SO_TIMESTAMPING`
//! `TX_SOFTWARE | OPT_ID`, read back from the error queue and matched to the
//! probe by the per-socket counter), which leaves the `sendto` syscall and
//! the stack's send path out of the RTT. Where no TX stamp arrives (macOS,
//! or a driver that never calls `skb_tx_timestamp`) t1 is the userspace
//! read taken right before `sendto`, the choice `ping(8)` makes. Every
//! stamp is on the OS's probe clock (`imp::now_ns`, `imp::CLOCK`).
//! The t1 carried in the packet is always the userspace read (the kernel
//! stamp only exists after the send).

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, trace};

use super::imp;
use super::late::{LateBound, LateRule};
use super::packet::{ErrorEstimate, NtpTimestamp, ReflectorPacket, SenderPacket, PACKET_LEN};
use super::probe::{Expiry, ProbeTable, Verdict};
use super::target::Target;
use super::MAX_DATAGRAM;
use crate::health::Health;

/// The longest the loop waits without looking at the stop token and the
/// open windows.
const MAX_WAIT: Duration = Duration::from_millis(100);

/// Below this, wait by sleeping rather than by a socket timeout.
const FINE_WAIT: Duration = Duration::from_millis(8);

/// Slack subtracted from a socket timeout so a tick-rounded wake-up is not
/// late.
const TICK_SLACK: Duration = Duration::from_millis(4);

/// What the session loop reports to its owner (the sender thread or
/// `ping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Probe `seq` went out at `sent_unix_ns`.
    Sent { sent_unix_ns: u64 },
    /// First answer; `rtt_ns` `None` when discarded.
    Reply {
        seq: u32,
        sent_unix_ns: u64,
        /// t4: when the reply arrived (kernel RX timestamp where there is one).
        received_unix_ns: u64,
        rtt_ns: Option<u64>,
        kernel_rx: bool,
        kernel_tx: bool,
        /// Answered after being called late ([`Outcome::Overdue`]).
        late: bool,
    },
    /// Another answer to an answered probe.
    Duplicate { seq: u32, sent_unix_ns: u64 },
    /// Unanswered at the late bound ([`super::late`]): late, not yet lost.
    Overdue { seq: u32, sent_unix_ns: u64 },
    /// Unanswered at the timeout.
    Lost { seq: u32, sent_unix_ns: u64 },
    /// The loop woke up; nothing in particular happened.
    Tick,
}

/// One session: a socket, the probe table and the schedule.
pub(crate) struct Session {
    socket: UdpSocket,
    peer: SocketAddr,
    interval: Duration,
    table: ProbeTable,
    /// When an unanswered probe is late, from this link's round trips.
    late: LateBound,
    health: Arc<Health>,
    seq: u32,
    rx: Vec<u8>,
    tx: [u8; PACKET_LEN],
    expired: Vec<Expiry>,
    read_timeout: Option<Duration>,
    /// Kernel TX timestamps are on.
    tx_stamps: bool,
    /// `(TX counter, seq)` of sends whose TX stamp has not been read yet.
    tx_pending: VecDeque<(u32, u32)>,
    next_tx_id: u32,
    tx_read: Vec<(u32, u64, u64)>,
}

/// Sends awaiting a TX stamp, at most: this many in a row without a stamp
/// means the driver never stamps.
const MAX_TX_PENDING: usize = 1024;

impl Session {
    /// Binds an ephemeral local port of the peer's family, optionally to a
    /// device, with kernel RX timestamps on, and kernel TX timestamps if
    /// `kernel_tx` and the OS has them. A probe goes out every `interval`,
    /// is late when unanswered past the bound `late` sets, and is lost
    /// when unanswered after `timeout`.
    pub(crate) fn open(
        target: &Target,
        interval: Duration,
        timeout: Duration,
        late: LateRule,
        health: Arc<Health>,
        kernel_tx: bool,
    ) -> io::Result<Session> {
        if interval.is_zero() || timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "probe interval and timeout must be positive",
            ));
        }
        let socket = target.probe_socket("STAMP probes")?;
        imp::enable_rx_metadata(&socket)?;
        let tx_stamps = kernel_tx && imp::enable_tx_timestamps(&socket);
        let late = LateBound::new(late, timeout);
        Ok(Session {
            socket,
            peer: target.addr,
            interval,
            table: ProbeTable::new(late.bound(), timeout),
            late,
            health,
            seq: 0,
            rx: vec![0u8; MAX_DATAGRAM],
            tx: [0u8; PACKET_LEN],
            expired: Vec::new(),
            read_timeout: None,
            tx_stamps,
            tx_pending: VecDeque::new(),
            next_tx_id: 0,
            tx_read: Vec::new(),
        })
    }

    /// Probes from `first_send` on until `stop` is cancelled or, with
    /// `limit`, until `limit` probes were sent and each was answered or
    /// lost.
    pub(crate) fn run(
        &mut self,
        first_send: Instant,
        limit: Option<u64>,
        stop: &CancellationToken,
        on: &mut dyn FnMut(Outcome),
    ) {
        let mut next_send = Some(first_send);
        let mut sent = 0u64;
        if limit == Some(0) {
            return;
        }
        while !stop.is_cancelled() {
            let now = Instant::now();
            if let Some(due) = next_send.filter(|&d| now >= d) {
                self.send_probe(on);
                sent += 1;
                let mut next = due + self.interval;
                while next <= now {
                    next += self.interval;
                }
                next_send = if limit.is_some_and(|l| sent >= l) {
                    None
                } else {
                    Some(next)
                };
            }
            // Lateness is judged as of before the replies are read: every
            // reply that came by then is read first, so however long this
            // thread was off the CPU, its own stall makes no probe late.
            let judged = Instant::now();
            self.drain(on);
            self.table.expire(judged, &mut self.expired);
            for e in self.expired.drain(..) {
                on(match e {
                    Expiry::Overdue { seq, sent_unix_ns } => {
                        // The detection bench reads these times (bench/detect.sh).
                        let age_ns = imp::now_ns().saturating_sub(sent_unix_ns);
                        debug!(peer = %self.peer, seq, age_ns, "STAMP probe overdue");
                        Outcome::Overdue { seq, sent_unix_ns }
                    }
                    Expiry::Lost { seq, sent_unix_ns } => Outcome::Lost { seq, sent_unix_ns },
                });
            }
            on(Outcome::Tick);
            if next_send.is_none() && self.table.in_flight() == 0 {
                return;
            }
            let now = Instant::now();
            let wake = [next_send, self.table.next_deadline(), Some(now + MAX_WAIT)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now);
            self.wait(wake.saturating_duration_since(now), on);
        }
    }

    /// The peer's reflector held a probe: sets the silence while held.
    fn stalled(&mut self, delay: Duration, now: Instant) {
        if self.late.observe_stall(delay, now) {
            self.late_bound_moved();
        }
    }

    fn late_bound_moved(&mut self) {
        self.table.set_overdue_after(self.late.bound());
        self.table.set_silence_after(self.late.silence());
        debug!(peer = %self.peer, bound = ?self.late.bound(), silence = ?self.late.silence(),
            "STAMP late bound moved");
    }

    fn send_probe(&mut self, on: &mut dyn FnMut(Outcome)) {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        // Measures the wall-clock correction too, so a step before this
        // send is known before the probe's stamps are compared.
        let generation = crate::clock::read().generation;
        let t1 = imp::now_ns();
        let ts = NtpTimestamp::from_unix_ns(t1);
        SenderPacket {
            seq,
            timestamp: ts,
            error_estimate: ErrorEstimate::AGENT,
            ssid: 0,
        }
        .encode_into(&mut self.tx);
        match self.socket.send_to(&self.tx, self.peer) {
            Ok(_) if self.tx_stamps => {
                if self.tx_pending.len() >= MAX_TX_PENDING {
                    // The driver never stamps (no skb_tx_timestamp): stop
                    // asking and fall back to the userspace t1.
                    info!(peer = %self.peer, "no kernel TX timestamps arrive; t1 is a userspace read");
                    self.tx_stamps = false;
                    self.tx_pending.clear();
                }
                self.tx_pending.push_back((self.next_tx_id, seq));
                self.next_tx_id = self.next_tx_id.wrapping_add(1);
            }
            Ok(_) => {}
            // A probe that cannot leave (link down, no route) is a probe the
            // peer did not answer: it times out and counts as lost.
            Err(e) => debug!(peer = %self.peer, seq, error = %e, "STAMP probe send failed"),
        }
        // The deadlines count from after the send returned: a stall before
        // it makes the probe younger than it is, never older.
        self.table.sent(seq, ts, t1, Instant::now(), generation);
        self.collect_tx_stamps();
        on(Outcome::Sent { sent_unix_ns: t1 });
    }

    /// Handles every datagram already queued.
    fn drain(&mut self, on: &mut dyn FnMut(Outcome)) {
        // Bounded: at most a burst's worth per wake-up, the rest next time.
        for _ in 0..1024 {
            match imp::recv(&self.socket, &mut self.rx, true) {
                Ok(rx) => self.handle(rx, on),
                Err(e) if is_would_block(&e) => return,
                Err(e) => {
                    // ICMP errors surface here (e.g. ECONNREFUSED); the
                    // probe itself times out.
                    trace!(peer = %self.peer, error = %e, "STAMP receive error");
                    return;
                }
            }
        }
    }

    /// Waits up to `wait` for a datagram, handling it if one comes.
    fn wait(&mut self, wait: Duration, on: &mut dyn FnMut(Outcome)) {
        if wait < FINE_WAIT {
            std::thread::sleep(wait);
            return;
        }
        let t = wait - TICK_SLACK;
        if self.read_timeout != Some(t) {
            if self.socket.set_read_timeout(Some(t)).is_err() {
                std::thread::sleep(wait);
                return;
            }
            self.read_timeout = Some(t);
        }
        match imp::recv(&self.socket, &mut self.rx, false) {
            Ok(rx) => self.handle(rx, on),
            Err(e) if is_would_block(&e) => {}
            Err(e) => {
                trace!(peer = %self.peer, error = %e, "STAMP receive error");
                // Errors are not consumed waits; do not spin on them.
                std::thread::sleep(Duration::from_millis(1).min(wait));
            }
        }
    }

    /// Moves queued kernel TX timestamps into the probe table.
    fn collect_tx_stamps(&mut self) {
        if self.tx_pending.is_empty() {
            return;
        }
        imp::read_tx_timestamps(&self.socket, &mut self.tx_read);
        for (id, ns, generation) in self.tx_read.drain(..) {
            // Stamps come in send order; older pending sends never got one.
            while let Some(&(pid, seq)) = self.tx_pending.front() {
                if pid.wrapping_sub(id) as i32 > 0 {
                    break;
                }
                self.tx_pending.pop_front();
                if pid == id {
                    self.table.kernel_sent(seq, ns, generation);
                    break;
                }
            }
        }
    }

    fn handle(&mut self, rx: super::Received, on: &mut dyn FnMut(Outcome)) {
        self.collect_tx_stamps();
        let len = rx.len.min(self.rx.len());
        let pkt = match ReflectorPacket::decode(&self.rx[..len]) {
            Ok(p) => p,
            Err(e) => {
                Health::incr(&self.health.malformed_packets);
                debug!(from = ?rx.from, error = %e, "malformed STAMP reply");
                return;
            }
        };
        if !rx
            .from
            .is_some_and(|f| f.ip() == self.peer.ip() && f.port() == self.peer.port())
        {
            debug!(from = ?rx.from, peer = %self.peer, "STAMP reply from a foreign address");
            return;
        }
        let kernel_rx = rx.kernel_rx_unix_ns.is_some();
        let t4 = rx.kernel_rx_unix_ns.unwrap_or_else(imp::now_ns);
        match self.table.reply(&pkt, t4, rx.generation) {
            Verdict::Reply {
                seq,
                sent_unix_ns,
                rtt_ns,
                kernel_tx,
                late,
            } => {
                // The whole wait, turnaround included, is what lateness
                // is judged on; a discarded RTT (clock step) teaches nothing.
                if let Some(rtt) = rtt_ns {
                    let wait = t4.saturating_sub(sent_unix_ns);
                    if self.late.observe(wait) {
                        self.late_bound_moved();
                    }
                    // How long the peer's reflector held it: its stall.
                    let turnaround = Duration::from_nanos(wait.saturating_sub(rtt));
                    self.stalled(turnaround, Instant::now());
                }
                on(Outcome::Reply {
                    seq,
                    sent_unix_ns,
                    received_unix_ns: t4,
                    rtt_ns,
                    kernel_rx,
                    kernel_tx,
                    late,
                })
            }
            Verdict::Duplicate { seq, sent_unix_ns } => {
                on(Outcome::Duplicate { seq, sent_unix_ns })
            }
            Verdict::Late { seq } => debug!(peer = %self.peer, seq, "late STAMP reply"),
            Verdict::Foreign => {
                debug!(peer = %self.peer, seq = pkt.sender_seq, "STAMP reply to no probe of ours")
            }
        }
    }
}

fn is_would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
