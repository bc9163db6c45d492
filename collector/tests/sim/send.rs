//! Sends the generated records through the collector's gRPC ingest, one
//! stream per agent boot, each batch acknowledged before the next.

use std::net::SocketAddr;

use boltwatch_proto::v1::Record;

use super::*;
use crate::common::Agent;

/// Runs the scenario into the collector at `grpc`, about `batch` records a
/// message (a simulated second adds a few beyond it); returns the truth.
pub async fn run(sc: &Scenario, grpc: SocketAddr, batch: usize) -> Truth {
    let mut truth = Truth::default();
    let n = sc.nodes.len();
    for i in 0..n {
        let mut boot_no = 1;
        let mut g = NodeGen {
            boot: format!("{}-boot-{boot_no}", sc.nodes[i]),
            seq: 0,
            out: Vec::new(),
            thermal_sum: 0.0,
            thermal_n: 0,
            thermal_max: f64::NEG_INFINITY,
            dropped: false,
            started: sc.start,
            counters: Default::default(),
        };
        let mut agent = open(grpc, shift::hello(sc, i, &g.boot, g.started)).await;
        let mut t = sc.start;
        while t < sc.end() {
            if sc.down(i, t) {
                if !g.out.is_empty() {
                    flush(&mut agent, &mut g.out).await;
                }
                // The agent restarts after the gap with a new boot.
                t = sc.restart.1;
                boot_no += 1;
                g.boot = format!("{}-boot-{boot_no}", sc.nodes[i]);
                g.seq = 0;
                g.started = t;
                agent = open(grpc, shift::hello(sc, i, &g.boot, g.started)).await;
                continue;
            }
            second(sc, i, t, &mut g, &mut truth);
            if g.out.len() >= batch {
                flush(&mut agent, &mut g.out).await;
            }
            t += S;
        }
        flush(&mut agent, &mut g.out).await;
        let episodes: Vec<_> = sc.throttles.iter().filter(|e| e.0 == i).collect();
        truth.thermal.insert(
            sc.nodes[i].clone(),
            (
                episodes.len() as u64,
                episodes.iter().map(|e| (e.2 - e.1) as f64 / 1e9).sum(),
                g.thermal_sum / g.thermal_n as f64,
                g.thermal_max,
            ),
        );
    }
    let links = (n * (n - 1)) as u64;
    truth.expected_windows = links * sc.duration / WINDOW;
    let gap_windows = (sc.restart.1 - sc.restart.0) / WINDOW;
    truth.stored_windows = truth.expected_windows - (n as u64 - 1) * gap_windows;
    truth.gaps = n as u64 - 1;
    truth.sequence_holes = DROPPED;
    truth.spool_drops = DROPPED;
    truth
}

async fn open(grpc: SocketAddr, hello: boltwatch_proto::v1::Hello) -> Agent {
    let mut a = Agent::open(grpc, hello).await.expect("stream opened");
    a.next().await.expect("welcome");
    a
}

async fn flush(a: &mut Agent, out: &mut Vec<Record>) {
    if out.is_empty() {
        return;
    }
    let records = std::mem::take(out);
    let last = records.last().map(|r| (r.boot_id.clone(), r.seq)).unwrap();
    let wm = a.send(records).await.expect("batch acknowledged");
    // The ack covers the batch: its boot's highest seq is at least the
    // last one sent (a replayed record can come last in a small batch).
    assert!(
        wm.iter()
            .any(|w| w.boot_id == last.0 && w.highest_seq >= last.1),
        "{wm:?} after {last:?}"
    );
}
