//! The checks on facts, the RDMA parsers on captures (see
//! `agent/tests/fixtures/macos/rdma/README.md`) and the Linux sysfs reader
//! on its fixture tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use boltwatch_proto::fabric::{Check, TCP_CLOCK_LIMIT_SECS};

use super::rdma::{checks, parse_ibv_devinfo, parse_rdma_ctl, RdmaPort};
use super::*;

const DAY: u64 = 86_400;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn text(rel: &str) -> String {
    std::fs::read_to_string(fixture(rel)).unwrap()
}

fn settings() -> Settings {
    Settings {
        tcp_clock_margin: Duration::from_secs(3 * DAY),
        expect_rdma: false,
    }
}

fn find<'a>(out: &'a [Outcome], check: Check, interface: &str) -> &'a Outcome {
    out.iter()
        .find(|o| o.check == check && o.interface == interface)
        .unwrap_or_else(|| panic!("no {check:?} on {interface:?} in {out:?}"))
}

/// A Mac mini as shipped, cabled into a ring with Thunderbolt Bridge on,
/// a DHCP lease on the bridge and its default route through it.
fn mini_as_shipped() -> Facts {
    Facts {
        links: vec!["bridge0".into()],
        default_routes: vec!["bridge0".into()],
        bridges: vec![Bridge {
            name: "bridge0".into(),
            members_up: vec!["en2".into(), "en3".into()],
        }],
        pmset: Some(Pmset {
            sleep: Some(1),
            autorestart: Some(0),
            womp: None,
        }),
        dhcp: Some(BTreeMap::from([("bridge0".to_string(), true)])),
        uptime: Some(Duration::from_secs(48 * DAY)),
        rdma: None,
    }
}

#[test]
fn a_mini_as_shipped_fails_every_setting_check_and_says_what_it_saw() {
    let out = evaluate(&mini_as_shipped(), settings());
    assert!(out.iter().all(|o| !o.ok), "{out:?}");
    assert_eq!(
        find(&out, Check::SleepDisabled, "").detail,
        "pmset sleep 1 (wanted 0)"
    );
    assert_eq!(
        find(&out, Check::WakeOnNetworkEnabled, "").detail,
        "pmset womp unset (wanted 1)"
    );
    assert_eq!(
        find(&out, Check::BridgeSinglePort, "bridge0").detail,
        "members with carrier: en2, en3"
    );
    assert!(!find(&out, Check::NoDefaultRoute, "bridge0").ok);
    assert!(!find(&out, Check::NoDhcpLease, "bridge0").ok);
    // 48 days is within 3 days of 49 d 17 h.
    assert!(!find(&out, Check::UptimeUnderTcpLimit, "").ok);
    // Every failing check says how to fix it.
    assert!(out.iter().all(|o| !o.advice().is_empty()));
}

#[test]
fn a_node_set_up_as_the_docs_say_passes_every_check() {
    let f = Facts {
        links: vec!["en2".into(), "en3".into()],
        default_routes: vec!["en0".into()],
        bridges: vec![],
        pmset: Some(Pmset {
            sleep: Some(0),
            autorestart: Some(1),
            womp: Some(1),
        }),
        dhcp: Some(BTreeMap::from([
            ("en2".to_string(), false),
            ("en3".to_string(), false),
        ])),
        uptime: Some(Duration::from_secs(10 * DAY)),
        rdma: None,
    };
    let out = evaluate(&f, settings());
    assert!(out.iter().all(|o| o.ok), "{out:?}");
    // Three pmset checks, a route and a lease check per link, uptime.
    assert_eq!(out.len(), 3 + 2 * 2 + 1);
}

#[test]
fn the_uptime_check_fails_exactly_the_margin_before_the_limit() {
    let limit = Duration::from_secs(TCP_CLOCK_LIMIT_SECS);
    let margin = Duration::from_secs(3 * DAY);
    let at = |up: Duration| uptime_check(up, margin).ok;
    assert!(at(limit - margin - Duration::from_secs(1)));
    assert!(!at(limit - margin));
    assert!(!at(limit + Duration::from_secs(DAY)));
}

#[test]
fn linux_facts_run_only_the_portable_checks() {
    let f = Facts {
        links: vec!["tb0".into()],
        default_routes: vec![],
        bridges: vec![Bridge {
            name: "br0".into(),
            members_up: vec!["tb1".into()],
        }],
        ..Default::default()
    };
    let out = evaluate(&f, settings());
    let names: Vec<_> = out.iter().map(|o| (o.check, o.ok)).collect();
    assert_eq!(
        names,
        [
            (Check::BridgeSinglePort, true),
            (Check::NoDefaultRoute, true)
        ]
    );
}

