//! Fabric checks and RDMA ports, from `fabric_check` records.

use super::*;
use boltwatch_proto::v1::FabricCheck;

fn check(name: &str, interface: &str, device: &str, ok: bool) -> Payload {
    Payload::FabricCheck(FabricCheck {
        check: name.into(),
        interface: interface.into(),
        ok,
        detail: String::new(),
        device: device.into(),
    })
}

#[test]
fn each_check_holds_its_newest_result_and_rdma_ports_have_their_own_family() {
    let mut m = Metrics::new();
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        10,
        check("sleep_disabled", "", "", false),
    ));
    m.apply_record(&rec(
        "a",
        "b1",
        2,
        20,
        check("no_default_route", "en2", "", true),
    ));
    m.apply_record(&rec(
        "a",
        "b1",
        3,
        30,
        check("rdma_port_active", "en2", "rdma_en2", false),
    ));
    let ok = |series: &str| value(&m, series);
    assert_eq!(
        ok("boltwatch_fabric_check_ok{node=\"a\",check=\"sleep_disabled\",interface=\"\"}")
            .as_deref(),
        Some("0")
    );
    assert_eq!(
        ok("boltwatch_fabric_check_ok{node=\"a\",check=\"no_default_route\",interface=\"en2\"}")
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        ok("boltwatch_rdma_port_up{node=\"a\",device=\"rdma_en2\",interface=\"en2\"}").as_deref(),
        Some("0")
    );
    // The fix lands: newer by sequence number wins; a late replay of the
    // old result does not undo it.
    m.apply_record(&rec(
        "a",
        "b1",
        5,
        50,
        check("sleep_disabled", "", "", true),
    ));
    m.apply_record(&rec(
        "a",
        "b1",
        4,
        40,
        check("sleep_disabled", "", "", false),
    ));
    assert_eq!(
        value(
            &m,
            "boltwatch_fabric_check_ok{node=\"a\",check=\"sleep_disabled\",interface=\"\"}"
        )
        .as_deref(),
        Some("1")
    );
}

#[test]
fn unknown_check_names_stay_out_and_a_gone_node_loses_its_checks() {
    let mut m = Metrics::new();
    for i in 0..100u64 {
        m.apply_record(&rec(
            "a",
            "b1",
            i + 1,
            i,
            check(&format!("invented_{i}"), "", "", false),
        ));
    }
    assert!(!m.render().contains("invented_"));
    m.apply_record(&rec("a", "b1", 200, 200, check("rdma_ready", "", "", true)));
    m.apply_record(&rec(
        "a",
        "b1",
        201,
        201,
        check("rdma_port_active", "en3", "rdma_en3", true),
    ));
    assert!(m.render().contains("check=\"rdma_ready\""));
    m.forget("a");
    let text = m.render();
    assert!(!text.contains("check=\"rdma_ready\""), "{text}");
    assert!(!text.contains("rdma_en3"), "{text}");
}
