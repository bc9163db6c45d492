//! The agents' spool backlog on real processes: an agent whose collector
//! is not there yet spools, and its own `/metrics` shows the spool growing
//! with its oldest record staying put; once a collector listens on the
//! address, the collector's `/metrics` shows the backlog the agent
//! reported (its oldest record made before the collector started), then the
//! backlog drained (the oldest waiting record made after the collector
//! started), on both `/metrics`.
//!
//! Every wait is bounded and fails with the last state seen; nothing
//! asserts how long anything took.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use boltwatch_tests::procs::{
    agent, free_tcp_port, free_udp_port, http_get, sample, Collector, CollectorOptions,
};

/// Upper bound on any one wait; reaching it is a failure, not a figure.
const WAIT: Duration = Duration::from_secs(120);
const BYTES: &str = "boltwatch_agent_spool_bytes";
const OLDEST: &str = "boltwatch_agent_spool_oldest_record_timestamp_seconds";
const NODE: &str = "spooler";

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The node's (bytes, oldest) in a scrape, when both are there.
fn spool(text: &str) -> Option<(f64, f64)> {
    let l = [("node", NODE)];
    Some((sample(text, BYTES, &l)?, sample(text, OLDEST, &l)?))
}

/// Polls `scrape` every 20 ms until `cond` holds on its spool figures;
/// returns them, or panics with the last seen after [`WAIT`].
fn until(what: &str, scrape: impl Fn() -> String, cond: impl Fn((f64, f64)) -> bool) -> (f64, f64) {
    let deadline = Instant::now() + WAIT;
    let mut last = None;
    loop {
        last = spool(&scrape()).or(last);
        if let Some(s) = last.filter(|s| cond(*s)) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: last (bytes, oldest) {last:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_spool_backlog_shows_while_the_collector_is_away_then_drains() {
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http) = (free_tcp_port(), free_tcp_port());
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_tcp_port()).parse().unwrap();
    let args: Vec<String> = [
        "--collector",
        &format!("http://127.0.0.1:{grpc}"),
        "--listen",
        &format!("127.0.0.1:{}", free_udp_port()),
        "--metrics-listen",
        &metrics.to_string(),
    ]
    .map(String::from)
    .into();
    let before_agent = now_s();
    let mut a = agent(dir.path(), NODE, &args);
    let own = || {
        http_get(&format!("http://{metrics}/metrics"))
            .map(|(_, b)| b)
            .unwrap_or_default()
    };

    // Nothing acknowledges: the spool grows, its oldest record stays.
    let first = until("the agent's spool holding records", own, |(b, _)| b > 0.0);
    let later = until("the agent's spool growing", own, |(b, _)| b > first.0);
    assert_eq!(
        later.1, first.1,
        "the oldest record moved with nothing acked"
    );
    assert!(
        first.1 >= before_agent - 10.0,
        "{first:?} before {before_agent}"
    );

    let started = now_s();
    let opts = CollectorOptions {
        ports: Some((grpc, http)),
        ..Default::default()
    };
    let c = Collector::launch(dir.path(), &dir.path().join("data"), &opts);
    let scrape = || c.metrics();
    // The agent's readings from before: records waiting since before the
    // collector started.
    let backlog = until("the collector showing the backlog", scrape, |(b, o)| {
        b > 0.0 && o < started
    });
    assert_eq!(backlog.1, first.1, "the collector's oldest is the agent's");
    // Acked: the oldest waiting record is one made since.
    until(
        "the collector showing the backlog drained",
        scrape,
        |(_, o)| o >= started,
    );
    until("the agent showing the backlog drained", own, |(_, o)| {
        o >= started
    });
    assert!(a.alive(), "agent exited:\n{}", a.log_text());
}
