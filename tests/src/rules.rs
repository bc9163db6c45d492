//! The shipped Prometheus rule files (`dashboards/prometheus/*.yml`) as
//! the tests read them: YAML trees (`serde_norway`, so any valid layout
//! reads the same), their rules keyed by name.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::grafana::dashboards_dir;

/// `dashboards/prometheus/<name>` parsed; panics with the path on a read
/// or parse error.
pub fn rule_file(name: &str) -> Value {
    let path = dashboards_dir().join("prometheus").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rules of a rule file (`groups[].rules[]`) that carry `kind`
/// (`alert` or `record`), keyed by that name; a name used twice fails.
pub fn rule_map(doc: &Value, kind: &str) -> BTreeMap<String, Value> {
    let mut rules = BTreeMap::new();
    for group in doc["groups"].as_array().expect("groups: a list") {
        for rule in group["rules"].as_array().expect("rules: a list") {
            if let Some(name) = rule[kind].as_str() {
                assert!(
                    rules.insert(name.to_string(), rule.clone()).is_none(),
                    "{name} twice"
                );
            }
        }
    }
    rules
}

/// The recording rules of `recording.yml`, by name.
pub fn recording_rules() -> BTreeMap<String, Value> {
    rule_map(&rule_file("recording.yml"), "record")
}

/// The alerts of `alerts.yml`, by name.
pub fn alerts() -> BTreeMap<String, Value> {
    rule_map(&rule_file("alerts.yml"), "alert")
}
