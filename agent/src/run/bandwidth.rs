//! The bandwidth roles: the server peers test against, and the scheduler
//! testing every peer. Both share the node-wide one-test gate and the load
//! marks the STAMP senders tag their windows from.

use std::net::TcpListener;

use tracing::warn;

use super::crew::Crew;
use super::topology::Topology;
use crate::bandwidth::expect::{path_speed, LinkSpeed};
use crate::bandwidth::load::{LoadBoard, TestGate};
use crate::bandwidth::schedule::{self, PeerServer, ScheduleOptions};
use crate::bandwidth::thermals::ThermalProbe;
use crate::bandwidth::{spawn_server, ServerOptions};
use crate::config::Config;
use crate::error::Error;

/// Binds the server's port when bandwidth tests are enabled; a port that
/// cannot be bound runs the agent without a server, with a warning.
pub(super) fn bind(config: &Config) -> Option<TcpListener> {
    if !config.bandwidth_enabled {
        return None;
    }
    TcpListener::bind(config.bandwidth_listen)
        .inspect_err(|e| {
            warn!(addr = %config.bandwidth_listen, error = %e,
                "cannot bind the bandwidth server; running without one")
        })
        .ok()
}

/// Every peer's load marks, reachable by name (our tests) and by the IPs
/// it may test us from: its STAMP and bandwidth addresses.
pub(super) fn load_board(config: &Config) -> LoadBoard {
    LoadBoard::new(config.peers.iter().map(|p| {
        (
            p.name.clone(),
            vec![p.addr.ip(), config.bandwidth_addr(p).ip()],
        )
    }))
}

/// Starts the server on `listener` (if any) and, when enabled, the
/// scheduler.
pub(super) fn start(
    crew: &mut Crew,
    config: &Config,
    topology: &Topology,
    listener: Option<TcpListener>,
    load: &LoadBoard,
) -> Result<(), Error> {
    let gate = TestGate::default();
    if let Some(l) = listener {
        let defaults = ServerOptions::default();
        let opts = ServerOptions {
            gate: Some(gate.clone()),
            load: Some(load.clone()),
            // Configured peers, by both their addresses, and whatever the
            // operator allowed; the server refuses everyone else.
            peers: config
                .peers
                .iter()
                .flat_map(|p| [p.addr.ip(), config.bandwidth_addr(p).ip()])
                .collect(),
            allow: config.bandwidth_allow.clone(),
            // Peers run our own schedule: room for its test length.
            max_duration: defaults.max_duration.max(config.bandwidth_duration),
            ..defaults
        };
        let spawned = spawn_server(l, crew.stop.clone(), opts);
        crew.thread("bandwidth server", spawned)?;
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
    let targets = topology
        .peers
        .iter()
        .zip(&config.peers)
        .map(|(p, cfg)| PeerServer {
            peer: p.name.clone(),
            addr: config.bandwidth_addr(cfg),
            interface: p.interface.clone(),
            expected: config.expected(&p.name),
        })
        .collect();
    // The interface the route to the peer's server takes now (it may have
    // moved since discovery), else the one discovery found.
    let root = config.sysfs_root.clone();
    let link_speed = LinkSpeed::new(move |iface, addr| {
        use crate::discovery::{describe, kind, route_interface};
        let iface = route_interface(addr).unwrap_or_else(|_| iface.to_string());
        let d = describe(&iface, &root);
        let members: Vec<u64> = d
            .members
            .iter()
            .map(|m| describe(m, &root).speed_bits_per_second)
            .collect();
        path_speed(d.speed_bits_per_second, d.kind == kind::BRIDGE, &members)
    });
    let opts = ScheduleOptions {
        plan,
        streams: config.bandwidth_streams,
        gate,
        load: load.clone(),
        thermals: ThermalProbe::new(crate::thermal::default_source(&config.sysfs_root)),
        link_speed,
    };
    let scheduler = schedule::run_schedule(targets, opts, crew.sink.clone(), crew.stop.clone());
    crew.task(scheduler);
    Ok(())
}
