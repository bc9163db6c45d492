//! boltwatch-collector: receives every agent's records over gRPC, stores
//! them durably in SQLite, and serves Prometheus `/metrics` and a JSON API.
//!
//! # Layout
//! - [`config`]: TOML file plus flags, checked once into a [`Config`].
//! - [`error`]: the crate's [`Error`].
//! - [`ingest`]: the `Telemetry` gRPC service, batch validation and the
//!   HTTP/2-preface acceptor on the gRPC port.
//! - [`store`]: SQLite (WAL, `synchronous=FULL`): one writer thread, pooled
//!   read connections, migrations and the only SQL text.
//! - [`export`]: the exporter state behind `/metrics`, one module per
//!   domain, and the Prometheus text rendering; pure. Ingest writes to it,
//!   HTTP reads it.
//! - [`api`] and [`dto`]: the `/api/v1` JSON routes and their shapes.
//! - [`http`]: the axum server for `/metrics`, `/healthz` and `/api/v1`.
//! - [`report`]: report math over stored records (lab table, soak reports).
//! - [`soak`]: soak runs as stored objects, their HTTP routes, the report
//!   loader and the live soak state on `/metrics`.
//!
//! # Restarts
//! Records, boots and watermarks live in the store and survive a restart
//! (the `Welcome` after a restart carries them). Metric state does not:
//! accumulated counters (probe counts, the RTT histogram, records received,
//! duplicates, agent stats) restart at 0, which Prometheus handles as a
//! counter reset. Known nodes get their `boltwatch_agent_up 0` and
//! `boltwatch_agent_info` series back from the store at startup.
//!
//! [`run`] takes already-bound listeners and a shutdown future, so tests and
//! the lab (`boltwatch-lab`) bind port 0 and stop it at will.
#![deny(missing_docs)]

pub mod api;
pub mod config;
pub mod dto;
pub mod error;
pub mod export;
pub mod http;
pub mod ingest;
pub mod remote_write;
pub mod report;
pub mod soak;
pub mod store;
pub mod tls;

use std::future::Future;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

pub use config::Config;
pub use error::Error;

use export::agent::AgentInfo;
use export::{Metrics, SharedMetrics};
use ingest::raw::TelemetryService;
use ingest::Ingest;
use store::{BootRow, Store, StoreHandle};

/// The sockets [`run`] serves on, bound by the caller.
#[derive(Debug)]
pub struct Listeners {
    /// gRPC ingest (`Telemetry.Stream`).
    pub grpc: TcpListener,
    /// HTTP: `/metrics`, `/healthz`, and `/api/v1` unless `api` is given.
    pub http: TcpListener,
    /// HTTP: `/api/v1` on its own listener (`api_listen`).
    pub api: Option<TcpListener>,
}

impl Listeners {
    /// Binds both addresses of `config`.
    pub async fn bind(config: &Config) -> Result<Listeners, Error> {
        let bind = |addr| async move {
            TcpListener::bind(addr).await.map_err(|source| Error::Io {
                what: format!("binding {addr}"),
                source,
            })
        };
        let api = match config.api_listen {
            Some(a) => Some(bind(a).await?),
            None => None,
        };
        Ok(Listeners {
            grpc: bind(config.grpc_listen).await?,
            http: bind(config.http_listen).await?,
            api,
        })
    }
}

/// HTTP/2 keepalive ping interval on gRPC connections.
pub const GRPC_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);
/// A keepalive ping unanswered this long closes the connection.
pub const GRPC_KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Concurrent streams on one gRPC connection (an agent needs one).
pub const GRPC_STREAMS_PER_CONNECTION: u32 = 8;
/// Largest header block of a gRPC request (the bearer token is the only
/// large header an agent sends).
pub const GRPC_MAX_HEADER_BYTES: u32 = 16 * 1024;

