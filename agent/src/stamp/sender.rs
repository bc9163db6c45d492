//! The STAMP Session-Sender: probes one peer every `interval` on a
//! dedicated thread, matches replies, and emits one `RttSummary` per
//! one-second window through the [`Sink`]; per-probe outcomes go to an
//! optional observer (the outage ledger).
//!
//! The loop ([`Session::run`]) is shared with `ping`. Probes go out on
//! absolute deadlines (`start + k * interval`), so the schedule does not
//! drift; slots missed while the thread was not scheduled are skipped, not
//! sent in a burst. The thread never sleeps on a socket timeout shorter than
//! 8 ms, because Linux rounds `SO_RCVTIMEO` up to a scheduler tick (4 ms at
//! HZ=250); it sleeps with `nanosleep` for the last stretch instead. That
//! delays reading a reply a little but not its RTT: t4 is the kernel's RX
//! timestamp.
//!
//! t1: on Linux the kernel's software TX timestamp (`SO_TIMESTAMPING`
//! `TX_SOFTWARE | OPT_ID`, read back from the error queue and matched to the
//! probe by the per-socket counter), which leaves the `sendto` syscall and
//! the stack's send path out of the RTT. Where no TX stamp arrives (macOS,
//! or a driver that never calls `skb_tx_timestamp`) t1 is the userspace
//! realtime read taken right before `sendto`, the choice `ping(8)` makes.
//! The t1 carried in the packet is always the userspace read (the kernel
//! stamp only exists after the send).

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::RttSummary;
use rand::Rng;
use tracing::{debug, info, trace, warn};

use super::imp;
use super::packet::{ErrorEstimate, NtpTimestamp, ReflectorPacket, SenderPacket, PACKET_LEN};
use super::probe::{Expiry, ProbeTable, Verdict};
use super::window::WindowLedger;
use super::MAX_DATAGRAM;
use crate::bandwidth::load::LoadTag;
use crate::health::Health;
use crate::sink::{now_unix_ns, Sink};

/// Length of one `RttSummary` window.
pub const WINDOW: Duration = Duration::from_secs(1);

/// The longest the loop waits without looking at the stop flag and the
/// window ledger.
const MAX_WAIT: Duration = Duration::from_millis(100);

/// Below this, wait by sleeping rather than by a socket timeout.
const FINE_WAIT: Duration = Duration::from_millis(8);

/// Slack subtracted from a socket timeout so a tick-rounded wake-up is not
/// late.
const TICK_SLACK: Duration = Duration::from_millis(4);

/// The peer one session-sender probes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The peer's node name (the `peer` label of its records).
    pub peer: String,
    /// The peer's reflector address.
    pub addr: SocketAddr,
    /// The local interface the probes are expected to leave through (the
    /// `interface` label of its records).
    pub interface: String,
    /// If set, pin the socket to this device (`SO_BINDTODEVICE` on Linux,
    /// `IP_BOUND_IF` on macOS). Best effort: a failure is logged and the
    /// routing table decides.
    pub bind_device: Option<String>,
}

/// Probe timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderOptions {
    /// Time between probes.
    pub interval: Duration,
    /// A probe unanswered after this long is lost.
    pub timeout: Duration,
}

impl Default for SenderOptions {
    fn default() -> Self {
        SenderOptions {
            interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
        }
    }
}

/// Per-probe outcomes for the outage ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeEvent {
    /// The first answer to a probe, within the timeout (possibly after an
    /// `Overdue` for the same probe). `rtt_ns` is 0 when the RTT was
    /// discarded as negative (clock step): the peer did answer.
    Reply {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
        /// `(t4 - t1) - (t3 - t2)`.
        rtt_ns: u64,
    },
    /// Still unanswered `min(interval, timeout)` after sending.
    Overdue {
        /// Sequence number.
        seq: u32,
        /// t1, unix ns.
        sent_unix_ns: u64,
    },
}

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
        rtt_ns: Option<u64>,
        kernel_rx: bool,
        kernel_tx: bool,
    },
    /// Another answer to an answered probe.
    Duplicate { seq: u32, sent_unix_ns: u64 },
    /// Unanswered after the overdue period.
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
    opts: SenderOptions,
    table: ProbeTable,
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
    tx_read: Vec<(u32, u64)>,
}

/// Sends awaiting a TX stamp, at most: this many in a row without a stamp
/// means the driver never stamps.
const MAX_TX_PENDING: usize = 1024;

