//! The server side of the iperf3 protocol, one test at a time, as a stock
//! `iperf3 -s` behaves: a second client while a test runs gets
//! `ACCESS_DENIED` and is closed; stream connections are matched to the
//! running test by cookie.
//!
//! Hostile clients are the normal case on an unauthenticated port: only
//! admitted clients get a test ([`policy::Admission`]: configured peers,
//! an allow-list, loopback), a test's length and rate are capped
//! ([`policy::accept`]), data sockets (TCP streams and the UDP connect
//! datagram) are taken only from the control connection's IP, so nobody
//! can aim a test's traffic at a third address, and every refusal is an
//! iperf3 `ACCESS_DENIED` sent by [`deny::Denier`], never a reset.
//!
//! One accept thread owns the listener and hands each test to a session
//! thread. Every wait on a client has a deadline (the whole set-up, each of
//! its reads, the test time plus a grace period, the results exchange),
//! and the session frees the
//! server slot from a drop guard, so a client that resets, goes silent,
//! drips its set-up a byte at a time or panics the session never leaves
//! the server stuck busy.

mod deadline;
mod deny;
pub mod policy;
mod report;
mod slot;
mod udp;

use super::client::{our_results, IntervalSampler};
use super::control::{read_frame, read_state, write_frame, write_state};
use super::engine::{self, DataSocket, Engine, EngineConfig, Finished, StreamSpec};
use super::error::BandwidthError;
use super::iperf3::{self, Mode, Params, Results, State};
use super::load::{GateGuard, LoadBoard, TestGate};
use boltwatch_proto::v1::BandwidthInterval;
use deadline::SetupDeadline;
use deny::Denier;
use policy::{Accepted, Admission, Limits};
use report::intervals_json;
use slot::{lock_unless_finishing, Slot, SlotGuard, FINISHING_WAIT};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use udp::{udp_accept, udp_listener, UdpFrom};

/// Server timeouts and limits.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Longest wait for any one step of the set-up (a read, or all the
    /// streams arriving) and for the results.
    pub setup_timeout: Duration,
    /// Longest the whole set-up may take, from accept to the test's start
    /// (cookie, parameters, every stream): [`SETUP_DEADLINE`] by default.
    /// Past it the client is dropped, the slot is free again and the event
    /// is counted in [`Refusals::setup_timed_out`].
    pub setup_deadline: Duration,
    /// How long past the announced test time a silent client is tolerated.
    pub grace: Duration,
    /// Longest test accepted, `time` plus `omit`. 60 s by default: a
    /// scheduled test runs `bandwidth_duration` (10 s by default) and the
    /// duty cycle keeps tests short, so a minute is room to spare, while
    /// any longer only lets a stranger keep the node "busy".
    pub max_duration: Duration,
    /// Highest total rate a client may ask for (all streams, both
    /// directions), bits/s; 40 Gbit/s by default, a Thunderbolt 4 link.
    /// UDP tests must name a rate.
    pub max_rate_bps: u64,
    /// Configured peers' addresses: always served.
    pub peers: Vec<IpAddr>,
    /// Anyone else inside one of these networks is served too
    /// (`--bandwidth-allow CIDR`).
    pub allow: Vec<ipnet::IpNet>,
    /// Clients on loopback are served (true by default).
    pub allow_loopback: bool,
    /// Refusals, by reason.
    pub refusals: Arc<Refusals>,
    /// Interval of the receiver-side figures sent back with the results.
    pub interval: Duration,
    /// The node-wide one-test gate shared with the agent's own scheduler:
    /// while it is held (our client is testing) clients are told busy.
    pub gate: Option<TestGate>,
    /// Where running tests are marked, by the client's IP.
    pub load: Option<LoadBoard>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            setup_timeout: Duration::from_secs(10),
            setup_deadline: SETUP_DEADLINE,
            grace: Duration::from_secs(10),
            max_duration: Duration::from_secs(60),
            max_rate_bps: 40_000_000_000,
            peers: Vec::new(),
            allow: Vec::new(),
            allow_loopback: true,
            refusals: Arc::default(),
            interval: Duration::from_secs(1),
            gate: None,
            load: None,
        }
    }
}

impl ServerOptions {
    fn admission(&self) -> Admission {
        Admission {
            peers: self.peers.clone(),
            allow: self.allow.clone(),
            loopback: self.allow_loopback,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            max_duration: self.max_duration,
            max_rate_bps: self.max_rate_bps,
        }
    }
}

