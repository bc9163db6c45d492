//! The client side of the iperf3 protocol: connect, send parameters, open
//! the data streams, run the engine for the test time, exchange results and
//! turn them into `BandwidthResult`s (one per direction).
//!
//! Blocking on purpose: the agent scheduler calls [`run_client`] from
//! `spawn_blocking`, the CLI calls it directly. Every wait on the peer has a
//! timeout, so a vanished server costs at most the setup timeout.

mod connect;
mod results;

use super::addr::{resolve, DEFAULT_PORT};
use super::control::{read_frame, read_server_error, read_state, write_frame, write_state};
use super::engine::{self, DataSocket, Engine, EngineConfig, Snapshot, StreamSpec};
use super::error::BandwidthError;
use super::iperf3::{self, Mode, Params, Results, State};
use boltwatch_proto::v1::{BandwidthInterval, BandwidthResult, Direction, Protocol};
use connect::Dest;
pub use results::bps;
pub(crate) use results::our_results;
use results::{build_results, Measured, Sampled};
use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How long any setup step may wait for the server.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the results exchange may take after the test.
const RESULTS_TIMEOUT: Duration = Duration::from_secs(15);
/// Default TCP write size. Measured here on loopback (2 s runs, P=1 and
/// P=4): 64-128 KiB beat 256 KiB and 1 MiB, which evict the data from the
/// cache before the receiver copies it.
pub const DEFAULT_TCP_BLOCK: usize = 128 * 1024;
/// Default UDP datagram size (fits a 1500-byte MTU).
pub const DEFAULT_UDP_BLOCK: usize = 1448;

/// What to test.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Server, "host", "host:port" or "[v6]:port"; "ip%if:port" or
    /// "[v6%if]:port" binds the test to interface `if`.
    pub server: String,
    /// Port used when `server` has none.
    pub default_port: u16,
    /// Parallel streams per direction (iperf3's `-P`): 1 to 128, what a
    /// stock server accepts.
    pub streams: u32,
    /// Test length (`-t`): 1 s to 1 h.
    pub duration: Duration,
    /// Upload (we send), download (`-R`, the server sends) or both at once
    /// (`--bidir`).
    pub mode: Mode,
    /// `Some(rate)` runs UDP at `rate` bits/s per stream (iperf3's `-b`
    /// semantics); `None` runs TCP as fast as possible.
    pub udp_rate_bps: Option<u64>,
    /// Write (TCP) or datagram (UDP) size; defaults per protocol.
    pub block_size: Option<usize>,
    /// Socket buffer size (`-w`); default: kernel autotuning for TCP,
    /// [`engine::DEFAULT_SOCKET_BUFFER`] for UDP.
    pub window: Option<usize>,
    /// Reporting interval (`-i`): at least 100 ms.
    pub interval: Duration,
    /// Peer node name for the result record.
    pub peer: String,
    /// Local interface name for the result record.
    pub interface: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            server: String::new(),
            default_port: DEFAULT_PORT,
            streams: 4,
            duration: Duration::from_secs(10),
            mode: Mode::Upload,
            udp_rate_bps: None,
            block_size: None,
            window: None,
            interval: Duration::from_secs(1),
            peer: String::new(),
            interface: String::new(),
        }
    }
}

/// One interval as it completes, for live printing.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalReport {
    /// Direction of the data, seen from this client.
    pub direction: Direction,
    /// The interval (bytes as counted on this side).
    pub interval: BandwidthInterval,
}

/// What a caller may watch and steer while a test runs: the CLI prints
/// intervals, the agent's scheduler marks the link loaded and ends a test
/// at shutdown. `&mut ()` watches nothing.
pub trait ClientObserver {
    /// An interval completed.
    fn interval(&mut self, _report: &IntervalReport) {}
    /// Data started (`true`, at `TEST_RUNNING`) or stopped (`false`, when
    /// the engine stopped) flowing.
    fn load(&mut self, _running: bool) {}
    /// Polled at least every 100 ms during the test; `true` ends it early
    /// with [`BandwidthError::Stopped`].
    fn stopped(&self) -> bool {
        false
    }
}

impl ClientObserver for () {}

