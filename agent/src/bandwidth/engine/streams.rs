//! The stream loops, one per thread: send or receive as fast as the
//! socket takes it (or at the paced rate), counting into the stream's
//! shared counters, until the engine cancels the token.

use super::super::iperf3::{UdpHeader, UdpReceiverStats};
use super::shared::{locked, EngineConfig, Shared};
use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

/// Receive buffer for TCP reads. Measured here with bench/bandwidth.sh
/// (alternating runs, single stream): 128 KiB reads beat 256 KiB ones by
/// 10-40 % on loopback and veth (the buffer stays in cache), and beat
/// 1 MiB reads with SO_RCVLOWAT 256 KiB on loopback.
const TCP_READ_BUF: usize = 128 * 1024;

pub(super) fn tcp_send(
    mut s: TcpStream,
    cfg: &EngineConfig,
    shared: &Shared,
    stop: &CancellationToken,
) -> io::Result<()> {
    let buf = vec![0x5au8; cfg.block_size.max(1)];
    let start = Instant::now();
    let mut sent: u64 = 0;
    while !stop.is_cancelled() {
        if cfg.rate_bps > 0 {
            pace(start, sent, cfg.rate_bps);
        }
        match s.write(&buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                sent += n as u64;
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn tcp_recv(
    mut s: TcpStream,
    shared: &Shared,
    stop: &CancellationToken,
) -> io::Result<()> {
    let mut buf = vec![0u8; TCP_READ_BUF];
    while !stop.is_cancelled() {
        match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                if !stop.is_cancelled() {
                    shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(e) if is_wait(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sleeps until sending one more block keeps the stream at or under
/// `rate_bps` on average since `start`.
fn pace(start: Instant, sent_bytes: u64, rate_bps: u64) {
    let due = Duration::from_secs_f64(sent_bytes as f64 * 8.0 / rate_bps as f64);
    let now = start.elapsed();
    if due > now {
        // Sleep in short steps so a stop request is seen promptly.
        std::thread::sleep((due - now).min(Duration::from_millis(5)));
    }
}

/// The realtime clock, as iperf3 stamps UDP datagrams with it.
fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

pub(super) fn udp_send(
    s: UdpSocket,
    cfg: &EngineConfig,
    start: Instant,
    shared: &Shared,
    stop: &CancellationToken,
) -> io::Result<()> {
    let len = cfg
        .block_size
        .clamp(super::super::iperf3::udp_header_len(cfg.udp_64bit), 65_507);
    let mut buf = vec![0x5au8; len];
    let mut pcount: u64 = 0;
    let mut sent: u64 = 0;
    while !stop.is_cancelled() {
        if cfg.rate_bps > 0 {
            let due = Duration::from_secs_f64(sent as f64 * 8.0 / cfg.rate_bps as f64);
            let now = start.elapsed();
            if due > now {
                std::thread::sleep((due - now).min(Duration::from_millis(5)));
                continue;
            }
        }
        pcount += 1;
        let now = wall_now();
        UdpHeader {
            sec: now.as_secs() as u32,
            usec: now.subsec_micros(),
            pcount,
        }
        .encode(&mut buf, cfg.udp_64bit)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        match s.send(&buf) {
            Ok(n) => {
                sent += n as u64;
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                shared.packets.fetch_add(1, Ordering::Relaxed);
            }
            // A full queue or a transient ICMP error: the datagram is gone,
            // which is the receiver's loss to count.
            Err(e) if is_wait(&e) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn udp_recv(
    s: UdpSocket,
    cfg: &EngineConfig,
    shared: &Shared,
    stop: &CancellationToken,
) -> io::Result<()> {
    let mut buf = vec![0u8; 65_536];
    let mut stats = UdpReceiverStats::default();
    let mut since_publish = 0u32;
    while !stop.is_cancelled() {
        match s.recv(&mut buf) {
            Ok(n) => {
                if stop.is_cancelled() {
                    break;
                }
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                if let Ok(h) = UdpHeader::decode(&buf[..n], cfg.udp_64bit) {
                    stats.on_packet(h.pcount, wall_now().as_secs_f64() - h.time_secs());
                }
                since_publish += 1;
                if since_publish >= 1024 {
                    since_publish = 0;
                    *locked(&shared.udp) = stats.clone();
                }
            }
            Err(e) if is_wait(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                *locked(&shared.udp) = stats;
                return Err(e);
            }
        }
    }
    *locked(&shared.udp) = stats;
    Ok(())
}

/// Whether a failed socket call only means "nothing yet, try again": its
/// timeout ran out (`WouldBlock`/`TimedOut`), or a signal interrupted it
/// (`Interrupted`: the kernel never restarts a socket call that has a
/// timeout, and any child of the process exiting sends SIGCHLD).
pub(crate) fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