/// The default [`ServerOptions::setup_deadline`]. A stock `iperf3 -c` or
/// our own client sends its cookie and parameters at once and opens its
/// streams right after `CREATE_STREAMS`: well under a second on a link,
/// with room left for a few retransmitted SYNs. Anything slower is a
/// client holding the node's one test slot without testing.
pub const SETUP_DEADLINE: Duration = Duration::from_secs(10);

/// Connections and datagrams the server refused, by reason.
#[derive(Debug, Default)]
pub struct Refusals {
    /// A test was running (or the node's own client held the gate).
    pub busy: AtomicU64,
    /// The client is neither a peer nor allowed.
    pub not_allowed: AtomicU64,
    /// A data stream or UDP connect datagram from another IP than the
    /// test's control connection.
    pub foreign_data_source: AtomicU64,
    /// Parameters over the limits (length, rate, streams, block).
    pub over_limits: AtomicU64,
    /// An admitted client that did not finish its set-up in time (a read
    /// timed out, or the whole set-up passed its deadline): dropped.
    pub setup_timed_out: AtomicU64,
}

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Serves tests on `listener` until `stop` is cancelled, with the timeouts
/// and limits of `opts` (`ServerOptions::default()` for the stock ones).
///
/// The caller owns the socket (tests bind `127.0.0.1:0`; the agent binds
/// `0.0.0.0:5202`). UDP tests bind UDP sockets on the listener's address.
/// After `stop` the accept loop ends within ~20 ms; a running test is told
/// `SERVER_TERMINATE` within 50 ms, a test still in setup ends by its setup
/// timeout; the returned thread joins its sessions before it exits.
pub fn spawn_server(
    listener: TcpListener,
    stop: CancellationToken,
    opts: ServerOptions,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("bw-server".into())
        .spawn(move || accept_loop(listener, local, stop, opts))
}

fn accept_loop(
    listener: TcpListener,
    local: SocketAddr,
    stop: CancellationToken,
    opts: ServerOptions,
) {
    let slot = Arc::new(Mutex::new(Slot::default()));
    let mut sessions: Vec<JoinHandle<()>> = Vec::new();
    let (denier, deny_thread) = match Denier::spawn() {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the bandwidth server");
            return;
        }
    };
    let admission = opts.admission();
    let cx = SessionCtx {
        local,
        slot,
        stop,
        opts,
        denier,
    };
    tracing::info!(%local, "bandwidth server listening");
    while !cx.stop.is_cancelled() {
        sessions.retain(|h| !h.is_finished());
        match listener.accept() {
            Ok((s, peer)) => sessions.extend(take_connection(&cx, &admission, s, peer)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    for h in sessions {
        let _ = h.join();
    }
    drop(cx);
    let _ = deny_thread.join();
}

/// One accepted connection: while a test runs it is that test's data
/// stream (or an intruder, refused); else a client that is admitted and
/// passes the node-wide gate gets the slot and a session thread, returned;
/// anyone else hears why they are refused.
fn take_connection(
    cx: &SessionCtx,
    admission: &Admission,
    s: TcpStream,
    peer: SocketAddr,
) -> Option<JoinHandle<()>> {
    if s.set_nonblocking(false).is_err() {
        return None;
    }
    let opts = &cx.opts;
    let mut g = lock_unless_finishing(&cx.slot, FINISHING_WAIT);
    if g.busy {
        // A busy slot's connections are its data streams (or
        // intruders: the session checks address and cookie).
        // Sent under the lock, so a session that closed its
        // inbox never misses one.
        if let Some(tx) = &g.streams_tx {
            if let Err(mpsc::SendError(s)) = tx.send(s) {
                cx.denier.deny(s);
            }
        } else {
            drop(g);
            count(&opts.refusals.busy);
            cx.denier.deny(s);
        }
        return None;
    }
    if !admission.admits(peer.ip()) {
        drop(g);
        count(&opts.refusals.not_allowed);
        tracing::debug!(%peer, "bandwidth client not allowed");
        cx.denier.deny(s);
        return None;
    }
    // The gate is only tried for a free slot.
    let gate_guard = match &opts.gate {
        Some(gate) => match gate.try_enter() {
            Some(gg) => Some(gg),
            None => {
                drop(g);
                count(&opts.refusals.busy);
                cx.denier.deny(s);
                return None;
            }
        },
        None => None,
    };
    g.busy = true;
    g.streams_tx = None;
    drop(g);
    spawn_session(cx, s, peer, gate_guard)
}

/// Runs the test of the client on `s`, which holds the slot (and the gate,
/// if any), on its own thread; the slot is freed when the thread ends,
/// however it ends.
fn spawn_session(
    cx: &SessionCtx,
    s: TcpStream,
    peer: SocketAddr,
    gate_guard: Option<GateGuard>,
) -> Option<JoinHandle<()>> {
    let ctx = cx.clone();
    let guard = SlotGuard(cx.slot.clone());
    // From accept: the thread's start is part of the client's time.
    let deadline = SetupDeadline::after(cx.opts.setup_deadline);
    let spawned = std::thread::Builder::new()
        .name("bw-session".into())
        .spawn(move || {
            let _guard = guard;
            let _gate = gate_guard;
            let mut phase = "cookie";
            match session(s, &ctx, deadline, &mut phase) {
                Ok(()) => tracing::info!(%peer, "bandwidth test done"),
                Err(e) => {
                    tracing::warn!(%peer, phase, error = %e, "bandwidth test aborted")
                }
            }
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(error = %e, "cannot spawn session");
            None
        }
    }
}

/// What a session needs from its server.
#[derive(Clone)]
struct SessionCtx {
    local: SocketAddr,
    slot: Arc<Mutex<Slot>>,
    stop: CancellationToken,
    opts: ServerOptions,
    denier: Denier,
}

/// A TCP test's stream connections, forwarded by the accept loop. When
/// dropped (the streams are in, or the session failed) it closes the slot's
/// channel under the lock, then denies whatever was still queued: a client
/// that arrived in that window hears "busy", not a reset.
struct Inbox<'a> {
    rx: mpsc::Receiver<TcpStream>,
    slot: &'a Mutex<Slot>,
    denier: &'a Denier,
}

impl<'a> Inbox<'a> {
    fn open(slot: &'a Mutex<Slot>, denier: &'a Denier) -> Inbox<'a> {
        let (tx, rx) = mpsc::channel();
        slot.lock().unwrap_or_else(|p| p.into_inner()).streams_tx = Some(tx);
        Inbox { rx, slot, denier }
    }
}

