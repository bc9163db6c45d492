//! The `export` subcommand: the records of a range, streamed from the
//! store's record scan to stdout (or `--out`) as CSV or JSON lines, one
//! record decoded and written at a time through a buffer, so memory stays
//! flat whatever the range holds. Read-only: it opens the store `serve`
//! made and never creates one.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use boltwatch_collector::dto::{PayloadDto, RecordDto};
use boltwatch_collector::report::raw::RawFormat;
use boltwatch_collector::soak::{load, time};
use boltwatch_proto::v1::Record;
use boltwatch_store::Scanned;
use clap::Args;
use prost::Message;

use super::StoreArgs;

/// `export` arguments.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Range start (RFC 3339 or unix seconds), inclusive.
    #[arg(long)]
    from: String,
    /// Range end, exclusive.
    #[arg(long)]
    to: String,
    /// Only records of these kinds (rtt, bandwidth, outage, ...;
    /// comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    kind: Vec<String>,
    /// Only records of these nodes.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// csv or jsonl.
    #[arg(long, default_value = "jsonl")]
    format: RawFormat,
    /// Write here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// What `export` wrote.
pub struct Exported {
    /// Records written.
    pub records: u64,
    /// Rolled-up minutes skipped: their raw RTT summaries and counters
    /// were replaced by per-minute rollups (retention), which are not
    /// records.
    pub rollup_minutes: u64,
}

fn check_kinds(kinds: &[String]) -> anyhow::Result<()> {
    for k in kinds {
        if !boltwatch_proto::KINDS.contains(&k.as_str()) {
            bail!(
                "kind `{k}`: use one of {}",
                boltwatch_proto::KINDS.join(", ")
            );
        }
    }
    Ok(())
}

/// Runs `export`.
pub fn export(store: &StoreArgs, a: ExportArgs) -> anyhow::Result<Exported> {
    let parse = |s: &str| time::parse(s).map_err(anyhow::Error::msg);
    let (from, to) = (parse(&a.from)?, parse(&a.to)?);
    if to <= from {
        bail!("--to must be after --from");
    }
    check_kinds(&a.kind)?;
    let path = store.existing_db_path()?;
    let db = load::open_reader(&path)?;
    let sink: Box<dyn Write> = match &a.out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = std::io::BufWriter::with_capacity(1 << 16, sink);
    if let Some(h) = a.format.header() {
        w.write_all(h.as_bytes())?;
    }
    let mut done = Exported {
        records: 0,
        rollup_minutes: 0,
    };
    // The scan's callback cannot stop it: the first write error is kept
    // and ends the writing (a closed pipe, a full disk).
    let mut failed: Option<std::io::Error> = None;
    db.scan(from, to, |s| match s {
        // The scan also hands over outages begun before the range (a
        // report clips them); an export keeps to the range.
        Scanned::Record {
            node,
            boot_id,
            seq,
            unix_ns,
            raw,
        } if failed.is_none() && unix_ns >= from => {
            if !a.nodes.is_empty() && !a.nodes.iter().any(|n| n == node) {
                return;
            }
            let payload = Record::decode(raw).ok().and_then(|r| r.payload);
            let kind = payload.as_ref().map_or("unknown", |p| p.kind());
            if !a.kind.is_empty() && !a.kind.iter().any(|k| k == kind) {
                return;
            }
            let r = RecordDto {
                node: node.to_string(),
                boot_id: boot_id.to_string(),
                seq,
                unix_ns,
                kind: kind.to_string(),
                payload: payload.as_ref().map(PayloadDto::from),
            };
            match w.write_all(a.format.line(&r).as_bytes()) {
                Ok(()) => done.records += 1,
                Err(e) => failed = Some(e),
            }
        }
        Scanned::Record { .. } => {}
        Scanned::Minute(_) => done.rollup_minutes += 1,
    })?;
    if let Some(e) = failed {
        return Err(e).context("writing the export");
    }
    w.flush().context("writing the export")?;
    Ok(done)
}
