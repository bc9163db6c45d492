//! The I/O edge of a report: reads a soak (or an ad-hoc range) and streams
//! its records from the store's one record scan into the pure [`Builder`].

use std::path::Path;

use boltwatch_proto::v1::{Hello, Record};
use boltwatch_store::{Db, Scanned, StoreError};
use prost::Message;

use super::{stored, Soak, SoakError};
use crate::report::soak::{Builder, Report, Scope};

/// Opens the store read-only (a report never writes; safe beside `serve`).
pub fn open_reader(path: &Path) -> Result<Db, SoakError> {
    Db::open_reader(path).map_err(|e| match e {
        StoreError::Missing(_) => SoakError::Invalid(e.to_string()),
        e => e.into(),
    })
}

/// The scope of a soak's report at `now_ns`, marks included.
pub fn scope_of(db: &Db, soak: &Soak, now_ns: u64) -> Result<Scope, SoakError> {
    let (from, to) = soak.range(now_ns);
    Ok(Scope {
        name: soak.name.clone(),
        from_unix_ns: from,
        to_unix_ns: to,
        nodes: soak.nodes.clone(),
        slo: soak.slo.clone(),
        marks: stored::marks(db, &soak.name)?,
    })
}

/// Builds the report of `scope` from the store.
pub fn report(db: &Db, scope: Scope) -> Result<Report, StoreError> {
    let mut b = Builder::new(scope);
    let (from, to) = b.scan_range();
    // The inventory's Hellos (stored bytes passed validation; one that
    // does not decode is left out).
    for h in db.hellos()? {
        if let Ok(hello) = Hello::decode(h.hello.as_slice()) {
            b.add_hello(&h.node, h.started_unix_ns, &hello);
        }
    }
    db.scan(from, to, |s| match s {
        Scanned::Record {
            node,
            boot_id,
            seq,
            unix_ns,
            raw,
        } => {
            // Stored bytes passed validation; a kind this build does not
            // know decodes without a payload and still counts for
            // completeness.
            let payload = Record::decode(raw).ok().and_then(|r| r.payload);
            b.add(node, boot_id, seq, unix_ns, payload.as_ref());
        }
        // Minutes whose raw dense records gave way to rollups (retention).
        Scanned::Minute(m) => b.add_minute(&m),
    })?;
    Ok(b.finish())
}

/// The report of the soak `name` at `now_ns`.
pub fn soak_report(db: &Db, name: &str, now_ns: u64) -> Result<Report, SoakError> {
    let soak = stored::get(db, name)?;
    let scope = scope_of(db, &soak, now_ns)?;
    Ok(report(db, scope)?)
}
