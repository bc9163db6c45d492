//! The node's own `/metrics` role (`--metrics-listen`): serves the records
//! the spool numbers (through the tap it hands back for the spool), whether
//! or not the collector is reachable.

use std::net::TcpListener;

use boltwatch_proto::v1::Hello;
use tracing::info;

use super::crew::Crew;
use crate::error::Error;
use crate::metrics::late::LateReplies;
use crate::metrics::{server, NodeMetrics};
use crate::spool::Tap;

/// Starts serving; the returned tap goes on the spool once it is recovered.
pub(super) fn start(
    crew: &mut Crew,
    listener: TcpListener,
    hello: &Hello,
    late: LateReplies,
) -> Result<Tap, Error> {
    let spawn_err = |source| Error::Spawn {
        what: "the metrics server".into(),
        source,
    };
    listener.set_nonblocking(true).map_err(spawn_err)?;
    let addr = listener.local_addr().ok();
    let listener = tokio::net::TcpListener::from_std(listener).map_err(spawn_err)?;
    let metrics = NodeMetrics::new(hello).with_late_replies(late);
    let tap = metrics.tap();
    crew.task(server::serve(listener, metrics, server::Limits::default()));
    info!(addr = ?addr, "serving this node's /metrics");
    Ok(tap)
}
