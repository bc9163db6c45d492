//! A running agent, assembled from its roles. Everything the process would
//! otherwise grab (sockets, the shutdown signal) is passed in, so `main`,
//! the lab and the tests share this one entry point, [`run`].
//!
//! Each role starts from its own small function, in the order below; all
//! of them stop on one [`CancellationToken`] (threads poll it, tasks run
//! until it fires):
//!
//! | role | where | runs as |
//! |---|---|---|
//! | STAMP reflector | [`reflector`] | thread |
//! | outage tracker | [`outage_tracker`] | thread, fed by one channel |
//! | STAMP sender, one per peer | [`senders`] | thread per peer |
//! | link watcher | [`link_watcher`] | thread |
//! | counter, thermal and Thunderbolt-port (fabric) sampler | [`sampler`] | thread |
//! | service checks | [`services`] | task per peer and service |
//! | bandwidth server and scheduler | [`bandwidth`] | thread, task |
//! | path MTU discovery, one peer after another | [`path_mtu`] | thread |
//! | path watch (route and path MTU) | [`path_watch`] | task per peer |
//! | fabric checks (settings that take a cluster down) | [`fabric`] | task |
//! | RDMA probe survey and side channel (`rdma.enabled`) | [`rdma`] | task |
//! | sleep and wake, `prevent_sleep` | [`power`] | thread |
//! | health reporter | [`health_reporter`] | task |
//! | the node's `/metrics` (`metrics_listen`) | [`metrics_server`] | task |
//! | spool recovery, then the transport | [`transport`] | blocking thread, then task, until the sinks close |
//!
//! The spool directory is locked before any role starts, and recovered
//! last, off the reflector's and the probes' path: records made meanwhile
//! wait in the sink's channel.
//!
//! Stopping runs the other way: the producers stop and are joined, the
//! outage tracker drains what they reported, a final health record goes
//! out, and the last sink is dropped, which tells the transport to flush
//! and hand back the spool.

mod bandwidth;
mod crew;
mod fabric;
mod health_reporter;
mod link_watcher;
mod metrics_server;
mod outage_tracker;
mod path_mtu;
mod path_watch;
mod power;
mod rdma;
mod reflector;
mod sampler;
mod senders;
mod services;
#[cfg(test)]
mod tests;
mod topology;
mod transport;

use std::future::Future;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::Config;
use crate::error::Error;
use crate::health::Health;
use crate::metrics::late::LateReplies;
use crate::spool::Spool;
use crew::Crew;
use topology::Topology;

/// Sockets the agent listens on, bound by the caller.
#[derive(Debug)]
pub struct Listeners {
    /// The STAMP reflector's UDP socket.
    pub stamp: UdpSocket,
    /// The bandwidth server's TCP listener; `None` runs no server.
    pub bandwidth: Option<TcpListener>,
    /// The node's own `/metrics` listener; `None` serves none.
    pub metrics: Option<TcpListener>,
}

impl Listeners {
    /// Binds the addresses from `config`. The bandwidth port is bound only
    /// when bandwidth tests are enabled, and failing to bind it is not
    /// fatal (the agent runs without a server and says so): probing must
    /// not stop because, say, an iperf3 already holds the port. The
    /// metrics port is bound when configured, and must bind: a scrape
    /// target that silently is not there is worse than a failed start.
    pub fn bind(config: &Config) -> Result<Listeners, Error> {
        let stamp = UdpSocket::bind(config.listen).map_err(|source| Error::Bind {
            what: "STAMP reflector",
            addr: config.listen,
            source,
        })?;
        let bandwidth = bandwidth::bind(config);
        let metrics = match config.metrics_listen {
            Some(addr) => Some(TcpListener::bind(addr).map_err(|source| Error::Bind {
                what: "metrics server",
                addr,
                source,
            })?),
            None => None,
        };
        Ok(Listeners {
            stamp,
            bandwidth,
            metrics,
        })
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
    run_supervised(config, listeners, |_| shutdown).await
}

/// What a service manager's watchdog may read of a running agent: the
/// counters of the work loops that must keep moving.
#[derive(Debug, Clone)]
pub struct Liveness {
    health: Arc<Health>,
    probing: bool,
}

impl Liveness {
    /// `(loop, counter)`: the sampler's turns, and, when there are peers to
    /// probe, the RTT windows the senders closed (one a second per peer,
    /// lost probes included, so a dead peer does not stop them).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = vec![("sampler", Health::get(&self.health.sampler_turns))];
        if self.probing {
            c.push(("probe windows", Health::get(&self.health.probe_windows)));
        }
        c
    }
}

