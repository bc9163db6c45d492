//! A stand-in for one node's RDMA probe. No RDMA device exists where the
//! tests run (no Thunderbolt 5, no rxe or siw in the kernel), so the lab
//! feeds its collector `rdma_probe` windows shaped as the agent's
//! (`agent/src/rdma/window.rs`: a record per link and window, with the
//! link's RTT summary, its device and the window's errors by class)
//! through the agent's own spool and transport, over the collector's real
//! gRPC ingest, under a boot of their own. Only the figures are made up,
//! from the window number: no clock, no randomness.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use boltwatch_agent::health::Health;
use boltwatch_agent::sink::Sink;
use boltwatch_agent::spool::{Spool, SpoolOptions};
use boltwatch_agent::transport::{self, ClientTls, TransportOptions};
use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{Hello, RdmaErrorClass, RdmaErrorCount, RdmaProbe, RttSummary};

/// The agent version in the stand-in's `Hello`: the collector's
/// `boltwatch_agent_info` names the latest `Hello`'s, so a test can tell
/// whether a real agent's came after it.
pub const VERSION: &str = "rdma-stand-in";

/// Pings per window: the probe sends a few a second at most.
const PINGS: u64 = 2;

/// One RDMA link of the node.
#[derive(Debug, Clone)]
pub struct Link {
    /// The peer node.
    pub peer: String,
    /// The `enX` (here the bed's cable) the device is paired with.
    pub interface: String,
    /// The verbs device.
    pub device: String,
}

/// Window `n` of a probed link: 2 pings, one lost in every fourth window;
/// a CRC mismatch in windows 2, 7, 12... and a sequence gap in windows 4,
/// 9, 14...; round trips of 1.0 to 1.45 ms (this build times them between
/// 1 ms probe ticks, docs/rdma.md).
pub fn window(n: u64, link: &Link, start_unix_ns: u64, window_ns: u64) -> RdmaProbe {
    let lost = u64::from(n % 4 == 3);
    let mut rtts: Vec<u64> = (0..PINGS - lost)
        .map(|i| 1_000_000 + ((n * 7 + i * 13) % 10) * 50_000)
        .collect();
    rtts.sort_unstable();
    let received = rtts.len() as u64;
    let sum: u64 = rtts.iter().sum();
    let mut errors = Vec::new();
    for (class, due) in [
        (RdmaErrorClass::CrcMismatch, n % 5 == 2),
        (RdmaErrorClass::SequenceGap, n % 5 == 4),
    ] {
        if due {
            errors.push(RdmaErrorCount {
                class: class as i32,
                count: 1,
            });
        }
    }
    RdmaProbe {
        rtt: Some(RttSummary {
            sent: PINGS,
            received,
            lost,
            min_ns: rtts[0],
            max_ns: rtts[rtts.len() - 1],
            mean_ns: sum / received,
            p50_ns: rtts[rtts.len() / 2],
            p99_ns: rtts[rtts.len() - 1],
            sum_ns: sum,
            buckets: sparse_buckets(rtts.iter().copied()),
            ..summary(link, start_unix_ns, window_ns)
        }),
        device: link.device.clone(),
        errors,
        // The stand-in runs no bandwidth burst (`rdma.burst_interval` off).
        ..Default::default()
    }
}

/// The one record of a link whose queue pair never reached RTS: the
/// watchdog fired, the port is wedged, nothing was sent.
pub fn wedged(link: &Link, start_unix_ns: u64, window_ns: u64) -> RdmaProbe {
    RdmaProbe {
        rtt: Some(summary(link, start_unix_ns, window_ns)),
        device: link.device.clone(),
        errors: vec![RdmaErrorCount {
            class: RdmaErrorClass::WatchdogTimeout as i32,
            count: 1,
        }],
        ..Default::default()
    }
}

fn summary(link: &Link, start_unix_ns: u64, window_ns: u64) -> RttSummary {
    RttSummary {
        peer: link.peer.clone(),
        interface: link.interface.clone(),
        window_start_unix_ns: start_unix_ns,
        window_ns,
        ..RttSummary::default()
    }
}

/// What the stand-in streams.
#[derive(Debug, Clone)]
pub struct Feed {
    /// The node it speaks for.
    pub node: String,
    /// The link it probes, a window each period.
    pub probed: Link,
    /// The link whose port wedged before the first window.
    pub wedged: Link,
    /// The window period.
    pub every: Duration,
    /// The window after which that port wedges again (the node reset and
    /// its agent restarted: the collector's count, summed over boots,
    /// grows), if ever.
    pub wedge_again_after: Option<u64>,
}

