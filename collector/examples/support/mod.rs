//! What the collector's benchmarks share: an in-process collector on
//! loopback ports with the default configuration, agent streams opened with
//! a Hello, and batches sent and awaited for their Ack as the agent does.

use std::net::SocketAddr;
use std::time::Duration;

use boltwatch_collector::{Config, Listeners};
use boltwatch_proto::v1::telemetry_client::TelemetryClient;
use boltwatch_proto::v1::{
    agent_message, collector_message, AgentMessage, CollectorMessage, Hello, Record, RecordBatch,
};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

pub type BoxError = Box<dyn std::error::Error>;

/// A collector running in this process, storing into a temporary directory.
pub struct InProcess {
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    _dir: tempfile::TempDir,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), boltwatch_collector::Error>>,
}

impl InProcess {
    pub async fn start() -> Result<InProcess, BoxError> {
        let dir = tempfile::tempdir()?;
        let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let (gaddr, haddr) = (grpc.local_addr()?, http.local_addr()?);
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(boltwatch_collector::run(
            config,
            Listeners {
                grpc,
                http,
                api: None,
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(InProcess {
            grpc: gaddr,
            http: haddr,
            _dir: dir,
            stop,
            server,
        })
    }

    /// Stops the collector and returns how its run ended.
    pub async fn stop(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        self.server.await??;
        Ok(())
    }
}

/// One agent stream: what it sends, what the collector answers.
pub type Stream = (
    mpsc::Sender<AgentMessage>,
    tonic::Streaming<CollectorMessage>,
);

/// Opens a stream to `addr` as `node` (boot "boot") and waits for Welcome.
pub async fn open(addr: SocketAddr, node: &str) -> Result<Stream, BoxError> {
    let mut client = TelemetryClient::connect(format!("http://{addr}")).await?;
    let (tx, rx) = mpsc::channel(4);
    let hello = Hello {
        node: node.into(),
        boot_id: "boot".into(),
        agent_version: "bench".into(),
        ..Default::default()
    };
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(hello)),
    })
    .await?;
    let mut inbound = client.stream(ReceiverStream::new(rx)).await?.into_inner();
    inbound.message().await?.expect("Welcome");
    Ok((tx, inbound))
}

/// Sends one batch; whether it was acked (a refusal ends the stream).
pub async fn send(s: &mut Stream, records: Vec<Record>) -> Result<bool, BoxError> {
    s.0.send(AgentMessage {
        msg: Some(agent_message::Msg::Batch(RecordBatch { records })),
    })
    .await?;
    let m = tokio::time::timeout(Duration::from_secs(60), s.1.message()).await?;
    Ok(matches!(
        m.ok().flatten().and_then(|m| m.msg),
        Some(collector_message::Msg::Ack(_))
    ))
}
