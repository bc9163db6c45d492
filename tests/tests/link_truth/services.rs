//! A stopped service listener is a service outage.

use std::time::Duration;

use boltwatch_tests::cluster::{now_unix_ns, AgentOptions, Cluster};
use boltwatch_tests::procs::{bin, sample, wait_for, Proc};
use serde_json::Value;

use crate::support::{lint, serial, u};

fn listener(c: &Cluster, node: usize, port: u16) -> Proc {
    let exe = bin("bw-listen");
    let cmd = c
        .bed
        .exec(node, &exe.to_string_lossy(), [format!("0.0.0.0:{port}")])
        .unwrap();
    Proc::spawn("bw-listen", cmd, c.path().join("bw-listen.log"))
}

#[test]
fn stopped_service_listener_is_a_service_outage() {
    let _g = serial();
    const PORT: u16 = 8080;
    let opts = AgentOptions {
        extra: vec![vec!["--service".into(), format!("web={PORT}")]],
        config: "service_interval = \"200ms\"\n".into(),
        ..Default::default()
    };
    let c = Cluster::start(2, &opts);
    let mut svc = listener(&c, 1, PORT);
    let up = || {
        sample(
            &c.metrics(),
            "boltwatch_service_up",
            &[("node", "n0"), ("peer", "n1"), ("service", "web")],
        )
    };
    wait_for("web up", Duration::from_secs(20), || up() == Some(1.0));
    let svc_labels = [("node", "n0"), ("peer", "n1"), ("service", "web")];
    // The agent may have checked before the listener was up: count from here.
    let before = sample(&c.metrics(), "boltwatch_service_outages_total", &svc_labels).unwrap();
    let seconds_before = sample(
        &c.metrics(),
        "boltwatch_service_outage_seconds_total",
        &svc_labels,
    )
    .unwrap();
    let begin = now_unix_ns();
    svc.terminate();
    wait_for("web down", Duration::from_secs(20), || up() == Some(0.0));
    // Only service outages: on a loaded machine a short probe-loss outage
    // of the link can happen too, and is judged separately below.
    let service_outages = |since| -> Vec<Value> {
        c.outages(0, since)
            .into_iter()
            .filter(|o| o["cause"] == "service")
            .collect()
    };
    wait_for("a service outage", Duration::from_secs(20), || {
        !service_outages(begin).is_empty()
    });
    let open = service_outages(begin);
    assert_eq!(open.len(), 1, "{open:#?}");
    assert_eq!(open[0]["cause"], "service");
    assert_eq!(open[0]["service"], "web");
    assert!(open[0]["end_unix_ns"].is_null());
    assert!(u(&open[0]["start_unix_ns"]) >= begin);
    let m = c.metrics();
    assert_eq!(
        sample(&m, "boltwatch_service_outages_total", &svc_labels),
        Some(before + 1.0)
    );
    // Unavailability of a service is not a link outage: the link counter
    // holds exactly the link outages the ledger recorded, none of them
    // caused by the service.
    let link_outages = c
        .outages(0, 0)
        .into_iter()
        .filter(|o| o["cause"] != "service")
        .count();
    assert_eq!(
        sample(
            &m,
            "boltwatch_outages_total",
            &[("node", "n0"), ("peer", "n1")]
        ),
        Some(link_outages as f64)
    );
    lint(&m);

    let _svc = listener(&c, 1, PORT);
    wait_for("web up again", Duration::from_secs(20), || {
        up() == Some(1.0)
    });
    wait_for("the service outage to end", Duration::from_secs(20), || {
        service_outages(begin)
            .iter()
            .all(|o| !o["end_unix_ns"].is_null())
    });
    let ended = &service_outages(begin)[0];
    let dur = u(&ended["end_unix_ns"]) - u(&ended["start_unix_ns"]);
    let secs = sample(
        &c.metrics(),
        "boltwatch_service_outage_seconds_total",
        &svc_labels,
    )
    .unwrap();
    let added = secs - seconds_before;
    assert!(
        (added - dur as f64 / 1e9).abs() < 1e-6,
        "{added} s vs {dur} ns"
    );
    let connect = sample(
        &c.metrics(),
        "boltwatch_service_connect_seconds",
        &svc_labels,
    )
    .unwrap();
    assert!(connect > 0.0 && connect < 1.0, "{connect}");
}