impl Session {
    /// Binds an ephemeral local port of the peer's family, optionally to a
    /// device, with kernel RX timestamps on, and kernel TX timestamps if
    /// `kernel_tx` and the OS has them.
    pub(crate) fn open(
        target: &Target,
        opts: SenderOptions,
        health: Arc<Health>,
        kernel_tx: bool,
    ) -> io::Result<Session> {
        if opts.interval.is_zero() || opts.timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "probe interval and timeout must be positive",
            ));
        }
        let v6 = target.addr.is_ipv6();
        let any: IpAddr = if v6 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        let socket = UdpSocket::bind(SocketAddr::new(any, 0))?;
        if let Some(dev) = &target.bind_device {
            if let Err(e) = imp::bind_device(&socket, dev, v6) {
                warn!(device = %dev, peer = %target.peer, error = %e,
                    "cannot bind STAMP probes to the device; the routing table decides");
            }
        }
        imp::enable_rx_metadata(&socket)?;
        let tx_stamps = kernel_tx && imp::enable_tx_timestamps(&socket);
        Ok(Session {
            socket,
            peer: target.addr,
            opts,
            table: ProbeTable::new(opts.interval, opts.timeout),
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

    /// Probes from `first_send` on until `stop` is set or, with `limit`,
    /// until `limit` probes were sent and each was answered or lost.
    pub(crate) fn run(
        &mut self,
        first_send: Instant,
        limit: Option<u64>,
        stop: &AtomicBool,
        on: &mut dyn FnMut(Outcome),
    ) {
        let mut next_send = Some(first_send);
        let mut sent = 0u64;
        if limit == Some(0) {
            return;
        }
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if let Some(due) = next_send.filter(|&d| now >= d) {
                self.send_probe(now, on);
                sent += 1;
                let mut next = due + self.opts.interval;
                while next <= now {
                    next += self.opts.interval;
                }
                next_send = if limit.is_some_and(|l| sent >= l) {
                    None
                } else {
                    Some(next)
                };
            }
            self.drain(on);
            self.table.expire(Instant::now(), &mut self.expired);
            for e in self.expired.drain(..) {
                on(match e {
                    Expiry::Overdue { seq, sent_unix_ns } => Outcome::Overdue { seq, sent_unix_ns },
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

    fn send_probe(&mut self, now: Instant, on: &mut dyn FnMut(Outcome)) {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let t1 = now_unix_ns();
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
        self.table.sent(seq, ts, t1, now);
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
        for (id, ns) in self.tx_read.drain(..) {
            // Stamps come in send order; older pending sends never got one.
            while let Some(&(pid, seq)) = self.tx_pending.front() {
                if pid.wrapping_sub(id) as i32 > 0 {
                    break;
                }
                self.tx_pending.pop_front();
                if pid == id {
                    self.table.kernel_sent(seq, ns);
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
        let t4 = rx.kernel_rx_unix_ns.unwrap_or_else(now_unix_ns);
        match self.table.reply(&pkt, t4) {
            Verdict::Reply {
                seq,
                sent_unix_ns,
                rtt_ns,
                kernel_tx,
            } => on(Outcome::Reply {
                seq,
                sent_unix_ns,
                rtt_ns,
                kernel_rx,
                kernel_tx,
            }),
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

/// Starts probing `target` on its own thread until `stop` is set. Records
/// go to `sink`, one `RttSummary` per complete one-second window, stamped
/// with the window's end; per-probe outcomes go to `observer` if given.
/// The first probe goes out after a random splay in `[0, interval)`.
pub fn spawn_sender(
    target: Target,
    opts: SenderOptions,
    sink: Sink,
    health: Arc<Health>,
    observer: Option<mpsc::Sender<ProbeEvent>>,
    stop: Arc<AtomicBool>,
) -> io::Result<JoinHandle<()>> {
    spawn_sender_tagged(target, opts, sink, health, observer, stop, None)
}

/// [`spawn_sender`], tagging `under_load` every window that overlaps a
/// bandwidth test marked on `load`.
pub fn spawn_sender_tagged(
    target: Target,
    opts: SenderOptions,
    sink: Sink,
    health: Arc<Health>,
    observer: Option<mpsc::Sender<ProbeEvent>>,
    stop: Arc<AtomicBool>,
    load: Option<LoadTag>,
) -> io::Result<JoinHandle<()>> {
    let mut session = Session::open(&target, opts, health, true)?;
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
                ..Default::default()
            };
            let mut ledger = WindowLedger::new(
                WINDOW.as_nanos() as u64,
                template,
                imp::KERNEL_RX_TIMESTAMPS,
            );
            let mut observer = observer;
            session.run(first, None, &stop, &mut |o| {
                record(&mut ledger, &mut observer, &sink, load.as_ref(), o)
            });
            let open = ledger.open_windows();
            info!(peer = %target.peer, open_windows = open, "STAMP session-sender stopped");
        })
}

/// Feeds one outcome to the window ledger and the observer, and emits every
/// window that is complete.
fn record(
    ledger: &mut WindowLedger,
    observer: &mut Option<mpsc::Sender<ProbeEvent>>,
    sink: &Sink,
    load: Option<&LoadTag>,
    o: Outcome,
) {
    let event = match o {
        Outcome::Sent { sent_unix_ns } => {
            ledger.sent(sent_unix_ns);
            None
        }
        Outcome::Reply {
            seq,
            sent_unix_ns,
            rtt_ns,
            kernel_rx,
            ..
        } => {
            ledger.received(sent_unix_ns, rtt_ns, kernel_rx);
            Some(ProbeEvent::Reply {
                seq,
                sent_unix_ns,
                rtt_ns: rtt_ns.unwrap_or(0),
            })
        }
        Outcome::Duplicate { sent_unix_ns, .. } => {
            if !ledger.duplicate(sent_unix_ns) {
                debug!("duplicate STAMP reply after its window was emitted");
            }
            None
        }
        Outcome::Overdue { seq, sent_unix_ns } => Some(ProbeEvent::Overdue { seq, sent_unix_ns }),
        Outcome::Lost { sent_unix_ns, .. } => {
            ledger.lost(sent_unix_ns);
            None
        }
        Outcome::Tick => {
            let tagged = |start, end| load.is_some_and(|l| l.overlaps(start, end));
            for (end, summary) in ledger.drain_complete_tagged(now_unix_ns(), tagged) {
                sink.emit_at(end, Payload::Rtt(summary));
            }
            None
        }
    };
    if let (Some(ev), Some(tx)) = (event, observer.as_ref()) {
        if tx.send(ev).is_err() {
            // The ledger went away; stop feeding it.
            *observer = None;
        }
    }
}
