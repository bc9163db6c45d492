//! The `prune` subcommand: raw-record retention on demand, on the store
//! `serve` uses (beside a running `serve`, too), with the rules of
//! `retention.raw` (see `boltwatch_store`'s retention).

use anyhow::Context;
use boltwatch_collector::soak::time;
use boltwatch_store::Db;
use clap::Args;

use super::StoreArgs;

/// `prune` arguments.
#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Replace raw RTT summaries and counters recorded before this (RFC
    /// 3339 or unix seconds; rounded down to a minute) by per-minute
    /// rollups.
    #[arg(long)]
    before: String,
    /// Then give the freed pages back to the file system (needs the
    /// database's size free on disk, and time).
    #[arg(long)]
    vacuum: bool,
}

/// Runs `prune`; what it prints.
pub fn prune(store: &StoreArgs, a: PruneArgs) -> anyhow::Result<String> {
    let path = store.existing_db_path()?;
    let cutoff = time::parse(&a.before).map_err(anyhow::Error::msg)?;
    let mut db = Db::open_writer(&path)?;
    // Every endpoint the store has delivered to, configured or not: an
    // offline command does not know which ones `serve` still pushes to.
    let (done, held) = db
        .prune_before(cutoff, None)
        .with_context(|| format!("pruning {}", path.display()))?;
    let mut out = format!(
        "replaced {} raw records by {} per-minute rollups; raw RTT summaries and counters before {} are pruned\n",
        done.records,
        done.rollups,
        time::format(done.until_ns)
    );
    if let Some(endpoint) = held {
        out += &format!(
            "held back by remote_write endpoint {endpoint}, which has not delivered the rest yet\n"
        );
    }
    if a.vacuum {
        db.vacuum().context("VACUUM")?;
    }
    let p = db.pages()?;
    out += &format!(
        "store: {} bytes in use, {} bytes free for reuse\n",
        (p.total - p.free) * p.size,
        p.free * p.size
    );
    Ok(out)
}
