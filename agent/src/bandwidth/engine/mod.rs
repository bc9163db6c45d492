//! The data path: one dedicated `std::thread` per stream, blocking sockets,
//! large writes, receivers counting bytes.
//!
//! Why threads and not tokio: a saturating sender wants to sit in `send(2)`
//! with nothing between it and the kernel; readiness-driven I/O adds
//! EAGAIN/re-arm syscalls and competes with the agent's gRPC tasks. The
//! control protocol (`client`, `server`) owns the sockets' setup and hands
//! connected sockets here; this module only moves bytes and counts them.
//! Threads poll a stop token between blocking calls, which carry short
//! socket timeouts so a stalled peer never pins a thread.

mod shared;
mod streams;

use super::iperf3::UdpReceiverStats;
use super::sys::{sys, CpuTimes, SocketStats};
pub use shared::EngineConfig;
use shared::{locked, Shared};
use std::io;
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub(crate) use streams::is_wait;
use tokio_util::sync::CancellationToken;

/// How often a blocked stream thread wakes to look at the stop token.
const POLL: Duration = Duration::from_millis(100);
/// UDP socket buffer (UDP has no autotuning): 80 Gb/s × 0.1 ms RTT is
/// 1 MB; 4 MiB leaves room for bursts. The kernel caps it at
/// `net.core.{w,r}mem_max` / `kern.ipc.maxsockbuf`.
pub const DEFAULT_SOCKET_BUFFER: usize = 4 * 1024 * 1024;

/// A connected data socket.
#[derive(Debug)]
pub enum DataSocket {
    /// A TCP stream (cookie already exchanged).
    Tcp(TcpStream),
    /// A connected UDP socket (handshake already done).
    Udp(UdpSocket),
}

/// One stream to run.
#[derive(Debug)]
pub struct StreamSpec {
    /// iperf3 stream id.
    pub id: i64,
    /// True when this side sends on the stream.
    pub sender: bool,
    /// The connected socket.
    pub socket: DataSocket,
}

struct Running {
    id: i64,
    sender: bool,
    udp: bool,
    shared: Arc<Shared>,
    tcp: Option<TcpStream>,
    /// A second handle on the socket, so it stays open after the thread
    /// ends: closing a socket with unread data sends a RST, which would
    /// kill the peer's test before results are exchanged.
    _keep: DataSocket,
    handle: Option<JoinHandle<()>>,
    /// Counters at the last [`Engine::rebase`].
    base: Baseline,
}

/// A stream's counters when counting (re)started.
#[derive(Debug, Clone, Copy, Default)]
struct Baseline {
    bytes: u64,
    packets: u64,
    retransmits: u64,
}

impl Running {
    /// The kernel's retransmit count of a sending TCP stream, else 0.
    fn raw_retransmits(&self) -> u64 {
        match (&self.tcp, self.sender) {
            (Some(t), true) => sys().tcp_retransmits(t).unwrap_or(0),
            _ => 0,
        }
    }

    /// The counters now, raw (not rebased).
    fn raw(&self) -> Baseline {
        Baseline {
            bytes: self.shared.bytes.load(Ordering::Relaxed),
            packets: self.shared.packets.load(Ordering::Relaxed),
            retransmits: self.raw_retransmits(),
        }
    }

    /// Counters since the last rebase.
    fn count(&self) -> StreamCount {
        let now = self.raw();
        StreamCount {
            id: self.id,
            sender: self.sender,
            bytes: now.bytes.saturating_sub(self.base.bytes),
            retransmits: now.retransmits.saturating_sub(self.base.retransmits),
        }
    }
}

/// Running streams of one test.
pub struct Engine {
    streams: Vec<Running>,
    stop: CancellationToken,
    started: Instant,
    cpu_start: Option<CpuTimes>,
}

/// A point-in-time reading of the counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Time since the engine started.
    pub elapsed: Duration,
    /// Per stream: (id, sender, bytes so far, retransmits so far).
    pub streams: Vec<StreamCount>,
}

