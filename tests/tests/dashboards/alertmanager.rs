//! The shipped Alertmanager configuration: the real `amtool` (Debian
//! package `prometheus-alertmanager`; missing, the test fails) accepts it,
//! routes every alert of `alerts.yml` by its severity (critical to the
//! pager, the rest to chat, the throttled bandwidth alert paging), and its
//! inhibit rules name only alerts that exist and keep `cluster` in every
//! `equal`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::files::*;

const PAGER: &str = "on-call-pager";
const CHAT: &str = "team-chat";

fn config() -> PathBuf {
    dashboards().join("alertmanager/alertmanager.yml")
}

/// Runs amtool; panics with its output when it fails and, loudly, when it
/// is not installed.
fn amtool(args: &[&str], dir: &Path) -> String {
    let out = match Command::new("amtool").args(args).current_dir(dir).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "amtool is not installed: this test needs the real one \
             (apt-get install -y --no-install-recommends prometheus-alertmanager)"
        ),
        Err(e) => panic!("running amtool {args:?}: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "amtool {args:?} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
fn shipped_alertmanager_config_passes_amtool_check() {
    let path = config();
    let out = amtool(&["check-config", path.to_str().unwrap()], &dashboards());
    assert!(out.contains("SUCCESS"), "{out}");
    assert!(out.contains("2 receivers"), "{out}");
}

#[test]
fn every_alert_routes_by_its_severity() {
    let path = format!("--config.file={}", config().display());
    for (name, rule) in alerts() {
        let severity = values_of(&rule["labels"], "severity").remove(0);
        let out = amtool(
            &[
                "config",
                "routes",
                "test",
                &path,
                &format!("alertname={name}"),
                &format!("severity={severity}"),
                "cluster=lab1",
            ],
            &dashboards(),
        );
        let want = if severity == "critical" { PAGER } else { CHAT };
        // stdout (the receiver) comes first, then amtool's warnings.
        let receiver = out.lines().next().map(str::trim);
        assert_eq!(receiver, Some(want), "{name} ({severity}): {out}");
    }
    // The alert the product exists for pages.
    let headline = &alerts()["BoltwatchBandwidthLowThrottled"];
    assert_eq!(values_of(&headline["labels"], "severity"), ["critical"]);
}

#[test]
fn inhibit_rules_name_real_alerts_and_keep_cluster() {
    let doc = yaml(&config());
    let rules = doc["inhibit_rules"].as_array().expect("inhibit_rules");
    assert!(rules.len() >= 4, "{rules:?}");
    let alerts = alerts();
    for rule in rules {
        let equal: Vec<&str> = rule["equal"]
            .as_array()
            .expect("equal")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(equal.contains(&"cluster"), "{rule}: cluster not in equal");
        for key in ["source_matchers", "target_matchers"] {
            for m in matchers(&rule[key]) {
                for name in alert_names(&m) {
                    assert!(alerts.contains_key(&name), "{rule}: no alert {name}");
                }
            }
        }
    }
}

fn matchers(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("a matcher list")
        .iter()
        .map(|m| m.as_str().expect("a matcher string").to_string())
        .collect()
}

/// The alert names a matcher's value spells out (`Boltwatch.+` names none).
fn alert_names(matcher: &str) -> Vec<String> {
    let Some(value) = matcher
        .strip_prefix("alertname")
        .and_then(|m| m.split_once('"'))
        .map(|(_, v)| v.trim_end_matches('"'))
    else {
        return Vec::new();
    };
    value
        .split('|')
        .filter(|n| !n.contains(['.', '*', '+']))
        .map(str::to_string)
        .collect()
}
