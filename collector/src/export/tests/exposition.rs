//! The exposition as a whole: every declared family rendered once, the
//! declarations following the naming conventions, the README's table
//! matching them, and the text unchanged from before the split by domain.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::export::agent::AgentInfo;
use crate::export::family::{escape_help, escape_label, Family, Type};

/// Families removed as duplicates when the metrics were split by domain:
/// the same state as `boltwatch_link_up` and
/// `boltwatch_agent_dropped_records_total`.
const REMOVED: [&str; 2] = [
    "boltwatch_interface_carrier",
    "boltwatch_spool_dropped_records_total",
];

/// Families added since `testdata/before.prom` was taken (the soak
/// families are taken from their module).
const ADDED: [&str; 4] = [
    "boltwatch_agent_stamp_refused_total",
    "boltwatch_ingest_series_refused_total",
    "boltwatch_store_rollup_records",
    "boltwatch_store_raw_pruned_until_timestamp_seconds",
];

/// Families changed on purpose since the split (issue 11: base units,
/// one `direction` vocabulary, no boot id in the info), old name -> new
/// name; their text is checked by their domain's tests instead.
const CHANGED: [(&str, &str); 5] = [
    (
        "boltwatch_bandwidth_bits_per_second",
        "boltwatch_bandwidth_bytes_per_second",
    ),
    (
        "boltwatch_interface_throughput_bits_per_second",
        "boltwatch_interface_throughput_bytes_per_second",
    ),
    (
        "boltwatch_link_speed_bits_per_second",
        "boltwatch_link_speed_bytes_per_second",
    ),
    ("boltwatch_agent_info", "boltwatch_agent_info"),
    ("boltwatch_thermal_throttled", "boltwatch_thermal_throttled"),
];

/// Families added by issue 11.
const ADDED_ONCALL: [&str; 6] = [
    "boltwatch_thermal_throttled_seconds_total",
    "boltwatch_bandwidth_last_test_timestamp_seconds",
    "boltwatch_bandwidth_last_test_throttled",
    "boltwatch_bandwidth_last_test_max_temperature_celsius",
    "boltwatch_bandwidth_last_test_max_pressure_level",
    "boltwatch_bandwidth_expected_bytes_per_second",
];

/// Splits exposition text into its families: name -> HELP, TYPE and
/// sample lines.
fn by_family(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::<String, String>::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            current = rest.split(' ').next().unwrap().to_string();
            assert!(!out.contains_key(&current), "{current} twice");
        }
        let block = out.entry(current.clone()).or_default();
        block.push_str(line);
        block.push('\n');
    }
    out
}

#[test]
fn exposition_is_unchanged_family_by_family_but_for_the_removed_duplicates() {
    let mut before = by_family(include_str!("../testdata/before.prom"));
    for name in REMOVED.into_iter().chain(CHANGED.map(|c| c.0)) {
        assert!(before.remove(name).is_some(), "{name}");
    }
    let mut m = Metrics::new();
    sequence::drive(&mut m);
    let mut after = by_family(&m.render());
    let soak = crate::export::soak::FAMILIES.iter().map(|f| f.name);
    let soak = soak.chain(crate::export::remote_write::FAMILIES.iter().map(|f| f.name));
    let process = crate::export::process::FAMILIES.iter().map(|f| f.name);
    let process = process.chain(crate::export::build::FAMILIES.iter().map(|f| f.name));
    let oncall = ADDED_ONCALL.into_iter().chain(CHANGED.map(|c| c.1));
    for name in ADDED.into_iter().chain(soak).chain(process).chain(oncall) {
        assert!(after.remove(name).is_some(), "{name} is not rendered");
    }
    let names = |f: &BTreeMap<String, String>| f.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&after), names(&before));
    for (name, block) in &before {
        assert_eq!(&after[name], block, "family {name} changed");
    }
}

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
            _ => {
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

/// The README's metric table, as generated from the declarations.
fn readme_table(families: &[Family]) -> String {
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
fn readme_metric_table_matches_the_declarations() {
    let readme = include_str!("../../../../README.md");
    let table = readme_table(&Metrics::new().families());
    assert!(
        readme.contains(&table),
        "README.md's metric table differs from the declarations; it should read:\n{table}"
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
    m.set_process(crate::export::process::read_self());
    let text = m.render();
    // The snapshot had the bits-per-second findings: the check works.
    let before = promtool_findings(include_str!("../testdata/before.prom"));
    assert!(
        before.iter().any(|l| l.contains("use base unit")),
        "{before:?}"
    );
    let after = promtool_findings(&text);
    assert!(after.is_empty(), "promtool findings: {after:?}");
}