/// One stream's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamCount {
    /// iperf3 stream id.
    pub id: i64,
    /// True when this side sends.
    pub sender: bool,
    /// Bytes sent (sender) or received (receiver).
    pub bytes: u64,
    /// TCP retransmits (senders on Linux/macOS), else 0.
    pub retransmits: u64,
}

impl Snapshot {
    /// Sum of bytes over the streams whose direction is `sender`.
    pub fn bytes(&self, sender: bool) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.sender == sender)
            .map(|s| s.bytes)
            .sum()
    }

    /// Sum of retransmits over sending streams.
    pub fn retransmits(&self) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.sender)
            .map(|s| s.retransmits)
            .sum()
    }
}

/// Final figures of one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFinal {
    /// Counters at the stop.
    pub count: StreamCount,
    /// True for UDP.
    pub udp: bool,
    /// UDP datagrams sent (sender).
    pub packets_sent: u64,
    /// UDP receiver bookkeeping (receiver).
    pub udp_stats: UdpReceiverStats,
    /// The error that ended the stream early, if any.
    pub error: Option<String>,
}

/// What [`Engine::stop`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Run time from start to stop.
    pub elapsed: Duration,
    /// Per-stream figures.
    pub streams: Vec<StreamFinal>,
    /// Process CPU over the run, percent of one core.
    pub cpu_percent: f64,
    /// User part.
    pub cpu_user_percent: f64,
    /// System part.
    pub cpu_system_percent: f64,
}

/// Applies timeouts, and buffer sizes only when asked (`-w`), to a TCP data
/// socket.
///
/// Left alone, Linux and macOS autotune TCP buffers up to `tcp_wmem` /
/// `tcp_rmem` (4 MiB / 32 MiB here) or `kern.ipc.maxsockbuf`, past the
/// ~1 MB that 80 Gb/s × 0.1 ms needs. A fixed SO_SNDBUF/SO_RCVBUF turns
/// autotuning off, and measured here it halved loopback and veth
/// throughput: big fixed buffers push the in-flight data out of the CPU
/// caches.
pub fn tune_tcp(sock: &TcpStream, window: Option<usize>) -> io::Result<()> {
    let s = socket2::SockRef::from(sock);
    if let Some(size) = window {
        // Best effort: the kernel clamps; an error here must not fail a test.
        let _ = s.set_send_buffer_size(size);
        let _ = s.set_recv_buffer_size(size);
    }
    sock.set_read_timeout(Some(POLL))?;
    sock.set_write_timeout(Some(POLL))?;
    Ok(())
}

