//! The bandwidth server against clients it must refuse, with Debian's
//! stock `iperf3` where a real client matters: a client arriving while
//! another test (ours or theirs) holds the server hears "busy" the iperf3
//! way, never a reset.
//!
//! A missing `iperf3` fails these tests; it never skips them.

use boltwatch_agent::bandwidth::load::TestGate;
use boltwatch_agent::bandwidth::{spawn_server_with, ServerOptions};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

fn iperf3() -> &'static str {
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

/// Our server on an ephemeral loopback port, stopped and joined on drop.
struct OurServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl OurServer {
    fn start(opts: ServerOptions) -> OurServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let handle = spawn_server_with(l, stop.clone(), opts).unwrap();
        OurServer {
            addr,
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for OurServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs a stock `iperf3 -c` and returns its JSON "error" (empty when the
/// test ran).
fn stock_error(addr: SocketAddr, args: &[&str]) -> String {
    let out = Command::new(iperf3())
        .args(["-c", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-J"])
        .args(args)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["error"].as_str().unwrap_or_default().to_string()
}

#[test]
fn stock_clients_hear_busy_not_a_reset_while_the_gate_is_held() {
    let gate = TestGate::default();
    let held = gate.try_enter().unwrap();
    let srv = OurServer::start(ServerOptions {
        gate: Some(gate.clone()),
        ..Default::default()
    });
    let errors: Vec<String> = (0..30).map(|_| stock_error(srv.addr, &["-t", "1"])).collect();
    let busy = errors.iter().filter(|e| e.contains("busy")).count();
    eprintln!("30 stock clients while the gate is held: {busy} busy; others: {:?}",
        errors.iter().filter(|e| !e.contains("busy")).collect::<Vec<_>>());
    assert_eq!(busy, 30, "{errors:?}");
    drop(held);
}

#[test]
fn probe_raw_busy() {
    use std::io::{Read, Write};
    let gate = TestGate::default();
    let held = gate.try_enter().unwrap();
    let srv = OurServer::start(ServerOptions {
        gate: Some(gate.clone()),
        ..Default::default()
    });
    let mut res = std::collections::BTreeMap::new();
    for i in 0..20 {
        let mut c = std::net::TcpStream::connect(srv.addr).unwrap();
        c.write_all(&[b'x'; 37]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50 + (i % 3) * 20));
        let _ = c.write_all(&[1]);
        let mut b = [0u8; 4];
        let r = c.read(&mut b).map(|n| b[..n].to_vec()).map_err(|e| e.kind());
        *res.entry(format!("{r:?}")).or_insert(0) += 1;
    }
    eprintln!("raw: {res:?}");
    drop(held);
}