/// Runs one test and returns one result per direction (two for bidir),
/// reporting to `observer` as it goes.
pub fn run_client(
    opts: ClientOptions,
    observer: &mut dyn ClientObserver,
) -> Result<Vec<BandwidthResult>, BandwidthError> {
    check_options(&opts)?;
    let dest = Dest::new(&resolve(&opts.server, opts.default_port)?)?;
    let udp = opts.udp_rate_bps.is_some();
    let block = opts.block_size.unwrap_or(if udp {
        DEFAULT_UDP_BLOCK
    } else {
        DEFAULT_TCP_BLOCK
    });
    let params = test_params(&opts, udp, block);
    let start_unix_ns = boltwatch_common::clock::now_unix_ns();
    let mut ctrl = connect_control(&dest)?;
    let cookie = iperf3::make_cookie(&mut rand::rng());
    ctrl.write_all(&cookie)?;
    let test = ClientTest {
        dest: dest.clone(),
        cookie,
        opts: &opts,
        udp,
        params,
        cfg: EngineConfig {
            block_size: block,
            rate_bps: opts.udp_rate_bps.unwrap_or(0),
            udp_64bit: false,
        },
    };
    // Lives until the function returns, keeping the data sockets open
    // through the results exchange.
    let mut engine: Option<Engine> = None;
    let (measured, peer) = test.converse(&mut ctrl, observer, &mut engine)?;
    let template = BandwidthResult {
        peer_address: dest.shown().to_string(),
        start_unix_ns,
        ..result_template(&opts)
    };
    Ok(build_results(&template, &measured, &peer))
}

/// The bounds a stock iperf3 server accepts, checked before connecting.
fn check_options(opts: &ClientOptions) -> Result<(), BandwidthError> {
    if opts.streams == 0 || opts.streams > 128 {
        return Err(BandwidthError::Options("streams must be 1..=128".into()));
    }
    if opts.duration < Duration::from_secs(1) || opts.duration > Duration::from_secs(3600) {
        return Err(BandwidthError::Options("duration must be 1 s..=1 h".into()));
    }
    if opts.interval < Duration::from_millis(100) {
        return Err(BandwidthError::Options("interval must be >= 100 ms".into()));
    }
    Ok(())
}

/// The parameters sent to the server, from the options.
fn test_params(opts: &ClientOptions, udp: bool, block: usize) -> Params {
    Params {
        tcp: (!udp).then_some(true),
        udp: udp.then_some(true),
        omit: 0,
        time: opts.duration.as_secs(),
        num: 0,
        blockcount: 0,
        parallel: opts.streams as u64,
        reverse: (opts.mode == Mode::Download).then_some(true),
        bidirectional: (opts.mode == Mode::Bidir).then_some(true),
        window: opts.window.map(|w| w as u64),
        len: block as u64,
        bandwidth: opts.udp_rate_bps,
        pacing_timer: Some(1000),
        // Our server answers with its receiver-side intervals; a stock one
        // with text we ignore.
        get_server_output: Some(1),
        udp_counters_64bit: None,
        client_version: Some(format!("boltwatch-{}", env!("CARGO_PKG_VERSION"))),
    }
}

/// The control connection to `dest`, with the setup timeouts.
fn connect_control(dest: &Dest) -> Result<TcpStream, BandwidthError> {
    let ctrl = dest.tcp(SETUP_TIMEOUT)?;
    ctrl.set_nodelay(true)?;
    ctrl.set_read_timeout(Some(SETUP_TIMEOUT))?;
    ctrl.set_write_timeout(Some(SETUP_TIMEOUT))?;
    Ok(ctrl)
}

/// One test as the client runs it, once the control connection is up.
struct ClientTest<'a> {
    dest: Dest,
    cookie: [u8; iperf3::COOKIE_SIZE],
    opts: &'a ClientOptions,
    udp: bool,
    params: Params,
    cfg: EngineConfig,
}