/// Applies buffer sizes and timeouts to a UDP data socket.
pub fn tune_udp(sock: &UdpSocket, window: Option<usize>) -> io::Result<()> {
    let s = socket2::SockRef::from(sock);
    let size = window.unwrap_or(DEFAULT_SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(size);
    let _ = s.set_recv_buffer_size(size);
    sock.set_read_timeout(Some(POLL))?;
    sock.set_write_timeout(Some(POLL))?;
    Ok(())
}

impl Engine {
    /// Starts one thread per stream. Data flows at once; callers start the
    /// engine when the protocol says `TEST_RUNNING`.
    pub fn start(specs: Vec<StreamSpec>, cfg: &EngineConfig) -> io::Result<Engine> {
        let stop = CancellationToken::new();
        let cpu_start = sys().process_cpu().ok();
        let started = Instant::now();
        // Built first so an error part-way drops it, and its Drop stops and
        // joins the threads already started.
        let mut eng = Engine {
            streams: Vec::with_capacity(specs.len()),
            stop: stop.clone(),
            started,
            cpu_start,
        };
        for spec in specs {
            let shared = Arc::new(Shared::default());
            let (tcp, udp, keep) = match &spec.socket {
                DataSocket::Tcp(t) => {
                    (Some(t.try_clone()?), false, DataSocket::Tcp(t.try_clone()?))
                }
                DataSocket::Udp(u) => (None, true, DataSocket::Udp(u.try_clone()?)),
            };
            let th_shared = shared.clone();
            let th_stop = stop.clone();
            let th_cfg = cfg.clone();
            let sender = spec.sender;
            let name = format!("bw-{}-{}", if sender { "tx" } else { "rx" }, spec.id);
            let handle = std::thread::Builder::new().name(name).spawn(move || {
                let r = match (spec.socket, sender) {
                    (DataSocket::Tcp(s), true) => {
                        streams::tcp_send(s, &th_cfg, &th_shared, &th_stop)
                    }
                    (DataSocket::Tcp(s), false) => streams::tcp_recv(s, &th_shared, &th_stop),
                    (DataSocket::Udp(s), true) => {
                        streams::udp_send(s, &th_cfg, started, &th_shared, &th_stop)
                    }
                    (DataSocket::Udp(s), false) => {
                        streams::udp_recv(s, &th_cfg, &th_shared, &th_stop)
                    }
                };
                if let Err(e) = r {
                    if !th_stop.is_cancelled() {
                        tracing::debug!(error = %e, "stream ended early");
                        *locked(&th_shared.error) = Some(e.to_string());
                    }
                }
            })?;
            eng.streams.push(Running {
                id: spec.id,
                sender,
                udp,
                shared,
                tcp,
                _keep: keep,
                handle: Some(handle),
                base: Baseline::default(),
            });
        }
        Ok(eng)
    }

    /// Reads every stream's counters without stopping anything.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            elapsed: self.started.elapsed(),
            streams: self.streams.iter().map(Running::count).collect(),
        }
    }

    /// Restarts the counters and the clock from now, for iperf3's `-O`
    /// (omit the first seconds, e.g. TCP slow start). UDP loss and jitter
    /// keep their history.
    pub fn rebase(&mut self) {
        for r in &mut self.streams {
            r.base = r.raw();
        }
        self.started = Instant::now();
        self.cpu_start = sys().process_cpu().ok();
    }

    /// True once every stream thread has ended on its own (peer gone).
    pub fn all_ended(&self) -> bool {
        self.streams
            .iter()
            .all(|r| r.handle.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// The first stream error, if any stream ended early.
    pub fn first_error(&self) -> Option<String> {
        self.streams
            .iter()
            .find_map(|r| locked(&r.shared.error).clone())
    }

    /// Stops counting, joins every thread and returns the totals. The
    /// sockets stay open until the engine is dropped, which callers do
    /// after the results exchange.
    pub fn stop(&mut self) -> Finished {
        self.stop.cancel();
        let elapsed = self.started.elapsed();
        // Retransmits are read before the threads let go of their sockets.
        let snap = self.snapshot();
        self.join();
        let cpu_end = sys().process_cpu().ok();
        let (cpu_user_percent, cpu_system_percent) = match (self.cpu_start, cpu_end) {
            (Some(a), Some(b)) if elapsed > Duration::ZERO => {
                let w = elapsed.as_secs_f64();
                (
                    100.0 * b.user.saturating_sub(a.user).as_secs_f64() / w,
                    100.0 * b.system.saturating_sub(a.system).as_secs_f64() / w,
                )
            }
            _ => (0.0, 0.0),
        };
        let streams = self
            .streams
            .iter()
            .zip(snap.streams)
            .map(|(r, mut count)| {
                // Receivers stop counting at the token; take the settled value.
                let now = r.raw();
                count.bytes = now.bytes.saturating_sub(r.base.bytes);
                StreamFinal {
                    count,
                    udp: r.udp,
                    packets_sent: now.packets.saturating_sub(r.base.packets),
                    udp_stats: locked(&r.shared.udp).clone(),
                    error: locked(&r.shared.error).clone(),
                }
            })
            .collect();
        Finished {
            elapsed,
            streams,
            cpu_percent: cpu_user_percent + cpu_system_percent,
            cpu_user_percent,
            cpu_system_percent,
        }
    }

    /// Stops every stream thread and waits for it.
    fn join(&mut self) {
        self.stop.cancel();
        for h in self.streams.iter_mut().filter_map(|r| r.handle.take()) {
            // A panicked stream thread left its counters; nothing to add.
            let _ = h.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests;
