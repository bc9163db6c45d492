//! The agent's bandwidth scheduler: one task that asks the [`Planner`]
//! what to do, runs each test with [`run_client`] on a blocking
//! thread, and emits the results as `Payload::Bandwidth` records (one per
//! direction; a failed test is one record with `error` set).
//!
//! Scheduled tests are bidirectional (`iperf3 --bidir`): one test measures
//! both directions of the link at once, as a soak loads it, and yields an
//! upload and a download record. While data flows the peer's [`LoadTag`]
//! is marked so its RTT windows are tagged under load.
//!
//! At most one test per node at a time: the scheduler takes the node-wide
//! [`TestGate`] (shared with our bandwidth server) before testing; a gate
//! held by a peer's test against us, or a peer that answers busy, is a busy
//! outcome the planner retries with jitter. A "busy" is not a failure and
//! leaves no record, unless the peer stays busy through every retry: then a
//! failure record says so.
//!
//! Each result carries the link's expected throughput ([`super::expect`]:
//! `bandwidth.expected`, or `bandwidth.expected_share` of the link speed
//! read as the test starts) and, when the scheduler has a
//! [`ThermalProbe`], the node's thermals during the test
//! ([`super::thermals`]).
//!
//! The schedule's knobs derive from the config in [`plan_config`] (pure).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use boltwatch_common::clock::now_unix_ns;
use boltwatch_proto::v1::BandwidthResult;
use rand::SeedableRng;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::client::{run_client, ClientObserver, ClientOptions};
use super::error::BandwidthError;
use super::expect::{Expected, LinkSpeed};
use super::iperf3::Mode;
use super::load::{LoadBoard, LoadSpan, LoadTag, TestGate};
use super::plan::{Decision, Outcome, PlanConfig, PlanError, Planner};
use super::thermals::{DuringTest, ThermalProbe};
use super::{emit_results, failed_result};
use crate::sink::Sink;

/// The shortest window the duty cycle is measured over.
const MIN_DUTY_WINDOW: Duration = Duration::from_secs(600);

/// The planner's knobs for tests of `duration` every `interval`, spending
/// at most `duty_cycle` of wall time testing.
///
/// The duty cycle is measured over 10 minutes, or one interval if longer.
/// Busy retries wait 1/20 to 1/5 of the interval (15-60 s at the default 5
/// minutes), clamped to 1-15 s and 2-60 s, so short test intervals retry
/// within their own interval.
pub fn plan_config(
    interval: Duration,
    duration: Duration,
    duty_cycle: f64,
) -> Result<PlanConfig, PlanError> {
    let cfg = PlanConfig {
        interval,
        duration,
        duty_cycle,
        duty_window: MIN_DUTY_WINDOW.max(interval),
        busy_retry_min: (interval / 20).clamp(Duration::from_secs(1), Duration::from_secs(15)),
        busy_retry_max: (interval / 5).clamp(Duration::from_secs(2), Duration::from_secs(60)),
        ..PlanConfig::default()
    };
    if interval <= duration {
        return Err(PlanError::Invalid("interval must be longer than a test"));
    }
    cfg.validate()?;
    Ok(cfg)
}

/// A peer's bandwidth server.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerServer {
    /// Peer node name.
    pub peer: String,
    /// Its bandwidth server (a scope binds the test to that interface).
    pub addr: crate::discovery::scoped::ScopedAddr,
    /// Local interface towards it (for the record).
    pub interface: String,
    /// Throughput expected of the link.
    pub expected: Expected,
}

/// What the scheduler needs besides its peers.
#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    /// The plan.
    pub plan: PlanConfig,
    /// Parallel TCP streams per direction.
    pub streams: u32,
    /// Node-wide one-test gate, shared with our server.
    pub gate: TestGate,
    /// Load marks of every peer.
    pub load: LoadBoard,
    /// The node's thermals, sampled during each test.
    pub thermals: ThermalProbe,
    /// Link speeds, for expectations that are a share of one.
    pub link_speed: LinkSpeed,
}

