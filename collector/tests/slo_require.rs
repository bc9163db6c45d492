//! The SLO's `require` key: its line names are the verdict's, a required
//! line without data fails, any other says "no data" and does not decide;
//! and the read commands, run from a directory without a store, name the
//! absolute path they tried and create nothing.

use boltwatch_collector::report::soak::{Builder, Scope};
use boltwatch_collector::soak::{slo, Slo};

/// An empty report (no records at all) judged by `slo`.
fn empty(slo: Slo) -> boltwatch_collector::report::soak::Report {
    Builder::new(Scope {
        name: "empty".into(),
        from_unix_ns: 1_000_000_000_000,
        to_unix_ns: 1_060_000_000_000,
        nodes: Vec::new(),
        slo,
        marks: Vec::new(),
    })
    .finish()
}

#[test]
fn require_names_every_verdict_line() {
    let r = empty(Slo::default());
    let keys: Vec<&str> = r.verdict.lines.iter().map(|l| l.key).collect();
    assert_eq!(keys, slo::LINES);
}

#[test]
fn only_required_lines_fail_without_data() {
    let r = empty(Slo::default());
    let by = |k: &str| r.verdict.lines.iter().find(|l| l.key == k).unwrap();
    // Required by default: no RTT data is a FAIL.
    assert_eq!(by("rtt_worst").pass, Some(false));
    assert_eq!(by("completeness").pass, Some(false));
    // No sshd checked: no data, not judged.
    assert_eq!(by("availability").measured, None);
    assert_eq!(by("availability").pass, None);
    assert!(!r.verdict.pass);

    let none = Slo::parse("slo.toml", "require = []\n").unwrap();
    let r = empty(none);
    assert!(r.verdict.lines.iter().all(|l| l.pass != Some(false)));
    assert!(r.verdict.pass, "{:?}", r.verdict);

    let ssh = Slo::parse("slo.toml", "require = [\"availability\"]\n").unwrap();
    let r = empty(ssh);
    let avail = r.verdict.lines.iter().find(|l| l.key == "availability");
    assert_eq!(avail.unwrap().pass, Some(false));
    assert_eq!(r.verdict.lines[0].pass, None, "rtt_worst not required here");
}

/// From a directory without `boltwatch-data`, with no `--data-dir`.
#[test]
fn read_commands_name_the_absolute_path_they_tried() {
    let cwd = tempfile::tempdir().unwrap();
    for args in [&["soak", "list"][..], &["report", "--soak", "week"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_boltwatch-collector"))
            .args(args)
            .current_dir(cwd.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        let tried = cwd.path().join("boltwatch-data/boltwatch.db");
        assert!(
            err.contains(&format!("no store at {} ", tried.display()))
                && err.contains("--data-dir DIR"),
            "{args:?}: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
        assert!(left.is_empty(), "{args:?} created {left:?}");
    }
}
