//! RDMA probe windows (`rdma_probe` records) over the real gRPC stream:
//! stored, served by the API under their own kind, exported in their own
//! families beside (never inside) the link's STAMP RTT.

use boltwatch_proto::histogram::sparse_buckets;
use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{RdmaErrorClass, RdmaErrorCount, RdmaProbe, RttSummary};

use crate::common::*;
use crate::support::*;

fn rdma(rtts_ns: &[u64], lost: u64, errors: &[(RdmaErrorClass, u64)]) -> Payload {
    Payload::RdmaProbe(RdmaProbe {
        rtt: Some(RttSummary {
            peer: "b".into(),
            interface: "en2".into(),
            window_start_unix_ns: 1_000,
            window_ns: 10_000_000_000,
            sent: rtts_ns.len() as u64 + lost,
            received: rtts_ns.len() as u64,
            lost,
            p50_ns: rtts_ns[rtts_ns.len() / 2],
            sum_ns: rtts_ns.iter().sum(),
            buckets: sparse_buckets(rtts_ns.iter().copied()),
            ..Default::default()
        }),
        device: "rdma_en2".into(),
        errors: errors
            .iter()
            .map(|&(c, count)| RdmaErrorCount {
                class: c as i32,
                count,
            })
            .collect(),
        burst_sent_bytes: 1 << 20,
        burst_confirmed_bytes: 1 << 19,
        burst_ns: 1_000_000,
    })
}

#[tokio::test]
async fn an_rdma_window_goes_in_over_grpc_and_comes_out_on_metrics_beside_stamp() {
    let (_dir, c) = Collector::temp().await;
    let (mut a, _) = c.agent("a", "a-boot").await;
    let errors = [
        (RdmaErrorClass::SequenceGap, 1),
        (RdmaErrorClass::RtrBridgeOn, 2),
    ];
    let records = vec![
        record("a", "a-boot", 1, rtt("b", 1_000, &[80_000, 90_000], 0)),
        record("a", "a-boot", 2, rdma(&[9_000, 10_000, 12_000], 1, &errors)),
    ];
    assert_eq!(a.send(records).await.unwrap(), [wm("a-boot", 2)]);

    let np = "{node=\"a\",peer=\"b\"}";
    let err = |c: &str| {
        format!("boltwatch_rdma_errors_total{{node=\"a\",device=\"rdma_en2\",class=\"{c}\"}}")
    };
    let body = c.metrics().await;
    expect_metrics(
        &body,
        &[
            (&format!("boltwatch_rdma_rtt_seconds_count{np}"), 3.0),
            (&format!("boltwatch_rdma_rtt_seconds_sum{np}"), 31e-6),
            (&format!("boltwatch_rdma_rtt_p50_seconds{np}"), 10e-6),
            (&format!("boltwatch_rdma_probe_sent_total{np}"), 4.0),
            (&format!("boltwatch_rdma_probe_received_total{np}"), 3.0),
            (&format!("boltwatch_rdma_probe_lost_total{np}"), 1.0),
            (&err("sequence_gap"), 1.0),
            (&err("rtr_bridge_on"), 2.0),
            // Half of 1 MiB confirmed in 1 ms.
            (
                &format!("boltwatch_rdma_send_bandwidth_bytes_per_second{np}"),
                524_288_000.0,
            ),
            // STAMP's families hold the STAMP window only.
            (&format!("boltwatch_rtt_seconds_count{np}"), 2.0),
            (&format!("boltwatch_probe_sent_total{np}"), 2.0),
        ],
    );
    assert_eq!(metric(&body, &err("crc_mismatch")), None);
    promtool_clean(&body);

    let v = c.json("/api/v1/records?kind=rdma_probe").await;
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 1, "{v}");
    let p = &recs[0]["payload"];
    assert_eq!(p["kind"], "rdma_probe");
    assert_eq!(p["device"], "rdma_en2");
    assert_eq!(p["received"], 3);
    assert_eq!(p["errors"][1], serde_json::json!(["rtr_bridge_on", 2]));
    assert_eq!(
        (
            &p["burst_sent_bytes"],
            &p["burst_confirmed_bytes"],
            &p["burst_ns"]
        ),
        (
            &serde_json::json!(1 << 20),
            &serde_json::json!(1 << 19),
            &serde_json::json!(1_000_000)
        )
    );
    drop(a);
    c.stop().await;
}