#[test]
fn ibv_devinfo_captures_parse_into_ports_paired_by_apples_names() {
    let mlx = parse_ibv_devinfo(&text("macos/rdma/ibv_devinfo_mlx5.txt"));
    assert_eq!(
        mlx,
        [RdmaPort {
            device: "mlx5_12".into(),
            port: 1,
            interface: String::new(),
            state: "PORT_DOWN".into(),
            active_mtu: Some(1024),
            generation: String::new(),
        }]
    );
    let mac = parse_ibv_devinfo(&text("macos/rdma/ibv_devinfo_tb5.txt"));
    let summary: Vec<_> = mac
        .iter()
        .map(|p| {
            (
                p.device.as_str(),
                p.interface.as_str(),
                p.active(),
                p.active_mtu,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("rdma_en2", "en2", true, Some(4096)),
            ("rdma_en3", "en3", false, Some(1024))
        ]
    );
    assert_eq!(parse_ibv_devinfo("No IB devices found\n"), []);
}

#[test]
fn rdma_ctl_status_reads_both_words_and_nothing_else() {
    assert_eq!(
        parse_rdma_ctl(&text("macos/rdma/rdma_ctl_status_enabled.txt")),
        Some(true)
    );
    assert_eq!(
        parse_rdma_ctl(&text("macos/rdma/rdma_ctl_status_disabled.txt")),
        Some(false)
    );
    assert_eq!(
        parse_rdma_ctl("usage: rdma_ctl [enable|disable|status]\n"),
        None
    );
}

#[test]
fn rdma_is_ready_when_every_cluster_link_device_is_active() {
    let mut ports = parse_ibv_devinfo(&text("macos/rdma/ibv_devinfo_tb5.txt"));
    let links = vec!["en2".to_string(), "en3".to_string()];
    let on = |ports: &[RdmaPort], enabled| Rdma {
        enabled,
        ports: ports.to_vec(),
    };
    let out = checks(&on(&ports, Some(true)), &links, false);
    assert_eq!(out.len(), 3);
    assert!(find(&out, Check::RdmaPortActive, "en2").ok);
    assert!(!find(&out, Check::RdmaPortActive, "en3").ok);
    let ready = find(&out, Check::RdmaReady, "");
    assert!(!ready.ok);
    assert_eq!(ready.detail, "1 of 2 cluster-link devices active");
    // en3 is a Thunderbolt 4 port: said so, still not active.
    ports[1].generation = "4".into();
    let out = checks(&on(&ports, Some(true)), &links, false);
    assert!(find(&out, Check::RdmaPortActive, "en3")
        .detail
        .ends_with("RDMA needs Thunderbolt 5"));
    // Only en2 is a cluster link: ready.
    let out = checks(&on(&ports, Some(true)), &links[..1], false);
    assert!(find(&out, Check::RdmaReady, "").ok);
    // Switched off: no rdma_ready unless it is expected, then failing.
    let off = on(&ports, Some(false));
    assert!(checks(&off, &links, false)
        .iter()
        .all(|o| o.check != Check::RdmaReady));
    let out = checks(&off, &links, true);
    assert_eq!(
        find(&out, Check::RdmaReady, "").detail,
        "rdma_ctl status: disabled"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn linux_sysfs_rdma_ports_pair_with_their_netdevs() {
    let r = imp::rdma(&fixture("rdma-sys")).expect("the class exists");
    let summary: Vec<_> = r
        .ports
        .iter()
        .map(|p| (p.device.as_str(), p.port, p.interface.as_str(), p.active()))
        .collect();
    assert_eq!(
        summary,
        [("mlx5_0", 1, "ens1f0", false), ("rxe0", 1, "tb-a", true)]
    );
    assert_eq!(r.enabled, None);
    // Devices and no switch: rdma_ready is judged on the cluster links.
    let out = checks(&r, &["tb-a".to_string()], false);
    assert!(find(&out, Check::RdmaReady, "").ok);
    assert!(imp::rdma(&fixture("sys")).is_none());
}

#[test]
fn the_emitter_sends_all_first_then_changes_then_all_every_tenth_round() {
    let facts = mini_as_shipped();
    let failing = evaluate(&facts, settings());
    let mut fixed = facts.clone();
    fixed.pmset = Some(Pmset {
        sleep: Some(0),
        autorestart: Some(0),
        womp: None,
    });
    let after_fix = evaluate(&fixed, settings());
    let mut e = Emitter::default();
    let (send, turned) = e.round(&failing);
    assert_eq!(send.len(), failing.len());
    assert_eq!(turned.len(), failing.len(), "failing from the start");
    // Unchanged: nothing sent.
    assert!(e.round(&failing).0.is_empty());
    // sleep fixed: only that check is sent.
    let (send, _) = e.round(&after_fix);
    assert_eq!(send.len(), 1);
    assert_eq!(send[0].check, Check::SleepDisabled);
    // It breaks again: sent and reported as turned failing.
    let (send, turned) = e.round(&failing);
    assert_eq!((send.len(), turned.len()), (1, 1));
    for _ in 4..Emitter::REPEAT_EVERY {
        assert!(e.round(&failing).0.is_empty());
    }
    assert_eq!(e.round(&failing).0.len(), failing.len());
}
