//! What the agent's integration tests share: the check that stock `iperf3`
//! is installed, and the agent's own servers (bandwidth server, STAMP
//! reflector) on ephemeral loopback ports, stopped and joined on drop.
//! Each test binary uses a part of it, hence the `dead_code` allow.
#![allow(dead_code)]

use std::net::{SocketAddr, SocketAddrV4, TcpListener, UdpSocket};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;

use boltwatch_agent::bandwidth::server::Refusals;
use boltwatch_agent::bandwidth::{spawn_server, ServerOptions};
use boltwatch_agent::health::Health;
use boltwatch_agent::stamp::{spawn_reflector, ReflectorOptions};
use tokio_util::sync::CancellationToken;

/// The stock `iperf3` binary; a missing one fails the test, never skips it.
pub fn iperf3() -> &'static str {
    let ok = Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "iperf3 is required for these tests (apt-get install -y iperf3); not skipping"
    );
    "iperf3"
}

/// Sends `payload` as a UDP datagram from `from` to `to` with a forged
/// source, through a raw IPv4 socket with our own header: the kernel fills
/// in the IP checksum and id, the UDP checksum is 0 (none, allowed over
/// IPv4). Needs root; without it the test fails, it does not skip.
pub fn spoof_udp(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) {
    let raw = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::UDP))
        .expect("raw socket (this test needs root; it does not skip)");
    raw.set_header_included_v4(true).unwrap();
    let total = 20 + 8 + payload.len();
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8]);
    p.extend_from_slice(&[0, 0, 0x40, 0]); // id 0 (kernel fills), DF
    p.extend_from_slice(&[64, 17, 0, 0]); // TTL, UDP, checksum (kernel)
    p.extend_from_slice(&from.ip().octets());
    p.extend_from_slice(&to.ip().octets());
    p.extend_from_slice(&from.port().to_be_bytes());
    p.extend_from_slice(&to.port().to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    let n = raw
        .send_to(&p, &SockAddr::from(SocketAddr::V4(to)))
        .unwrap();
    assert_eq!(n, total);
}

/// The /proc/net/tcp rows (split into fields) of sockets listening on
/// 127.0.0.1:`port`: field 1 is the local address, 3 the state (`0A` is
/// LISTEN), 4 `tx_queue:rx_queue` (for a listener, rx is its accept queue).
pub fn loopback_listeners(port: u16) -> Vec<Vec<String>> {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|f| f.len() > 4 && f[1] == want && f[3] == "0A")
        .collect()
}

/// A thread the test started: cancelled and joined on drop. A panic in
/// the thread fails the test (unless the test is already failing).
pub struct Running {
    pub stop: CancellationToken,
    pub handle: Option<JoinHandle<()>>,
    what: &'static str,
}

impl Running {
    /// Starts `what` through `spawn`, which gets the thread's stop token.
    fn start(
        what: &'static str,
        spawn: impl FnOnce(CancellationToken) -> std::io::Result<JoinHandle<()>>,
    ) -> Running {
        let stop = CancellationToken::new();
        let handle = spawn(stop.clone()).unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Running {
            stop,
            handle: Some(handle),
            what,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(h) = self.handle.take() {
            let joined = h.join();
            if !std::thread::panicking() {
                joined.unwrap_or_else(|_| panic!("{} thread must not panic", self.what));
            }
        }
    }
}

/// Our bandwidth server on an ephemeral loopback port.
pub struct OurServer {
    pub addr: SocketAddr,
    pub refusals: Arc<Refusals>,
    pub thread: Running,
}

impl OurServer {
    pub fn start(opts: ServerOptions) -> OurServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let refusals = opts.refusals.clone();
        let thread = Running::start("bandwidth server", |stop| spawn_server(l, stop, opts));
        OurServer {
            addr,
            refusals,
            thread,
        }
    }
}

/// Our STAMP reflector on an ephemeral loopback port.
pub struct Reflector {
    pub addr: SocketAddr,
    pub health: Arc<Health>,
    pub thread: Running,
}

impl Reflector {
    pub fn start(opts: ReflectorOptions) -> Reflector {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let health = Arc::new(Health::default());
        let thread = Running::start("reflector", |stop| {
            spawn_reflector(socket, health.clone(), stop, opts)
        });
        Reflector {
            addr,
            health,
            thread,
        }
    }

    /// Reflected, refused as a reflection, refused as its own address,
    /// refused over the rate limit.
    pub fn counts(&self) -> [u64; 4] {
        let h = &self.health;
        [
            Health::get(&h.reflected_packets),
            Health::get(&h.stamp_refused_reflected),
            Health::get(&h.stamp_refused_own_address),
            Health::get(&h.stamp_refused_rate_limited),
        ]
    }
}