/// Marks the link while data flows and lets shutdown end a test.
struct LoadMarker {
    tag: Option<LoadTag>,
    span: Option<LoadSpan>,
    stop: CancellationToken,
}

impl ClientObserver for LoadMarker {
    fn load(&mut self, running: bool) {
        self.span = if running {
            self.tag.as_ref().map(LoadTag::begin)
        } else {
            None
        };
    }

    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }
}

/// Tests `peers` as planned until `stop` is cancelled; a test running then
/// is ended early and leaves no record. Returns at once, after a warning,
/// when the plan is unusable.
pub async fn run_schedule(
    peers: Vec<PeerServer>,
    opts: ScheduleOptions,
    sink: Sink,
    stop: CancellationToken,
) {
    let Some(mut scheduler) = Scheduler::start(peers, opts, sink, stop) else {
        return;
    };
    while !scheduler.stop.is_cancelled() {
        let Some((peer, duration)) = scheduler.due().await else {
            continue;
        };
        let Some(outcome) = scheduler.test(&peer, duration).await else {
            // Stopped mid-test: no record, no outcome.
            break;
        };
        scheduler.planner.finish(&peer, outcome, Instant::now());
    }
}

/// The scheduler's state between tests.
struct Scheduler {
    planner: Planner<rand::rngs::StdRng>,
    peers: BTreeMap<String, PeerServer>,
    /// Busy answers in a row, per peer, since its last test that ran.
    busy_in_a_row: BTreeMap<String, u32>,
    /// Peers whose expectation needs a link speed their interface does not
    /// report (warned about once).
    speed_unknown: BTreeSet<String>,
    opts: ScheduleOptions,
    sink: Sink,
    stop: CancellationToken,
}

