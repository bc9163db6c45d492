//! Checks the operator-facing files under `dashboards/`: the Prometheus rule
//! files, their `promtool test rules` unit tests, the example Prometheus
//! config and the Grafana dashboard.
//!
//! The rules are checked and unit-tested by the real `promtool` (Debian
//! package `prometheus`); a missing promtool fails these tests, it never
//! skips them. On top of what promtool knows, this file holds the metric
//! contract ([`CONTRACT`]) in one place: every metric name in any PromQL
//! expression (rules, alerts, rule tests, dashboard panels, annotations and
//! variables) must be in it or be a recording rule of `recording.yml`, so a
//! renamed metric breaks this test rather than silently emptying a panel.
//!
//! The YAML files (rules, rule tests, the Prometheus config) are parsed with
//! `serde_norway` into a tree and read by key, so any valid YAML layout
//! (block or flow, quoted or plain, `|` or `>`) reads the same.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "dashboards/cluster.rs"]
mod cluster;

/// Every metric the product exposes (foundation, link truth, bandwidth
/// and soak marks), as agreed in the metric contract. Histograms are listed in
/// [`HISTOGRAMS`] instead.
const CONTRACT: &[&str] = &[
    // Foundation.
    "boltwatch_agent_up",
    "boltwatch_agent_info",
    "boltwatch_rtt_min_seconds",
    "boltwatch_rtt_p50_seconds",
    "boltwatch_rtt_p99_seconds",
    "boltwatch_rtt_max_seconds",
    "boltwatch_probe_sent_total",
    "boltwatch_probe_received_total",
    "boltwatch_probe_lost_total",
    "boltwatch_interface_receive_bytes_total",
    "boltwatch_interface_receive_packets_total",
    "boltwatch_interface_receive_errors_total",
    "boltwatch_interface_receive_drops_total",
    "boltwatch_interface_transmit_bytes_total",
    "boltwatch_interface_transmit_packets_total",
    "boltwatch_interface_transmit_errors_total",
    "boltwatch_interface_transmit_drops_total",
    "boltwatch_temperature_celsius",
    "boltwatch_records_received_total",
    "boltwatch_agent_malformed_packets_total",
    "boltwatch_agent_dropped_records_total",
    // Shown beside the malformed packets.
    "boltwatch_agent_stamp_refused_total",
    "boltwatch_ingest_malformed_connections_total",
    "boltwatch_ingest_errors_total",
    // Link truth.
    "boltwatch_link_up",
    "boltwatch_link_down_events_total",
    "boltwatch_outages_total",
    "boltwatch_outage_seconds_total",
    "boltwatch_path_ok",
    "boltwatch_link_speed_bytes_per_second",
    "boltwatch_link_info",
    "boltwatch_thermal_throttled",
    "boltwatch_thermal_throttled_seconds_total",
    "boltwatch_thermal_pressure_level",
    "boltwatch_cpu_frequency_ratio",
    "boltwatch_service_up",
    "boltwatch_service_connect_seconds",
    "boltwatch_service_outages_total",
    "boltwatch_service_outage_seconds_total",
    // Bandwidth.
    "boltwatch_bandwidth_bytes_per_second",
    "boltwatch_bandwidth_expected_bytes_per_second",
    "boltwatch_bandwidth_last_test_timestamp_seconds",
    "boltwatch_bandwidth_last_test_throttled",
    "boltwatch_bandwidth_last_test_max_temperature_celsius",
    "boltwatch_bandwidth_tests_total",
    "boltwatch_bandwidth_test_failures_total",
    "boltwatch_bandwidth_retransmits_total",
    "boltwatch_interface_throughput_bytes_per_second",
    // Soak runs: workload marks as dashboard annotations.
    "boltwatch_soak_mark_timestamp_seconds",
];

/// Classic histograms of the contract: queried as `_bucket`, `_sum`, `_count`.
const HISTOGRAMS: &[&str] = &[
    "boltwatch_rtt_seconds",
    // Windows a bandwidth test overlapped; at rest = rtt_seconds minus it.
    "boltwatch_rtt_under_load_seconds",
];

/// Series Prometheus itself synthesises for every scrape target.
const PROMETHEUS_SERIES: &[&str] = &["up"];

