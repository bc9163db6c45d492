//! SQL of soak runs and their marks (migration 2), and the record scans a
//! soak report makes. The CLI calls these on its own connection
//! ([`open_writer`]) while `serve` may run: WAL lets the two coexist, and
//! the busy timeout waits out the collector's short batch transactions.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use super::layout;
use super::ordered::{Ordered, Timed};
use super::rollup::minute_of;
use crate::soak::{Mark, Slo, Soak, SoakError};

/// How long a soak write waits for the collector's writer.
const BUSY: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens `path` for soak writes, creating and migrating it when needed, as
/// `serve` would.
pub fn open_writer(path: &Path) -> Result<Connection, SoakError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| SoakError::Invalid(format!("creating {}: {e}", dir.display())))?;
    }
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    super::schema::migrate(&mut conn).map_err(|e| SoakError::Invalid(e.to_string()))?;
    Ok(conn)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serializes")
}

fn from_json<T: serde::de::DeserializeOwned>(col: usize, text: &str) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Creates a soak; refuses a taken name.
pub fn create(conn: &Connection, s: &Soak, now_ns: u64) -> Result<(), SoakError> {
    crate::soak::check_name(&s.name)?;
    let n = conn.execute(
        "INSERT OR IGNORE INTO soaks (name, start_unix_ns, end_unix_ns, nodes, slo, labels, created_unix_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            s.name,
            s.start_unix_ns as i64,
            s.end_unix_ns.map(|e| e as i64),
            json(&s.nodes),
            json(&s.slo),
            json(&s.labels),
            now_ns as i64
        ],
    )?;
    if n == 0 {
        return Err(SoakError::Exists(s.name.clone()));
    }
    Ok(())
}

/// Ends a running soak at `end_ns`; a soak already ended keeps its end.
pub fn stop(conn: &Connection, name: &str, end_ns: u64) -> Result<Soak, SoakError> {
    let s = get(conn, name)?;
    if s.end_unix_ns.is_none() {
        if end_ns < s.start_unix_ns {
            return Err(SoakError::Invalid(format!(
                "soak `{name}` cannot end before it started"
            )));
        }
        conn.execute(
            "UPDATE soaks SET end_unix_ns = ?2 WHERE name = ?1",
            params![name, end_ns as i64],
        )?;
    }
    get(conn, name)
}

fn soak_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Soak> {
    Ok(Soak {
        name: r.get(0)?,
        start_unix_ns: r.get::<_, i64>(1)? as u64,
        end_unix_ns: r.get::<_, Option<i64>>(2)?.map(|e| e as u64),
        nodes: from_json(3, &r.get::<_, String>(3)?)?,
        slo: from_json::<Slo>(4, &r.get::<_, String>(4)?)?,
        labels: from_json(5, &r.get::<_, String>(5)?)?,
    })
}

const COLUMNS: &str = "name, start_unix_ns, end_unix_ns, nodes, slo, labels";

/// One soak.
pub fn get(conn: &Connection, name: &str) -> Result<Soak, SoakError> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM soaks WHERE name = ?1"),
        [name],
        soak_row,
    )
    .optional()?
    .ok_or_else(|| SoakError::NotFound(name.to_string()))
}

/// Every soak, newest start first.
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<Soak>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM soaks ORDER BY start_unix_ns DESC, name"
    ))?;
    let rows = stmt.query_map([], soak_row)?;
    rows.collect()
}

/// Adds a mark to a soak.
pub fn add_mark(conn: &Connection, soak: &str, m: &Mark) -> Result<(), SoakError> {
    get(conn, soak)?;
    if m.text.is_empty() || m.text.len() > 1024 {
        return Err(SoakError::Invalid("mark text: 1 to 1024 bytes".into()));
    }
    if m.until_unix_ns.is_some_and(|u| u < m.at_unix_ns) {
        return Err(SoakError::Invalid("mark ends before it starts".into()));
    }
    conn.execute(
        "INSERT INTO soak_marks (soak, text, at_unix_ns, until_unix_ns) VALUES (?1, ?2, ?3, ?4)",
        params![
            soak,
            m.text,
            m.at_unix_ns as i64,
            m.until_unix_ns.map(|u| u as i64)
        ],
    )?;
    Ok(())
}

