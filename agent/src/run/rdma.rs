//! The RDMA probe role (`[rdma] enabled`, docs/rdma.md): surveys the node
//! once (verbs library, devices, inventory pairing, GID index 1, bridges),
//! logs what it found, and for the ready links runs the dead-peer side
//! channel, the queue-pair exchange and one probe thread per link over the
//! real verbs port, whose windows leave as `rdma_probe` records. A node
//! that is not ready says why once and the role ends: it is not retried
//! until the agent restarts, so it never spins.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boltwatch_common::clock::now_unix_ns;
use boltwatch_proto::v1::record::Payload;
use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::rdma::driver::Driver;
use crate::rdma::jobs::{job_owns, JobWindow};
use crate::rdma::links::{Planned, GID_INDEX};
use crate::rdma::port::Port;
use crate::rdma::probe::{Context, Phase, Settings};
use crate::rdma::side::{self, Side};
use crate::rdma::survey::{survey, Survey};
use crate::rdma::verbs::{Verbs, VerbsPort};
use crate::sink::Sink;

/// How often a link's probe thread advances its probe between spins.
const TICK: Duration = Duration::from_millis(1);
/// The longest a link's thread polls its completion queue without pause
/// after a frame whose answer is due promptly (docs/rdma.md, Cost): twice
/// the tick, so the peer's echo of a warm-up ping, sent at the peer's next
/// tick, lands inside it and the measured ping behind it is timed in µs.
const SPIN: Duration = Duration::from_millis(2);
/// Apple's per-device queue-pair cap, and the QPs left for applications
/// below which the probe skips.
const QP_CAP: u32 = 10;
const QP_HEADROOM: u32 = 1;

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology) {
    if !config.rdma_enabled {
        return;
    }
    let peers: Vec<(String, String)> = topology
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.interface.clone()))
        .collect();
    let addrs: Vec<(String, IpAddr)> = config
        .peers
        .iter()
        .map(|p| (p.name.clone(), p.addr.ip()))
        .collect();
    let side = (config.rdma_side_port, config.rdma_interval, addrs);
    let links = Links {
        settings: settings(config),
        jobs: config.rdma_job_windows.clone(),
        sink: crew.sink.clone(),
        stop: crew.stop.clone(),
    };
    crew.task(role(peers, config.sysfs_root.clone(), side, links));
}

/// The probe's settings from `[rdma]`: a pong is late after one interval
/// (the next ping is due), the peer dead after three silent ones.
fn settings(config: &Config) -> Settings {
    Settings {
        interval: config.rdma_interval,
        watchdog: config.rdma_watchdog,
        pong_timeout: config.rdma_interval,
        peer_dead_after: config.rdma_interval * 3,
        qp_cap: QP_CAP,
        qp_headroom: QP_HEADROOM,
        spin: SPIN,
        burst_interval: config.rdma_burst_interval,
        burst_frames: config
            .rdma_burst_bytes
            .div_ceil(crate::rdma::frame::PAGE as u64),
    }
}

type SideSettings = (u16, Duration, Vec<(String, IpAddr)>);

/// What each link's probe thread needs.
#[derive(Clone)]
struct Links {
    settings: Settings,
    jobs: Vec<JobWindow>,
    sink: Sink,
    stop: CancellationToken,
}

async fn role(peers: Vec<(String, String)>, sysfs_root: PathBuf, side: SideSettings, links: Links) {
    let Ok(s) = tokio::task::spawn_blocking(move || survey(&peers, &sysfs_root)).await else {
        return;
    };
    if !log(&s) {
        return;
    }
    let (port, every, addrs) = side;
    let bind = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let listener = match tokio::net::TcpListener::bind(bind).await {
        Ok(l) => l,
        Err(e) => return warn!(%bind, error = %e, "RDMA side channel cannot listen"),
    };
    let state = Arc::new(Side::default());
    let ready: Vec<(Planned, IpAddr)> = s
        .ready()
        .into_iter()
        .filter_map(|p| {
            let ip = addrs.iter().find(|(n, _)| *n == p.link.peer)?.1;
            Some((p.clone(), ip))
        })
        .collect();
    let mut watchers = Vec::new();
    for (p, ip) in &ready {
        let addr = SocketAddr::from((*ip, port));
        let name = p.link.peer.clone();
        watchers.push(side::watch(name, addr, every, Arc::clone(&state)));
        start_link(p.clone(), *ip, &state, &links);
    }
    let exchanges = ready
        .iter()
        .map(|(_, ip)| exchange(SocketAddr::from((*ip, port)), every, Arc::clone(&state)));
    tokio::join!(
        side::serve(listener, Arc::clone(&state)),
        join_all(watchers),
        join_all(exchanges)
    );
}

/// Offers our hello to the peer at `addr` once our QP exists, every
/// `every`, until the peer's hello is known (sent by either side).
async fn exchange(addr: SocketAddr, every: Duration, side: Arc<Side>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while side.remote(addr.ip()).is_none() {
        tick.tick().await;
        if let Some(ours) = side.local(addr.ip()) {
            side::exchange_once(addr, &ours, &side, every.min(Duration::from_secs(2))).await;
        }
    }
}