/// As [`run`], for a supervised process: once every role started, `serve`
/// gets the agent's [`Liveness`] and returns the future the agent runs
/// until; the binary sends systemd's READY=1 there and runs the watchdog.
/// A spool that cannot be recovered stops the agent with its error.
pub async fn run_supervised<F, Fut>(
    config: Config,
    listeners: Listeners,
    serve: F,
) -> Result<Stopped, Error>
where
    F: FnOnce(Liveness) -> Fut,
    Fut: Future<Output = ()>,
{
    let probing = !config.peers.is_empty();
    let agent = Agent::start(config, listeners)?;
    let failed = agent.spool_failed.clone();
    let liveness = Liveness {
        health: agent.crew.health.clone(),
        probing,
    };
    tokio::select! {
        () = serve(liveness) => {}
        () = failed.cancelled() => {}
    }
    info!("agent stopping");
    agent.stop().await
}

/// The roles of a started agent.
struct Agent {
    boot_id: String,
    crew: Crew,
    outage: outage_tracker::Running,
    transport: JoinHandle<Result<Spool, Error>>,
    /// Cancelled when the spool could not be recovered.
    spool_failed: CancellationToken,
}

impl Agent {
    fn start(config: Config, listeners: Listeners) -> Result<Agent, Error> {
        let boot_id = new_boot_id();
        // Before any role starts, so a locked or unwritable spool fails fast;
        // it is recovered once they all run.
        let locked = transport::lock(&config)?;
        let (mut crew, records) = Crew::new(CancellationToken::new());
        let topology = Topology::discover(&config);
        let reflector_addr = listeners.stamp.local_addr().ok();
        reflector::start(&mut crew, listeners.stamp)?;
        let outage = outage_tracker::start(&crew, &config, &topology)?;
        let load = bandwidth::load_board(&config);
        let late = LateReplies::new(&config.node, topology.peers.iter().map(|p| p.name.clone()));
        senders::start(&mut crew, &config, &topology, &load, &outage, &late)?;
        link_watcher::start(&mut crew, &config, &topology, &outage);
        sampler::start(&mut crew, &config, &topology)?;
        services::start(&mut crew, &config, &outage);
        bandwidth::start(&mut crew, &config, &topology, listeners.bandwidth, &load)?;
        let mtus = path_mtu::start(&mut crew, &config, &topology)?;
        path_watch::start(&mut crew, &config, &topology, mtus);
        fabric::start(&mut crew, &config, &topology);
        rdma::start(&mut crew, &config, &topology);
        power::start(&mut crew, &config, &outage)?;
        health_reporter::start(&mut crew);
        let hello = topology.hello(&config, &boot_id);
        let tap = match listeners.metrics {
            Some(l) => Some(metrics_server::start(&mut crew, l, &hello, late)?),
            None => None,
        };
        info!(node = %config.node, boot_id = %boot_id, reflector = ?reflector_addr,
            peers = config.peers.len(), "agent started");
        crate::support::log_unsupported();
        let recovery = transport::Recovery {
            locked,
            boot_id: boot_id.clone(),
            tap,
            failed: CancellationToken::new(),
        };
        let spool_failed = recovery.failed.clone();
        let transport = transport::start(&config, hello, recovery, records, &crew);
        Ok(Agent {
            boot_id,
            crew,
            outage: outage.running(),
            transport,
            spool_failed,
        })
    }

    async fn stop(self) -> Result<Stopped, Error> {
        let Agent {
            boot_id,
            mut crew,
            outage,
            transport,
            spool_failed: _,
        } = self;
        crew.stop().await;
        outage.join().await;
        health_reporter::emit_final(&crew);
        // The last sink: the transport flushes and returns the spool.
        drop(crew);
        let (undelivered, last_seq) = match transport.await {
            Ok(Ok(spool)) => (spool.unacked() as usize, spool.next_seq() - 1),
            Ok(Err(e)) => return Err(e),
            Err(e) => {
                warn!(error = %e, "transport task failed");
                (0, 0)
            }
        };
        Ok(Stopped {
            boot_id,
            undelivered,
            last_seq,
        })
    }
}
