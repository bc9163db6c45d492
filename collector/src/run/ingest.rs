//! The gRPC ingest role: the acceptor that checks each connection's TLS
//! handshake or HTTP/2 preface and the tonic server of `Telemetry.Stream`
//! it hands the good ones to.

use std::time::Duration;

use boltwatch_store::StoreHandle;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use crate::export::SharedMetrics;
use crate::ingest::service::TelemetryService;
use crate::ingest::{self, Ingest};
use crate::{tls, Config, Error};

/// HTTP/2 keepalive ping interval on gRPC connections.
pub const GRPC_KEEPALIVE: Duration = Duration::from_secs(30);
/// A keepalive ping unanswered this long closes the connection.
pub const GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent streams on one gRPC connection (an agent needs one).
pub const GRPC_STREAMS_PER_CONNECTION: u32 = 8;
/// Largest header block of a gRPC request (the bearer token is the only
/// large header an agent sends).
pub const GRPC_MAX_HEADER_BYTES: u32 = 16 * 1024;

type Served = Result<Result<(), tonic::transport::Error>, tokio::task::JoinError>;

/// The running ingest role.
pub(super) struct Running {
    acceptor: JoinHandle<()>,
    grpc: JoinHandle<Result<(), tonic::transport::Error>>,
    grpc_done: bool,
}

/// Starts the acceptor on `listener` and the gRPC server behind it.
pub(super) fn start(
    config: &Config,
    listener: TcpListener,
    tls: &Option<std::sync::Arc<tls::Tls>>,
    store: &StoreHandle,
    metrics: &SharedMetrics,
    stop: &watch::Receiver<bool>,
) -> Running {
    let (conn_tx, conn_rx) = mpsc::channel(64);
    let accept = ingest::preface::AcceptPolicy {
        preface_timeout: config.preface_timeout,
        hello_timeout: config.hello_timeout,
        limits: ingest::conn::ConnLimits::new(
            config.max_connections,
            config.max_connections_per_address,
        ),
        pending: ingest::pending::PendingGate::new(
            ingest::pending::PENDING_LIMIT,
            config.max_pending_per_address,
        ),
        tls: tls.clone(),
    };
    if let Some(t) = tls {
        tokio::spawn(tls::reload_on_sighup(t.clone(), stop.clone()));
    }
    let acceptor = tokio::spawn(ingest::preface::accept_loop(
        listener,
        accept,
        metrics.clone(),
        conn_tx,
        stop.clone(),
    ));
    let service = TelemetryService::new(
        Ingest::new(
            store.clone(),
            metrics.clone(),
            stop.clone(),
            config.ingest_policy(),
        ),
        config.max_message_bytes,
    );
    let mut stopped = stop.clone();
    // Keepalive pings find dead peers (a pulled cable leaves no FIN);
    // small stream and header caps bound what one connection may hold.
    let grpc = tokio::spawn(
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(GRPC_KEEPALIVE))
            .http2_keepalive_timeout(Some(GRPC_KEEPALIVE_TIMEOUT))
            .max_concurrent_streams(Some(GRPC_STREAMS_PER_CONNECTION))
            .http2_max_header_list_size(GRPC_MAX_HEADER_BYTES)
            .serve_with_incoming_shutdown(service, ReceiverStream::new(conn_rx), async move {
                let _ = stopped.wait_for(|s| *s).await;
            }),
    );
    Running {
        acceptor,
        grpc,
        grpc_done: false,
    }
}

impl Running {
    /// Waits for the gRPC server to end on its own, which is an error.
    pub(super) async fn ended(&mut self) -> Error {
        let r: Served = (&mut self.grpc).await;
        self.grpc_done = true;
        match r {
            Ok(Ok(())) => Error::Io {
                what: "gRPC server".into(),
                source: std::io::Error::other("stopped unexpectedly"),
            },
            Ok(Err(e)) => e.into(),
            Err(e) => Error::Task("gRPC server", e),
        }
    }

    /// After the stop signal: lets open streams drain for `grace`, then
    /// stops the server and the acceptor.
    pub(super) async fn drain(mut self, grace: Duration) {
        if !self.grpc_done && tokio::time::timeout(grace, &mut self.grpc).await.is_err() {
            tracing::warn!("gRPC server did not drain in time");
            self.grpc.abort();
        }
        self.acceptor.abort();
        let _ = self.acceptor.await;
    }
}