impl ClientTest<'_> {
    /// Answers the server's states, from the parameter exchange to the
    /// results: what we measured and the server's results. The engine is
    /// left in `engine`, so its data sockets outlive the exchange.
    fn converse(
        &self,
        ctrl: &mut TcpStream,
        observer: &mut dyn ClientObserver,
        engine: &mut Option<Engine>,
    ) -> Result<(Measured, Results), BandwidthError> {
        let mut specs: Vec<StreamSpec> = Vec::new();
        let mut measured: Option<Measured> = None;
        let mut peer_results: Option<Results> = None;
        loop {
            let state = match read_state(ctrl) {
                Err(BandwidthError::PeerClosed) if peer_results.is_some() => break,
                other => other?,
            };
            match state {
                State::ParamExchange => write_frame(ctrl, &self.params.to_json())?,
                State::CreateStreams => {
                    specs = create_streams(&self.dest, &self.cookie, self.opts, self.udp)?;
                }
                State::TestStart => {}
                State::TestRunning => {
                    let eng = engine.insert(Engine::start(std::mem::take(&mut specs), &self.cfg)?);
                    measured = Some(self.run(ctrl, eng, observer)?);
                }
                State::ExchangeResults => {
                    let Some(m) = &measured else {
                        return Err(BandwidthError::Protocol("results before the test".into()));
                    };
                    write_frame(ctrl, &our_results(&m.fin).to_json())?;
                    let doc = read_frame(ctrl, iperf3::MAX_RESULTS_JSON)?;
                    peer_results = Some(Results::from_json(&doc)?);
                }
                State::DisplayResults => {
                    // Best effort: the server may already be gone.
                    let _ = write_state(ctrl, State::IperfDone);
                    break;
                }
                State::AccessDenied => return Err(BandwidthError::Busy),
                State::ServerError => return Err(read_server_error(ctrl)),
                State::ServerTerminate => return Err(BandwidthError::ServerTerminated),
                other => {
                    return Err(BandwidthError::Protocol(format!(
                        "unexpected state {other:?}"
                    )))
                }
            }
        }
        let (Some(measured), Some(peer)) = (measured, peer_results) else {
            return Err(BandwidthError::Protocol(
                "test ended without results".into(),
            ));
        };
        Ok((measured, peer))
    }

    /// The test itself, from `TEST_RUNNING`: data flows and intervals are
    /// sampled for the test time, then the engine stops and we send
    /// `TEST_END`.
    fn run(
        &self,
        ctrl: &mut TcpStream,
        eng: &mut Engine,
        observer: &mut dyn ClientObserver,
    ) -> Result<Measured, BandwidthError> {
        observer.load(true);
        let r = run_intervals(ctrl, eng, self.opts, observer);
        let fin = eng.stop();
        observer.load(false);
        let sampled = r?;
        ctrl.set_read_timeout(Some(RESULTS_TIMEOUT))?;
        write_state(ctrl, State::TestEnd)?;
        Ok(Measured { fin, sampled })
    }
}

/// The fields every result of a test shares, from its options: peer,
/// address as given, interface, direction by mode, protocol, streams.
pub(crate) fn result_template(opts: &ClientOptions) -> BandwidthResult {
    BandwidthResult {
        peer: opts.peer.clone(),
        peer_address: opts.server.clone(),
        interface: opts.interface.clone(),
        direction: match opts.mode {
            Mode::Download => Direction::Download,
            _ => Direction::Upload,
        } as i32,
        protocol: if opts.udp_rate_bps.is_some() {
            Protocol::Udp
        } else {
            Protocol::Tcp
        } as i32,
        streams: opts.streams,
        ..Default::default()
    }
}

fn create_streams(
    dest: &Dest,
    cookie: &[u8; iperf3::COOKIE_SIZE],
    opts: &ClientOptions,
    udp: bool,
) -> Result<Vec<StreamSpec>, BandwidthError> {
    let p = opts.streams as usize;
    let total = if opts.mode == Mode::Bidir { 2 * p } else { p };
    let mut out = Vec::with_capacity(total);
    for i in 0..total {
        // iperf3 opens the client's sending streams first in bidir mode.
        let sender = match opts.mode {
            Mode::Upload => true,
            Mode::Download => false,
            Mode::Bidir => i < p,
        };
        let socket = if udp {
            DataSocket::Udp(udp_connect(dest, opts.window)?)
        } else {
            let mut s = dest.tcp(SETUP_TIMEOUT)?;
            s.set_write_timeout(Some(SETUP_TIMEOUT))?;
            s.write_all(cookie)?;
            engine::tune_tcp(&s, opts.window)?;
            DataSocket::Tcp(s)
        };
        out.push(StreamSpec {
            id: iperf3::stream_id(i),
            sender,
            socket,
        });
    }
    Ok(out)
}

