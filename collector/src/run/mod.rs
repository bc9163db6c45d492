//! A running collector, assembled from its roles. Everything the process
//! would otherwise grab (sockets, the shutdown signal) is passed in, so
//! `main`, the lab and the tests share this one entry point, [`run`].
//!
//! Each role starts from its own small function, in the order below; all
//! of them stop on one `watch` channel turning true:
//!
//! | role | where | runs as |
//! |---|---|---|
//! | the store: writer thread and read pool | `boltwatch_store` | thread, blocking tasks |
//! | `/metrics` state from the store (known nodes, retention, rebuild) | [`startup`] | before anything serves |
//! | remote write, one sender per endpoint | [`crate::remote_write`] | task per endpoint |
//! | gRPC ingest: preface acceptor and `Telemetry.Stream` | [`ingest`] | tasks |
//! | live soak verdicts on `/metrics` | [`crate::soak::live`] | task |
//! | raw retention and compaction | [`upkeep`] | tasks |
//! | HTTP: `/metrics`, `/healthz`, `/api/v1` | [`crate::http`] | task |
//!
//! Stopping runs the other way: the servers drain (open agent streams end
//! with `UNAVAILABLE`, in-flight requests get `shutdown_grace`), the
//! background tasks are stopped between steps, and the store is closed
//! last.

mod ingest;
mod startup;
mod upkeep;
mod watched;

use std::future::Future;

use boltwatch_store::{Store, StoreHandle};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::export::SharedMetrics;
use crate::{api, http, remote_write, soak, tls, Config, Error};

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

/// Runs the collector until `shutdown` completes: opens the store under
/// `config.data_dir`, serves gRPC ingest on `listeners.grpc` and HTTP on
/// `listeners.http`, then drains and closes the store.
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
    let tokens = api_tokens(&config)?;
    let tls = tls::Tls::load(&config.tls)?;
    let (store, metrics) = open(&config).await?;
    let handle = store.handle();
    let grpc_addr = listeners.grpc.local_addr().ok();
    let http_addr = listeners.http.local_addr().ok();
    tracing::info!(?grpc_addr, ?http_addr, data_dir = %config.data_dir.display(), "collector serving");

    let (stop_tx, stop_rx) = watch::channel(false);
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
    let mut ingest = ingest::start(&config, listeners.grpc, &tls, &handle, &metrics, &stop_rx);
    let mut background = upkeep::start(&config, &handle, &metrics, &stop_rx);
    background.push(watched::start(&config, &metrics, &stop_rx));
    background.push(tokio::spawn(soak::live::run(
        handle.clone(),
        metrics.clone(),
        stop_rx.clone(),
    )));
    background.extend(senders);
    let live = handle.clone();
    let state = api::AppState {
        store: handle,
        metrics,
        tokens,
    };
    let http = http::serve(
        listeners.http,
        listeners.api,
        state,
        http::Settings::of(&config),
        stop_rx,
    );
    let mut http = tokio::spawn(http);
    let shutdown = serve(live);

    // A server that ends before shutdown was asked for is an error.
    let mut http_done = false;
    let early = tokio::select! {
        _ = shutdown => None,
        e = ingest.ended() => Some(e),
        r = &mut http => {
            http_done = true;
            Some(http_ended(r))
        }
    };
    tracing::info!("collector shutting down");
    let _ = stop_tx.send(true);
    ingest.drain(config.shutdown_grace).await;
    if !http_done {
        drain_http(http, config.shutdown_grace).await;
    }
    // Background tasks stop between steps; a remote_write batch in flight
    // is abandoned (its position was not saved, so it is sent again after
    // a restart).
    for task in background {
        stop(task).await;
    }
    store.close().await;
    early.map_or(Ok(()), Err)
}

/// Opens the store and the `/metrics` state it restores (closing the
/// store again when that fails).
async fn open(config: &Config) -> Result<(Store, SharedMetrics), Error> {
    let store = Store::open(&config.data_dir)?;
    let metrics = SharedMetrics::new();
    metrics.lock().set_stale_after(config.stale_after);
    if let Err(e) = startup::restore(&store.handle(), &metrics).await {
        store.close().await;
        return Err(e);
    }
    Ok((store, metrics))
}

/// Lets open HTTP requests finish for `grace` after the stop signal.
async fn drain_http(mut http: JoinHandle<std::io::Result<()>>, grace: std::time::Duration) {
    if tokio::time::timeout(grace, &mut http).await.is_err() {
        tracing::warn!("HTTP server did not drain in time");
        http.abort();
    }
}

/// The API's read and write tokens, as configured.
fn api_tokens(config: &Config) -> Result<api::token::Tokens, Error> {
    let load = |key: &str, p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| api::token::ApiToken::load(key, p))
            .transpose()
            .map_err(|message| Error::Io {
                what: message,
                source: std::io::Error::other("cannot read the API token"),
            })
    };
    Ok(api::token::Tokens {
        read: load("api_token_file", &config.api_token_file)?,
        write: load("api_write_token_file", &config.api_write_token_file)?,
    })
}

/// Why the HTTP server ended before it was asked to.
fn http_ended(r: Result<std::io::Result<()>, tokio::task::JoinError>) -> Error {
    match r {
        Ok(Ok(())) => Error::Io {
            what: "HTTP server".into(),
            source: std::io::Error::other("stopped unexpectedly"),
        },
        Ok(Err(source)) => Error::Io {
            what: "HTTP server".into(),
            source,
        },
        Err(e) => Error::Task("HTTP server", e),
    }
}

/// Stops a background task and waits until it is gone.
async fn stop<T>(task: JoinHandle<T>) {
    task.abort();
    let _ = task.await;
}
