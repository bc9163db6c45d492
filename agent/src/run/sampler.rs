//! The sampler role: interface counters every `counters_interval` and
//! thermals every `thermal_interval`, on one thread. Both are blocking file
//! or sysctl reads that must stay off the async runtime and off the probe
//! threads.
//!
//! The Thunderbolt fabric (every `thunderbolt-net` port's negotiated lanes
//! and lane speeds, Linux sysfs) is read with the counters: a handful of
//! small files per port. Ports are looked up afresh each time, so a cable
//! plugged in after the start is seen. A port's first reading and every
//! change of its state (lanes, speeds, peer, downshift verdict from
//! [`discovery::downshift`]) go out as a link event of source `FABRIC`.
//! Where the OS has no such reading (macOS, whose ports come from
//! `system_profiler`, too slow for this loop) it is tried once.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{LinkEvent, LinkEventSource};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::crew::Crew;
use super::topology::Topology;
use crate::config::Config;
use crate::discovery::{self, downshift::Fabric};
use crate::error::Error;
use crate::health::Health;
use crate::sink::Sink;
use crate::{counters, thermal};

/// The longest the thread sleeps without looking at the stop token.
const MAX_NAP: Duration = Duration::from_millis(100);

pub(super) fn start(crew: &mut Crew, config: &Config, topology: &Topology) -> Result<(), Error> {
    let sampler = Sampler {
        root: config.sysfs_root.clone(),
        interfaces: topology.interfaces.clone(),
        counters_every: config.counters_interval,
        thermal_every: config.thermal_interval,
        sink: crew.sink.clone(),
        health: crew.health.clone(),
    };
    let stop = crew.stop.clone();
    let spawned = std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || sampler.run(&stop));
    crew.thread("sampler", spawned)
}

struct Sampler {
    root: PathBuf,
    interfaces: Vec<String>,
    counters_every: Duration,
    thermal_every: Duration,
    sink: Sink,
    health: Arc<Health>,
}

impl Sampler {
    fn run(self, stop: &CancellationToken) {
        let mut counter_src = counters::default_source(&self.root);
        let mut thermal_src = thermal::default_source(&self.root);
        // Interfaces whose read failed last time: warned about once.
        let mut failing: HashSet<String> = HashSet::new();
        let start = Instant::now();
        let mut next_counters = start;
        let mut next_thermal = start;
        let mut fabric = Some(Fabric::default());
        while !stop.is_cancelled() {
            let now = Instant::now();
            if now >= next_counters {
                next_counters += self.counters_every;
                if let Some(f) = fabric.as_mut() {
                    if !self.read_fabric(f) {
                        fabric = None;
                    }
                }
                for name in &self.interfaces {
                    match counter_src.read(name) {
                        Ok(c) => {
                            failing.remove(name);
                            self.sink.emit(Payload::Counters(c));
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
                next_thermal += self.thermal_every;
                match thermal_src.read() {
                    Ok(t) if !t.sensors.is_empty() || t.throttle.is_some() => {
                        self.sink.emit(Payload::Thermal(t))
                    }
                    Ok(_) => {}
                    Err(e) => warn!(error = %e, "cannot read thermals"),
                }
            }
            // One turn done: what the systemd watchdog checks.
            Health::incr(&self.health.sampler_turns);
            let wake = next_counters.min(next_thermal);
            std::thread::sleep(wake.saturating_duration_since(Instant::now()).min(MAX_NAP));
        }
    }

    /// Reads every Thunderbolt port and emits the changed ones; false when
    /// this OS has no such reading (then it is not tried again).
    fn read_fabric(&self, fabric: &mut Fabric) -> bool {
        let links = match discovery::thunderbolt_interfaces(&self.root) {
            Ok(links) => links,
            Err(e) => {
                debug!(error = %e, "no Thunderbolt fabric reading on this OS");
                return false;
            }
        };
        for link in &links {
            if let Some(port) = fabric.observe(link) {
                self.sink.emit(Payload::LinkEvent(LinkEvent {
                    interface: link.interface.clone(),
                    source: LinkEventSource::Fabric as i32,
                    thunderbolt: Some(port),
                    ..LinkEvent::default()
                }));
            }
        }
        true
    }
}
