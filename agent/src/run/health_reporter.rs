//! The health reporter role: an `AgentStats` record every 10 s, and a
//! final one at the stop so the collector sees the last counters.

use std::time::Duration;

use boltwatch_proto::v1::{record::Payload, AgentStats};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use super::crew::Crew;
use crate::health::Health;
use crate::sink::Sink;

/// How often a health record goes out.
const EVERY: Duration = Duration::from_secs(10);

pub(super) fn start(crew: &mut Crew) {
    let health = crew.health.clone();
    let sink = crew.sink.clone();
    crew.task(async move {
        let mut process = ProcessProbe::new();
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            emit(&health, &sink, &mut process);
        }
    });
}

/// The last health record, once every other role has stopped.
pub(super) fn emit_final(crew: &Crew) {
    emit(&crew.health, &crew.sink, &mut ProcessProbe::new());
}

fn emit(health: &Health, sink: &Sink, process: &mut ProcessProbe) {
    let ProcessFigures {
        resident_bytes,
        cpu_seconds,
    } = process.sample();
    sink.emit(Payload::AgentStats(AgentStats {
        malformed_packets: Health::get(&health.malformed_packets),
        dropped_records: Health::get(&health.dropped_records),
        reconnects: Health::get(&health.reconnects),
        resident_bytes,
        cpu_seconds,
        reflected_packets: Health::get(&health.reflected_packets),
        queued_records: Health::get(&health.queued_records),
        stamp_refused_reflected: Health::get(&health.stamp_refused_reflected),
        stamp_refused_own_address: Health::get(&health.stamp_refused_own_address),
        stamp_refused_rate_limited: Health::get(&health.stamp_refused_rate_limited),
        unsupported_sources: crate::support::unsupported_sources(),
        clock_steps: crate::clock::clock().steps(),
        spool_bytes: Health::get(&health.spool_bytes),
        spool_oldest_unacked_unix_ns: Health::get(&health.spool_oldest_unacked_unix_ns),
    }));
}

/// The agent process as the OS sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct ProcessFigures {
    resident_bytes: u64,
    cpu_seconds: f64,
}

/// Reads this process's figures.
struct ProcessProbe {
    sys: Option<System>,
    pid: Pid,
}

impl ProcessProbe {
    fn new() -> ProcessProbe {
        ProcessProbe {
            sys: System::new().ok(),
            pid: Pid::from_u32(std::process::id()),
        }
    }

    /// Zeroes when the OS will not say.
    fn sample(&mut self) -> ProcessFigures {
        let Some(sys) = self.sys.as_mut() else {
            return ProcessFigures::default();
        };
        sys.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            true,
            ProcessRefreshKind::nothing().with_memory().with_cpu(),
        );
        match sys.process(self.pid) {
            Some(p) => ProcessFigures {
                resident_bytes: p.memory(),
                cpu_seconds: p.accumulated_cpu_time() as f64 / 1000.0,
            },
            None => ProcessFigures::default(),
        }
    }
}
