//! Every panel shows its values in the unit they have: seconds as `s`,
//! bytes per second times 8 as `bps`, ratios as `percentunit`, counts as
//! `short`, rates as a per-second unit, degrees as `celsius`, and no panel
//! mixes units (an override by refId cannot put seconds next to counts).

use boltwatch_tests::grafana::queries;
use boltwatch_tests::units::{expr_unit, shows};

use crate::files::dashboard;

#[test]
fn every_panel_unit_matches_its_metrics_unit() {
    let mut faults = Vec::new();
    let all = queries(&dashboard());
    assert!(all.len() > 60, "only {} queries", all.len());
    for q in &all {
        match expr_unit(&q.expr) {
            Ok(u) if shows(q.unit.as_deref(), u, &q.kind) => {}
            Ok(u) => faults.push(format!(
                "{} {}: unit {:?} does not show {u:?}: {}",
                q.panel, q.ref_id, q.unit, q.expr
            )),
            Err(e) => faults.push(format!("{} {}: {e}", q.panel, q.ref_id)),
        }
    }
    // One unit per panel: two axes of different units read as one.
    let mut units: std::collections::BTreeMap<&str, std::collections::BTreeSet<Option<&str>>> =
        Default::default();
    for q in &all {
        units.entry(&q.panel).or_default().insert(q.unit.as_deref());
    }
    for (panel, u) in units.iter().filter(|(_, u)| u.len() > 1) {
        faults.push(format!("{panel}: mixes units {u:?}"));
    }
    assert!(
        faults.is_empty(),
        "panels whose unit is not their metric's:\n{}",
        faults.join("\n")
    );
}
