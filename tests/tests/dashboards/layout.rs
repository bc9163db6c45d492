//! The Grafana side: the dashboard is well formed, imports like a
//! grafana.com dashboard, every expression parses in promtool, and every
//! query filters by cluster and keeps it.

use std::collections::{BTreeMap, BTreeSet};

use boltwatch_tests::grafana::{self, panels, Vars};

use crate::cluster;
use crate::files::*;

/// The filter variables, in the order they narrow the selection.
const FILTERS: [&str; 5] = ["cluster", "job", "instance", "node", "peer"];

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
    for name in FILTERS {
        assert_eq!(var(name)["type"], "query", "{name}");
        assert_eq!(var(name)["datasource"]["uid"], "${DS_PROMETHEUS}", "{name}");
        assert_eq!(var(name)["multi"], true, "{name}");
        // All is `.*`, which also matches an absent (empty) label: a single
        // collector scraped without a cluster label still shows.
        assert_eq!(var(name)["includeAll"], true, "{name}");
        assert_eq!(var(name)["allValue"], ".*", "{name}");
    }
    // Clusters come from a series remote write pushes too (boltwatch_agent_up
    // is scrape-only), and the variables filter in order: each lists only
    // what the ones before it select.
    assert_eq!(
        var("cluster")["query"]["query"],
        "label_values(boltwatch_records_received_total, cluster)"
    );
    let order: Vec<&str> = vars.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(order[0], "DS_PROMETHEUS");
    assert_eq!(order[1..=FILTERS.len()], FILTERS);
    // Last, `$soak`: the running soaks of the selected collectors, which
    // the running-soak row repeats over (one copy per soak).
    assert_eq!(order[FILTERS.len() + 1..], ["soak"]);
    assert_eq!(
        var("soak")["query"]["query"],
        "label_values(boltwatch_soak_info{cluster=~\"$cluster\",job=~\"$job\",instance=~\"$instance\"}, soak)"
    );
    assert_eq!(
        (
            var("soak")["multi"].clone(),
            var("soak")["allValue"].clone()
        ),
        (true.into(), ".*".into())
    );
    let repeated: Vec<&serde_json::Value> = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .filter(|p| p["repeat"] == "soak")
        .collect();
    assert_eq!(repeated.len(), 1, "one row repeats over $soak");
    assert_eq!(repeated[0]["type"], "row");
    for (k, name) in FILTERS.iter().enumerate() {
        let query = var(name)["query"]["query"].as_str().expect("a query");
        for before in &FILTERS[..k] {
            let filter = format!("{before}=~\"${before}\"");
            assert!(query.contains(&filter), "variable {name} lacks {filter}");
        }
    }

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
        "Running soak $soak",
        "Round-trip time",
        "Loss and outages",
        "Link state",
        "Throughput",
        "Temperatures",
        "Services",
        "Agent",
        "Fabric",
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
        // 72 hours, the range the dashboard opens on, at the shipped 5 s.
        let expr = grafana::substitute(expr, &Vars::all(72 * 3600, 120, 5));
        assert!(!expr.is_empty(), "{origin}: empty");
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

#[test]
fn every_dashboard_selector_filters_by_job_and_instance() {
    // The cluster check demands `cluster=~"$cluster"` on every selector; the
    // job and instance filters ride with it, so counting is enough.
    let cluster = r#"cluster=~"$cluster""#;
    let all = r#"cluster=~"$cluster",job=~"$job",instance=~"$instance""#;
    let mut faults = Vec::new();
    for (origin, expr) in dashboard_exprs(&dashboard()) {
        let name = origin.trim_start_matches("variable ").trim_matches('"');
        if ["cluster", "job", "instance"].contains(&name) {
            continue;
        }
        if expr.matches(cluster).count() != expr.matches(all).count() {
            faults.push(format!("{origin}: {expr}"));
        }
    }
    assert!(
        faults.is_empty(),
        "selectors without the job and instance filters:\n{}",
        faults.join("\n")
    );
}

