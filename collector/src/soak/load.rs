//! The I/O edge of a report: reads a soak (or an ad-hoc range) and streams
//! its records from the store into the pure [`Builder`].

use std::path::Path;

use boltwatch_proto::v1::Record;
use prost::Message;
use rusqlite::{Connection, OpenFlags};

use super::{Soak, SoakError};
use crate::report::soak::{Builder, Report, Scope};
use crate::store::{retention, soaks};

/// Opens the store read-only (a report never writes; safe beside `serve`).
pub fn open_reader(path: &Path) -> Result<Connection, SoakError> {
    if !path.exists() {
        return Err(SoakError::Invalid(format!(
            "no store at {}",
            path.display()
        )));
    }
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    c.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(c)
}

/// The scope of a soak's report at `now_ns`, marks included.
pub fn scope_of(conn: &Connection, soak: &Soak, now_ns: u64) -> rusqlite::Result<Scope> {
    let (from, to) = soak.range(now_ns);
    Ok(Scope {
        name: soak.name.clone(),
        from_unix_ns: from,
        to_unix_ns: to,
        nodes: soak.nodes.clone(),
        slo: soak.slo.clone(),
        marks: soaks::marks(conn, &soak.name)?,
    })
}

/// Builds the report of `scope` from the store.
pub fn report(conn: &Connection, scope: Scope) -> rusqlite::Result<Report> {
    let (from, to) = (scope.from_unix_ns, scope.to_unix_ns);
    let mut b = Builder::new(scope);
    soaks::scan_range(conn, from, to, |node, boot, seq, t, raw| {
        // Stored bytes passed validation; a kind this build does not know
        // decodes without a payload and still counts for completeness.
        let payload = Record::decode(raw).ok().and_then(|r| r.payload);
        b.add(node, boot, seq, t, payload.as_ref());
    })?;
    // Minutes whose raw dense records gave way to rollups (retention).
    retention::scan(conn, from, to, |r| {
        b.add_rollup(r.node, r.boot_id, r.minute, &r.rollup)
    })?;
    Ok(b.finish())
}

/// The report of the soak `name` at `now_ns`.
pub fn soak_report(conn: &Connection, name: &str, now_ns: u64) -> Result<Report, SoakError> {
    let soak = soaks::get(conn, name)?;
    let scope = scope_of(conn, &soak, now_ns)?;
    Ok(report(conn, scope)?)
}
