//! The server side of the iperf3 protocol, one test at a time, as a stock
//! `iperf3 -s` behaves: a second client while a test runs gets
//! `ACCESS_DENIED` and is closed; stream connections are matched to the
//! running test by cookie.
//!
//! One accept thread owns the listener and hands each test to a session
//! thread. Every wait on a client has a deadline (setup steps, the test time
//! plus a grace period, the results exchange), and the session frees the
//! server slot from a drop guard, so a client that resets, goes silent or
//! panics the session never leaves the server stuck busy.

use super::client::{bps, our_results, IntervalSampler};
use super::control::{read_frame, read_state, write_frame, write_state};
use super::engine::{self, DataSocket, Engine, EngineConfig, StreamSpec};
use super::iperf3::{self, Mode, Params, Results, State};
use super::load::{LoadBoard, TestGate};
use super::BandwidthError;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Server timeouts and limits.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Longest wait for any setup step (cookie, parameters, streams).
    pub setup_timeout: Duration,
    /// How long past the announced test time a silent client is tolerated.
    pub grace: Duration,
    /// Longest test accepted.
    pub max_duration: Duration,
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
            grace: Duration::from_secs(10),
            max_duration: Duration::from_secs(3600),
            interval: Duration::from_secs(1),
            gate: None,
            load: None,
        }
    }
}

/// Largest parallel count accepted (iperf3 caps at 128 too).
const MAX_STREAMS: u64 = 128;
/// Largest TCP block accepted.
const MAX_BLOCK: u64 = 16 * 1024 * 1024;

#[derive(Default)]
struct Slot {
    busy: bool,
    streams_tx: Option<mpsc::Sender<TcpStream>>,
}

/// Frees the slot however the session ends.
struct SlotGuard(Arc<Mutex<Slot>>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.busy = false;
        s.streams_tx = None;
    }
}

/// Serves tests on `listener` until `stop` is cancelled, with default
/// options.
///
/// The caller owns the socket (tests bind `127.0.0.1:0`; the agent binds
/// `0.0.0.0:5202`). UDP tests bind UDP sockets on the listener's address.
/// After `stop` the accept loop ends within ~20 ms; a running test is told
/// `SERVER_TERMINATE` within 50 ms, a test still in setup ends by its setup
/// timeout; the returned thread joins its sessions before it exits.
pub fn spawn_server(
    listener: TcpListener,
    stop: CancellationToken,
) -> std::io::Result<JoinHandle<()>> {
    spawn_server_with(listener, stop, ServerOptions::default())
}