fn udp_connect(dest: &Dest, window: Option<usize>) -> Result<UdpSocket, BandwidthError> {
    let s = dest.udp()?;
    engine::tune_udp(&s, window)?;
    // The datagram may be lost; retry a few times within the setup budget.
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    for _ in 0..5 {
        s.send(&iperf3::UDP_CONNECT_MSG.to_ne_bytes())?;
        let mut b = [0u8; 4];
        match s.recv(&mut b) {
            Ok(4) => {
                let v = u32::from_ne_bytes(b);
                if v == iperf3::UDP_CONNECT_REPLY || v == iperf3::LEGACY_UDP_CONNECT_REPLY {
                    engine::tune_udp(&s, window)?;
                    return Ok(s);
                }
                return Err(BandwidthError::Protocol(format!(
                    "bad UDP connect reply {v:#x}"
                )));
            }
            Ok(_) => return Err(BandwidthError::Protocol("short UDP connect reply".into())),
            Err(e) if crate::bandwidth::engine::is_wait(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(BandwidthError::Protocol("no UDP connect reply".into()))
}

/// Samples the engine every interval until the test time is up, watching
/// the control socket for a server that gives up.
fn run_intervals(
    ctrl: &mut TcpStream,
    eng: &Engine,
    opts: &ClientOptions,
    observer: &mut dyn ClientObserver,
) -> Result<Sampled, BandwidthError> {
    let start = Instant::now();
    let deadline = start + opts.duration;
    let mut sampler = IntervalSampler::new(eng.snapshot());
    let mut sampled = Sampled::default();
    let mut next_tick = start + opts.interval;
    loop {
        let now = Instant::now();
        let until = next_tick.min(deadline);
        if observer.stopped() {
            let _ = write_state(ctrl, State::ClientTerminate);
            return Err(BandwidthError::Stopped);
        }
        if now < until {
            let wait = (until - now).min(Duration::from_millis(100));
            ctrl.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
            let mut b = [0u8; 1];
            match ctrl.peek(&mut b) {
                Ok(0) => return Err(BandwidthError::PeerClosed),
                Ok(_) => {
                    return Err(match read_state(ctrl)? {
                        State::ServerError => read_server_error(ctrl),
                        State::AccessDenied => BandwidthError::Busy,
                        State::ServerTerminate => BandwidthError::ServerTerminated,
                        s => BandwidthError::Protocol(format!("unexpected {s:?} mid-test")),
                    })
                }
                Err(e) if crate::bandwidth::engine::is_wait(&e) => {}
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        let snap = eng.snapshot();
        let next = sampler.next(&snap);
        for (iv, list, dir) in [
            (next.sent, &mut sampled.up, Direction::Upload),
            (next.received, &mut sampled.down, Direction::Download),
        ] {
            if let Some(iv) = iv {
                observer.interval(&IntervalReport {
                    direction: dir,
                    interval: iv,
                });
                list.push(iv);
            }
        }
        if now >= deadline {
            return Ok(sampled);
        }
        next_tick += opts.interval;
    }
}

/// The interval since the previous snapshot, per direction; `None` for a
/// direction this side has no streams in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NextInterval {
    /// Data this side sent.
    pub sent: Option<BandwidthInterval>,
    /// Data this side received.
    pub received: Option<BandwidthInterval>,
}

/// Turns successive snapshots into per-direction intervals.
pub(crate) struct IntervalSampler {
    last: Snapshot,
}

impl IntervalSampler {
    pub(crate) fn new(first: Snapshot) -> Self {
        IntervalSampler { last: first }
    }

    pub(crate) fn next(&mut self, snap: &Snapshot) -> NextInterval {
        let dur = snap.elapsed.saturating_sub(self.last.elapsed);
        let mk = |sender: bool, last: &Snapshot| {
            if !snap.streams.iter().any(|s| s.sender == sender) {
                return None;
            }
            let bytes = snap.bytes(sender).saturating_sub(last.bytes(sender));
            let retransmits = if sender {
                snap.retransmits().saturating_sub(last.retransmits())
            } else {
                0
            };
            Some(BandwidthInterval {
                offset_ns: last.elapsed.as_nanos() as u64,
                duration_ns: dur.as_nanos() as u64,
                bytes,
                bits_per_second: bps(bytes, dur),
                retransmits,
            })
        };
        let out = NextInterval {
            sent: mk(true, &self.last),
            received: mk(false, &self.last),
        };
        self.last = snap.clone();
        out
    }
}