/// Creates every known node's series before it reconnects (agent_up 0,
/// info of its latest boot that sent a Hello) and the store size gauge.
fn seed_metrics(m: &mut Metrics, boots: &[BootRow]) {
    let mut latest: std::collections::BTreeMap<&str, Option<&BootRow>> = Default::default();
    for b in boots {
        let slot = latest.entry(&b.node).or_default();
        if b.agent_version.is_empty() {
            continue; // Known only from records (a replayed spool): no info.
        }
        let key = |b: &BootRow| (b.started_unix_ns, b.first_seen_unix_ns);
        if slot.is_none_or(|cur| key(b) >= key(cur)) {
            *slot = Some(b);
        }
    }
    for (node, b) in latest {
        let info = b.map(|b| AgentInfo {
            version: b.agent_version.clone(),
            os: b.os.clone(),
            boot_id: b.boot_id.clone(),
        });
        m.on_known_node(node, info);
    }
    m.set_store_records(boots.iter().map(|b| b.records).sum());
}

/// Runs the collector until `shutdown` completes: opens the store under
/// `config.data_dir`, serves gRPC ingest on `listeners.grpc` and HTTP on
/// `listeners.http`, then drains (open agent streams end with
/// `UNAVAILABLE`, in-flight requests get `config.shutdown_grace`) and closes
/// the store.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    run_supervised(config, listeners, |_| shutdown).await
}

