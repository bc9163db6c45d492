//! Assembles a running agent from its parts: the STAMP reflector and
//! senders, the counter and thermal sampler, the self-health reporter, the
//! bandwidth server and test scheduler (whose tests tag the RTT windows
//! they overlap as under load) and the transport. Everything the process would otherwise grab (sockets, the
//! shutdown signal) is passed in, so `main`, the lab and the tests share this
//! one entry point.

use std::future::Future;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::{record::Payload, AgentStats, Hello, Interface, PathCheck, Peer};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::bandwidth::load::{LoadBoard, TestGate};
use crate::bandwidth::schedule::{self, PeerServer, ScheduleOptions};
use crate::config::Config;
use crate::error::Error;
use crate::health::Health;
use crate::link::LinkChange;
use crate::outage::{OutageIds, PeerLedger};
use crate::service::{self, ServiceTarget};
use crate::sink::{now_unix_ns, Sink};
use crate::stamp::ProbeEvent;
use crate::{bandwidth, counters, discovery, link, stamp, thermal, transport};

/// What the outage ledger thread consumes.
enum LedgerInput {
    Probe(usize, ProbeEvent),
    Link(LinkChange),
    Service {
        peer: usize,
        service: String,
        up: bool,
        at: u64,
    },
}

/// Sockets the agent listens on, bound by the caller.
#[derive(Debug)]
pub struct Listeners {
    /// The STAMP reflector's UDP socket.
    pub stamp: UdpSocket,
    /// The bandwidth server's TCP listener; `None` runs no server.
    pub bandwidth: Option<TcpListener>,
}

impl Listeners {
    /// Binds the addresses from `config`. The bandwidth port is bound only
    /// when bandwidth tests are enabled, and failing to bind it is not
    /// fatal (the agent runs without a server and says so): probing must
    /// not stop because, say, an iperf3 already holds the port.
    pub fn bind(config: &Config) -> Result<Listeners, Error> {
        let stamp = UdpSocket::bind(config.listen).map_err(|source| Error::Bind {
            what: "STAMP reflector",
            addr: config.listen,
            source,
        })?;
        let bandwidth = bind_bandwidth(config);
        Ok(Listeners { stamp, bandwidth })
    }

    /// The reflector's bound address.
    pub fn stamp_addr(&self) -> std::io::Result<SocketAddr> {
        self.stamp.local_addr()
    }
}

/// What the agent left behind when it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The boot id it ran as.
    pub boot_id: String,
    /// Records that were never acknowledged by the collector.
    pub undelivered: usize,
    /// Highest sequence number made.
    pub last_seq: u64,
}

