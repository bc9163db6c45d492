//! The spool and transport role. The spool directory is locked before any
//! role starts (a second agent on it fails at once); its recovery, which
//! reads every byte earlier boots left, runs on a blocking thread once the
//! reflector and the probes are up, so a large or damaged spool never
//! keeps the node from answering STAMP. Then the transport ships what the
//! sink received meanwhile and since.

use std::time::{Duration, Instant};

use boltwatch_proto::v1::Hello;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use super::crew::Crew;
use crate::config::Config;
use crate::error::Error;
use crate::sink::Emitted;
use crate::spool::{Locked, Spool, SpoolOptions, Tap};
use crate::transport::{self, TransportOptions};

/// Locks the spool directory (creating it): quick, and fatal when it fails.
pub(super) fn lock(config: &Config) -> Result<Locked, Error> {
    let opts = SpoolOptions {
        dir: config.spool_dir.clone(),
        max_bytes: config.spool_max_bytes,
    };
    Spool::lock(opts).map_err(spool_error)
}

fn spool_error(e: crate::spool::SpoolError) -> Error {
    Error::Spawn {
        what: "the spool".into(),
        source: std::io::Error::other(e),
    }
}

/// What the spool's recovery needs, and what it tells when done.
pub(super) struct Recovery {
    /// The locked directory.
    pub locked: Locked,
    /// This boot.
    pub boot_id: String,
    /// The node's `/metrics`, when served: sees every record numbered.
    pub tap: Option<Tap>,
    /// Cancelled when the recovery fails: the agent cannot go on without
    /// its spool and stops.
    pub failed: CancellationToken,
}

/// Recovers the spool off the runtime, then runs the transport until the
/// last sink is dropped, flushing for at most 3 s; returns the spool, or
/// why it could not be recovered.
pub(super) fn start(
    config: &Config,
    hello: Hello,
    recovery: Recovery,
    records: UnboundedReceiver<Emitted>,
    crew: &Crew,
) -> JoinHandle<Result<Spool, Error>> {
    let opts = TransportOptions {
        collector: config.collector.clone(),
        hello,
        token: config.token.clone(),
        tls: config.tls.clone(),
        flush_timeout: Duration::from_secs(3),
    };
    let node = config.node.clone();
    let health = crew.health.clone();
    tokio::spawn(async move {
        let failed = recovery.failed.clone();
        let recovered = tokio::task::spawn_blocking(move || recover(recovery, &node))
            .await
            .map_err(|e| Error::Spawn {
                what: "the spool recovery".into(),
                source: std::io::Error::other(e),
            })
            .and_then(|r| r);
        match recovered {
            Ok(spool) => Ok(transport::run(opts, spool, records, health).await),
            Err(e) => {
                error!(error = %e, "spool recovery failed; stopping");
                failed.cancel();
                Err(e)
            }
        }
    })
}

/// Indexes what earlier boots left, on the calling (blocking) thread.
fn recover(r: Recovery, node: &str) -> Result<Spool, Error> {
    let started = Instant::now();
    let mut spool = r.locked.recover(node, &r.boot_id).map_err(spool_error)?;
    if let Some(tap) = r.tap {
        spool.set_tap(tap);
    }
    info!(took = ?started.elapsed(), unacked = spool.unacked(), "spool recovered");
    Ok(spool)
}
