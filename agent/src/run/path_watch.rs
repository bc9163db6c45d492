//! The path watch role: re-checks every 5 s which interface the route to
//! each peer leaves through, and reads the peer's newest path MTU from the
//! path MTU role; emits a record when either changes and once a minute.

use std::net::SocketAddr;
use std::time::Duration;

use boltwatch_proto::v1::{record::Payload, PathCheck};
use tokio::sync::watch;
use tracing::warn;

use super::crew::Crew;
use super::path_mtu::PathMtus;
use super::topology::Topology;
use crate::config::Config;
use crate::discovery;
use crate::sink::Sink;

/// How often the route is looked up.
const EVERY: Duration = Duration::from_secs(5);
/// An unchanged answer is emitted again after this many lookups.
const REPEAT_AFTER: u32 = 12;

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology, mtus: PathMtus) {
    for ((p, cfg), mtu) in topology.peers.iter().zip(&config.peers).zip(mtus) {
        // A scoped peer's probes are bound to its scope: its path is the
        // route out of that interface, not the unbound route (which may
        // name another cable with the same link-local subnet).
        let addr = cfg.scoped().socket_addr().unwrap_or(cfg.addr);
        let watch = watch_path(
            p.name.clone(),
            (addr, cfg.interface.clone()),
            p.interface.clone(),
            (mtu, crew.sink.clone()),
        );
        crew.task(watch);
    }
}

/// The route as last emitted: whether it left through `expected`, the
/// interface it left through ("" when there was no route), and the path
/// MTU (0 unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    ok: bool,
    interface: String,
    mtu: u32,
}

async fn watch_path(
    peer: String,
    (addr, scope): (SocketAddr, Option<String>),
    expected: String,
    (mtu, sink): (watch::Receiver<u32>, Sink),
) {
    let mut tick = tokio::time::interval(EVERY);
    let mut last: Option<Route> = None;
    let mut since_emit = 0u32;
    loop {
        tick.tick().await;
        let scope = scope.clone();
        let interface = tokio::task::spawn_blocking(move || match scope {
            Some(dev) => discovery::bound_route_interface(addr, &dev),
            None => discovery::route_interface(addr),
        })
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let ok = !interface.is_empty() && interface == expected;
        let route = Route {
            ok,
            interface,
            mtu: *mtu.borrow(),
        };
        since_emit += 1;
        if last.as_ref() != Some(&route) || since_emit >= REPEAT_AFTER {
            if last.as_ref().is_some_and(|l| l.ok && !ok) {
                warn!(peer = %peer, expected = %expected, route = %route.interface,
                    "route to peer left the expected interface");
            }
            sink.emit(Payload::Path(PathCheck {
                peer: peer.clone(),
                expected_interface: expected.clone(),
                route_interface: route.interface.clone(),
                ok,
                path_mtu: route.mtu,
            }));
            last = Some(route);
            since_emit = 0;
        }
    }
}