/// A soak's marks, oldest first.
pub fn marks(conn: &Connection, soak: &str) -> rusqlite::Result<Vec<Mark>> {
    let mut stmt = conn.prepare_cached(
        "SELECT text, at_unix_ns, until_unix_ns FROM soak_marks
         WHERE soak = ?1 ORDER BY at_unix_ns, id",
    )?;
    let rows = stmt.query_map([soak], |r| {
        Ok(Mark {
            text: r.get(0)?,
            at_unix_ns: r.get::<_, i64>(1)? as u64,
            until_unix_ns: r.get::<_, Option<i64>>(2)?.map(|u| u as u64),
        })
    })?;
    rows.collect()
}

/// A record found by [`scan_range`], in its output order: time, then
/// boot and seq (ties broken the same way on every run).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Found {
    unix_ns: u64,
    boot: i64,
    seq: u64,
    raw: Vec<u8>,
}

impl Timed for Found {
    fn unix_ns(&self) -> u64 {
        self.unix_ns
    }
}

/// Calls `f` with (node, boot_id, seq, unix_ns, encoded record) of every
/// outage record before `from` (an outage that began before the range may
/// still be open in it; the report clips), node by node, then of every
/// record with `from <= unix_ns < to` in time order. Both scans follow an
/// index of integers ((kind, time), then time), and resolve boot ids from
/// a map read once instead of joining per row, so a soak costs its own
/// records, not the whole store's. Streams: a 72-hour soak never sits in
/// memory (packed rows are held back about a minute to keep time order:
/// [`super::ordered`]).
pub fn scan_range(
    conn: &Connection,
    from_ns: u64,
    to_ns: u64,
    mut f: impl FnMut(&str, &str, u64, u64, &[u8]),
) -> rusqlite::Result<()> {
    let boots = layout::boot_names(conn)?;
    // Every record of the rows of `stmt` (selecting `boot` then the packed
    // columns, by time) that `keep` accepts, in order, to `visit`.
    let scan = |stmt: &mut rusqlite::Statement<'_>,
                args: &[&dyn rusqlite::ToSql],
                keep: &dyn Fn(u64) -> bool,
                visit: &mut dyn FnMut(Found)|
     -> rusqlite::Result<()> {
        let expand = |r: &rusqlite::Row<'_>, held: &mut Ordered<Found>| {
            let boot: i64 = r.get(0)?;
            let Some((_, _, head)) = boots.get(&boot) else {
                return Ok(()); // Written after the map was read.
            };
            layout::each_whole(&layout::packed_row(r, 1)?, head, |i, raw| {
                if keep(i.unix_ns) {
                    held.push(Found {
                        unix_ns: i.unix_ns,
                        boot,
                        seq: i.seq,
                        raw,
                    });
                }
            });
            Ok(())
        };
        layout::in_time_order(stmt.query(args)?, 3, expand, |x| {
            visit(x);
            true
        })
    };
    let mut call = |x: Found| {
        if let Some((node, boot_id, _)) = boots.get(&x.boot) {
            f(node, boot_id, x.seq, x.unix_ns, &x.raw);
        }
    };
    let outage: Option<i64> = conn
        .query_row("SELECT id FROM kinds WHERE name = 'outage'", [], |r| {
            r.get(0)
        })
        .optional()?;
    if let Some(kind) = outage {
        let mut earlier = conn.prepare(
            // `kind >= 3` as in the partial index (outage is a sparse kind).
            "SELECT boot, pos, seq, unix_ns, whole, n, body FROM stored
             WHERE kind = ?1 AND kind >= 3 AND unix_ns < ?2 ORDER BY unix_ns",
        )?;
        // Few rows; grouped by node (in name order) as the report expects.
        let mut found: Vec<Found> = Vec::new();
        scan(
            &mut earlier,
            &[&kind, &(from_ns as i64)],
            &|t| t < from_ns,
            &mut |x| found.push(x),
        )?;
        let node = |x: &Found| boots.get(&x.boot).map(|b| b.0.as_str());
        found.sort_by(|a, b| node(a).cmp(&node(b)));
        found.into_iter().for_each(&mut call);
    }
    // A packed row starts at its earliest record and ends within that
    // minute: rows from the first minute of the range hold every record.
    let mut range = conn.prepare(
        "SELECT boot, pos, seq, unix_ns, whole, n, body FROM stored
         WHERE unix_ns >= ?1 AND unix_ns < ?2 ORDER BY unix_ns",
    )?;
    scan(
        &mut range,
        &[&(minute_of(from_ns) as i64), &(to_ns as i64)],
        &|t| from_ns <= t && t < to_ns,
        &mut call,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soak(name: &str) -> Soak {
        Soak {
            name: name.into(),
            start_unix_ns: 100,
            end_unix_ns: None,
            nodes: vec!["a".into(), "b".into()],
            slo: Slo::default(),
            labels: [("team".to_string(), "ops".to_string())].into(),
        }
    }

    #[test]
    fn soaks_persist_with_marks_and_stop_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boltwatch.db");
        let c = open_writer(&path).unwrap();
        create(&c, &soak("s1"), 1).unwrap();
        assert!(matches!(
            create(&c, &soak("s1"), 1),
            Err(SoakError::Exists(_))
        ));
        assert!(matches!(get(&c, "nope"), Err(SoakError::NotFound(_))));
        add_mark(
            &c,
            "s1",
            &Mark {
                text: "xcode build".into(),
                at_unix_ns: 150,
                until_unix_ns: Some(160),
            },
        )
        .unwrap();
        assert!(add_mark(
            &c,
            "s1",
            &Mark {
                text: "bad".into(),
                at_unix_ns: 150,
                until_unix_ns: Some(10)
            }
        )
        .is_err());
        assert!(matches!(stop(&c, "s1", 50), Err(SoakError::Invalid(_))));
        assert_eq!(stop(&c, "s1", 200).unwrap().end_unix_ns, Some(200));
        assert_eq!(stop(&c, "s1", 300).unwrap().end_unix_ns, Some(200));
        drop(c);
        // A reopened store (a restarted collector) has them.
        let c = open_writer(&path).unwrap();
        let all = list(&c).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].nodes, ["a", "b"]);
        assert_eq!(all[0].labels["team"], "ops");
        assert_eq!(marks(&c, "s1").unwrap()[0].text, "xcode build");
    }

    #[test]
    fn range_scan_adds_earlier_outage_records_only() {
        let dir = tempfile::tempdir().unwrap();
        let c = open_writer(&dir.path().join("boltwatch.db")).unwrap();
        for (seq, t, kind) in [
            (1, 5, "outage"),
            (2, 6, "rtt"),
            (3, 15, "rtt"),
            (4, 16, "outage"),
            (5, 25, "rtt"),
        ] {
            let r = crate::store::NewRecord {
                node: "a".into(),
                boot_id: "b".into(),
                seq,
                unix_ns: t,
                kind,
                raw: vec![seq as u8],
            };
            crate::store::queries::insert_record(&c, &r).unwrap();
        }
        crate::store::queries::add_boot_records(&c, "a", "b", 1, 5, 5).unwrap();
        let mut got = Vec::new();
        scan_range(&c, 10, 20, |_, _, seq, _, _| got.push(seq)).unwrap();
        assert_eq!(got, [1, 3, 4]);
    }
}
