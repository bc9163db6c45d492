//! The store's upkeep end to end: a simulated soak goes through the real
//! gRPC ingest; a collector restarted with `retention.raw` replaces the
//! raw RTT summaries and counters by per-minute rollups, and any collector
//! compacts the single rows a live soak leaves into packs. Either way the
//! report (by the real binary) and `/metrics` after a restart must be
//! what they were before, and a pruned record sent again is still a
//! duplicate. And the store commands never create a store where none is.

mod cli;
mod common;
mod sim;

use std::path::Path;
use std::time::{Duration, Instant};

use boltwatch_store::testing::rusqlite::{Connection, OpenFlags};
use cli::{collector_cli, collector_cli_ok};
use common::{Collector, WAIT};
use serde_json::Value;
use sim::{Scenario, S};

/// 2026-11-30T00:00:00Z: hours before any run of this test, so the whole
/// simulated soak is older than the one-hour retention.
const T0: u64 = 1_795_996_800 * S;
const HOURS: u64 = 2;

fn db(dir: &Path) -> Connection {
    Connection::open_with_flags(dir.join("boltwatch.db"), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

/// (raw dense records, rollups, every stored record): a row holds `n`
/// records (packed rows).
fn counts(dir: &Path) -> (i64, i64, i64) {
    three(
        dir,
        [
            "SELECT coalesce(sum(n), 0) FROM stored WHERE kind < 3",
            "SELECT count(*) FROM rollups",
            "SELECT coalesce(sum(n), 0) FROM stored",
        ],
    )
}

/// The answers of three counting queries.
fn three(dir: &Path, sql: [&str; 3]) -> (i64, i64, i64) {
    let c = db(dir);
    let [a, b, c] = sql.map(|q| c.query_row(q, [], |r| r.get::<_, i64>(0)).unwrap());
    (a, b, c)
}

/// The series a restart rebuilds from the store: RTT histograms and
/// counts, the newest window's gauges, interface counters and the
/// records received per kind.
fn rebuilt(metrics: &str) -> Vec<String> {
    let keep = [
        "boltwatch_rtt_",
        "boltwatch_records_received_total",
        "boltwatch_interface_",
        "boltwatch_probe_",
    ];
    let mut v: Vec<String> = metrics
        .lines()
        .filter(|l| keep.iter().any(|k| l.starts_with(k)))
        .map(str::to_string)
        .collect();
    v.sort();
    assert!(v.len() > 50, "too few series to compare:\n{}", v.join("\n"));
    v
}

/// Names the scenario's range and nodes soak `sim`, as an operator would.
fn start_soak(dir: &Path, sc: &Scenario) {
    collector_cli_ok(
        &[
            "soak",
            "start",
            "sim",
            "--from",
            &(T0 / S).to_string(),
            "--to",
            &((T0 + sc.duration) / S).to_string(),
            "--nodes",
            &sc.nodes.join(","),
        ],
        dir,
    );
}

fn report(dir: &Path) -> Value {
    let out = collector_cli_ok(&["report", "--soak", "sim", "--format", "json"], dir);
    serde_json::from_str(&out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruned_minutes_report_and_rebuild_as_the_raw_records_did() {
    let dir = tempfile::tempdir().unwrap();
    let sc = Scenario::standard(3, T0, HOURS * 3600 * S);
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    let truth = sim::run(&sc, c.grpc, 4000).await;
    // The simulator sends no interface counters: one more boot of mini-a
    // sends three minutes of them, once a second.
    let (mut agent, _) = c.agent("mini-a", "counters").await;
    let counters: Vec<_> = (0..180u64)
        .map(|i| {
            let mut r = common::record(
                "mini-a",
                "counters",
                i + 1,
                common::counters("veth0", 1_000_000 * i, i % 50 != 7),
            );
            r.unix_ns = T0 + i * S;
            r
        })
        .collect();
    agent.send(counters).await.unwrap();
    drop(agent);
    assert_eq!(c.stored().await, truth.records + 180);
    c.stop().await;
    start_soak(dir.path(), &sc);

    // Over the raw records: the report, and /metrics rebuilt at a restart.
    let before = report(dir.path());
    let c = Collector::start(dir.path()).await;
    let raw_metrics = rebuilt(&c.metrics().await);
    c.stop().await;
    let (dense, rollups, rows) = counts(dir.path());
    assert!(dense > 10_000 && rollups == 0, "{dense} {rollups}");

    // A restart with the retention prunes at once (the soak is hours old).
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.raw_retention = Some(Duration::from_secs(3600));
    })
    .await;
    let deadline = Instant::now() + WAIT * 6;
    loop {
        let (d, r, _) = counts(dir.path());
        if d == 0 && r > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {d} raw dense records, {r} rollups"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, rollups, left) = counts(dir.path());
    // The gauges follow: every pruned record is held in a rollup, and the
    // mark is past the soak's end (an hour before now, on a minute).
    let m = c
        .wait_metric("boltwatch_store_rollup_records", dense as f64)
        .await;
    let mark = common::metric(&m, "boltwatch_store_raw_pruned_until_timestamp_seconds").unwrap();
    assert!(
        mark >= ((T0 + sc.duration) / S) as f64 && mark % 60.0 == 0.0,
        "{mark}"
    );
    // Every other kind stays raw.
    assert_eq!(left, rows - dense);
    // One rollup per boot, kind and minute: RTT of 3 nodes over 120
    // minutes, less the 2 minutes mini-c's agent was down (on minute
    // boundaries), and 3 of counters.
    assert_eq!(rollups, 3 * 120 - 2 + 3, "{rollups} rollups");

    // A pruned record sent again is a duplicate: nothing is stored.
    let (boot, seq, minute): (String, i64, i64) = db(dir.path())
        .query_row(
            "SELECT b.boot_id, r.min_seq, r.minute FROM rollups r JOIN boot_keys b ON b.id = r.boot
             WHERE b.node = 'mini-a' AND r.kind = 1 ORDER BY r.minute LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let stored = c.stored().await;
    let (mut agent, _) = c.agent("mini-a", &boot).await;
    let mut again = common::record(
        "mini-a",
        &boot,
        seq as u64,
        common::rtt("mini-b", minute as u64, &[90_000], 0),
    );
    again.unix_ns = minute as u64 + S;
    agent.send(vec![again]).await.unwrap();
    assert_eq!(c.stored().await, stored);
    assert_eq!(counts(dir.path()).2, left);
    drop(agent);
    c.stop().await;

    // The report over rollups is the report over raw records, to the byte.
    let after = report(dir.path());
    assert_eq!(after, before);
    assert!(after["links"].as_array().unwrap().len() >= 6, "{after}");

    // A restart rebuilds the same cumulative series from the rollups.
    let c = Collector::start(dir.path()).await;
    let pruned_metrics = rebuilt(&c.metrics().await);
    c.stop().await;
    assert_eq!(pruned_metrics, raw_metrics);

    // The retention key is refused below an hour, naming the key.
    let toml = dir.path().join("c.toml");
    std::fs::write(&toml, "[retention]\nraw = \"10m\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
        .args(["serve", "--check-config", "--config"])
        .arg(&toml)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("retention.raw"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_command_leaves_a_mixed_range_reporting_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let sc = Scenario::standard(3, T0, 3600 * S);
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    sim::run(&sc, c.grpc, 4000).await;
    c.stop().await;
    let range = |f: &str| {
        collector_cli_ok(
            &[
                "report",
                "--from",
                &(T0 / S).to_string(),
                "--to",
                &((T0 + 3600 * S) / S).to_string(),
                "--format",
                f,
            ],
            dir.path(),
        )
    };
    let before = range("json");
    let (dense, _, _) = counts(dir.path());

    // An endpoint that delivered nothing yet holds everything back.
    {
        let w = Connection::open(dir.path().join("boltwatch.db")).unwrap();
        w.execute(
            "INSERT INTO remote_write_positions (endpoint, pos, updated_unix_ns) VALUES ('http://vm/api/v1/write', 0, 0)",
            [],
        )
        .unwrap();
    }
    let half = ((T0 + 1800 * S) / S).to_string();
    let out = collector_cli_ok(&["prune", "--before", &half], dir.path());
    assert!(
        out.contains("replaced 0 raw records")
            && out.contains("held back by remote_write endpoint http://vm/api/v1/write"),
        "{out}"
    );
    assert_eq!(counts(dir.path()).0, dense);

    // Delivered: the first half goes; the range mixes rollups and raw.
    Connection::open(dir.path().join("boltwatch.db"))
        .unwrap()
        .execute("UPDATE remote_write_positions SET pos = 1000000000", [])
        .unwrap();
    let out = collector_cli_ok(&["prune", "--before", &half, "--vacuum"], dir.path());
    assert!(out.contains("before 2026-11-30T00:30:00Z"), "{out}");
    let (left, rollups, _) = counts(dir.path());
    assert!(
        left > 0 && left < dense && rollups > 0,
        "{left} of {dense}, {rollups}"
    );
    assert!(
        out.contains(&format!("replaced {} raw records", dense - left)),
        "{out}"
    );
    assert_eq!(range("json"), before);
}

/// (rows, records, distinct (boot, kind, minute)): what compaction
/// brings rows down to when no group is over a pack's bounds.
fn rows_and_groups(dir: &Path) -> (i64, i64, i64) {
    three(
        dir,
        [
            "SELECT count(*) FROM stored",
            "SELECT coalesce(sum(n), 0) FROM stored",
            "SELECT count(*) FROM (SELECT DISTINCT boot, kind, unix_ns / 60000000000 FROM stored)",
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_soak_compacts_into_packs_and_reports_and_rebuilds_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let sc = Scenario::standard(3, T0, 10 * 60 * S);
    let c = Collector::start_with(dir.path(), |cfg| {
        cfg.max_records_per_second = 10_000_000;
    })
    .await;
    // A record a batch, as agents stream live.
    let truth = sim::run(&sc, c.grpc, 1).await;
    assert_eq!(c.stored().await, truth.records);
    c.stop().await;
    start_soak(dir.path(), &sc);
    let before = report(dir.path());

    // A restart rebuilds /metrics (before compaction starts), then
    // compacts the soak's minutes, all long closed, at once.
    let c = Collector::start(dir.path()).await;
    let raw_metrics = rebuilt(&c.metrics().await);
    let deadline = Instant::now() + WAIT * 6;
    loop {
        let (rows, records, groups) = rows_and_groups(dir.path());
        assert_eq!(records, truth.records as i64);
        if rows == groups {
            // A live soak's rows were mostly single records.
            assert!(rows * 10 < records, "{rows} rows for {records} records");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {rows} rows for {groups} (boot, kind, minute) groups"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Records sent again are still duplicates.
    let stored = c.stored().await;
    sim::run(&sc, c.grpc, 500).await;
    assert_eq!(c.stored().await, stored);
    c.stop().await;

    assert_eq!(report(dir.path()), before);
    let c = Collector::start(dir.path()).await;
    let packed_metrics = rebuilt(&c.metrics().await);
    c.stop().await;
    assert_eq!(packed_metrics, raw_metrics);
}

/// RTT windows of mini-a towards mini-b, one a second from `T0`, with
/// the sequence numbers `seqs`.
fn windows(seqs: impl Iterator<Item = u64>) -> Vec<boltwatch_proto::v1::Record> {
    seqs.map(|seq| {
        let t = T0 + (seq - 1) * S;
        let mut r = common::record("mini-a", "b1", seq, common::rtt("mini-b", t, &[90_000], 0));
        r.unix_ns = t + S;
        r
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_arrive_behind_the_prune_mark_are_pruned_at_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let before = ((T0 + 600 * S) / S).to_string();
    let send = |records: Vec<boltwatch_proto::v1::Record>| async {
        let c = Collector::start(dir.path()).await;
        let (mut agent, _) = c.agent("mini-a", "b1").await;
        agent.send(records).await.unwrap();
        drop(agent);
        c.stop().await;
    };
    // Five minutes of windows but one; pruned.
    send(windows((1..=300).filter(|s| *s != 7))).await;
    collector_cli_ok(&["prune", "--before", &before], dir.path());
    assert_eq!(counts(dir.path()).0, 0);
    // The missing window arrives late (a spool replayed after an outage
    // longer than raw retention), behind the mark: the next step folds
    // it into its minute's rollup instead of keeping it raw for good.
    send(windows(7..=7)).await;
    assert_eq!(counts(dir.path()).0, 1);
    let out = collector_cli_ok(&["prune", "--before", &before], dir.path());
    assert!(out.contains("replaced 1 raw records"), "{out}");
    assert_eq!(counts(dir.path()).0, 0);
    let held: i64 = db(dir.path())
        .query_row("SELECT sum(records) FROM rollups", [], |r| r.get(0))
        .unwrap();
    assert_eq!(held, 300);
}

/// Run where no store is, `soak`, `report` and `prune` fail naming the
/// path they tried and how to name the right one, and create nothing.
#[test]
fn store_commands_refuse_a_missing_store_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runs: [&[&str]; 6] = [
        &["soak", "list"],
        &["soak", "show", "week"],
        &["soak", "start", "week"],
        &["soak", "mark", "week", "load"],
        &["report", "--soak", "week"],
        &["prune", "--before", "2026-01-01T00:00:00Z"],
    ];
    for args in runs {
        let out = collector_cli(args, dir.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {err}");
        let db = dir.path().join("boltwatch.db");
        assert!(
            err.contains(&format!("no store at {}", db.display())) && err.contains("--data-dir"),
            "{args:?}: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
}
