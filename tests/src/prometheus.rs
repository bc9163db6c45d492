//! Debian's real `prometheus` as a child process: a config written for the
//! test (scrape and evaluation intervals, rule files, scrape jobs), a
//! private TSDB in the test's directory, and its HTTP query API. A missing
//! `prometheus` fails the test; it never skips.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cmd::find_tool;
use crate::procs::{free_tcp_port, http_get, Proc};

/// A running Prometheus on loopback; killed on drop.
pub struct Prometheus {
    /// The process.
    pub proc: Proc,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
}

/// What the Prometheus of a test is told.
#[derive(Debug, Clone, Default)]
pub struct PromConfig {
    /// `global.scrape_interval` and `evaluation_interval`, seconds.
    pub interval_s: u64,
    /// Rule files (copied into the test directory as they are).
    pub rule_files: Vec<std::path::PathBuf>,
    /// `scrape_configs:` entries, YAML text indented by two spaces, each
    /// starting with `- job_name:`.
    pub scrape_configs: String,
    /// Extra command-line flags.
    pub flags: Vec<String>,
    /// The port of an Alertmanager on loopback to send alerts to.
    pub alertmanager: Option<u16>,
}

impl Prometheus {
    /// Writes `prometheus.yml` into `dir`, starts Prometheus on a free port
    /// and waits (bounded) until it is ready.
    pub fn start(dir: &Path, cfg: &PromConfig) -> Prometheus {
        let bin = find_tool("prometheus", "prometheus")
            .expect("apt-get install prometheus; the test does not skip");
        let mut rules = String::new();
        for f in &cfg.rule_files {
            let name = f.file_name().expect("a rule file name");
            std::fs::copy(f, dir.join(name))
                .unwrap_or_else(|e| panic!("copying {}: {e}", f.display()));
            rules.push_str(&format!("  - {}\n", name.to_string_lossy()));
        }
        let i = cfg.interval_s;
        let alerting = cfg.alertmanager.map_or(String::new(), |am| {
            format!(
                "alerting:\n  alertmanagers:\n    - static_configs:\n        \
                 - targets: ['127.0.0.1:{am}']\n"
            )
        });
        let text = format!(
            "global:\n  scrape_interval: {i}s\n  scrape_timeout: {}ms\n  evaluation_interval: {i}s\n\
             rule_files:\n{rules}{alerting}scrape_configs:\n{}",
            i * 900,
            cfg.scrape_configs
        );
        let path = dir.join("prometheus.yml");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let port = free_tcp_port();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prom-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(&cfg.flags);
        let proc = Proc::spawn("prometheus", cmd, dir.join("prometheus.log"));
        let p = Prometheus { proc, port };
        let deadline = Instant::now() + Duration::from_secs(120);
        let ready = format!("http://127.0.0.1:{port}/-/ready");
        while !http_get(&ready).is_ok_and(|(code, _)| code == 200) {
            assert!(
                Instant::now() < deadline,
                "prometheus never became ready at {ready}:\n{}",
                p.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// GET `path_and_query` on the API, parsed; `Err` with the body when
    /// the status is not `success`.
    pub fn api(&self, path_and_query: &str) -> Result<Value, String> {
        let url = format!("http://127.0.0.1:{}{path_and_query}", self.port);
        let (code, body) = http_get(&url).map_err(|e| format!("GET {url}: {e}"))?;
        let v: Value =
            serde_json::from_str(&body).map_err(|e| format!("GET {url}: {code} {e}: {body}"))?;
        if v["status"] == "success" {
            Ok(v["data"].clone())
        } else {
            Err(format!("GET {url}: {code} {body}"))
        }
    }

    /// `/api/v1/query` at `time` (unix seconds): the result list.
    pub fn query(&self, expr: &str, time: f64) -> Result<Vec<Value>, String> {
        let data = self.api(&format!(
            "/api/v1/query?query={}&time={time:.3}",
            encode(expr)
        ))?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// `/api/v1/query_range` from `start` to `end` every `step_s`: the
    /// result list (one entry per series).
    pub fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step_s: u64,
    ) -> Result<Vec<Value>, String> {
        let data = self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step_s}",
            encode(expr)
        ))?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The values of an instant query now; empty when it has none or
    /// failed (for bounded waits, which report the last state seen).
    pub fn values(&self, expr: &str) -> Vec<f64> {
        let Ok(data) = self.api(&format!("/api/v1/query?query={}", encode(expr))) else {
            return Vec::new();
        };
        data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["value"][1].as_str()?.parse().ok())
            .collect()
    }

    /// The number of series an instant query returns now (a scalar result
    /// is one).
    pub fn series(&self, expr: &str) -> Result<usize, String> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(expr)))?;
        if data["resultType"] == "scalar" {
            return Ok(1);
        }
        Ok(data["result"].as_array().map_or(0, Vec::len))
    }

    /// Prometheus' alerts (`/api/v1/alerts`), for failure messages.
    pub fn alerts(&self) -> String {
        self.api("/api/v1/alerts")
            .map(|d| d.to_string())
            .unwrap_or_else(|e| e)
    }

    /// The health of every scrape target, for failure messages.
    pub fn targets(&self) -> String {
        self.api("/api/v1/targets")
            .map(|d| {
                d["activeTargets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| format!("{} {} {}", t["scrapeUrl"], t["health"], t["lastError"]))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_else(|e| e)
    }
}

/// Percent-encodes a query parameter (RFC 3986 unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_promql() {
        assert_eq!(
            super::encode(r#"rate(a{b=~"c|d"}[5m]) / 2"#),
            "rate%28a%7Bb%3D~%22c%7Cd%22%7D%5B5m%5D%29%20%2F%202"
        );
    }
}
