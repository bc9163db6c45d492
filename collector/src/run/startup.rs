//! What `/metrics` knows before ingest starts: every known node's series
//! (agent_up 0 and the info of its latest boot), the store size, what
//! retention did before, and the replay of every stored record
//! ([`crate::rebuild`]), so counters continue across a restart and no
//! record is applied twice.

use boltwatch_store::{BootRow, StoreHandle};

use crate::export::{Metrics, SharedMetrics};
use crate::Error;
use boltwatch_exposition::agent::AgentInfo;

/// Seeds `metrics` from the store.
pub(super) async fn restore(store: &StoreHandle, metrics: &SharedMetrics) -> Result<(), Error> {
    let boots = store.boots().await?;
    seed_nodes(&mut metrics.lock(), &boots);
    // What retention did before (this run's or a `prune` command's).
    let (mark, rollups) = store.read(|db| db.retention_status()).await?;
    metrics.lock().set_retention(mark, rollups);
    crate::rebuild::rebuild(store, metrics).await?;
    Ok(())
}

/// Creates every known node's series before it reconnects (agent_up 0,
/// info of its latest boot that sent a Hello) and the store size gauge.
fn seed_nodes(m: &mut Metrics, boots: &[BootRow]) {
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
