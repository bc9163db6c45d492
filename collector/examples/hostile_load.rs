//! `bench/hostile.sh`'s load: one agent stream sending a batch every
//! 100 ms and timing each Ack, optionally under the attacks of issue 24
//! items 3, 4 and 8 at once, all from this process on loopback:
//!
//! - HTTP: 1100 idle connections (re-opened when closed), 50 header drips
//!   (a byte a second), and 300 clients looping on the soak report and
//!   the node list;
//! - gRPC: 40 source addresses (127.0.1.x) x 32 connections that send
//!   only `PRI` (re-opened when closed).
//!
//! Prints one line: `acks=N refused=N ack_p50_ms=.. ack_p99_ms=..
//! rss_peak_kib=.. http_ok=N http_503=N http_other=N` (the RSS from the
//! collector's /proc status, sampled every 100 ms). Every loop is bounded
//! by `--seconds` (at most 600).
//!
//! Usage: hostile_load --grpc ADDR --http ADDR --pid PID --seconds S
//!        --soak NAME [--attack]

// The stream half of the benches' support; its in-process collector is
// for the others (this one measures a collector in its own process).
#[allow(dead_code)]
mod support;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Record, RttSummary};
use support::BoxError;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

struct Args {
    grpc: SocketAddr,
    http: SocketAddr,
    pid: u32,
    seconds: u64,
    soak: String,
    attack: bool,
}

fn args() -> Result<Args, BoxError> {
    let mut a = std::env::args().skip(1);
    let (mut grpc, mut http, mut pid, mut seconds, mut soak) = (None, None, None, 30, None);
    let mut attack = false;
    while let Some(k) = a.next() {
        match k.as_str() {
            "--attack" => attack = true,
            _ => {
                let v = a.next().ok_or(format!("{k} needs a value"))?;
                match k.as_str() {
                    "--grpc" => grpc = Some(v.parse()?),
                    "--http" => http = Some(v.parse()?),
                    "--pid" => pid = Some(v.parse()?),
                    "--seconds" => seconds = v.parse::<u64>()?.clamp(1, 600),
                    "--soak" => soak = Some(v),
                    _ => return Err(format!("unknown argument {k}").into()),
                }
            }
        }
    }
    Ok(Args {
        grpc: grpc.ok_or("--grpc")?,
        http: http.ok_or("--http")?,
        pid: pid.ok_or("--pid")?,
        seconds,
        soak: soak.ok_or("--soak")?,
        attack,
    })
}

/// Counters the attack tasks keep.
#[derive(Default)]
struct Tally {
    http_ok: AtomicU64,
    http_503: AtomicU64,
    http_other: AtomicU64,
}

async fn connect_from(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(from, 0))?;
    s.connect(to).await
}

/// Keeps one connection open that sends `first` and then, every `drip`
/// (if any), one more byte; re-opens it (at most once a second) when the
/// collector closes it, until `end`.
async fn hold(
    from: IpAddr,
    to: SocketAddr,
    first: &'static [u8],
    drip: Option<Duration>,
    end: Instant,
) {
    while Instant::now() < end {
        if let Ok(mut s) = connect_from(from, to).await {
            let _ = s.write_all(first).await;
            let mut buf = [0u8; 256];
            loop {
                let wait = drip.unwrap_or(Duration::from_secs(3600));
                let remaining = end.saturating_duration_since(Instant::now());
                tokio::select! {
                    r = s.readable() => {
                        match s.try_read(&mut buf) {
                            Ok(0) | Err(_) if r.is_ok() => break,
                            _ => {}
                        }
                    }
                    _ = tokio::time::sleep(wait.min(remaining)) => {
                        if Instant::now() >= end || s.write_all(b"x").await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Loops on `path` until `end`, counting the answers.
async fn client(http: SocketAddr, path: String, tally: Arc<Tally>, end: Instant) {
    let c = reqwest::Client::new();
    while Instant::now() < end {
        let r = c
            .get(format!("http://{http}{path}"))
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        let slot = match r.as_ref().map(|r| r.status().as_u16()) {
            Ok(200) => &tally.http_ok,
            Ok(503) => &tally.http_503,
            _ => &tally.http_other,
        };
        slot.fetch_add(1, Ordering::Relaxed);
        if let Ok(r) = r {
            let _ = r.bytes().await;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn attack(a: &Args, tally: &Arc<Tally>, end: Instant) {
    let local: IpAddr = "127.0.0.1".parse().expect("an address");
    for _ in 0..1100 {
        tokio::spawn(hold(local, a.http, b"", None, end));
    }
    for _ in 0..50 {
        let drip = Some(Duration::from_secs(1));
        tokio::spawn(hold(local, a.http, b"GET / HTTP/1.1\r\nX: ", drip, end));
    }
    for i in 0..300 {
        let path = if i % 2 == 0 {
            format!("/api/v1/soaks/{}/report?format=json", a.soak)
        } else {
            "/api/v1/nodes".to_string()
        };
        tokio::spawn(client(a.http, path, tally.clone(), end));
    }
    for src in 1..=40u8 {
        let from = IpAddr::from([127, 0, 1, src]);
        for _ in 0..32 {
            tokio::spawn(hold(from, a.grpc, b"PRI", None, end));
        }
    }
}

/// The collector's resident set (VmRSS), KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn batch(seq: &mut u64) -> Vec<Record> {
    (0..10)
        .map(|_| {
            *seq += 1;
            let now = boltwatch_common::clock::now_unix_ns();
            Record {
                node: "probe".into(),
                boot_id: "boot".into(),
                seq: *seq,
                unix_ns: now,
                payload: Some(Payload::Rtt(RttSummary {
                    peer: "peer".into(),
                    window_start_unix_ns: now,
                    window_ns: 1_000_000_000,
                    sent: 10,
                    received: 10,
                    ..Default::default()
                })),
            }
        })
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[(((sorted.len() as f64) * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let a = args()?;
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let tally = Arc::new(Tally::default());
    if a.attack {
        attack(&a, &tally, end);
        // Let the attack take hold before measuring.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let peak = Arc::new(AtomicU64::new(0));
    let (p, pid) = (peak.clone(), a.pid);
    tokio::spawn(async move {
        while Instant::now() < end {
            p.fetch_max(rss_kib(pid), Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut stream = support::open(a.grpc, "probe").await?;
    let (mut seq, mut acks, mut refused, mut lat) = (0u64, 0u64, 0u64, Vec::new());
    while Instant::now() < end {
        let t = Instant::now();
        if support::send(&mut stream, batch(&mut seq)).await? {
            acks += 1;
            lat.push(t.elapsed().as_secs_f64() * 1e3);
        } else {
            refused += 1;
            stream = support::open(a.grpc, "probe").await?;
        }
        tokio::time::sleep(Duration::from_millis(100).saturating_sub(t.elapsed())).await;
    }
    lat.sort_by(f64::total_cmp);
    println!(
        "acks={acks} refused={refused} ack_p50_ms={:.2} ack_p99_ms={:.2} rss_peak_kib={} http_ok={} http_503={} http_other={}",
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        peak.load(Ordering::Relaxed),
        tally.http_ok.load(Ordering::Relaxed),
        tally.http_503.load(Ordering::Relaxed),
        tally.http_other.load(Ordering::Relaxed),
    );
    std::process::exit(0)
}
