//! The Prometheus side of `agent_metrics`: a real `prometheus` scraping a
//! job every second with the shipped recording rules, and the Grafana
//! dashboard's queries with their variables substituted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use boltwatch_tests::cmd::find_tool;
use boltwatch_tests::procs::{free_tcp_port, http_get, wait_for, Proc};
use serde_json::Value;

use super::{write, CLUSTER, WAIT};

pub struct Prometheus {
    _proc: Proc,
    port: u16,
}

impl Prometheus {
    /// Scrapes `targets` every second as `job`, with `cluster` as a target
    /// label, and evaluates the shipped recording rules every second.
    pub fn start(dir: &Path, job: &str, targets: &[String], honor_labels: bool) -> Prometheus {
        let bin = find_tool("prometheus", "prometheus")
            .expect("apt-get install prometheus; the test does not skip");
        let dir = dir.join(job);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            dashboards().join("prometheus/recording.yml"),
            dir.join("recording.yml"),
        )
        .unwrap();
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let port = free_tcp_port();
        let cfg = dir.join("prometheus.yml");
        write(
            &cfg,
            &format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
                 rule_files:\n  - recording.yml\n\
                 scrape_configs:\n  - job_name: {job}\n    honor_labels: {honor_labels}\n    \
                 static_configs:\n      - targets: [{}]\n        \
                 labels:\n          cluster: {CLUSTER}\n",
                targets.join(", ")
            ),
        );
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        let p = Proc::spawn(job, cmd, dir.join("prometheus.log"));
        wait_for(&format!("{job} prometheus ready"), WAIT, || {
            http_get(&format!("http://127.0.0.1:{port}/-/ready")).is_ok_and(|(c, _)| c == 200)
        });
        Prometheus { _proc: p, port }
    }

    /// The number of series an instant query returns.
    pub fn series(&self, expr: &str) -> Result<usize, String> {
        let url = format!(
            "http://127.0.0.1:{}/api/v1/query?query={}",
            self.port,
            percent_encode(expr)
        );
        let (code, body) = http_get(&url).map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{code} {e}: {body}"))?;
        match v["data"]["result"].as_array() {
            Some(r) if v["status"] == "success" => Ok(r.len()),
            // A scalar result (a number) is data too.
            _ if v["data"]["resultType"] == "scalar" => Ok(1),
            _ => Err(format!("{code}: {body}")),
        }
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn dashboards() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards")
}

/// Every panel query of the Grafana dashboard: (panel title, expression
/// with the Grafana variables substituted).
pub fn dashboard_queries() -> Vec<(String, String)> {
    let path = dashboards().join("grafana/boltwatch.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    let title = p["title"].as_str().unwrap_or("?").to_string();
                    out.push((title, substitute(expr)));
                }
            }
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

/// Grafana's built-in variables become fixed durations (a range the
/// test's data covers); every dashboard variable selects everything.
fn substitute(expr: &str) -> String {
    let builtin = expr
        .replace("$__rate_interval", "1m")
        .replace("$__interval", "5s")
        .replace("$__range_s", "300")
        .replace("$__range", "5m");
    let mut out = String::new();
    let mut rest = builtin.as_str();
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name_len, skip) = match after.strip_prefix('{') {
            Some(inner) => (inner.find('}').expect("closing brace"), 2),
            None => (
                after
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .unwrap_or(after.len()),
                0,
            ),
        };
        out.push_str(".*");
        rest = &after[name_len + skip..];
    }
    out.push_str(rest);
    out
}

/// The metric names an expression reads, through recording rules (by
/// their own expressions): every identifier that names a boltwatch or
/// process family or `up`.
pub fn metrics_read(expr: &str, rules: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let idents = expr
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.contains("boltwatch_") || w.starts_with("process_") || *w == "up");
    for w in idents {
        match rules.get(w) {
            Some(inner) => out.extend(metrics_read(inner, rules)),
            None => {
                out.insert(w.to_string());
            }
        }
    }
    out
}

/// Recording rule name -> expression.
pub fn recording_rules() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dashboards().join("prometheus/recording.yml")).unwrap();
    let doc: Value = serde_norway::from_str(&text).unwrap();
    let mut out = BTreeMap::new();
    for g in doc["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            if let (Some(name), Some(expr)) = (r["record"].as_str(), r["expr"].as_str()) {
                out.insert(name.to_string(), expr.to_string());
            }
        }
    }
    out
}
