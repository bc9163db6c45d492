//! The store commands (`soak`, `report`, `prune`) never create a store:
//! run where no store is, each fails with the path it tried and how to name
//! the right one, and leaves the directory as it found it.

mod cli;

use cli::collector_cli;

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
