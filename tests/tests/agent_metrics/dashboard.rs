//! The Prometheus side of `agent_metrics`: a real `prometheus` scraping a
//! job every second with the shipped recording rules, and the Grafana
//! dashboard's queries with their variables substituted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use boltwatch_tests::grafana::{self, Vars};
use boltwatch_tests::prometheus::{PromConfig, Prometheus};
use boltwatch_tests::{promql, rules};

use super::CLUSTER;

/// Scrapes `targets` every second as `job`, with `cluster` as a target
/// label, and evaluates the shipped recording rules every second.
pub fn start_prometheus(
    dir: &Path,
    job: &str,
    targets: &[String],
    honor_labels: bool,
) -> Prometheus {
    let dir = dir.join(job);
    std::fs::create_dir_all(&dir).unwrap();
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    Prometheus::start(
        &dir,
        &PromConfig {
            interval_s: 1,
            rule_files: vec![grafana::dashboards_dir().join("prometheus/recording.yml")],
            scrape_configs: format!(
                "  - job_name: {job}\n    honor_labels: {honor_labels}\n    \
                 static_configs:\n      - targets: [{}]\n        \
                 labels:\n          cluster: {CLUSTER}\n",
                targets.join(", ")
            ),
            ..Default::default()
        },
    )
}

/// Every panel query of the Grafana dashboard: (panel title, expression
/// with the Grafana variables substituted: every filter at All, a range
/// of 5 minutes, a 5 s step).
pub fn dashboard_queries() -> Vec<(String, String)> {
    let vars = Vars::all(300, 5, 1);
    grafana::queries(&grafana::load())
        .into_iter()
        .map(|q| (q.panel, grafana::substitute(&q.expr, &vars)))
        .collect()
}

/// The metric names an expression reads, through recording rules (by
/// their own expressions).
pub fn metrics_read(expr: &str, rules: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let names = promql::metric_names(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    for name in names {
        match rules.get(&name) {
            Some(inner) => out.extend(metrics_read(inner, rules)),
            None => {
                out.insert(name);
            }
        }
    }
    out
}

/// Recording rule name -> expression.
pub fn recording_rules() -> BTreeMap<String, String> {
    rules::recording_rules()
        .into_iter()
        .map(|(name, rule)| {
            let expr = rule["expr"].as_str().expect("a recording rule's expr");
            (name, expr.to_string())
        })
        .collect()
}
