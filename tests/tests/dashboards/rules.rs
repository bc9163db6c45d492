//! The Prometheus side: both rule files and the example config pass the
//! real promtool, every alert is complete and unit-tested both ways, every
//! recording rule is named by convention, unit-tested and used, every
//! metric an expression selects is in the contract, and no rule merges
//! clusters.

use std::collections::BTreeSet;

use boltwatch_tests::promql::metric_names;

use crate::cluster;
use crate::contract::{CONTRACT, HISTOGRAMS, NOT_CHARTED};
use crate::files::*;

const SEVERITIES: &[&str] = &["critical", "warning", "info"];

#[test]
fn rule_files_pass_promtool_check() {
    let dir = dashboards().join("prometheus");
    let out = promtool(&["check", "rules", "recording.yml", "alerts.yml"], &dir);
    let rules = recording_rules().len();
    let alerts = alerts().len();
    assert!(
        out.contains(&format!("SUCCESS: {rules} rules found")),
        "{out}"
    );
    assert!(
        out.contains(&format!("SUCCESS: {alerts} rules found")),
        "{out}"
    );
}

#[test]
fn rule_unit_tests_pass_promtool() {
    // Run from elsewhere: rule_files paths must resolve from the test file.
    let root = dashboards();
    for file in rule_test_files() {
        let out = promtool(
            &["test", "rules", file.to_str().expect("utf-8 path")],
            &root,
        );
        assert!(out.contains("SUCCESS"), "{}: {out}", file.display());
    }
}