/// [`spawn_server`] with explicit timeouts and limits.
pub fn spawn_server_with(
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
    tracing::info!(%local, "bandwidth server listening");
    while !stop.is_cancelled() {
        sessions.retain(|h| !h.is_finished());
        match listener.accept() {
            Ok((s, peer)) => {
                if s.set_nonblocking(false).is_err() {
                    continue;
                }
                let mut g = slot.lock().unwrap_or_else(|p| p.into_inner());
                // The gate is only tried for a free slot: a busy slot's
                // connections are its data streams.
                let gate = if g.busy {
                    None
                } else {
                    match &opts.gate {
                        Some(gate) => gate.try_enter().map(Some),
                        None => Some(None),
                    }
                };
                if let Some(gate_guard) = gate {
                    g.busy = true;
                    g.streams_tx = None;
                    drop(g);
                    let session_slot = slot.clone();
                    let guard = SlotGuard(slot.clone());
                    let stop = stop.clone();
                    let opts = opts.clone();
                    let spawned = std::thread::Builder::new()
                        .name("bw-session".into())
                        .spawn(move || {
                            let _guard = guard;
                            let _gate = gate_guard;
                            let mut phase = "cookie";
                            let r = session(s, local, &session_slot, &stop, &opts, &mut phase);
                            match r {
                                Ok(()) => tracing::info!(%peer, "bandwidth test done"),
                                Err(e) => {
                                    tracing::warn!(%peer, phase, error = %e, "bandwidth test aborted")
                                }
                            }
                        });
                    match spawned {
                        Ok(h) => sessions.push(h),
                        Err(e) => tracing::warn!(error = %e, "cannot spawn session"),
                    }
                } else if let Some(tx) = g.streams_tx.clone() {
                    // A data stream, or an intruder; the session checks the cookie.
                    drop(g);
                    let _ = tx.send(s);
                } else {
                    drop(g);
                    deny(s);
                }
            }
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
}

/// Writes `ACCESS_DENIED` without reading anything (reading could block on
/// a client that sends nothing) and closes.
fn deny(mut s: TcpStream) {
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = s.write_all(&[State::AccessDenied.to_byte()]);
}

fn server_error(ctrl: &mut TcpStream, msg: &str) -> BandwidthError {
    let _ = ctrl.write_all(&iperf3::encode_server_error(iperf3::IE_PARAMS, 0));
    BandwidthError::Protocol(msg.to_string())
}

fn session(
    mut ctrl: TcpStream,
    local: SocketAddr,
    slot: &Arc<Mutex<Slot>>,
    stop: &CancellationToken,
    opts: &ServerOptions,
    phase: &mut &'static str,
) -> Result<(), BandwidthError> {
    ctrl.set_nodelay(true)?;
    ctrl.set_read_timeout(Some(opts.setup_timeout))?;
    ctrl.set_write_timeout(Some(opts.setup_timeout))?;
    let mut cookie = [0u8; iperf3::COOKIE_SIZE];
    ctrl.read_exact(&mut cookie)?;
    *phase = "parameters";
    write_state(&mut ctrl, State::ParamExchange)?;
    let params = Params::from_json(&read_frame(&mut ctrl, iperf3::MAX_PARAMS_JSON)?)?;
    let udp = params.is_udp();
    if params.parallel == 0 || params.parallel > MAX_STREAMS {
        return Err(server_error(&mut ctrl, "bad parallel count"));
    }
    let max_block = if udp { 65_507 } else { MAX_BLOCK };
    if params.len > max_block {
        return Err(server_error(&mut ctrl, "block too large"));
    }
    let test_time = Duration::from_secs(if params.time == 0 {
        // Byte- or block-count tests: bounded by the longest test instead.
        opts.max_duration.as_secs()
    } else {
        params.time
    });
    if test_time > opts.max_duration {
        return Err(server_error(&mut ctrl, "test too long"));
    }
    let mode = params.mode();
    let p = params.parallel as usize;
    let total = if mode == Mode::Bidir { 2 * p } else { p };
    let block = if params.len > 0 {
        params.len as usize
    } else if udp {
        super::client::DEFAULT_UDP_BLOCK
    } else {
        iperf3::DEFAULT_TCP_BLKSIZE
    };
    let window = params.window.map(|w| w as usize);
    let deadline = Instant::now() + opts.setup_timeout;

    *phase = "streams";
    let mut specs = Vec::with_capacity(total);
    // iperf3 accepts the receiving streams first (the client opens its
    // sending streams first).
    let server_sends = |i: usize| match mode {
        Mode::Upload => false,
        Mode::Download => true,
        Mode::Bidir => i >= p,
    };
    if udp {
        let mut listener = udp_listener(local)?;
        write_state(&mut ctrl, State::CreateStreams)?;
        for i in 0..total {
            let (sock, next) = udp_accept(listener, local, deadline, window)?;
            listener = next;
            specs.push(StreamSpec {
                id: iperf3::stream_id(i),
                sender: server_sends(i),
                socket: DataSocket::Udp(sock),
            });
        }
    } else {
        let (tx, rx) = mpsc::channel();
        slot.lock().unwrap_or_else(|p| p.into_inner()).streams_tx = Some(tx);
        write_state(&mut ctrl, State::CreateStreams)?;
        while specs.len() < total {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut s = rx
                .recv_timeout(left)
                .map_err(|_| BandwidthError::Protocol("streams did not arrive".into()))?;
            let mut c = [0u8; iperf3::COOKIE_SIZE];
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            if s.read_exact(&mut c).is_err() || c != cookie {
                deny(s);
                continue;
            }
            engine::tune_tcp(&s, window)?;
            let i = specs.len();
            specs.push(StreamSpec {
                id: iperf3::stream_id(i),
                sender: server_sends(i),
                socket: DataSocket::Tcp(s),
            });
        }
        slot.lock().unwrap_or_else(|p| p.into_inner()).streams_tx = None;
    }
    *phase = "running";
    write_state(&mut ctrl, State::TestStart)?;
    write_state(&mut ctrl, State::TestRunning)?;
    let cfg = EngineConfig {
        block_size: block,
        rate_bps: params.bandwidth.unwrap_or(0),
        udp_64bit: params.udp_counters_64bit.unwrap_or(0) != 0,
    };
    let client = ctrl.peer_addr()?.ip();
    let span = opts.load.as_ref().map(|b| b.begin_ip(client));
    let mut eng = Engine::start(specs, &cfg)?;
    let started = Instant::now();
    let omit = Duration::from_secs(params.omit);
    let mut omit_at = (!omit.is_zero()).then_some(started + omit);
    let end_by = started + test_time + omit + opts.grace;
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
        if stop.is_cancelled() {
            let _ = write_state(&mut ctrl, State::ServerTerminate);
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
        match read_state(&mut ctrl) {
            Ok(State::TestEnd) => break,
            Ok(State::ClientTerminate) => {
                return Err(BandwidthError::Protocol("client terminated".into()))
            }
            Ok(s) => return Err(BandwidthError::Protocol(format!("unexpected {s:?}"))),
            Err(BandwidthError::Io(e))
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    let last = sampler.next(&eng.snapshot()).received;
    intervals.extend(last.filter(|iv| iv.duration_ns > 1_000_000));
    *phase = "results";
    let fin = eng.stop();
    drop(span);
    // Close the data sockets now, as iperf3's server does on TEST_END: a
    // stock client in -R mode keeps draining with blocking full-block
    // reads, and only EOF releases it to send its results.
    drop(eng);
    ctrl.set_read_timeout(Some(opts.setup_timeout))?;
    write_state(&mut ctrl, State::ExchangeResults)?;
    let _client = Results::from_json(&read_frame(&mut ctrl, iperf3::MAX_RESULTS_JSON)?)?;
    let mut ours = our_results(&fin);
    if params.get_server_output.unwrap_or(0) != 0 && mode != Mode::Download {
        ours.server_output_json = Some(intervals_json(&intervals));
    }
    write_frame(&mut ctrl, &ours.to_json())?;
    write_state(&mut ctrl, State::DisplayResults)?;
    // The client answers IPERF_DONE and closes; either is fine.
    let _ = read_state(&mut ctrl);
    Ok(())
}

/// Receiver-side intervals in iperf3's JSON shape (`intervals[].sum`).
fn intervals_json(list: &[boltwatch_proto::v1::BandwidthInterval]) -> serde_json::Value {
    let ivs: Vec<serde_json::Value> = list
        .iter()
        .map(|iv| {
            let start = iv.offset_ns as f64 / 1e9;
            let secs = iv.duration_ns as f64 / 1e9;
            serde_json::json!({"sum": {
                "start": start,
                "end": start + secs,
                "seconds": secs,
                "bytes": iv.bytes,
                "bits_per_second": bps(iv.bytes, Duration::from_nanos(iv.duration_ns)),
                "sender": false,
            }})
        })
        .collect();
    serde_json::json!({ "intervals": ivs })
}

fn udp_listener(local: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    // BSDs need SO_REUSEPORT to bind the same address twice.
    #[cfg(target_os = "macos")]
    s.set_reuse_port(true)?;
    s.bind(&local.into())?;
    Ok(s.into())
}

/// Waits for a client's connect datagram on `listener`, connects it to the
/// client, opens the next listener, then replies (so the client's next
/// datagram finds it).
fn udp_accept(
    listener: UdpSocket,
    local: SocketAddr,
    deadline: Instant,
    window: Option<usize>,
) -> Result<(UdpSocket, UdpSocket), BandwidthError> {
    let mut b = [0u8; 64];
    let peer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BandwidthError::Protocol(
                "UDP streams did not arrive".into(),
            ));
        }
        listener.set_read_timeout(Some(left))?;
        match listener.recv_from(&mut b) {
            Ok((_, peer)) => break peer,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e.into()),
        }
    };
    listener.connect(peer)?;
    let next = udp_listener(local)?;
    engine::tune_udp(&listener, window)?;
    listener.send(&iperf3::UDP_CONNECT_REPLY.to_ne_bytes())?;
    Ok((listener, next))
}