impl Drop for Inbox<'_> {
    fn drop(&mut self) {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .streams_tx = None;
        while let Ok(s) = self.rx.try_recv() {
            self.denier.deny(s);
        }
    }
}

fn server_error(ctrl: &mut TcpStream, msg: &str) -> BandwidthError {
    let _ = ctrl.write_all(&iperf3::encode_server_error(iperf3::IE_PARAMS, 0));
    BandwidthError::Protocol(msg.to_string())
}

/// One test, as iperf3's server runs it: the cookie and parameters, the
/// data streams (all of it by `deadline`), the test itself, then the
/// results exchange. `phase` names the step under way, for the log line of
/// a test that fails.
fn session(
    mut ctrl: TcpStream,
    cx: &SessionCtx,
    deadline: SetupDeadline,
    phase: &mut &'static str,
) -> Result<(), BandwidthError> {
    let client = ctrl.peer_addr()?.ip();
    let (params, ok, specs) = match set_up(&mut ctrl, cx, client, deadline, phase) {
        Ok(s) => s,
        Err(e) => {
            if deadline.passed() || matches!(&e, BandwidthError::Io(io) if engine::is_wait(io)) {
                count(&cx.opts.refusals.setup_timed_out);
            }
            return Err(e);
        }
    };
    *phase = "running";
    write_state(&mut ctrl, State::TestStart)?;
    write_state(&mut ctrl, State::TestRunning)?;
    let cfg = EngineConfig {
        block_size: ok.block,
        rate_bps: ok.rate_bps,
        udp_64bit: params.udp_counters_64bit.unwrap_or(0) != 0,
    };
    let span = cx.opts.load.as_ref().map(|b| b.begin_ip(client));
    let mut eng = Engine::start(specs, &cfg)?;
    let intervals = run_test(&mut ctrl, cx, &mut eng, &ok)?;
    *phase = "results";
    cx.slot.lock().unwrap_or_else(|p| p.into_inner()).finishing = true;
    let fin = eng.stop();
    drop(span);
    // Close the data sockets now, as iperf3's server does on TEST_END: a
    // stock client in -R mode keeps draining with blocking full-block
    // reads, and only EOF releases it to send its results.
    drop(eng);
    exchange_results(&mut ctrl, &cx.opts, &params, &fin, &intervals)
}