#[test]
fn example_config_passes_promtool_check() {
    let dir = dashboards().join("prometheus");
    let out = promtool(&["check", "config", "prometheus.yml"], &dir);
    assert!(out.contains("SUCCESS: 2 rule files found"), "{out}");
    let config = yaml(&dir.join("prometheus.yml"));
    // BoltwatchCollectorDown selects this job by name.
    let jobs = config["scrape_configs"].as_array().expect("scrape_configs");
    let job = jobs
        .iter()
        .find(|j| j["job_name"] == "boltwatch-collector")
        .expect("a job named boltwatch-collector");
    assert!(
        job["static_configs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["targets"].as_array().into_iter().flatten())
            .any(|t| t == "127.0.0.1:9471"),
        "scrapes the collector: {job}"
    );
    // The collector's cluster, as a target label the rules can see.
    assert!(
        job["static_configs"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["labels"]["cluster"]
                .as_str()
                .is_some_and(|v| !v.is_empty())),
        "every target names its cluster: {job}"
    );
    let expr = alerts()["BoltwatchCollectorDown"]["expr"].clone();
    assert!(expr
        .as_str()
        .is_some_and(|e| e.contains("job=\"boltwatch-collector\"")));
}

#[test]
fn every_alert_is_complete_and_tested_both_ways() {
    let alerts = alerts();
    assert!(alerts.len() >= 15, "only {} alerts", alerts.len());
    for (name, rule) in &alerts {
        assert!(name.starts_with("Boltwatch"), "{name}: prefix");
        assert!(rule["for"].is_string(), "{name}: one for: duration");
        let severity = values_of(&rule["labels"], "severity");
        assert!(
            severity.len() == 1 && SEVERITIES.contains(&severity[0].as_str()),
            "{name}: severity {severity:?} not one of {SEVERITIES:?}"
        );
        for key in ["summary", "description", "runbook"] {
            let v = values_of(&rule["annotations"], key);
            assert!(v.len() == 1 && v[0].len() > 10, "{name}: annotation {key}");
        }
    }

    // Which alerts each rule test expects to fire, and to stay silent.
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for file in rule_test_files() {
        let doc = yaml(&file);
        let cases = doc["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten());
        for case in cases {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            assert!(
                alerts.contains_key(&name),
                "{}: unknown alert {name}",
                file.display()
            );
            let expected = case["exp_alerts"].as_array().expect("exp_alerts: a list");
            if expected.is_empty() {
                silent.insert(name);
            } else {
                fires.insert(name);
            }
        }
    }
    for name in alerts.keys() {
        assert!(
            fires.contains(name),
            "{name}: no rule test expects it to fire"
        );
        assert!(
            silent.contains(name),
            "{name}: no rule test expects it silent"
        );
    }
}

#[test]
fn every_recording_rule_is_named_by_convention_and_tested() {
    let rules = recording_rules();
    assert!(rules.len() >= 15, "only {} recording rules", rules.len());
    let tested: BTreeSet<String> = rule_test_files()
        .iter()
        .flat_map(|f| values_of(&yaml(f), "expr"))
        .flat_map(|e| metric_names(&e).expect("test expr parses"))
        .collect();
    for name in rules.keys() {
        // level:metric:operations, e.g. node_peer:boltwatch_rtt_seconds:p99_5m.
        let parts: Vec<&str> = name.split(':').collect();
        assert_eq!(parts.len(), 3, "{name}: not level:metric:operations");
        assert!(parts.iter().all(|p| !p.is_empty()), "{name}: empty part");
        assert!(parts[1].starts_with("boltwatch_"), "{name}: metric part");
        assert!(
            !parts[1].ends_with("_total"),
            "{name}: _total is dropped once rated"
        );
        for level_label in parts[0].split('_') {
            assert!(
                [
                    "node",
                    "peer",
                    "interface",
                    "service",
                    "direction",
                    "protocol",
                    "sensor",
                    "le",
                    // The RDMA probe's errors (docs/rdma.md).
                    "device",
                    "class"
                ]
                .contains(&level_label),
                "{name}: level {level_label} is not a label of the contract"
            );
        }
        assert!(
            tested.contains(name),
            "{name}: no promql_expr_test reads it"
        );
    }
}

#[test]
fn yaml_trees_read_block_and_one_line_expressions_alike() {
    let doc = yaml_text(
        "rules:\n  - record: x\n    expr: |\n      a\n        + b\n  - alert: Y\n    expr: c > 1\n",
    )
    .unwrap();
    assert_eq!(values_of(&doc, "expr"), ["a\n  + b\n", "c > 1"]);
}

#[test]
fn every_metric_referenced_is_in_the_contract_or_recorded() {
    let known = known_metrics();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for file in ["recording.yml", "alerts.yml"] {
        for expr in values_of(&yaml(&dashboards().join("prometheus").join(file)), "expr") {
            exprs.push((file.to_string(), expr));
        }
    }
    for file in rule_test_files() {
        let doc = yaml(&file);
        let origin = file.display().to_string();
        for key in ["expr", "series", "labels"] {
            for value in values_of(&doc, key) {
                if key == "labels" && !value.contains('{') {
                    continue; // exp_labels blocks, not series selectors
                }
                exprs.push((origin.clone(), value));
            }
        }
    }
    exprs.extend(dashboard_exprs(&dashboard()));
    assert!(exprs.len() > 100, "only {} expressions found", exprs.len());

    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    for (origin, expr) in &exprs {
        let names = metric_names(expr).unwrap_or_else(|e| panic!("{origin}: {e}"));
        assert!(!names.is_empty(), "{origin}: no metric in {expr:?}");
        for name in names {
            if !known.contains(&name) {
                unknown.push(format!("{origin}: {name}"));
            }
            used.insert(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics outside the contract:\n{}",
        unknown.join("\n")
    );

    // And the other way round: every contract metric is shown or alerted on.
    let histogram_series = HISTOGRAMS.iter().map(|h| format!("{h}_bucket"));
    let not_charted: BTreeSet<&str> = NOT_CHARTED.iter().map(|(m, _)| *m).collect();
    let unused: Vec<String> = CONTRACT
        .iter()
        .map(|s| s.to_string())
        .chain(histogram_series)
        .filter(|m| !used.contains(m) && !not_charted.contains(m.as_str()))
        .collect();
    assert!(
        unused.is_empty(),
        "contract metrics nothing shows: {unused:?}"
    );
    for m in &not_charted {
        assert!(CONTRACT.contains(m), "{m}: not in the contract");
        assert!(!used.contains(*m), "{m}: listed as not charted, but read");
    }
}

#[test]
fn every_rule_keeps_cluster_through_aggregations_and_joins() {
    let demands = cluster::Demands {
        filter: false,
        keep: true,
    };
    let mut faults = Vec::new();
    let mut checked = 0;
    for file in ["recording.yml", "alerts.yml"] {
        for expr in values_of(&yaml(&dashboards().join("prometheus").join(file)), "expr") {
            checked += 1;
            for fault in cluster::faults(&expr, demands).unwrap_or_else(|e| panic!("{file}: {e}")) {
                faults.push(format!("{file}: {fault} in {expr}"));
            }
        }
    }
    assert!(checked >= 35, "only {checked} rule expressions");
    assert!(
        faults.is_empty(),
        "rules that merge clusters:\n{}",
        faults.join("\n")
    );
}

#[test]
fn every_recording_rule_is_read_by_the_dashboard_or_an_alert() {
    let mut readers: Vec<String> =
        values_of(&yaml(&dashboards().join("prometheus/alerts.yml")), "expr");
    readers.extend(dashboard_exprs(&dashboard()).into_iter().map(|(_, e)| e));
    let read: BTreeSet<String> = readers
        .iter()
        .flat_map(|e| metric_names(e).expect("expression parses"))
        .collect();
    let unread: Vec<String> = recording_rules()
        .into_keys()
        .filter(|r| !read.contains(r))
        .collect();
    assert!(
        unread.is_empty(),
        "recording rules nothing reads (Prometheus evaluates them for nothing): {unread:?}"
    );
}
