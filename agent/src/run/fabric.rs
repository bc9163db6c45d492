//! The fabric check role: every `fabric.check_interval` it gathers the
//! node's facts for the links towards the peers (blocking: it runs the
//! OS's tools), judges them ([`crate::fabric::evaluate`]) and sends each
//! check when it is new, when its verdict changes, and every tenth round.

use std::path::PathBuf;
use std::sync::Arc;

use boltwatch_proto::v1::record::Payload;
use tracing::warn;

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::fabric::{self, Emitter, Settings};
use crate::sink::Sink;

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology) {
    let settings = Settings {
        tcp_clock_margin: config.fabric_tcp_clock_margin,
        expect_rdma: config.fabric_expect_rdma,
    };
    let watch = check_fabric(
        topology.interfaces.clone(),
        config.sysfs_root.clone(),
        (config.fabric_check_interval, settings),
        crew.sink.clone(),
    );
    crew.task(watch);
}

async fn check_fabric(
    links: Vec<String>,
    sysfs_root: PathBuf,
    (every, settings): (std::time::Duration, Settings),
    sink: Sink,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut emitter = Emitter::default();
    let context = Arc::new((links, sysfs_root));
    // The links' generations once: on macOS discovery runs system_profiler.
    let c = Arc::clone(&context);
    let generations = tokio::task::spawn_blocking(move || fabric::generations(&c.0, &c.1))
        .await
        .unwrap_or_default();
    let generations = Arc::new(generations);
    loop {
        tick.tick().await;
        let (c, g) = (Arc::clone(&context), Arc::clone(&generations));
        let Ok(facts) = tokio::task::spawn_blocking(move || fabric::gather(&c.0, &c.1, &g)).await
        else {
            continue;
        };
        let outcomes = fabric::evaluate(&facts, settings);
        let (send, failed) = emitter.round(&outcomes);
        for o in failed {
            warn!(check = o.check.name(), interface = %o.interface, detail = %o.detail,
                advice = o.advice(), "fabric check failing");
        }
        for o in send {
            sink.emit(Payload::FabricCheck(o.record()));
        }
    }
}