/// A fresh random boot id (128 bits, hex).
pub fn new_boot_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<Stopped, Error> {
    let health = Arc::new(Health::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (sink, rx) = Sink::new();
    let boot_id = new_boot_id();
    // Before any worker starts, so a locked or unwritable spool fails fast.
    let spool = crate::spool::Spool::open(
        crate::spool::SpoolOptions {
            dir: config.spool_dir.clone(),
            max_bytes: config.spool_max_bytes,
        },
        &config.node,
        &boot_id,
    )
    .map_err(|e| Error::Spawn {
        what: "the spool".into(),
        source: std::io::Error::other(e),
    })?;
    let mut threads: Vec<(String, JoinHandle<()>)> = Vec::new();

    let reflector_addr = listeners.stamp.local_addr().ok();
    let h = stamp::spawn_reflector(listeners.stamp, health.clone(), stop.clone()).map_err(
        |source| Error::Spawn {
            what: "STAMP reflector".into(),
            source,
        },
    )?;
    threads.push(("reflector".into(), h));

    // Which interface each peer is reached through (discovery, unless the
    // operator named one).
    let mut peers = Vec::new();
    for p in &config.peers {
        let iface = match &config.interface {
            Some(i) => i.clone(),
            None => discovery::route_interface(p.addr).unwrap_or_else(|e| {
                warn!(peer = %p.name, addr = %p.addr, error = %e, "no route to peer yet");
                String::from("unknown")
            }),
        };
        peers.push(Peer {
            name: p.name.clone(),
            address: p.addr.to_string(),
            interface: iface,
        });
    }
    let mut iface_names: Vec<String> = peers
        .iter()
        .map(|p| p.interface.clone())
        .filter(|i| i != "unknown")
        .collect();
    iface_names.sort();
    iface_names.dedup();
    let interfaces: Vec<Interface> = iface_names
        .iter()
        .map(|n| discovery::describe(n, &config.sysfs_root))
        .collect();

    // The outage ledger: one thread owns every peer's ledger; probes, link
    // events and service checks feed it through one channel.
    let (ledger_tx, ledger_rx) = std::sync::mpsc::channel::<LedgerInput>();
    let ids = OutageIds::new();
    let ledgers: Vec<PeerLedger> = peers
        .iter()
        .map(|p| {
            PeerLedger::new(
                &p.name,
                &p.interface,
                config.outage_after_missing,
                ids.clone(),
            )
        })
        .collect();
    let load = load_board(&config);
    let h = spawn_ledger(ledgers, ledger_rx, sink.clone()).map_err(|source| Error::Spawn {
        what: "outage ledger".into(),
        source,
    })?;
    threads.push(("ledger".into(), h));

    for (i, (p, cfg)) in peers.iter().zip(&config.peers).enumerate() {
        let (probe_tx, probe_rx) = std::sync::mpsc::channel::<ProbeEvent>();
        let ltx = ledger_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("ledger-fwd-{i}"))
            .spawn(move || {
                for ev in probe_rx {
                    if ltx.send(LedgerInput::Probe(i, ev)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|source| Error::Spawn {
                what: "ledger forwarder".into(),
                source,
            })?;
        threads.push((format!("ledger forwarder {i}"), h));
        let target = stamp::Target {
            peer: p.name.clone(),
            addr: cfg.addr,
            interface: p.interface.clone(),
            bind_device: config.interface.clone(),
        };
        let opts = stamp::SenderOptions {
            interval: config.probe_interval,
            timeout: config.probe_timeout,
        };
        let h = stamp::spawn_sender_tagged(
            target,
            opts,
            sink.clone(),
            health.clone(),
            Some(probe_tx),
            stop.clone(),
            load.tag(&p.name),
        )
        .map_err(|source| Error::Spawn {
            what: format!("STAMP sender to {}", p.name),
            source,
        })?;
        threads.push((format!("sender {}", p.name), h));
    }

    // Link events: emitted as records at once by the watcher, and fed to
    // the ledger.
    let (link_tx, link_rx) = std::sync::mpsc::channel::<LinkChange>();
    let watcher = match link::spawn_watcher(
        iface_names.clone(),
        config.sysfs_root.clone(),
        sink.clone(),
        Some(link_tx),
    ) {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(error = %e, "link events unavailable; carrier is still sampled with the counters");
            None
        }
    };
    {
        let ltx = ledger_tx.clone();
        let h = std::thread::Builder::new()
            .name("ledger-link".into())
            .spawn(move || {
                for c in link_rx {
                    if ltx.send(LedgerInput::Link(c)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|source| Error::Spawn {
                what: "ledger link forwarder".into(),
                source,
            })?;
        threads.push(("ledger link forwarder".into(), h));
    }

    let h = spawn_sampler(&config, iface_names.clone(), sink.clone(), stop.clone()).map_err(
        |source| Error::Spawn {
            what: "sampler".into(),
            source,
        },
    )?;
    threads.push(("sampler".into(), h));

    let hello = Hello {
        schema_revision: boltwatch_proto::SCHEMA_REVISION,
        node: config.node.clone(),
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        os: os_description(),
        boot_id: boot_id.clone(),
        interfaces,
        peers: peers.clone(),
        hostname: sysinfo::System::host_name().unwrap_or_default(),
        started_unix_ns: now_unix_ns(),
    };
    info!(node = %config.node, boot_id = %boot_id, reflector = ?reflector_addr, peers = config.peers.len(), "agent started");
    crate::platform::log_unsupported();

    let (stop_tx, stop_rx) = watch::channel(false);
    let transport = tokio::spawn(transport::run(
        transport::TransportOptions {
            collector: config.collector.clone(),
            hello,
            token: config.token.clone(),
            flush_timeout: Duration::from_secs(3),
        },
        spool,
        rx,
        health.clone(),
        stop_rx,
    ));
    let reporter = tokio::spawn(report_health(health.clone(), sink.clone()));
    let mut tasks = Vec::new();
    for (i, p) in config.peers.iter().enumerate() {
        for svc in &config.services {
            let target = ServiceTarget {
                peer: p.name.clone(),
                service: svc.name.clone(),
                addr: service::service_addr(p.addr.ip(), svc.port),
            };
            let ltx = ledger_tx.clone();
            tasks.push(tokio::spawn(service::watch(
                target,
                config.service_interval,
                sink.clone(),
                move |r, at| {
                    let _ = ltx.send(LedgerInput::Service {
                        peer: i,
                        service: r.service.clone(),
                        up: r.up,
                        at,
                    });
                },
            )));
        }
    }
    drop(ledger_tx);
    start_bandwidth(
        &config,
        listeners.bandwidth,
        &peers,
        &load,
        &sink,
        &stop,
        &mut threads,
        &mut tasks,
    )?;
    for (p, cfg) in peers.iter().zip(&config.peers) {
        tasks.push(tokio::spawn(watch_path(
            p.name.clone(),
            cfg.addr,
            p.interface.clone(),
            sink.clone(),
        )));
    }

    shutdown.await;
    info!("agent stopping");
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    stop.store(true, Ordering::SeqCst);
    if let Some(w) = watcher {
        let _ = tokio::task::spawn_blocking(move || w.stop()).await;
    }
    for (name, h) in threads {
        let joined = tokio::task::spawn_blocking(move || h.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            warn!(worker = %name, "worker panicked");
        }
    }
    reporter.abort();
    // A final health record so the collector sees the last counters.
    emit_health(&health, &sink, &mut HealthProbe::new());
    drop(sink);
    let _ = stop_tx.send(true);
    let (undelivered, last_seq) = match transport.await {
        Ok(spool) => (spool.unacked() as usize, spool.next_seq() - 1),
        Err(_) => (0, 0),
    };
    Ok(Stopped {
        boot_id,
        undelivered,
        last_seq,
    })
}

fn bind_bandwidth(config: &Config) -> Option<TcpListener> {
    if !config.bandwidth_enabled {
        return None;
    }
    match TcpListener::bind(config.bandwidth_listen) {
        Ok(l) => Some(l),
        Err(e) => {
            warn!(addr = %config.bandwidth_listen, error = %e,
                "cannot bind the bandwidth server; running without one");
            None
        }
    }
}

/// Every peer's load marks, reachable by name (our tests) and by the IPs
/// it may test us from: its STAMP and bandwidth addresses.
fn load_board(config: &Config) -> LoadBoard {
    LoadBoard::new(config.peers.iter().map(|p| {
        (
            p.name.clone(),
            vec![p.addr.ip(), config.bandwidth_addr(p).ip()],
        )
    }))
}

/// Starts the bandwidth server on `listener` (if any) and, when enabled,
/// the scheduler testing every peer. Both share the one-test gate and the
/// load marks.
#[allow(clippy::too_many_arguments)]
fn start_bandwidth(
    config: &Config,
    listener: Option<TcpListener>,
    peers: &[Peer],
    load: &LoadBoard,
    sink: &Sink,
    stop: &Arc<AtomicBool>,
    threads: &mut Vec<(String, JoinHandle<()>)>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Result<(), Error> {
    let gate = TestGate::default();
    if let Some(l) = listener {
        let opts = bandwidth::ServerOptions {
            gate: Some(gate.clone()),
            load: Some(load.clone()),
            ..Default::default()
        };
        let h =
            bandwidth::spawn_server_with(l, stop.clone(), opts).map_err(|source| Error::Spawn {
                what: "bandwidth server".into(),
                source,
            })?;
        threads.push(("bandwidth server".into(), h));
    }
    if !config.bandwidth_enabled || config.peers.is_empty() {
        return Ok(());
    }
    let plan = match schedule::plan_config(
        config.bandwidth_interval,
        config.bandwidth_duration,
        config.bandwidth_duty_cycle,
    ) {
        Ok(p) => p,
        Err(e) => {
            // Config::build checked this already; a hand-made Config may not.
            warn!(error = %e, "bandwidth tests disabled");
            return Ok(());
        }
    };
    let targets = peers
        .iter()
        .zip(&config.peers)
        .map(|(p, cfg)| PeerServer {
            peer: p.name.clone(),
            addr: config.bandwidth_addr(cfg),
            interface: p.interface.clone(),
        })
        .collect();
    let opts = ScheduleOptions {
        plan,
        streams: config.bandwidth_streams,
        gate,
        load: load.clone(),
    };
    tasks.push(tokio::spawn(schedule::run_schedule(
        targets,
        opts,
        sink.clone(),
        stop.clone(),
    )));
    Ok(())
}

fn spawn_ledger(
    mut ledgers: Vec<PeerLedger>,
    rx: std::sync::mpsc::Receiver<LedgerInput>,
    sink: Sink,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ledger".into())
        .spawn(move || {
            // Ends when every producer (senders, watcher, service checks) is gone.
            for input in rx {
                let out = match input {
                    LedgerInput::Probe(
                        i,
                        ProbeEvent::Reply {
                            seq, sent_unix_ns, ..
                        },
                    ) => ledgers[i].on_probe_reply(u64::from(seq), sent_unix_ns, now_unix_ns()),
                    LedgerInput::Probe(i, ProbeEvent::Overdue { seq, sent_unix_ns }) => {
                        ledgers[i].on_probe_missing(u64::from(seq), sent_unix_ns, now_unix_ns())
                    }
                    LedgerInput::Link(c) => ledgers
                        .iter_mut()
                        .flat_map(|l| l.on_link_change(&c))
                        .collect(),
                    LedgerInput::Service {
                        peer,
                        service,
                        up,
                        at,
                    } => ledgers[peer].on_service(&service, up, at),
                };
                for o in out {
                    sink.emit(Payload::Outage(o));
                }
            }
        })
}

/// Re-checks every 5 s which interface the route to a peer leaves through;
/// emits a record when the answer changes and once a minute.
async fn watch_path(peer: String, addr: SocketAddr, expected: String, sink: Sink) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    let mut last: Option<(bool, String)> = None;
    let mut since_emit = 0u32;
    loop {
        tick.tick().await;
        let route = tokio::task::spawn_blocking(move || discovery::route_interface(addr))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let ok = !route.is_empty() && route == expected;
        let state = (ok, route.clone());
        since_emit += 1;
        if last.as_ref() != Some(&state) || since_emit >= 12 {
            if last.as_ref().is_some_and(|l| l.0 && !ok) {
                warn!(peer = %peer, expected = %expected, route = %route, "route to peer left the expected interface");
            }
            sink.emit(Payload::Path(PathCheck {
                peer: peer.clone(),
                expected_interface: expected.clone(),
                route_interface: route,
                ok,
            }));
            last = Some(state);
            since_emit = 0;
        }
    }
}

fn os_description() -> String {
    let version = sysinfo::System::os_version()
        .or_else(|_| sysinfo::System::kernel_version())
        .unwrap_or_default();
    format!("{} {}", std::env::consts::OS, version)
        .trim()
        .to_string()
}

/// Reads interface counters every `counters_interval` and thermals every
/// `thermal_interval` on one thread: both are blocking file or sysctl reads
/// that must stay off the async runtime and off the probe threads.
fn spawn_sampler(
    config: &Config,
    interfaces: Vec<String>,
    sink: Sink,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let root: PathBuf = config.sysfs_root.clone();
    let counters_every = config.counters_interval;
    let thermal_every = config.thermal_interval;
    std::thread::Builder::new().name("sampler".into()).spawn(move || {
        let mut counter_src = counters::default_source(&root);
        let mut thermal_src = thermal::default_source(&root);
        let mut failing: std::collections::HashSet<String> = Default::default();
        let start = Instant::now();
        let mut next_counters = start;
        let mut next_thermal = start;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next_counters {
                next_counters += counters_every;
                for name in &interfaces {
                    match counter_src.read(name) {
                        Ok(c) => {
                            failing.remove(name);
                            sink.emit(Payload::Counters(c));
                        }
                        Err(e) => {
                            if failing.insert(name.clone()) {
                                warn!(interface = %name, error = %e, "cannot read interface counters");
                            }
                        }
                    }
                }
            }
            if now >= next_thermal {
                next_thermal += thermal_every;
                match thermal_src.read() {
                    Ok(t) if !t.sensors.is_empty() || t.throttle.is_some() => sink.emit(Payload::Thermal(t)),
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "cannot read thermals"),
                }
            }
            let wake = next_counters.min(next_thermal);
            let nap = wake.saturating_duration_since(Instant::now()).min(Duration::from_millis(100));
            std::thread::sleep(nap);
        }
    })
}

/// Process figures for the health record.
struct HealthProbe {
    sys: Option<sysinfo::System>,
    pid: sysinfo::Pid,
}

impl HealthProbe {
    fn new() -> HealthProbe {
        HealthProbe {
            sys: sysinfo::System::new().ok(),
            pid: sysinfo::Pid::from_u32(std::process::id()),
        }
    }

    fn sample(&mut self) -> (u64, f64) {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate};
        let Some(sys) = self.sys.as_mut() else {
            return (0, 0.0);
        };
        sys.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            true,
            ProcessRefreshKind::nothing().with_memory().with_cpu(),
        );
        match sys.process(self.pid) {
            Some(p) => (p.memory(), p.accumulated_cpu_time() as f64 / 1000.0),
            None => (0, 0.0),
        }
    }
}

fn emit_health(health: &Health, sink: &Sink, probe: &mut HealthProbe) {
    let (resident_bytes, cpu_seconds) = probe.sample();
    sink.emit(Payload::AgentStats(AgentStats {
        malformed_packets: Health::get(&health.malformed_packets),
        dropped_records: Health::get(&health.dropped_records),
        reconnects: Health::get(&health.reconnects),
        resident_bytes,
        cpu_seconds,
        reflected_packets: Health::get(&health.reflected_packets),
        queued_records: Health::get(&health.queued_records),
        unsupported_sources: crate::platform::unsupported_sources(),
    }));
}

async fn report_health(health: Arc<Health>, sink: Sink) {
    let mut probe = HealthProbe::new();
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        emit_health(&health, &sink, &mut probe);
    }
}
