//! RDMA probe windows and error counts: own families, never STAMP's.

use super::*;
use boltwatch_proto::v1::{RdmaErrorClass, RdmaErrorCount, RdmaProbe};

fn probe(w: Payload, errors: &[(RdmaErrorClass, u64)]) -> Payload {
    let Payload::Rtt(rtt) = w else { unreachable!() };
    Payload::RdmaProbe(RdmaProbe {
        rtt: Some(rtt),
        device: "rdma_en2".into(),
        errors: errors
            .iter()
            .map(|&(c, count)| RdmaErrorCount {
                class: c as i32,
                count,
            })
            .collect(),
        ..RdmaProbe::default()
    })
}

#[test]
fn windows_add_up_in_rdma_families_and_stamp_families_stay_empty() {
    let mut m = Metrics::new();
    let e = [(RdmaErrorClass::CrcMismatch, 2)];
    m.apply_record(&rec(
        "a",
        "b1",
        1,
        10,
        probe(window("b", 10, &[9_000, 11_000], 1, false), &e),
    ));
    let e = [
        (RdmaErrorClass::CrcMismatch, 1),
        (RdmaErrorClass::WatchdogTimeout, 1),
    ];
    m.apply_record(&rec(
        "a",
        "b1",
        2,
        20,
        probe(window("b", 20, &[30_000], 0, false), &e),
    ));
    let v = |s: &str| value(&m, s);
    let ab = "{node=\"a\",peer=\"b\"}";
    assert_eq!(
        v(&format!("boltwatch_rdma_probe_sent_total{ab}")).as_deref(),
        Some("4")
    );
    assert_eq!(
        v(&format!("boltwatch_rdma_probe_received_total{ab}")).as_deref(),
        Some("3")
    );
    assert_eq!(
        v(&format!("boltwatch_rdma_probe_lost_total{ab}")).as_deref(),
        Some("1")
    );
    assert_eq!(
        v(&format!("boltwatch_rdma_rtt_seconds_count{ab}")).as_deref(),
        Some("3")
    );
    assert_eq!(
        v(&format!("boltwatch_rdma_rtt_seconds_sum{ab}")).as_deref(),
        Some("0.00005")
    );
    assert_eq!(
        v(&format!("boltwatch_rdma_rtt_p50_seconds{ab}")).as_deref(),
        Some("0.00003")
    );
    let err = |c: &str| {
        v(&format!(
            "boltwatch_rdma_errors_total{{node=\"a\",device=\"rdma_en2\",class=\"{c}\"}}"
        ))
    };
    assert_eq!(err("crc_mismatch").as_deref(), Some("3"));
    assert_eq!(err("watchdog_timeout").as_deref(), Some("1"));
    assert_eq!(err("sequence_gap"), None);
    assert_eq!(v(&format!("boltwatch_rtt_seconds_count{ab}")), None);
    assert_eq!(v(&format!("boltwatch_probe_sent_total{ab}")), None);
}

#[test]
fn the_newest_burst_is_the_send_bandwidth_and_an_unconfirmed_one_is_zero() {
    let mut m = Metrics::new();
    let burst = |sent, confirmed, ns| {
        let Payload::RdmaProbe(mut p) = probe(window("b", 10, &[9_000], 0, false), &[]) else {
            unreachable!()
        };
        (p.burst_sent_bytes, p.burst_confirmed_bytes, p.burst_ns) = (sent, confirmed, ns);
        Payload::RdmaProbe(p)
    };
    let name = "boltwatch_rdma_send_bandwidth_bytes_per_second{node=\"a\",peer=\"b\"}";
    m.apply_record(&rec("a", "b1", 1, 10, burst(0, 0, 0)));
    assert_eq!(value(&m, name), None, "no burst, no figure");
    m.apply_record(&rec("a", "b1", 2, 20, burst(1 << 20, 1 << 20, 500_000)));
    assert_eq!(value(&m, name).as_deref(), Some("2097152000"));
    // A window without a burst keeps the newest figure.
    m.apply_record(&rec("a", "b1", 3, 30, burst(0, 0, 0)));
    assert_eq!(value(&m, name).as_deref(), Some("2097152000"));
    m.apply_record(&rec("a", "b1", 4, 40, burst(1 << 20, 0, 0)));
    assert_eq!(value(&m, name).as_deref(), Some("0"));
}

#[test]
fn unknown_error_classes_are_dropped() {
    let mut m = Metrics::new();
    let p = Payload::RdmaProbe(RdmaProbe {
        rtt: None,
        device: "rdma_en3".into(),
        errors: vec![RdmaErrorCount {
            class: 77,
            count: 5,
        }],
        ..RdmaProbe::default()
    });
    m.apply_record(&rec("a", "b1", 1, 10, p));
    assert!(!m.render().contains("rdma_en3"));
}