/// Runs `p`'s probe on its own thread: the verbs port holds raw handles
/// and its calls may block, so it never runs on the async workers.
fn start_link(p: Planned, ip: IpAddr, side: &Arc<Side>, links: &Links) {
    let (side, links) = (Arc::clone(side), links.clone());
    let name = format!("rdma-{}", p.link.peer);
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || probe_link(&p, ip, &side, &links));
    if let Err(e) = spawned {
        warn!(error = %e, "RDMA probe thread not started");
    }
}

fn probe_link(p: &Planned, ip: IpAddr, side: &Side, links: &Links) {
    let port_num = u8::try_from(p.port).unwrap_or(1);
    let opened =
        Verbs::open().and_then(|v| VerbsPort::open(&v, &p.link.device, port_num, GID_INDEX as u8));
    let mut port = match opened {
        Ok(port) => port,
        Err(e) => {
            return warn!(peer = %p.link.peer, device = %p.link.device, error = %e, "RDMA port not opened; link not probed")
        }
    };
    // The QP first, so there is a QP number to exchange; the probe's own
    // create_uc_qp then returns this same result (never a second set-up).
    if port.create_uc_qp().is_ok() {
        if let Some(ours) = port.local() {
            side.offer(ip, ours);
        }
        match wait_remote(ip, side, &links.stop) {
            Some(theirs) => port.set_remote(theirs),
            None => return,
        }
    }
    drive(p, &mut port, side, links);
}

/// The peer's hello, or `None` when the agent stops first.
fn wait_remote(
    ip: IpAddr,
    side: &Side,
    stop: &CancellationToken,
) -> Option<crate::rdma::hello::Hello> {
    loop {
        if stop.is_cancelled() {
            return None;
        }
        if let Some(h) = side.remote(ip) {
            return Some(h);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ticks the link's probe until the agent stops, emitting each window.
/// While the probe asks to spin, it is ticked again at once (one
/// non-blocking poll each, no sleep) until its spin ends, then at the
/// pace of [`pause`].
fn drive(p: &Planned, port: &mut VerbsPort, side: &Side, links: &Links) {
    let started = Instant::now();
    let mut driver = Driver::new(
        p.link.clone(),
        links.settings.clone(),
        Duration::ZERO,
        now_unix_ns(),
    );
    info!(peer = %p.link.peer, device = %p.link.device, "RDMA probe running");
    while !links.stop.is_cancelled() {
        let unix_ns = now_unix_ns();
        let cx = Context {
            peer_heard: side
                .heard(&p.link.peer)
                .map(|t| t.saturating_duration_since(started)),
            job_owns_link: job_owns(&links.jobs, unix_ns),
        };
        let (_, record) = driver.step(port, started.elapsed(), unix_ns, cx);
        // The spin: the clock read right before each poll stamps what it
        // finds, so a round trip is timed to one poll, not one tick.
        let mut records: Vec<_> = record.into_iter().collect();
        while started.elapsed() < driver.spin_until() {
            std::hint::spin_loop();
            records.extend(driver.step(port, started.elapsed(), unix_ns, cx).1);
        }
        for r in records {
            links.sink.emit(Payload::RdmaProbe(r));
        }
        std::thread::sleep(pause(driver.phase(), links.settings.interval));
    }
}

/// The fast tick only while a QP transition or the ping-pong needs polling;
/// a port not yet up (each tick would count one more `port_down`), failed
/// or wedged is looked at once per interval.
fn pause(phase: Phase, interval: Duration) -> Duration {
    match phase {
        Phase::Transition { .. } | Phase::Ready => TICK,
        Phase::Down | Phase::Failed(_) | Phase::Wedged => interval,
    }
}

/// Logs the survey; true when a link is ready.
fn log(s: &Survey) -> bool {
    let (library, opened) = &s.library;
    let why = match (&s.plan, opened) {
        (Err(why), _) => why.to_string(),
        (Ok((_, skipped)), _) => {
            for why in skipped {
                warn!(reason = %why, "RDMA link not probed");
            }
            for (bridge, member) in &s.bridged {
                warn!(%bridge, %member, "RDMA link is a bridge member (RTR fails with errno 22): not probed");
            }
            String::new()
        }
    };
    let ready = s.ready();
    if !why.is_empty() || ready.is_empty() {
        let why = if why.is_empty() {
            "no ready link"
        } else {
            &why
        };
        warn!(%library, devices = s.devices.len(), reason = why,
            "RDMA probe not ready; not retried until the agent restarts");
        return false;
    }
    for p in &ready {
        info!(peer = %p.link.peer, device = %p.link.device, interface = %p.link.interface,
            "RDMA link ready: probed over verbs once the peer's agent has exchanged its queue pair");
    }
    true
}