impl Scheduler {
    /// The planner for `peers`, or `None` (after a warning) when the plan
    /// is unusable.
    fn start(
        peers: Vec<PeerServer>,
        opts: ScheduleOptions,
        sink: Sink,
        stop: CancellationToken,
    ) -> Option<Scheduler> {
        let rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
        let mut planner = match Planner::new(opts.plan.clone(), rng) {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %e, "bandwidth tests disabled");
                return None;
            }
        };
        let by_name: BTreeMap<String, PeerServer> =
            peers.into_iter().map(|p| (p.peer.clone(), p)).collect();
        planner.set_peers(by_name.keys().cloned(), Instant::now());
        info!(peers = by_name.len(), interval = ?opts.plan.interval, duration = ?opts.plan.duration,
            duty_cycle = opts.plan.duty_cycle, "bandwidth scheduler started");
        Some(Scheduler {
            planner,
            peers: by_name,
            busy_in_a_row: BTreeMap::new(),
            speed_unknown: BTreeSet::new(),
            opts,
            sink,
            stop,
        })
    }

    /// The test the planner wants now; `None` after waiting until its next
    /// decision (or the stop).
    async fn due(&mut self) -> Option<(String, Duration)> {
        let now = Instant::now();
        match self.planner.poll(now) {
            Decision::Wait { until } => {
                let nap = until.saturating_duration_since(now);
                tokio::select! {
                    _ = tokio::time::sleep(nap.max(Duration::from_millis(10))) => {}
                    _ = self.stop.cancelled() => {}
                }
                None
            }
            Decision::Run { peer, duration } => Some((peer, duration)),
        }
    }

    /// Tests `peer` for `duration` and records the results (or the
    /// failure); the outcome for the planner, `None` when the stop ended
    /// the test.
    async fn test(&mut self, peer: &str, duration: Duration) -> Option<Outcome> {
        let Some(target) = self.peers.get(peer) else {
            return Some(Outcome::Failed);
        };
        let client = ClientOptions {
            server: target.addr.to_string(),
            streams: self.opts.streams,
            duration,
            mode: Mode::Bidir,
            peer: target.peer.clone(),
            interface: target.interface.clone(),
            ..ClientOptions::default()
        };
        let server = target.addr.addr;
        let expected = expected_now(target, &self.opts.link_speed, &mut self.speed_unknown).await;
        let start_unix_ns = now_unix_ns();
        let mut during = DuringTest::default();
        let result = self
            .run_gated(peer, &client, &mut during)
            .await
            .map(|mut results| {
                for r in &mut results {
                    r.expected_bits_per_second = expected;
                    during.stamp(r);
                }
                results
            });
        self.record(peer, server, &client, start_unix_ns, result)
    }

    /// Runs the test on a blocking thread while the node-wide gate is ours
    /// (busy if our server holds it), reading the thermals meanwhile.
    async fn run_gated(
        &self,
        peer: &str,
        client: &ClientOptions,
        during: &mut DuringTest,
    ) -> Result<Vec<BandwidthResult>, BandwidthError> {
        let Some(gate) = self.opts.gate.try_enter() else {
            // Our server is serving a test (likely this very peer's).
            return Err(BandwidthError::Busy);
        };
        let mut obs = LoadMarker {
            tag: self.opts.load.tag(peer),
            span: None,
            stop: self.stop.clone(),
        };
        let c = client.clone();
        let mut test = tokio::task::spawn_blocking(move || {
            let r = run_client(c, &mut obs);
            drop(obs);
            drop(gate);
            r
        });
        let joined = sample_while(&mut test, &self.opts.thermals, during).await;
        match joined {
            Ok(r) => r,
            Err(e) => Err(BandwidthError::Protocol(format!("test task: {e}"))),
        }
    }

    /// Emits the results, or a failed result (for busy answers only once
    /// the retries are spent); the outcome for the planner, `None` when the
    /// test was stopped.
    fn record(
        &mut self,
        peer: &str,
        server: SocketAddr,
        client: &ClientOptions,
        start_unix_ns: u64,
        result: Result<Vec<BandwidthResult>, BandwidthError>,
    ) -> Option<Outcome> {
        let outcome = match result {
            Ok(results) => {
                self.busy_in_a_row.remove(peer);
                for r in &results {
                    info!(peer = %peer, direction = r.direction, bits_per_second = r.bits_per_second,
                        retransmits = r.retransmits, "bandwidth test done");
                }
                emit_results(&self.sink, results);
                Outcome::Done
            }
            Err(BandwidthError::Stopped) => return None,
            Err(e) if e.is_busy() => {
                let n = self.busy_in_a_row.entry(peer.to_owned()).or_default();
                *n += 1;
                debug!(peer = %peer, busy = *n, "bandwidth test: busy, retrying later");
                if *n > self.opts.plan.max_busy_retries {
                    // The planner gives up until the next regular slot.
                    *n = 0;
                    emit_results(&self.sink, vec![failed_result(client, start_unix_ns, &e)]);
                }
                Outcome::Busy
            }
            Err(e) => {
                self.busy_in_a_row.remove(peer);
                warn!(peer = %peer, server = %server, error = %e, "bandwidth test failed");
                emit_results(&self.sink, vec![failed_result(client, start_unix_ns, &e)]);
                Outcome::Failed
            }
        };
        Some(outcome)
    }
}

/// The link's expected bits per second now (0: none). A share of a speed
/// the interface does not report is no expectation, logged once per peer
/// until the speed is known again.
async fn expected_now(
    target: &PeerServer,
    speed: &LinkSpeed,
    unknown: &mut BTreeSet<String>,
) -> f64 {
    if !target.expected.needs_speed() {
        return target.expected.bits_per_second(0);
    }
    let (reader, iface, addr) = (speed.clone(), target.interface.clone(), target.addr.addr);
    let bps = tokio::task::spawn_blocking(move || reader.read(&iface, addr))
        .await
        .unwrap_or(0);
    if bps == 0 {
        if unknown.insert(target.peer.clone()) {
            warn!(peer = %target.peer, interface = %target.interface,
                "no expected bandwidth for this link: bandwidth.expected_share needs the link speed, \
                 which the interface does not report (set bandwidth.expected for the peer)");
        }
    } else if unknown.remove(&target.peer) {
        info!(peer = %target.peer, bits_per_second = bps, "link speed known again");
    }
    target.expected.bits_per_second(bps)
}

