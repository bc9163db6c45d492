//! `boltwatch-agent doctor` on Linux, run for real inside a node of the
//! network-namespace bed: every row must agree with the OS's own tool, and
//! the captures must read back through the agent's sysfs reader as a
//! fixture tree. One link is down (its peer end taken down) so a carrier
//! of false is compared too, not only "up everywhere".
//!
//! Needs root and `ip`; without them it fails with a message, it never
//! skips. The bed's namespaces are deleted when it drops, also on panic.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::time::Duration;

use boltwatch_agent::counters::{CounterSource, SysfsCounters};
use boltwatch_tests::procs::{bin, wait_for};
use boltwatch_tests::TestBed;
use serde_json::Value;

#[test]
fn doctor_rows_agree_in_a_bed_node() {
    let bed = TestBed::new(3).unwrap_or_else(|e| panic!("cannot build the test bed: {e}"));
    // Node 0 keeps its link to node 1 up; node 2 takes its end of the link
    // to node 0 down, so node 0's end has no carrier.
    let up = bed.link_if(0, 1).unwrap().to_owned();
    let down = bed.link_if(0, 2).unwrap().to_owned();
    let far = bed.link_if(2, 0).unwrap().to_owned();
    bed.set_link(2, &far, false).unwrap();
    let carrier = |iface: &str| bed.read_sysfs(0, &format!("class/net/{iface}/carrier"));
    // linkwatch may batch the change up to about a second.
    wait_for("node 0 to lose carrier", Duration::from_secs(10), || {
        carrier(&down).is_ok_and(|c| c == "0")
    });

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("doctor");
    let agent = bin("boltwatch-agent");
    let report_txt = || std::fs::read_to_string(out.join("report.txt")).unwrap_or_default();
    let stdout = bed
        .run(
            0,
            agent.to_str().unwrap(),
            &["doctor", "--out", out.to_str().unwrap()],
        )
        .unwrap_or_else(|e| panic!("{e}\n{}", report_txt()));
    assert!(stdout.starts_with("SOURCE"), "{stdout}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["os"], "linux");
    let rows = report["rows"].as_array().unwrap();
    let row = |source: &str, subject: &str| -> &Value {
        rows.iter()
            .find(|r| r["source"] == source && r["subject"] == subject)
            .unwrap_or_else(|| panic!("no {source} row for {subject}:\n{stdout}"))
    };
    // Every interface of the node, and nothing from the host's namespace.
    for iface in ["lo", "mgmt0", up.as_str(), down.as_str()] {
        for source in ["link", "counters"] {
            assert_eq!(
                row(source, iface)["verdict"]["verdict"],
                "agree",
                "{source} {iface}:\n{stdout}"
            );
        }
    }
    assert_eq!(
        rows.iter().filter(|r| r["source"] == "link").count(),
        4,
        "{stdout}"
    );
    assert!(row("link", &up)["agent"]
        .as_str()
        .unwrap()
        .contains("carrier up"));
    assert!(row("link", &down)["agent"]
        .as_str()
        .unwrap()
        .contains("carrier down"));
    assert!(row("link", &down)["os_tool"]
        .as_str()
        .unwrap()
        .contains("carrier down"));
    assert_eq!(
        row("kernel_timestamps", "loopback datagram")["verdict"]["verdict"],
        "agree"
    );
    assert_eq!(
        row("discovery", "thunderbolt ports")["verdict"]["verdict"],
        "not_applicable"
    );
    // No row is left unchecked for want of a tool, none disagrees.
    for r in rows {
        let v = &r["verdict"]["verdict"];
        assert!(v == "agree" || v == "not_applicable", "{r}\n{stdout}");
    }

    // The captures are a fixture tree: the agent's own reader, pointed at
    // them, sees what the doctor saw.
    assert!(out.join("linux/ip-s-j-link.before.json").is_file());
    assert!(out.join("linux/ip-s-j-link.after.json").is_file());
    let fixture = SysfsCounters::new(&out.join("sys")).read(&down).unwrap();
    assert!(fixture.carrier_known && !fixture.carrier);
    let fixture = SysfsCounters::new(&out.join("sys")).read(&up).unwrap();
    assert!(fixture.carrier_known && fixture.carrier);
    assert!(Path::new(&out.join("report.txt")).is_file());
}