/// PromQL functions the files may call; anything else followed by `(` is an
/// error, so a misspelt function in a Grafana panel is caught too.
#[rustfmt::skip]
const FUNCTIONS: &[&str] = &[
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp",
    "clamp_max", "clamp_min", "count_over_time", "delta", "deriv", "floor",
    "histogram_quantile", "idelta", "increase", "irate", "label_replace", "last_over_time",
    "max_over_time", "min_over_time", "predict_linear", "quantile_over_time", "rate",
    "resets", "round", "scalar", "sort", "sort_desc", "stddev_over_time", "sum_over_time",
    "time", "timestamp", "vector",
];

/// Aggregation operators: may be followed by `by (...)` before their `(`.
#[rustfmt::skip]
const AGGREGATIONS: &[&str] = &[
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile",
];

/// Keywords followed by a parenthesised label list, which holds no metrics.
#[rustfmt::skip]
const LABEL_LIST_KEYWORDS: &[&str] = &[
    "by", "without", "on", "ignoring", "group_left", "group_right",
];

/// Other PromQL keywords and literals.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "inf", "nan"];

const SEVERITIES: &[&str] = &["critical", "warning", "info"];

fn dashboards() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("dashboards")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Runs promtool and returns its combined output; panics (with the output)
/// when it exits non-zero and, loudly, when promtool is not installed.
fn promtool(args: &[&str], dir: &Path) -> String {
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

fn rule_test_files() -> Vec<PathBuf> {
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
fn yaml(path: &Path) -> Value {
    yaml_text(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_text(text: &str) -> Result<Value, serde_norway::Error> {
    serde_norway::from_str(text)
}

/// Every string value of `key` anywhere in `tree`, in document order for
/// sequences.
fn values_of(tree: &Value, key: &str) -> Vec<String> {
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

/// The rules of a rule file (`groups[].rules[]`) that carry `kind`
/// (`alert` or `record`), keyed by that name; a name used twice fails.
fn rule_map(doc: &Value, kind: &str) -> BTreeMap<String, Value> {
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

// --- PromQL metric-name extraction ----------------------------------------

/// The metric names a PromQL expression selects, in order of appearance.
/// Errors on an unknown function and on unbalanced brackets.
fn metric_names(expr: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '{' => i = skip_group(&chars, i, '{', '}')?,
            '[' => i = skip_group(&chars, i, '[', ']')?,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            // Grafana variables: $node, ${node}, $__rate_interval.
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_group(&chars, i, '{', '}')?;
                } else {
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                }
            }
            _ if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                // Numbers and durations: 0.5, 50e9, 1e-9, 5m, 0x1F.
                i += 1;
                while i < chars.len() {
                    let d = chars[i];
                    let exponent_sign = (d == '+' || d == '-') && matches!(chars[i - 1], 'e' | 'E');
                    if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            _ if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let ident: String = chars[start..i].iter().collect();
                let lower = ident.to_ascii_lowercase();
                let mut j = i;
                while j < chars.len() && chars[j].is_whitespace() {
                    j += 1;
                }
                let calls = chars.get(j) == Some(&'(');
                if LABEL_LIST_KEYWORDS.contains(&lower.as_str()) {
                    if calls {
                        i = skip_group(&chars, j, '(', ')')?;
                    }
                } else if KEYWORDS.contains(&lower.as_str())
                    || AGGREGATIONS.contains(&ident.as_str())
                {
                    // Nothing to record.
                } else if calls {
                    if !FUNCTIONS.contains(&ident.as_str()) {
                        return Err(format!("unknown function {ident}() in {expr}"));
                    }
                } else {
                    names.push(ident);
                }
            }
            _ => i += 1,
        }
    }
    Ok(names)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Index just past the string literal opening at `start`.
fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' && quote != '`' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return Ok(i + 1);
        }
        i += 1;
    }
    Err(format!("unterminated string at {start}"))
}

/// Index just past the group opening at `start`, strings inside respected.
fn skip_group(chars: &[char], start: usize, open: char, close: char) -> Result<usize, String> {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i)?;
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(format!("unbalanced {open}{close} from {start}"))
}

/// Metric names a rule-file or dashboard may query: the contract, histogram
/// series, Prometheus' own series and the recording rules.
fn known_metrics() -> BTreeSet<String> {
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

fn recording_rules() -> BTreeMap<String, Value> {
    rule_map(
        &yaml(&dashboards().join("prometheus/recording.yml")),
        "record",
    )
}

fn alerts() -> BTreeMap<String, Value> {
    rule_map(&yaml(&dashboards().join("prometheus/alerts.yml")), "alert")
}

fn dashboard() -> Value {
    let path = dashboards().join("grafana/boltwatch.json");
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel, rows included, with nested (collapsed-row) panels flattened.
fn panels(dash: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().expect("panels is an array") {
            out.push(panel);
            if let Some(nested) = panel.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

/// Every PromQL expression in the dashboard with where it comes from.
fn dashboard_exprs(dash: &Value) -> Vec<(String, String)> {
    let mut exprs = Vec::new();
    for panel in panels(dash) {
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

/// Replaces Grafana's variables with values Prometheus accepts.
fn substitute_grafana_variables(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "30s")
        .replace("$__range_s", "259200")
        .replace("$__range", "72h")
        .replace("$cluster", ".*")
        .replace("$node", ".*")
        .replace("$peer", ".*")
}

// --- tests -----------------------------------------------------------------

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
                    "protocol"
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
fn metric_name_extraction_sees_what_promql_selects() {
    let expr = r#"sum by (node, le) (rate(a_total{x="y}", le=~"[0-9]"}[5m] offset 1h))
        / on (node) group_left (kind) b:c:d * 50e9 - 1e-9 + ignoring(z) $node_x
        or histogram_quantile(0.99, e_bucket) > bool 0.0005"#;
    assert_eq!(
        metric_names(expr).unwrap(),
        ["a_total", "b:c:d", "e_bucket"],
        "label lists, strings, ranges, numbers and variables are not metrics"
    );
    assert!(
        metric_names("rte(a_total[5m])").is_err(),
        "unknown function"
    );
    assert!(metric_names("sum(a{b=\"c\"").is_err(), "unbalanced braces");
    // The YAML tree yields block and one-line expressions alike.
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
    let unused: Vec<String> = CONTRACT
        .iter()
        .map(|s| s.to_string())
        .chain(histogram_series)
        .filter(|m| !used.contains(m))
        .collect();
    assert!(
        unused.is_empty(),
        "contract metrics nothing shows: {unused:?}"
    );
}

#[test]
fn grafana_dashboard_is_well_formed() {
    let dash = dashboard();
    let schema = dash["schemaVersion"].as_u64().expect("schemaVersion");
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");
    assert!(dash["uid"]
        .as_str()
        .is_some_and(|u| !u.is_empty() && u.len() <= 40));
    assert!(dash["title"].as_str().is_some_and(|t| !t.is_empty()));

    let vars = dash["templating"]["list"]
        .as_array()
        .expect("templating.list");
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    assert_eq!(var("DS_PROMETHEUS")["type"], "datasource");
    assert_eq!(var("DS_PROMETHEUS")["query"], "prometheus");
    for name in ["cluster", "node", "peer"] {
        assert_eq!(var(name)["type"], "query", "{name}");
        assert_eq!(var(name)["datasource"]["uid"], "${DS_PROMETHEUS}", "{name}");
        assert_eq!(var(name)["multi"], true, "{name}");
        // All is `.*`, which also matches an absent (empty) label: a single
        // collector scraped without a cluster label still shows.
        assert_eq!(var(name)["includeAll"], true, "{name}");
        assert_eq!(var(name)["allValue"], ".*", "{name}");
    }
    // Clusters come from a series remote write pushes too (boltwatch_agent_up
    // is scrape-only), and the variables filter in order: cluster, node, peer.
    assert_eq!(
        var("cluster")["query"]["query"],
        "label_values(boltwatch_records_received_total, cluster)"
    );
    let order: Vec<&str> = vars.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(order, ["DS_PROMETHEUS", "cluster", "node", "peer"]);

    let all = panels(&dash);
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut types = BTreeSet::new();
    for panel in &all {
        let title = panel["title"].as_str().unwrap_or_default();
        assert!(!title.is_empty(), "panel without a title: {panel}");
        let id = panel["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("{title}: id"));
        assert!(ids.insert(id), "{title}: duplicate id {id}");
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| {
            grid[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{title}: gridPos.{k}"))
        });
        assert!(w >= 1 && h >= 1 && x + w <= 24, "{title}: gridPos {grid}");
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title.to_string()) {
                    panic!("{title} overlaps {other} at ({cx}, {cy})");
                }
            }
        }
        let kind = panel["type"]
            .as_str()
            .unwrap_or_else(|| panic!("{title}: type"));
        types.insert(kind.to_string());
        if kind == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${DS_PROMETHEUS}",
            "{title}: datasource"
        );
        assert_eq!(
            panel["datasource"]["type"], "prometheus",
            "{title}: datasource"
        );
        let targets = panel["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: targets"));
        assert!(!targets.is_empty(), "{title}: no queries");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "{title}: expr"
            );
            let r = t["refId"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: refId"));
            assert!(refs.insert(r), "{title}: duplicate refId {r}");
            assert_eq!(
                t["datasource"]["uid"], "${DS_PROMETHEUS}",
                "{title}: target datasource"
            );
        }
        assert!(
            panel["fieldConfig"]["defaults"].is_object(),
            "{title}: fieldConfig.defaults"
        );
    }
    for kind in ["row", "stat", "heatmap", "timeseries", "state-timeline"] {
        assert!(types.contains(kind), "no {kind} panel");
    }

    // The titles of the panels of one type, in order.
    let titles = |kind: &str| -> Vec<&str> {
        all.iter()
            .filter(|p| p["type"] == kind)
            .map(|p| p["title"].as_str().unwrap_or_default())
            .collect()
    };
    // The rows the soak review walks through, in order.
    let rows = titles("row");
    let expected = [
        "Soak verdict",
        "Round-trip time",
        "Loss and outages",
        "Link state",
        "Throughput",
        "Temperatures",
        "Services",
        "Agent",
    ];
    assert_eq!(rows.len(), expected.len(), "rows {rows:?}");
    for (row, prefix) in rows.iter().zip(expected) {
        assert!(row.starts_with(prefix), "row {row:?}, expected {prefix}…");
    }
    let verdict = titles("stat");
    for title in [
        "RTT mean",
        "RTT worst",
        "Bandwidth mean",
        "Bandwidth worst",
        "Link interruptions",
        "SSH availability",
        "Temperature mean",
        "Temperature worst",
    ] {
        assert!(verdict.contains(&title), "soak verdict lacks {title}");
    }
    let heatmap = all
        .iter()
        .find(|p| p["type"] == "heatmap")
        .expect("heatmap");
    assert_eq!(heatmap["targets"][0]["format"], "heatmap");
    assert!(heatmap["targets"][0]["expr"]
        .as_str()
        .is_some_and(|e| e.contains("boltwatch_rtt_seconds_bucket") && e.contains("by (le)")));
}

#[test]
fn grafana_expressions_parse_in_promtool() {
    // promtool has no bare query parser; a rule file with one recording rule
    // per dashboard expression gets every one parsed by Prometheus' own code.
    let exprs = dashboard_exprs(&dashboard());
    let mut rules = Vec::new();
    for (n, (origin, expr)) in exprs.iter().enumerate() {
        let expr = substitute_grafana_variables(expr);
        assert!(
            !expr.contains('$'),
            "{origin}: unhandled Grafana variable in {expr}"
        );
        rules.push(serde_json::json!({"record": format!("grafana:expression:n{n}"), "expr": expr}));
    }
    let doc = serde_json::json!({"groups": [{"name": "grafana_expressions", "rules": rules}]});
    let file = serde_norway::to_string(&doc).expect("rules serialise");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("grafana.yml"), file).expect("write rules");
    let out = promtool(&["check", "rules", "grafana.yml"], dir.path());
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{out}"
    );
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
    assert!(checked >= 40, "only {checked} rule expressions");
    assert!(
        faults.is_empty(),
        "rules that merge clusters:\n{}",
        faults.join("\n")
    );
}

#[test]
fn every_dashboard_query_filters_by_cluster_and_keeps_it() {
    let dash = dashboard();
    // A heatmap is one distribution of every selected link: it sums by le
    // alone (a series per cluster would break its bucket arithmetic), but
    // still only over the selected clusters.
    let heatmaps: BTreeSet<String> = panels(&dash)
        .iter()
        .filter(|p| p["type"] == "heatmap")
        .map(|p| format!("panel {:?}", p["title"].as_str().unwrap_or_default()))
        .collect();
    let mut faults = Vec::new();
    let mut checked = 0;
    for (origin, expr) in dashboard_exprs(&dash) {
        // The cluster variable lists the clusters; it cannot filter by itself.
        if origin == "variable \"cluster\"" {
            continue;
        }
        checked += 1;
        let demands = cluster::Demands {
            filter: true,
            keep: !heatmaps.contains(&origin),
        };
        for fault in cluster::faults(&expr, demands).unwrap_or_else(|e| panic!("{origin}: {e}")) {
            faults.push(format!("{origin}: {fault} in {expr}"));
        }
    }
    assert!(checked > 60, "only {checked} dashboard expressions");
    assert!(
        faults.is_empty(),
        "dashboard queries that mix clusters:\n{}",
        faults.join("\n")
    );
}