/// Everything before `TEST_START`, by `deadline`: the parameters, what the
/// policy made of them, and the data streams.
fn set_up(
    ctrl: &mut TcpStream,
    cx: &SessionCtx,
    client: IpAddr,
    deadline: SetupDeadline,
    phase: &mut &'static str,
) -> Result<(Params, Accepted, Vec<StreamSpec>), BandwidthError> {
    let (cookie, params, ok) = negotiate(ctrl, &cx.opts, deadline, phase)?;
    *phase = "streams";
    // The streams come at once: waiting for them is one step, limited
    // like any other, and never past the set-up's deadline.
    let plan = StreamPlan::of(&params, deadline.within(cx.opts.setup_timeout));
    let specs = if params.is_udp() {
        udp_streams(ctrl, cx, client, &plan)?
    } else {
        tcp_streams(ctrl, cx, client, &cookie, &plan)?
    };
    Ok((params, ok, specs))
}

/// The set-up before any stream: the client's cookie, its parameters, and
/// the policy's verdict on them (a refusal is sent to the client and
/// counted).
fn negotiate(
    ctrl: &mut TcpStream,
    opts: &ServerOptions,
    deadline: SetupDeadline,
    phase: &mut &'static str,
) -> Result<([u8; iperf3::COOKIE_SIZE], Params, Accepted), BandwidthError> {
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(opts.setup_timeout))?;
    let mut cookie = [0u8; iperf3::COOKIE_SIZE];
    let mut r = deadline.reader(ctrl, opts.setup_timeout);
    r.read_exact(&mut cookie)?;
    *phase = "parameters";
    write_state(ctrl, State::ParamExchange)?;
    let mut r = deadline.reader(ctrl, opts.setup_timeout);
    let params = Params::from_json(&read_frame(&mut r, iperf3::MAX_PARAMS_JSON)?)?;
    match policy::accept(&params, &opts.limits(), super::client::DEFAULT_UDP_BLOCK) {
        Ok(ok) => Ok((cookie, params, ok)),
        Err(why) => {
            count(&opts.refusals.over_limits);
            Err(server_error(ctrl, why))
        }
    }
}

/// The data streams a test opens: how many, which of them the server
/// sends on, their socket buffer, and by when they must all be in.
struct StreamPlan {
    mode: Mode,
    parallel: usize,
    total: usize,
    window: Option<usize>,
    deadline: SetupDeadline,
}

impl StreamPlan {
    fn of(params: &Params, deadline: SetupDeadline) -> StreamPlan {
        let mode = params.mode();
        let parallel = params.parallel as usize;
        StreamPlan {
            mode,
            parallel,
            total: if mode == Mode::Bidir {
                2 * parallel
            } else {
                parallel
            },
            window: params.window.map(|w| w as usize),
            deadline,
        }
    }

    /// Stream `i` as the engine runs it. iperf3 accepts the receiving
    /// streams first (the client opens its sending streams first).
    fn spec(&self, i: usize, socket: DataSocket) -> StreamSpec {
        StreamSpec {
            id: iperf3::stream_id(i),
            sender: match self.mode {
                Mode::Upload => false,
                Mode::Download => true,
                Mode::Bidir => i >= self.parallel,
            },
            socket,
        }
    }
}

/// A UDP test's streams: one connect datagram each, from the client's IP.
fn udp_streams(
    ctrl: &mut TcpStream,
    cx: &SessionCtx,
    client: IpAddr,
    plan: &StreamPlan,
) -> Result<Vec<StreamSpec>, BandwidthError> {
    let mut specs = Vec::with_capacity(plan.total);
    let mut listener = udp_listener(cx.local)?;
    write_state(ctrl, State::CreateStreams)?;
    for i in 0..plan.total {
        let from = UdpFrom {
            client,
            deadline: plan.deadline.at(),
            refused: &cx.opts.refusals.foreign_data_source,
        };
        let (sock, next) = udp_accept(listener, cx.local, &from, plan.window)?;
        listener = next;
        specs.push(plan.spec(i, DataSocket::Udp(sock)));
    }
    Ok(specs)
}

/// Longest wait for one read of a stream connection's cookie (within the
/// set-up deadline): a stream sends it as soon as it connects.
const STREAM_COOKIE_WAIT: Duration = Duration::from_secs(2);