/// As [`run`], for a supervised process: once the store is open and every
/// server is serving, `serve` gets a store handle (for the watchdog's
/// liveness check, [`StoreHandle::writer_answers`]) and returns the future
/// the collector runs until; the binary sends systemd's READY=1 there.
pub async fn run_supervised<F, Fut>(
    config: Config,
    listeners: Listeners,
    serve: F,
) -> Result<(), Error>
where
    F: FnOnce(StoreHandle) -> Fut,
    Fut: Future<Output = ()>,
{
    let api_token = match &config.api_token_file {
        Some(p) => Some(api::token::ApiToken::load(p).map_err(|message| Error::Io {
            what: message,
            source: std::io::Error::other("cannot read the API token"),
        })?),
        None => None,
    };
    let tls = tls::Tls::load(&config.tls)?;
    let store = Store::open(&config.data_dir)?;
    let handle = store.handle();
    let metrics = SharedMetrics::new();
    metrics.lock().set_stale_after(config.stale_after);
    match handle.boots().await {
        Ok(boots) => seed_metrics(&mut metrics.lock(), &boots),
        Err(e) => {
            store.close().await;
            return Err(e.into());
        }
    }
    // What retention did before (this run's or a `prune` command's).
    match handle.read(store::retention::status).await {
        Ok((mark, rollups)) => metrics.lock().set_retention(mark, rollups),
        Err(e) => {
            store.close().await;
            return Err(e.into());
        }
    }
    // Before ingest starts, so no record is applied twice.
    if let Err(e) = remote_write::log::rebuild(&handle, &metrics).await {
        store.close().await;
        return Err(e.into());
    }
    let grpc_addr = listeners.grpc.local_addr().ok();
    let http_addr = listeners.http.local_addr().ok();
    tracing::info!(?grpc_addr, ?http_addr, data_dir = %config.data_dir.display(), "collector serving");

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |rx: watch::Receiver<bool>| async move {
        let mut rx = rx;
        let _ = rx.wait_for(|s| *s).await;
    };

    let senders = match remote_write::spawn(
        &config.remote_write,
        handle.clone(),
        metrics.clone(),
        stop_rx.clone(),
    ) {
        Ok(s) => s,
        Err(e) => {
            store.close().await;
            return Err(e);
        }
    };
    let (conn_tx, conn_rx) = mpsc::channel(64);
    let accept = ingest::preface::AcceptPolicy {
        preface_timeout: config.preface_timeout,
        hello_timeout: config.hello_timeout,
        limits: ingest::conn::ConnLimits::new(
            config.max_connections,
            config.max_connections_per_address,
        ),
        tls: tls.clone(),
    };
    if let Some(t) = &tls {
        tokio::spawn(tls::reload_on_sighup(t.clone(), stop_rx.clone()));
    }
    let acceptor = tokio::spawn(ingest::preface::accept_loop(
        listeners.grpc,
        accept,
        metrics.clone(),
        conn_tx,
        stop_rx.clone(),
    ));
    let service = TelemetryService::new(
        Ingest::new(
            handle.clone(),
            metrics.clone(),
            stop_rx.clone(),
            config.ingest_policy(),
        ),
        config.max_message_bytes,
    );
    // Keepalive pings find dead peers (a pulled cable leaves no FIN);
    // small stream and header caps bound what one connection may hold.
    let mut grpc = tokio::spawn(
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(GRPC_KEEPALIVE))
            .http2_keepalive_timeout(Some(GRPC_KEEPALIVE_TIMEOUT))
            .max_concurrent_streams(Some(GRPC_STREAMS_PER_CONNECTION))
            .http2_max_header_list_size(GRPC_MAX_HEADER_BYTES)
            .serve_with_incoming_shutdown(
                service,
                ReceiverStream::new(conn_rx),
                stopped(stop_rx.clone()),
            ),
    );
    let soaks = tokio::spawn(soak::live::run(
        handle.clone(),
        metrics.clone(),
        stop_rx.clone(),
    ));
    // Pruning steps are writer commands, so stopping it between steps
    // (abort at shutdown) leaves no half-done step.
    let retention = config.raw_retention.map(|keep| {
        let m = metrics.clone();
        tokio::spawn(store::retention::run(
            handle.clone(),
            keep,
            config.remote_write.urls.clone(),
            move |mark, rollups| m.lock().set_retention(mark, rollups),
            stop_rx.clone(),
        ))
    });
    // Compaction steps are writer commands too.
    let compaction = config.compact.then(|| {
        tokio::spawn(store::compact::run(
            handle.clone(),
            config.remote_write.urls.clone(),
            store::upkeep::EVERY,
            stop_rx.clone(),
        ))
    });
    let live = handle.clone();
    let state = api::AppState {
        store: handle,
        metrics,
        api_token,
    };
    let mut http = tokio::spawn(http::serve(listeners.http, listeners.api, state, stop_rx));
    let shutdown = serve(live);

    // A server that ends before shutdown was asked for is an error.
    let mut early: Option<Error> = None;
    let (mut grpc_done, mut http_done) = (false, false);
    tokio::select! {
        _ = shutdown => {}
        r = &mut grpc => {
            grpc_done = true;
            early = Some(match r {
                Ok(Ok(())) => Error::Io { what: "gRPC server".into(), source: std::io::Error::other("stopped unexpectedly") },
                Ok(Err(e)) => e.into(),
                Err(e) => Error::Task("gRPC server", e),
            });
        }
        r = &mut http => {
            http_done = true;
            early = Some(match r {
                Ok(Ok(())) => Error::Io { what: "HTTP server".into(), source: std::io::Error::other("stopped unexpectedly") },
                Ok(Err(source)) => Error::Io { what: "HTTP server".into(), source },
                Err(e) => Error::Task("HTTP server", e),
            });
        }
    }
    tracing::info!("collector shutting down");
    let _ = stop_tx.send(true);
    let grace = config.shutdown_grace;
    if !grpc_done && tokio::time::timeout(grace, &mut grpc).await.is_err() {
        tracing::warn!("gRPC server did not drain in time");
        grpc.abort();
    }
    if !http_done && tokio::time::timeout(grace, &mut http).await.is_err() {
        tracing::warn!("HTTP server did not drain in time");
        http.abort();
    }
    acceptor.abort();
    let _ = acceptor.await;
    soaks.abort();
    let _ = soaks.await;
    if let Some(r) = retention {
        r.abort();
        let _ = r.await;
    }
    if let Some(c) = compaction {
        c.abort();
        let _ = c.await;
    }
    // A batch in flight is abandoned (its position was not saved, so it is
    // sent again after a restart).
    for s in senders {
        s.abort();
        let _ = s.await;
    }
    store.close().await;
    match early {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