#[test]
fn no_window_is_just_one_step_wide() {
    // Evaluated once per step, windows of exactly one step tile the range
    // with no overlap: two samples on either side of a window boundary are
    // never in one window, so `changes()` or `increase()` over them misses
    // what happened between them (a link-down annotation vanished that way
    // whenever the flap fell on a boundary). `$__rate_interval` is at least
    // one step plus one scrape interval, so consecutive windows overlap.
    let faults: Vec<String> = dashboard_exprs(&dashboard())
        .into_iter()
        .filter(|(_, expr)| expr.contains("[$__interval]") || expr.contains("[${__interval}]"))
        .map(|(origin, expr)| format!("{origin}: {expr}"))
        .collect();
    assert!(
        faults.is_empty(),
        "windows one step wide (use $__rate_interval):\n{}",
        faults.join("\n")
    );
}

#[test]
fn dashboard_imports_like_a_grafana_com_dashboard() {
    let dash = dashboard();
    // Import asks for the one input, then replaces ${DS_PROMETHEUS} everywhere.
    let inputs = dash["__inputs"].as_array().expect("__inputs");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["name"], "DS_PROMETHEUS");
    assert_eq!(inputs[0]["type"], "datasource");
    assert_eq!(inputs[0]["pluginId"], "prometheus");
    let requires = dash["__requires"].as_array().expect("__requires");
    let required = |kind: &str, id: &str| {
        requires
            .iter()
            .any(|r| r["type"] == kind && r["id"] == id && r["version"].is_string())
    };
    assert!(required("grafana", "grafana"), "{requires:?}");
    assert!(required("datasource", "prometheus"), "{requires:?}");
    for panel in panels(&dash) {
        let kind = panel["type"].as_str().unwrap_or_default();
        if kind != "row" {
            assert!(required("panel", kind), "__requires lacks panel {kind}");
        }
    }
    // Every data source reference is the input (or Grafana's own).
    fn walk(v: &serde_json::Value, path: &str, bad: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(ds) = map.get("datasource").and_then(|d| d.as_object()) {
                    let uid = ds.get("uid").and_then(|u| u.as_str()).unwrap_or_default();
                    if uid != "${DS_PROMETHEUS}" && uid != "-- Grafana --" {
                        bad.push(format!("{path}: {uid:?}"));
                    }
                }
                for (k, c) in map {
                    walk(c, &format!("{path}.{k}"), bad);
                }
            }
            serde_json::Value::Array(list) => {
                for (i, c) in list.iter().enumerate() {
                    walk(c, &format!("{path}[{i}]"), bad);
                }
            }
            _ => {}
        }
    }
    let mut bad = Vec::new();
    walk(&dash, "", &mut bad);
    assert!(bad.is_empty(), "data sources other than the input: {bad:?}");
}

#[test]
fn soak_verdict_shows_every_link_or_node_on_its_own() {
    // A verdict averaged over the cluster hides the one bad link: every
    // stat keeps node (and peer, where the series has one) in its `by`.
    let dash = dashboard();
    let mut faults = Vec::new();
    for q in grafana::queries(&dash).iter().filter(|q| q.kind == "stat") {
        let lists: Vec<&str> = q
            .expr
            .split("by (")
            .skip(1)
            .map(|rest| rest.split(')').next().unwrap_or_default())
            .collect();
        let per_link = q.expr.contains("peer=~");
        let ok = !lists.is_empty()
            && lists.iter().all(|l| {
                let labels: Vec<&str> = l.split(',').map(str::trim).collect();
                labels.contains(&"node")
                    && (!per_link || labels.contains(&"peer") || labels.contains(&"interface"))
            });
        if !ok {
            faults.push(format!("{} {}: {}", q.panel, q.ref_id, q.expr));
        }
    }
    assert!(
        faults.is_empty(),
        "verdicts that merge links:\n{}",
        faults.join("\n")
    );
}
