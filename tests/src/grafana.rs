//! The shipped Grafana dashboard (`dashboards/grafana/boltwatch.json`) as
//! the tests read it: its panels and their queries, Grafana's variables
//! substituted the way Grafana would before a query reaches Prometheus.
//! Pure; the units each query yields are in [`crate::units`].

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `dashboards/` of the workspace.
pub fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("dashboards")
}

/// The dashboard JSON; panics with the path on a read or parse error.
pub fn load() -> Value {
    let path = dashboards_dir().join("grafana/boltwatch.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel, rows included, with nested (collapsed-row) panels flattened.
pub fn panels(dash: &Value) -> Vec<&Value> {
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

/// One query of one panel.
#[derive(Debug, Clone)]
pub struct Query {
    /// The panel's title.
    pub panel: String,
    /// The panel's type (`stat`, `timeseries`, ...).
    pub kind: String,
    /// The target's refId.
    pub ref_id: String,
    /// The PromQL as written, variables unsubstituted.
    pub expr: String,
    /// An instant query (`instant: true`), else a range query.
    pub instant: bool,
    /// The unit Grafana shows this target in: an override by this refId,
    /// else the panel's default; `None` when unset.
    pub unit: Option<String>,
    /// The panel's `maxDataPoints`, which bounds the steps of a range query.
    pub max_data_points: Option<u64>,
}

/// Every panel query of the dashboard, in panel order.
pub fn queries(dash: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for panel in panels(dash) {
        let title = panel["title"].as_str().unwrap_or("?").to_string();
        let default_unit = panel["fieldConfig"]["defaults"]["unit"]
            .as_str()
            .map(str::to_string);
        for t in panel["targets"].as_array().into_iter().flatten() {
            let ref_id = t["refId"].as_str().unwrap_or("?").to_string();
            out.push(Query {
                panel: title.clone(),
                kind: panel["type"].as_str().unwrap_or("?").to_string(),
                unit: override_unit(panel, &ref_id).or(default_unit.clone()),
                ref_id,
                expr: t["expr"].as_str().unwrap_or_default().to_string(),
                instant: t["instant"] == true,
                max_data_points: panel["maxDataPoints"].as_u64(),
            });
        }
    }
    out
}

/// Every annotation query of the dashboard (Grafana runs them as range
/// queries over the time range), as [`Query`]s of kind `annotation`.
pub fn annotations(dash: &Value) -> Vec<Query> {
    dash["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some(Query {
                panel: format!("annotation {}", a["name"].as_str().unwrap_or("?")),
                kind: "annotation".into(),
                ref_id: "Anno".into(),
                expr: a["expr"].as_str()?.to_string(),
                instant: false,
                unit: None,
                max_data_points: None,
            })
        })
        .collect()
}

/// The unit an override matching frames of `ref_id` sets, if any.
fn override_unit(panel: &Value, ref_id: &str) -> Option<String> {
    let overrides = panel["fieldConfig"]["overrides"].as_array()?;
    overrides
        .iter()
        .filter(|o| o["matcher"]["id"] == "byFrameRefID" && o["matcher"]["options"] == ref_id)
        .flat_map(|o| o["properties"].as_array().into_iter().flatten())
        .find(|p| p["id"] == "unit")
        .and_then(|p| p["value"].as_str().map(str::to_string))
}

/// The values Grafana gives its variables for one query.
#[derive(Debug, Clone)]
pub struct Vars {
    /// `$cluster`, `$job`, `$instance`, `$node`, `$peer`: regexes (All is
    /// `.*`).
    pub cluster: String,
    /// `$job`.
    pub job: String,
    /// `$instance`.
    pub instance: String,
    /// `$node`.
    pub node: String,
    /// `$peer`.
    pub peer: String,
    /// `$soak`: the running soak a repeated row is drawn for (each copy
    /// of the row has one value; All is `.*`).
    pub soak: String,
    /// The dashboard's time range, seconds (`$__range`, `$__range_s`).
    pub range_s: u64,
    /// The query step, seconds (`$__interval`).
    pub interval_s: u64,
    /// Prometheus' scrape interval, seconds (for `$__rate_interval`).
    pub scrape_s: u64,
}

impl Vars {
    /// Every variable at All (`.*`).
    pub fn all(range_s: u64, interval_s: u64, scrape_s: u64) -> Vars {
        let any = ".*".to_string();
        Vars {
            cluster: any.clone(),
            job: any.clone(),
            instance: any.clone(),
            node: any.clone(),
            peer: any.clone(),
            soak: any,
            range_s,
            interval_s,
            scrape_s,
        }
    }

    /// `$__rate_interval` as Grafana computes it: the larger of four
    /// scrape intervals and one step plus one scrape interval.
    pub fn rate_interval_s(&self) -> u64 {
        (4 * self.scrape_s).max(self.interval_s + self.scrape_s)
    }
}

/// `expr` with every Grafana variable replaced (longest names first, so
/// `$__range_s` is not read as `$__range` followed by `_s`). Panics on a
/// variable it does not know, so a new one cannot slip through unreplaced.
pub fn substitute(expr: &str, v: &Vars) -> String {
    let pairs = [
        ("$__rate_interval", format!("{}s", v.rate_interval_s())),
        ("$__interval", format!("{}s", v.interval_s)),
        ("$__range_s", v.range_s.to_string()),
        ("$__range", format!("{}s", v.range_s)),
        ("$cluster", v.cluster.clone()),
        ("$instance", v.instance.clone()),
        ("$job", v.job.clone()),
        ("$node", v.node.clone()),
        ("$peer", v.peer.clone()),
        ("$soak", v.soak.clone()),
    ];
    let mut out = expr.to_string();
    for (name, value) in &pairs {
        let braced = format!("${{{}}}", &name[1..]);
        out = out.replace(&braced, value).replace(name, value);
    }
    assert!(!out.contains('$'), "unhandled Grafana variable in {expr}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_replaced_longest_first() {
        let v = Vars {
            node: "a|b".into(),
            soak: "s1".into(),
            ..Vars::all(3600, 15, 5)
        };
        assert_eq!(
            substitute(
                r#"x{node=~"$node",peer=~"${peer}",soak=~"$soak"}[$__rate_interval] / $__range_s + y[$__range] + z[$__interval]"#,
                &v
            ),
            r#"x{node=~"a|b",peer=~".*",soak=~"s1"}[20s] / 3600 + y[3600s] + z[15s]"#
        );
        assert_eq!(Vars::all(60, 2, 1).rate_interval_s(), 4);
    }

    #[test]
    #[should_panic(expected = "unhandled Grafana variable")]
    fn an_unknown_variable_fails() {
        substitute("x{a=~\"$unknown\"}", &Vars::all(1, 1, 1));
    }
}