/// A TCP test's streams, forwarded by the accept loop: only connections
/// from the client's IP that present its cookie join; the rest are refused.
fn tcp_streams(
    ctrl: &mut TcpStream,
    cx: &SessionCtx,
    client: IpAddr,
    cookie: &[u8; iperf3::COOKIE_SIZE],
    plan: &StreamPlan,
) -> Result<Vec<StreamSpec>, BandwidthError> {
    let opts = &cx.opts;
    let mut specs = Vec::with_capacity(plan.total);
    let inbox = Inbox::open(&cx.slot, &cx.denier);
    write_state(ctrl, State::CreateStreams)?;
    while specs.len() < plan.total {
        let left = plan.deadline.at().saturating_duration_since(Instant::now());
        let s = inbox
            .rx
            .recv_timeout(left)
            .map_err(|_| BandwidthError::Protocol("streams did not arrive".into()))?;
        // Only the client's own address may join its test: a stream
        // from elsewhere is an intruder (or a client who finds us busy).
        if s.peer_addr().map(|a| a.ip().to_canonical()).ok() != Some(client.to_canonical()) {
            count(&opts.refusals.foreign_data_source);
            cx.denier.deny(s);
            continue;
        }
        let mut c = [0u8; iperf3::COOKIE_SIZE];
        let cookie_read = plan
            .deadline
            .reader(&s, STREAM_COOKIE_WAIT)
            .read_exact(&mut c);
        if cookie_read.is_err() || c != *cookie {
            // Another client from the same address: it hears "busy".
            count(&opts.refusals.busy);
            cx.denier.deny_after_cookie(s);
            continue;
        }
        engine::tune_tcp(&s, plan.window)?;
        specs.push(plan.spec(specs.len(), DataSocket::Tcp(s)));
    }
    drop(inbox);
    Ok(specs)
}

/// Runs the test until the client's `TEST_END`, sampling the receiver-side
/// intervals (after the omitted seconds); fails when the server stops, the
/// client terminates, or it stays silent past the test time.
fn run_test(
    ctrl: &mut TcpStream,
    cx: &SessionCtx,
    eng: &mut Engine,
    ok: &Accepted,
) -> Result<Vec<BandwidthInterval>, BandwidthError> {
    let opts = &cx.opts;
    let started = Instant::now();
    let omit = ok.omit;
    let mut omit_at = (!omit.is_zero()).then_some(started + omit);
    let end_by = started + ok.time + omit + opts.grace;
    let mut sampler = IntervalSampler::new(eng.snapshot());
    let mut intervals = Vec::new();
    let mut next_tick = started + opts.interval;
    loop {
        if omit_at.is_some_and(|at| Instant::now() >= at) {
            // iperf3 -O: the omitted seconds count nowhere.
            omit_at = None;
            eng.rebase();
            sampler = IntervalSampler::new(eng.snapshot());
            intervals.clear();
            next_tick = Instant::now() + opts.interval;
        }
        if cx.stop.is_cancelled() {
            let _ = write_state(ctrl, State::ServerTerminate);
            return Err(BandwidthError::Protocol("server stopping".into()));
        }
        let now = Instant::now();
        if now >= end_by {
            return Err(BandwidthError::Protocol(
                "client silent past the test time".into(),
            ));
        }
        if now >= next_tick {
            let rx_iv = sampler.next(&eng.snapshot()).received;
            intervals.extend(rx_iv);
            next_tick += opts.interval;
            continue;
        }
        // Short waits so `stop` and the omit boundary are seen promptly.
        let wait = (next_tick.min(end_by) - now).min(Duration::from_millis(50));
        ctrl.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match read_state(ctrl) {
            Ok(State::TestEnd) => break,
            Ok(State::ClientTerminate) => {
                return Err(BandwidthError::Protocol("client terminated".into()))
            }
            Ok(s) => return Err(BandwidthError::Protocol(format!("unexpected {s:?}"))),
            Err(BandwidthError::Io(e)) if super::engine::is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let last = sampler.next(&eng.snapshot()).received;
    intervals.extend(last.filter(|iv| iv.duration_ns > 1_000_000));
    Ok(intervals)
}

/// The results exchange after the test: the client's results are read and
/// set aside, ours (with our receiver-side intervals when the client asked
/// for server output and received nothing from us) are sent back.
fn exchange_results(
    ctrl: &mut TcpStream,
    opts: &ServerOptions,
    params: &Params,
    fin: &Finished,
    intervals: &[BandwidthInterval],
) -> Result<(), BandwidthError> {
    ctrl.set_read_timeout(Some(opts.setup_timeout))?;
    write_state(ctrl, State::ExchangeResults)?;
    let _client = Results::from_json(&read_frame(ctrl, iperf3::MAX_RESULTS_JSON)?)?;
    let mut ours = our_results(fin);
    if params.get_server_output.unwrap_or(0) != 0 && params.mode() != Mode::Download {
        ours.server_output_json = Some(intervals_json(intervals));
    }
    write_frame(ctrl, &ours.to_json())?;
    write_state(ctrl, State::DisplayResults)?;
    // The client answers IPERF_DONE and closes; either is fine.
    let _ = read_state(ctrl);
    Ok(())
}
