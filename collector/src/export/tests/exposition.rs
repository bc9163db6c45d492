//! The exposition as a whole: every declared family rendered once, in
//! declaration order, the declarations following the naming conventions,
//! the metric reference (`docs/metrics.md`) matching them, escaping, and
//! `promtool check metrics` finding nothing. Nothing here lists families
//! by hand: a new family is checked from its declaration alone.

use std::collections::BTreeSet;

use super::*;
use boltwatch_exposition::agent::AgentInfo;
use boltwatch_exposition::family::{escape_help, escape_label, Family, Type};

#[test]
fn every_declared_family_is_rendered_once_in_order() {
    let mut m = Metrics::new();
    m.on_commit("a", 1, 10, 0.002);
    let text = m.render();
    let rendered: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next())
        .collect();
    let declared: Vec<&str> = m.families().iter().map(|f| f.name).collect();
    assert_eq!(rendered, declared);
    assert_eq!(
        declared.iter().collect::<BTreeSet<_>>().len(),
        declared.len()
    );
    for f in m.families() {
        assert!(text.contains(&format!("# TYPE {} {}\n", f.name, f.kind.as_str())));
    }
    let expect = [
        ("boltwatch_store_commit_seconds_bucket{le=\"0.0025\"}", "1"),
        ("boltwatch_store_commit_seconds_bucket{le=\"0.001\"}", "0"),
        ("boltwatch_records_duplicate_total{node=\"a\"}", "1"),
        ("boltwatch_ingest_errors_total{kind=\"no_hello\"}", "0"),
    ];
    for (series, want) in expect {
        assert_eq!(sample(&text, series).as_deref(), Some(want), "{series}");
    }
}

/// Label names the conventions allow.
const LABELS: &[&str] = &[
    "node",
    "peer",
    "interface",
    "sensor",
    "service",
    "endpoint",
    "direction",
    "protocol",
    // Which end of a link: local (the node) or peer.
    "end",
    "kind",
    "generation",
    // A fabric check's name (only names the build knows are exported) and
    // an RDMA device (budgeted as an interface at ingest).
    "check",
    "device",
    // An RDMA probe error's class (a closed set: proto's `rdma::CLASSES`).
    "class",
    // A path check: the interface the route leaves through, and what the
    // check saw (boltwatch_path_route_info).
    "route_interface",
    "state",
    // A watched TLS certificate file's path.
    "file",
    "version",
    "os",
    "boot_id",
    "reason",
    "soak",
    "nodes",
    "slo",
    "mark",
    "edge",
];

#[test]
fn declarations_follow_the_naming_conventions() {
    for f in Metrics::new().families() {
        let n = f.name;
        // `process_*`: the client libraries' standard names.
        assert!(
            n.starts_with("boltwatch_") || n.starts_with("process_"),
            "{n}"
        );
        let base = match f.kind {
            Type::Counter => n.strip_suffix("_total").unwrap_or_else(|| panic!("{n}")),
            Type::Gauge | Type::Histogram => {
                assert!(!n.ends_with("_total"), "{n}");
                n
            }
        };
        if !f.unit.is_empty() {
            assert!(
                base.ends_with(&format!("_{}", f.unit)),
                "{n} lacks unit {}",
                f.unit
            );
        }
        for l in f.labels {
            assert!(LABELS.contains(l), "{n}: label {l}");
        }
        assert!(f.help.ends_with('.'), "{n}");
    }
}

/// The metric reference table of `docs/metrics.md`, as generated from the
/// declarations.
fn docs_table(families: &[Family]) -> String {
    let mut rows: Vec<&Family> = families.iter().collect();
    rows.sort_by_key(|f| f.name);
    let mut t = String::from("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for f in rows {
        let labels = f.labels.join(", ");
        let kind = f.kind.as_str();
        t.push_str(&format!(
            "| `{}` | {kind} | {labels} | {} |\n",
            f.name, f.help
        ));
    }
    t
}

#[test]
fn docs_metric_table_matches_the_declarations() {
    let docs = include_str!("../../../../docs/metrics.md");
    let table = docs_table(&Metrics::new().families());
    assert!(
        docs.contains(&table),
        "docs/metrics.md's metric table differs from the declarations; it should read:\n{table}"
    );
}

#[test]
fn label_values_and_help_are_escaped() {
    assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
    assert_eq!(escape_label("x\ny"), "x\\ny");
    assert_eq!(escape_help("a\\b\nc"), "a\\\\b\\nc");
    let mut m = Metrics::new();
    let info = AgentInfo {
        version: "0.1.0".into(),
        os: "linux".into(),
        boot_id: "b1".into(),
    };
    m.on_hello("we\"ird\\node\n", info, &[]);
    let text = m.render();
    assert!(
        text.contains("boltwatch_agent_up{node=\"we\\\"ird\\\\node\\n\"} 1\n"),
        "{text}"
    );
}

/// `promtool check metrics` findings on `text` (its lint lines); a missing
/// promtool is a failure.
fn promtool_findings(text: &str) -> BTreeSet<String> {
    use std::io::{Seek, Write};
    let mut input = tempfile::tempfile().unwrap();
    input.write_all(text.as_bytes()).unwrap();
    input.rewind().unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(input)
        .output()
        .expect("promtool must be installed (apt-get install prometheus)");
    // 0: clean, 3: lint findings; anything else (1: unparsable) fails.
    assert!(matches!(out.status.code(), Some(0 | 3)), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    said.lines().map(str::to_string).collect()
}

#[test]
fn promtool_finds_nothing() {
    let mut m = Metrics::new();
    sequence::drive(&mut m);
    m.set_process(boltwatch_exposition::process::read_self());
    let text = m.render();
    // The check works: a family named in bits is a finding.
    let bits = "# HELP x_bits_per_second A rate in bits.\n\
                # TYPE x_bits_per_second gauge\n\
                x_bits_per_second 1\n";
    let found = promtool_findings(bits);
    assert!(
        found.iter().any(|l| l.contains("use base unit")),
        "{found:?}"
    );
    let after = promtool_findings(&text);
    assert!(after.is_empty(), "promtool findings: {after:?}");
}
