//! `boltwatch-lab --soak`: the real lab binary runs a soak into a kept
//! store, ends with the report's verdict (no sshd, sensors or bandwidth
//! floor on loopback: "no data", not FAIL), writes the HTML page beside the
//! store and names the commands that go on from it; the SLO decides (a
//! threshold no RTT can meet FAILs); a soak name already in the store is
//! refused before anything starts.

use std::path::Path;
use std::process::{Command, Output};

use boltwatch_collector::soak::{load, stored};

fn lab(store: &Path, soak: &str, slo: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_boltwatch-lab"))
        .args([
            "--soak",
            soak,
            "--duration",
            "3s",
            "--probe-interval",
            "20ms",
        ])
        .args(["--http-listen", "127.0.0.1:0", "--keep"])
        .arg(store)
        .arg("--slo")
        .arg(slo)
        .output()
        .unwrap()
}

fn stdout_ok(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "lab failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The result word of the verdict line starting with `name`.
fn result(stdout: &str, name: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no `{name}` line:\n{stdout}"));
    line.split_whitespace().last().unwrap().to_string()
}

#[test]
fn lab_soak_ends_with_its_verdict_and_stays_inspectable() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kept");
    // Thresholds a loaded CI machine meets on loopback; the rest default.
    let loose = dir.path().join("loose.toml");
    std::fs::write(&loose, "rtt_worst_ms = 1000\nrtt_p99_ms = 1000\n").unwrap();
    let out = stdout_ok(&lab(&store, "first", &loose));
    assert!(out.contains("\nverdict: PASS\n"), "{out}");
    assert_eq!(result(&out, "service availability"), "n/a", "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("service availability") && l.contains("no data")),
        "{out}"
    );
    assert_eq!(result(&out, "data completeness"), "PASS", "{out}");
    let page = store.join("first.html");
    assert!(
        out.contains(&format!("report: {}", page.display())),
        "{out}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{page:?}");
    for cmd in ["soak show first", "report --soak first", "serve"] {
        let want = format!("boltwatch-collector {cmd} --data-dir {}", store.display());
        assert!(out.contains(&want), "no `{want}`:\n{out}");
    }
    // The soak is in the kept store, ended, as `soak show` reads it.
    let db = load::open_reader(&store.join("boltwatch.db")).unwrap();
    let s = stored::get(&db, "first").unwrap();
    let end = s.end_unix_ns.expect("the soak ended");
    assert!(end > s.start_unix_ns);

    // The same name again into the same store: refused up front.
    let again = lab(&store, "first", &loose);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("a soak named `first` exists already"), "{err}");

    // A threshold nothing meets: the verdict says FAIL, on that line.
    let strict = dir.path().join("strict.toml");
    std::fs::write(&strict, "rtt_worst_ms = 0\nrtt_p99_ms = 1000\n").unwrap();
    let out = stdout_ok(&lab(&store, "strict", &strict));
    assert!(out.contains("\nverdict: FAIL\n"), "{out}");
    assert_eq!(result(&out, "RTT worst"), "FAIL", "{out}");
    assert_eq!(result(&out, "RTT p99"), "PASS", "{out}");
}