/// Awaits the test, reading the thermals as it starts, once a second while
/// it runs and as it ends (each read is a few small file reads).
async fn sample_while<T>(
    test: &mut tokio::task::JoinHandle<T>,
    probe: &ThermalProbe,
    during: &mut DuringTest,
) -> Result<T, tokio::task::JoinError> {
    if let Some(r) = probe.read() {
        during.add(&r, true);
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let out = loop {
        tokio::select! {
            r = &mut *test => break r,
            _ = tick.tick() => {
                if let Some(r) = probe.read() {
                    during.add(&r, false);
                }
            }
        }
    };
    if let Some(r) = probe.read() {
        during.add(&r, false);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn defaults_wire_the_five_percent_cap_over_ten_minutes() {
        let c = plan_config(s(300), s(10), 0.05).unwrap();
        assert_eq!(c.duty_window, s(600));
        assert_eq!(c.duty_window.mul_f64(c.duty_cycle), s(30));
        assert_eq!((c.busy_retry_min, c.busy_retry_max), (s(15), s(60)));
        assert_eq!((c.interval, c.duration), (s(300), s(10)));
    }

    #[test]
    fn short_intervals_retry_within_the_interval() {
        let c = plan_config(s(5), s(2), 0.5).unwrap();
        assert_eq!((c.busy_retry_min, c.busy_retry_max), (s(1), s(2)));
        let c = plan_config(s(3600), s(10), 0.05).unwrap();
        assert_eq!(c.duty_window, s(3600), "window at least one interval");
    }

    #[test]
    fn impossible_plans_are_refused() {
        assert!(
            plan_config(s(10), s(10), 0.5).is_err(),
            "test as long as interval"
        );
        // 1 % of 10 minutes is 6 s: a 10 s test never fits.
        assert!(plan_config(s(300), s(10), 0.01).is_err());
        assert!(plan_config(s(300), s(10), 0.0).is_err());
    }

    /// The whole loop on loopback against a real server: a scheduled test
    /// yields an upload and a download record, marks the peer's link while
    /// data flows, and releases the gate.
    #[tokio::test]
    async fn scheduled_test_emits_both_directions_and_marks_the_link() {
        use boltwatch_proto::v1::record::Payload;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let server =
            super::super::spawn_server(listener, stop.clone(), Default::default()).unwrap();
        let gate = TestGate::default();
        let board = LoadBoard::new([("p".to_string(), vec![addr.ip()])]);
        let (sink, mut rx) = Sink::new();
        let (_fixture, probe) = fixture_probe();
        let opts = ScheduleOptions {
            plan: plan_config(s(3), s(1), 1.0).unwrap(),
            streams: 1,
            gate: gate.clone(),
            load: board.clone(),
            thermals: probe,
            // A 40 Gbit/s link (Thunderbolt 4) through loopback.
            link_speed: LinkSpeed::new(|iface, _| if iface == "lo" { 40_000_000_000 } else { 0 }),
        };
        let peers = vec![PeerServer {
            peer: "p".into(),
            addr: addr.into(),
            interface: "lo".into(),
            expected: Expected::Share(0.6),
        }];
        let task = tokio::spawn(run_schedule(peers, opts, sink, stop.clone()));
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + s(30);
        while got.len() < 2 {
            let r = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .expect("two records within 30 s")
                .expect("sink open");
            if let Payload::Bandwidth(b) = r.payload {
                got.push(b);
            }
        }
        stop.cancel();
        task.await.unwrap();
        server.join().unwrap();
        let dirs: Vec<i32> = got.iter().map(|b| b.direction).collect();
        use boltwatch_proto::v1::Direction;
        assert_eq!(dirs, [Direction::Upload as i32, Direction::Download as i32]);
        for b in &got {
            assert!(b.error.is_empty(), "{b:?}");
            assert_eq!(b.expected_bits_per_second, 24e9);
            #[cfg(target_os = "linux")]
            assert!(
                b.thermals_sampled && !b.throttled_during && b.max_celsius_during == 55.0,
                "{b:?}"
            );
            assert!(b.bytes > 0 && b.bits_per_second > 0.0, "{b:?}");
            assert_eq!((b.peer.as_str(), b.streams), ("p", 1));
            let tag = board.tag("p").unwrap();
            assert!(tag.overlaps(b.start_unix_ns, b.start_unix_ns + b.duration_ns));
            assert!(!tag.active(), "the span ended with the test");
        }
        assert!(!gate.busy(), "the gate is released");
    }

    /// Our server shares the gate: while our own client holds it a client
    /// is told busy; once free it is served, and its IP's peer is marked
    /// during the test.
    #[test]
    fn server_answers_busy_while_the_gate_is_held_and_marks_the_client() {
        use super::super::server::{spawn_server, ServerOptions};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let gate = TestGate::default();
        let board = LoadBoard::new([("c".to_string(), vec![addr.ip()])]);
        let opts = ServerOptions {
            gate: Some(gate.clone()),
            load: Some(board.clone()),
            ..Default::default()
        };
        let server = spawn_server(listener, stop.clone(), opts).unwrap();
        let client = ClientOptions {
            server: addr.to_string(),
            streams: 1,
            duration: s(1),
            ..ClientOptions::default()
        };
        let held = gate.try_enter().unwrap();
        let e = run_client(client.clone(), &mut ()).unwrap_err();
        assert!(e.is_busy(), "{e}");
        drop(held);
        let r = run_client(client, &mut ()).unwrap();
        assert!(r[0].error.is_empty() && r[0].bytes > 0, "{r:?}");
        let tag = board.tag("c").unwrap();
        assert!(tag.overlaps(r[0].start_unix_ns, r[0].start_unix_ns + r[0].duration_ns));
        stop.cancel();
        server.join().unwrap();
        assert!(!gate.busy() && !tag.active());
    }

    /// The cap as configured holds when driven by the planner: 3 peers
    /// every 30 s for 10 s would be 100 % busy; 5 % allows 30 s per 10 min.
    #[test]
    fn configured_cap_bounds_testing_time() {
        let cfg = plan_config(s(30), s(10), 0.05).unwrap();
        let mut p = Planner::new(cfg.clone(), StdRng::seed_from_u64(7)).unwrap();
        let t0 = Instant::now();
        p.set_peers(["a", "b", "c"].map(String::from), t0);
        let mut now = t0;
        let mut runs = Vec::new();
        for _ in 0..10_000 {
            if now >= t0 + s(3600) {
                break;
            }
            match p.poll(now) {
                Decision::Run { peer, duration } => {
                    runs.push(now);
                    now += duration;
                    p.finish(&peer, Outcome::Done, now);
                }
                Decision::Wait { until } => now = until,
            }
        }
        let tested = cfg.duration * runs.len() as u32;
        assert!(tested <= s(3600).mul_f64(0.05) + cfg.duration, "{tested:?}");
        assert!(
            runs.len() >= 15,
            "the cap still lets tests run: {}",
            runs.len()
        );
    }

    /// A real sysfs reader over a fixture tree with one zone at 55 °C (on
    /// Linux; elsewhere the OS source).
    fn fixture_probe() -> (tempfile::TempDir, ThermalProbe) {
        let dir = tempfile::tempdir().unwrap();
        let zone = dir.path().join("class/thermal/thermal_zone0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("type"), "x86_pkg_temp\n").unwrap();
        std::fs::write(zone.join("temp"), "55000\n").unwrap();
        let probe = ThermalProbe::new(crate::thermal::default_source(dir.path()));
        (dir, probe)
    }
}
