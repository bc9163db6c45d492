//! What the agent's integration tests share: the check that stock `iperf3`
//! is installed, and the agent's own servers (bandwidth server, STAMP
//! reflector) on ephemeral loopback ports, stopped and joined on drop.
//! Each test binary uses a part of it, hence the `dead_code` allow.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;

use boltwatch_agent::bandwidth::server::Refusals;
use boltwatch_agent::bandwidth::{spawn_server_with, ServerOptions};
use boltwatch_agent::health::Health;
use boltwatch_agent::stamp::reflector::{spawn_reflector_with, ReflectorOptions};
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

/// A thread the test started: cancelled and joined on drop. A panic in
/// the thread fails the test (unless the test is already failing).
pub struct Running {
    pub stop: CancellationToken,
    pub handle: Option<JoinHandle<()>>,
    what: &'static str,
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
        let stop = CancellationToken::new();
        let refusals = opts.refusals.clone();
        let handle = spawn_server_with(l, stop.clone(), opts).unwrap();
        OurServer {
            addr,
            refusals,
            thread: Running {
                stop,
                handle: Some(handle),
                what: "bandwidth server",
            },
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
        let stop = CancellationToken::new();
        let handle = spawn_reflector_with(socket, health.clone(), stop.clone(), opts).unwrap();
        Reflector {
            addr,
            health,
            thread: Running {
                stop,
                handle: Some(handle),
                what: "reflector",
            },
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
