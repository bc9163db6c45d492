//! Reading the files under `dashboards/`: the rule files and their tests
//! as YAML trees (`serde_norway`, so any valid layout reads the same), the
//! dashboard's expressions, and the real `promtool`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use boltwatch_tests::grafana;
pub use boltwatch_tests::rules::{alerts, recording_rules};
use serde_json::Value;

use crate::contract::{CONTRACT, HISTOGRAMS, PROMETHEUS_SERIES};

pub fn dashboards() -> PathBuf {
    grafana::dashboards_dir()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Runs promtool and returns its combined output; panics (with the output)
/// when it exits non-zero and, loudly, when promtool is not installed.
pub fn promtool(args: &[&str], dir: &Path) -> String {
    let out = match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: these tests need the real one \
             (apt-get install -y --no-install-recommends prometheus)"
        ),
        Err(e) => panic!("running promtool {args:?}: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {args:?} in {} failed ({}):\n{text}",
        dir.display(),
        out.status
    );
    text
}

pub fn rule_test_files() -> Vec<PathBuf> {
    let dir = dashboards().join("prometheus/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no rule tests in {}", dir.display());
    files
}

// --- YAML ------------------------------------------------------------------

/// A YAML file as a tree (every key these files use is a string).
pub fn yaml(path: &Path) -> Value {
    yaml_text(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn yaml_text(text: &str) -> Result<Value, serde_norway::Error> {
    serde_norway::from_str(text)
}

/// Every string value of `key` anywhere in `tree`, in document order for
/// sequences.
pub fn values_of(tree: &Value, key: &str) -> Vec<String> {
    fn walk(v: &Value, key: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if k == key {
                        if let Some(s) = child.as_str() {
                            out.push(s.to_string());
                        }
                    }
                    walk(child, key, out);
                }
            }
            Value::Array(list) => list.iter().for_each(|c| walk(c, key, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(tree, key, &mut out);
    out
}

/// Metric names a rule-file or dashboard may query: the contract, histogram
/// series, Prometheus' own series and the recording rules.
pub fn known_metrics() -> BTreeSet<String> {
    let mut known: BTreeSet<String> = CONTRACT.iter().map(|s| s.to_string()).collect();
    for h in HISTOGRAMS {
        for suffix in ["_bucket", "_sum", "_count"] {
            known.insert(format!("{h}{suffix}"));
        }
    }
    known.extend(PROMETHEUS_SERIES.iter().map(|s| s.to_string()));
    known.extend(recording_rules().into_keys());
    known
}

pub fn dashboard() -> Value {
    grafana::load()
}

/// Every PromQL expression in the dashboard with where it comes from.
pub fn dashboard_exprs(dash: &Value) -> Vec<(String, String)> {
    let mut exprs = Vec::new();
    for panel in grafana::panels(dash) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("?");
            let expr = target["expr"].as_str().unwrap_or_default().to_string();
            exprs.push((format!("panel {title:?}"), expr));
        }
    }
    for ann in dash["annotations"]["list"].as_array().into_iter().flatten() {
        if let Some(expr) = ann["expr"].as_str() {
            exprs.push((format!("annotation {:?}", ann["name"]), expr.to_string()));
        }
    }
    for var in dash["templating"]["list"].as_array().into_iter().flatten() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"]
            .as_str()
            .or(var["query"].as_str())
            .expect("query variable has a query");
        // label_values(<selector>, <label>): only the selector is PromQL.
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
            .map(|(selector, _label)| selector.to_string())
            .unwrap_or_else(|| {
                panic!(
                    "variable {}: expected label_values(sel, label)",
                    var["name"]
                )
            });
        exprs.push((format!("variable {}", var["name"]), inner));
    }
    exprs
}