/// The running stand-in: a thread emitting a window of the probed link
/// every period (after the wedged port's record) into the agent's
/// transport. Dropping it stops the windows and flushes what is spooled.
pub struct RdmaFeed {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RdmaFeed {
    /// Starts streaming `feed` to the collector at `collector` (an
    /// `http://` gRPC URL), spooling in `spool_dir`.
    pub fn start(collector: &str, spool_dir: &Path, feed: Feed) -> RdmaFeed {
        let boot = format!("{}-rdma-stand-in", feed.node);
        let spool = Spool::open(
            SpoolOptions {
                dir: spool_dir.to_path_buf(),
                max_bytes: 16 << 20,
            },
            &feed.node,
            &boot,
        )
        .unwrap_or_else(|e| panic!("stand-in spool {}: {e}", spool_dir.display()));
        let opts = TransportOptions {
            collector: collector.to_string(),
            hello: hello(&feed.node, &boot),
            token: None,
            tls: ClientTls::default(),
            flush_timeout: Duration::from_secs(5),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                let (sink, rx) = Sink::new();
                let health = Arc::new(Health::default());
                let sender = tokio::spawn(transport::run(opts, spool, rx, health));
                emit_until(&sink, &feed, &flag).await;
                drop(sink);
                let _ = sender.await;
            });
        });
        RdmaFeed {
            stop,
            thread: Some(thread),
        }
    }
}

/// The wedged port's record, then a window a period until `stop`.
async fn emit_until(sink: &Sink, feed: &Feed, stop: &AtomicBool) {
    let window_ns = feed.every.as_nanos() as u64;
    let start = |end: u64| end.saturating_sub(window_ns);
    let now = boltwatch_agent::clock::unix_now();
    let first = wedged(&feed.wedged, start(now), window_ns);
    sink.emit(Payload::RdmaProbe(first));
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(feed.every).await;
        let end = boltwatch_agent::clock::unix_now();
        let w = window(n, &feed.probed, start(end), window_ns);
        sink.emit(Payload::RdmaProbe(w));
        if feed.wedge_again_after == Some(n) {
            let again = wedged(&feed.wedged, start(end), window_ns);
            sink.emit(Payload::RdmaProbe(again));
        }
        n += 1;
    }
}

impl Drop for RdmaFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The stand-in's `Hello`: no interfaces and no peers of its own (those
/// are the node's real agent's to say), started long before the real
/// agent so the store never takes it for the node's latest boot.
fn hello(node: &str, boot: &str) -> Hello {
    Hello {
        schema_revision: boltwatch_proto::SCHEMA_REVISION,
        node: node.to_string(),
        agent_version: VERSION.to_string(),
        os: "stand-in".to_string(),
        boot_id: boot.to_string(),
        hostname: format!("{node}-rdma-stand-in"),
        started_unix_ns: 1,
        ..Hello::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            peer: "n1".into(),
            interface: "tb1".into(),
            device: "rxe0".into(),
        }
    }

    #[test]
    fn windows_add_up_and_count_each_error_class_once() {
        let mut lost = 0;
        let mut classes = std::collections::BTreeMap::<i32, u64>::new();
        for n in 0..20 {
            let w = window(n, &link(), 1_000, 1_000_000_000);
            let s = w.rtt.expect("an RTT summary");
            assert_eq!(s.sent, s.received + s.lost, "window {n}");
            let counted: u64 = s.buckets.iter().map(|b| b.count).sum();
            assert_eq!(counted, s.received, "window {n}");
            assert!(s.min_ns <= s.p50_ns && s.p50_ns <= s.max_ns, "window {n}");
            assert!((1_000_000..=1_450_000).contains(&s.min_ns), "window {n}");
            lost += s.lost;
            for e in &w.errors {
                assert_eq!(e.count, 1);
                *classes.entry(e.class).or_default() += 1;
            }
        }
        assert_eq!(lost, 5);
        assert_eq!(classes[&(RdmaErrorClass::CrcMismatch as i32)], 4);
        assert_eq!(classes[&(RdmaErrorClass::SequenceGap as i32)], 4);
        assert_eq!(classes.len(), 2);
    }

    #[test]
    fn a_wedged_link_says_so_once_and_sends_nothing() {
        let w = wedged(&link(), 1_000, 1_000_000_000);
        let s = w.rtt.expect("an RTT summary");
        assert_eq!((s.sent, s.received, s.lost), (0, 0, 0));
        assert_eq!(
            w.errors,
            [RdmaErrorCount {
                class: RdmaErrorClass::WatchdogTimeout as i32,
                count: 1
            }]
        );
    }
}
