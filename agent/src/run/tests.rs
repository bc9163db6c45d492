//! The whole agent on loopback, with no collector to deliver to: every role
//! runs for real (reflector, senders, link watcher, sampler, service
//! checks, outage tracker) and everything it made is read back from the
//! spool after the stop.

use std::net::UdpSocket;
use std::time::Duration;

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{OutageCause, Record};

use super::{run, Listeners, Stopped};
use crate::config::{Config, PeerConfig, ServiceConfig};
use crate::spool::{Spool, SpoolOptions};

/// Every record of every earlier boot still in the spool at `dir`.
fn spooled(dir: &std::path::Path) -> Vec<Record> {
    let opts = SpoolOptions {
        dir: dir.to_path_buf(),
        max_bytes: 1 << 30,
    };
    let mut spool = Spool::open(opts, "a", "reader").expect("spool opens after the stop");
    spool.read_to_end(512).unwrap()
}

fn outages(records: &[Record]) -> Vec<boltwatch_proto::v1::Outage> {
    records
        .iter()
        .filter_map(|r| match &r.payload {
            Some(Payload::Outage(o)) => Some(o.clone()),
            _ => None,
        })
        .collect()
}

/// An agent at `spool_dir` probing two peers, `self` at `stamp` and
/// `hole` at `hole`, and checking one service on `closed_port`, which is
/// also where the collector would be: nothing listens there, so every
/// record stays in the spool.
fn two_peer_config(
    spool_dir: &std::path::Path,
    stamp: std::net::SocketAddr,
    hole: std::net::SocketAddr,
    closed_port: u16,
) -> Config {
    Config {
        node: "a".into(),
        collector: format!("http://127.0.0.1:{closed_port}"),
        peers: vec![
            PeerConfig {
                name: "self".into(),
                addr: stamp,
                interface: None,
            },
            PeerConfig {
                name: "hole".into(),
                addr: hole,
                interface: None,
            },
        ],
        probe_interval: Duration::from_millis(10),
        probe_timeout: Duration::from_millis(200),
        services: vec![ServiceConfig {
            name: "nothing".into(),
            port: closed_port,
        }],
        service_interval: Duration::from_millis(200),
        bandwidth_enabled: false,
        spool_dir: spool_dir.to_path_buf(),
        ..Config::default()
    }
}

/// Every record the run made is spooled, none acked, numbered from 1
/// without gaps under its boot id, the final health record last.
fn assert_spooled_in_order(records: &[Record], stopped: &Stopped) {
    assert_eq!(records.len() as u64, stopped.last_seq);
    assert_eq!(
        stopped.undelivered as u64, stopped.last_seq,
        "nothing acked"
    );
    for (i, r) in records.iter().enumerate() {
        assert_eq!(
            (r.seq, r.boot_id.as_str()),
            (i as u64 + 1, stopped.boot_id.as_str())
        );
    }
    assert!(
        matches!(
            records.last().unwrap().payload,
            Some(Payload::AgentStats(_))
        ),
        "the final health record comes last: {:?}",
        records.last()
    );
}

/// Two peers: our own reflector, and a socket that never answers. One
/// service on a port nobody listens on. The outage tracker hears from the
/// senders and the service checks through its one channel, each input
/// reaching the peer it names; after the stop the spool holds every record,
/// numbered without gaps, ending with the final health record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_report_to_the_tracker_and_stop_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let stamp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let config = two_peer_config(
        dir.path(),
        stamp.local_addr().unwrap(),
        hole.local_addr().unwrap(),
        closed_port,
    );
    let listeners = Listeners {
        stamp,
        bandwidth: None,
        metrics: None,
    };
    let stopped = run(
        config,
        listeners,
        tokio::time::sleep(Duration::from_secs(3)),
    )
    .await
    .expect("the agent starts");
    drop(hole);

    let records = spooled(dir.path());
    assert_spooled_in_order(&records, &stopped);
    let outages = outages(&records);
    let loss: Vec<_> = outages
        .iter()
        .filter(|o| o.cause == OutageCause::ProbeLoss as i32)
        .collect();
    assert!(!loss.is_empty(), "{outages:?}");
    assert!(loss.iter().all(|o| o.peer == "hole"), "{loss:?}");
    for peer in ["self", "hole"] {
        assert!(
            outages.iter().any(|o| o.peer == peer
                && o.cause == OutageCause::Service as i32
                && o.service == "nothing"),
            "service outage of {peer}: {outages:?}"
        );
    }
    let rtt = records
        .iter()
        .any(|r| matches!(&r.payload, Some(Payload::Rtt(s)) if s.peer == "self" && s.received > 0));
    assert!(rtt, "the sender to our own reflector got answers");
}
