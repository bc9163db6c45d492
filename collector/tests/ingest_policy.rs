//! Ingest policy on a real in-process collector over real gRPC:
//! bearer-token authentication, per-node permission, batch and rate limits,
//! and a full store answering UNAVAILABLE without losing or acking
//! anything.

mod common;

use std::net::SocketAddr;

use boltwatch_collector::ingest::auth::AuthTokens;
use boltwatch_collector::Config;
use boltwatch_proto::v1::telemetry_client::TelemetryClient;
use boltwatch_proto::v1::{agent_message, collector_message, AgentMessage, Record};
use common::{agent_stats, fill, hello, record, Agent, Collector, Tmpfs, WAIT};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const TOKEN_A: &str = "token-of-node-a-0123456789";
const TOKEN_B: &str = "token-of-node-b-0123456789";

/// Opens a stream presenting `token` (if any) and sends `node`'s Hello.
async fn open(addr: SocketAddr, token: Option<&str>, node: &str) -> Result<Agent, tonic::Status> {
    let mut client = TelemetryClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(16);
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(hello(
            node,
            &format!("boot-{node}"),
        ))),
    })
    .await
    .unwrap();
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let resp = tokio::time::timeout(WAIT, client.stream(req))
        .await
        .expect("answered in time")?;
    let mut agent = Agent {
        tx,
        rx: resp.into_inner(),
    };
    let first = agent.next().await?;
    assert!(matches!(
        first.msg,
        Some(collector_message::Msg::Welcome(_))
    ));
    Ok(agent)
}

fn batch(node: &str, seqs: impl IntoIterator<Item = u64>) -> Vec<Record> {
    seqs.into_iter()
        .map(|s| record(node, &format!("boot-{node}"), s, agent_stats(s, 0)))
        .collect()
}

fn with_auth(c: &mut Config) {
    c.auth = Some(AuthTokens::from_pairs([
        ("a".to_string(), TOKEN_A.to_string()),
        ("b".to_string(), TOKEN_B.to_string()),
    ]));
}

#[tokio::test]
async fn tokens_gate_who_may_speak_for_which_node() {
    let (_dir, c) = Collector::temp_with(with_auth).await;

    let e = open(c.grpc, None, "a").await.err().expect("refused");
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = open(c.grpc, Some("not-a-token-at-all-xxxxx"), "a")
        .await
        .err()
        .expect("refused");
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    // b's token, a's name.
    let e = match open(c.grpc, Some(TOKEN_B), "a").await {
        Err(e) => e,
        Ok(_) => panic!("b's token accepted for a"),
    };
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // The right token, then a record speaking for b inside a's stream.
    let mut a = open(c.grpc, Some(TOKEN_A), "a").await.unwrap();
    let mut recs = batch("a", 1..=2);
    recs.push(record("b", "boot-b", 1, agent_stats(0, 0)));
    let e = a.send(recs).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(c.stored().await, 0, "nothing of a refused stream is stored");
    assert_eq!(c.errors("unauthenticated").await, 2.0);
    assert_eq!(c.errors("permission_denied").await, 2.0);

    // The right token for the right node works.
    let mut a = open(c.grpc, Some(TOKEN_A), "a").await.unwrap();
    let acks = a.send(batch("a", 1..=3)).await.unwrap();
    assert_eq!(acks[0].highest_seq, 3);
    assert_eq!(c.stored().await, 3);
    drop(a);
    c.stop().await;
}

#[tokio::test]
async fn without_a_token_table_everyone_is_accepted() {
    let (_dir, c) = Collector::temp().await;
    let mut a = open(c.grpc, None, "a").await.unwrap();
    assert_eq!(a.send(batch("a", 1..=2)).await.unwrap()[0].highest_seq, 2);
    drop(a);
    c.stop().await;
}

#[tokio::test]
async fn oversized_batches_and_rate_are_refused_with_resource_exhausted() {
    let (_dir, c) = Collector::temp_with(|c| {
        c.max_batch_records = 50;
        c.max_records_per_second = 10; // burst 50
    })
    .await;
    let mut a = open(c.grpc, None, "a").await.unwrap();
    let e = a.send(batch("a", 1..=51)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert_eq!(c.stored().await, 0);

    let mut a = open(c.grpc, None, "a").await.unwrap();
    assert_eq!(a.send(batch("a", 1..=50)).await.unwrap()[0].highest_seq, 50);
    // The bucket is empty now; refill is 10/s, so 50 more cannot pass at
    // once (the bound holds however slow this machine is).
    let e = a.send(batch("a", 51..=100)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert_eq!(c.stored().await, 50, "the refused batch stored nothing");
    assert_eq!(c.errors("rate_limited").await, 1.0);
    assert_eq!(c.errors("batch_too_large").await, 1.0);
    c.stop().await;
}

#[tokio::test]
async fn full_store_answers_unavailable_and_acks_nothing_then_recovers() {
    let fs = Tmpfs::mount("size=4m");
    let mnt = fs.path();
    let c = Collector::start_with(&mnt.join("data"), |_| {}).await;
    let mut a = open(c.grpc, None, "a").await.unwrap();
    assert_eq!(a.send(batch("a", 1..=10)).await.unwrap()[0].highest_seq, 10);

    let filler = fill(mnt);
    // Big enough that SQLite must grow its files.
    let mut refused = None;
    let mut next = 11;
    for _ in 0..20 {
        match a.send(batch("a", next..next + 2000)).await {
            Ok(_) => next += 2000,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("a full disk must refuse a batch");
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(e.message().contains("store"), "{}", e.message());
    let before = c.stored().await;
    assert_eq!(
        before,
        next - 1,
        "everything acked was stored, nothing more"
    );
    assert!(c.errors("store").await >= 1.0);

    // Space again: the agent's retry of the same records goes through.
    std::fs::remove_file(filler).unwrap();
    let mut a = open(c.grpc, None, "a").await.unwrap();
    let acks = a.send(batch("a", next..next + 2000)).await.unwrap();
    assert_eq!(acks[0].highest_seq, next + 1999);
    assert_eq!(c.stored().await, next + 1999);
    drop(a);
    c.stop().await;
}
