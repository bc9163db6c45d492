//! Soak runs and their workload marks as rows (migration 2): the store
//! keeps them, the soak domain (the collector's `soak`) owns their rules
//! (names, ranges, mark text, what "stop" means). The SLO is kept as the
//! text the domain gives (JSON), never read here.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

/// One stored soak run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoakRow {
    /// Unique name (the primary key).
    pub name: String,
    /// Start, unix ns.
    pub start_unix_ns: u64,
    /// End, unix ns; `None` while it runs.
    pub end_unix_ns: Option<u64>,
    /// The nodes it covers.
    pub nodes: Vec<String>,
    /// Its SLO as the soak domain encoded it.
    pub slo: String,
    /// Free-form labels.
    pub labels: BTreeMap<String, String>,
}

/// One stored workload mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkRow {
    /// Free text.
    pub text: String,
    /// When it started, unix ns.
    pub at_unix_ns: u64,
    /// When it ended, if it spans time.
    pub until_unix_ns: Option<u64>,
}

/// What the stored soaks and marks take, for the soak domain's budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoakUsage {
    /// Soaks stored.
    pub soaks: u64,
    /// Soaks not ended at the time asked about (running or to start).
    pub open: u64,
    /// Bytes of their rows and their marks' rows (text as stored, plus a
    /// row's fixed columns).
    pub bytes: u64,
    /// Free bytes on the store's file system (`None`: an in-memory store).
    pub free_bytes: Option<u64>,
}

/// Fixed columns of a soak or mark row, in bytes (times, ids).
const ROW_OVERHEAD: u64 = 32;

impl SoakRow {
    /// The bytes this row takes as [`usage`] counts them.
    pub fn stored_bytes(&self) -> u64 {
        let text = [
            &self.name,
            &to_json(&self.nodes),
            &self.slo,
            &to_json(&self.labels),
        ];
        text.iter().map(|t| t.len() as u64).sum::<u64>() + ROW_OVERHEAD
    }
}

impl MarkRow {
    /// The bytes this row takes as a mark of `soak`, as [`usage`] counts
    /// them.
    pub fn stored_bytes(&self, soak: &str) -> u64 {
        (soak.len() + self.text.len()) as u64 + ROW_OVERHEAD
    }
}

/// Counts the soaks (open at `now_ns`) and the bytes they and their marks
/// take (text in bytes, as [`SoakRow::stored_bytes`] and
/// [`MarkRow::stored_bytes`] count one row); `free_bytes` is left to the
/// caller.
pub fn usage(conn: &Connection, now_ns: u64) -> rusqlite::Result<SoakUsage> {
    let (soaks, open, bytes): (i64, i64, i64) = conn.query_row(
        "SELECT count(*),
                coalesce(sum(end_unix_ns IS NULL OR end_unix_ns > ?1), 0),
                coalesce(sum(length(CAST(name AS BLOB)) + length(CAST(nodes AS BLOB))
                    + length(CAST(slo AS BLOB)) + length(CAST(labels AS BLOB)) + ?2), 0)
         FROM soaks",
        params![now_ns as i64, ROW_OVERHEAD as i64],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let marks: i64 = conn.query_row(
        "SELECT coalesce(sum(length(CAST(soak AS BLOB)) + length(CAST(text AS BLOB)) + ?1), 0)
         FROM soak_marks",
        [ROW_OVERHEAD as i64],
        |r| r.get(0),
    )?;
    Ok(SoakUsage {
        soaks: soaks as u64,
        open: open as u64,
        bytes: (bytes + marks) as u64,
        free_bytes: None,
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data serializes")
}

fn from_json<T: serde::de::DeserializeOwned>(col: usize, text: &str) -> rusqlite::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Inserts a soak; false when the name is taken.
pub fn insert(conn: &Connection, s: &SoakRow, now_ns: u64) -> rusqlite::Result<bool> {
    let n = conn.execute(
        "INSERT OR IGNORE INTO soaks (name, start_unix_ns, end_unix_ns, nodes, slo, labels, created_unix_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            s.name,
            s.start_unix_ns as i64,
            s.end_unix_ns.map(|e| e as i64),
            to_json(&s.nodes),
            s.slo,
            to_json(&s.labels),
            now_ns as i64
        ],
    )?;
    Ok(n > 0)
}

/// Sets a soak's end.
pub fn set_end(conn: &Connection, name: &str, end_ns: u64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE soaks SET end_unix_ns = ?2 WHERE name = ?1",
        params![name, end_ns as i64],
    )?;
    Ok(())
}

/// Deletes a soak and its marks; false when there was none.
pub fn delete(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.execute("DELETE FROM soak_marks WHERE soak = ?1", [name])?;
    Ok(conn.execute("DELETE FROM soaks WHERE name = ?1", [name])? > 0)
}

fn soak_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SoakRow> {
    Ok(SoakRow {
        name: r.get(0)?,
        start_unix_ns: r.get::<_, i64>(1)? as u64,
        end_unix_ns: r.get::<_, Option<i64>>(2)?.map(|e| e as u64),
        nodes: from_json(3, &r.get::<_, String>(3)?)?,
        slo: r.get(4)?,
        labels: from_json(5, &r.get::<_, String>(5)?)?,
    })
}

const COLUMNS: &str = "name, start_unix_ns, end_unix_ns, nodes, slo, labels";

/// One soak, if stored.
pub fn get(conn: &Connection, name: &str) -> rusqlite::Result<Option<SoakRow>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM soaks WHERE name = ?1"),
        [name],
        soak_row,
    )
    .optional()
}

/// Every soak, newest start first.
pub fn list(conn: &Connection) -> rusqlite::Result<Vec<SoakRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM soaks ORDER BY start_unix_ns DESC, name"
    ))?;
    let rows = stmt.query_map([], soak_row)?;
    rows.collect()
}

/// Adds a mark to a soak.
pub fn insert_mark(conn: &Connection, soak: &str, m: &MarkRow) -> rusqlite::Result<()> {
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

/// How many marks a soak has.
pub fn mark_count(conn: &Connection, soak: &str) -> rusqlite::Result<u64> {
    conn.prepare_cached("SELECT count(*) FROM soak_marks WHERE soak = ?1")?
        .query_row([soak], |r| r.get::<_, i64>(0))
        .map(|n| n as u64)
}

/// A soak's marks, oldest first.
pub fn marks(conn: &Connection, soak: &str) -> rusqlite::Result<Vec<MarkRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT text, at_unix_ns, until_unix_ns FROM soak_marks
         WHERE soak = ?1 ORDER BY at_unix_ns, id",
    )?;
    let rows = stmt.query_map([soak], |r| {
        Ok(MarkRow {
            text: r.get(0)?,
            at_unix_ns: r.get::<_, i64>(1)? as u64,
            until_unix_ns: r.get::<_, Option<i64>>(2)?.map(|u| u as u64),
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soak(name: &str) -> SoakRow {
        SoakRow {
            name: name.into(),
            start_unix_ns: 100,
            end_unix_ns: None,
            nodes: vec!["a".into(), "b".into()],
            slo: "{}".into(),
            labels: [("team".to_string(), "ops".to_string())].into(),
        }
    }

    #[test]
    fn soaks_persist_with_marks_and_delete_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boltwatch.db");
        let db = crate::Db::open_writer(&path).unwrap();
        let c = db.conn();
        assert!(insert(c, &soak("s1"), 1).unwrap());
        assert!(!insert(c, &soak("s1"), 1).unwrap());
        assert_eq!(get(c, "nope").unwrap(), None);
        let m = MarkRow {
            text: "xcode build".into(),
            at_unix_ns: 150,
            until_unix_ns: Some(160),
        };
        insert_mark(c, "s1", &m).unwrap();
        set_end(c, "s1", 200).unwrap();
        drop(db);
        // A reopened store (a restarted collector) has them.
        let db = crate::Db::open_writer(&path).unwrap();
        let c = db.conn();
        let all = list(c).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].nodes, ["a", "b"]);
        assert_eq!(all[0].labels["team"], "ops");
        assert_eq!(all[0].end_unix_ns, Some(200));
        assert_eq!(marks(c, "s1").unwrap(), [m]);
        assert_eq!(mark_count(c, "s1").unwrap(), 1);
        assert!(delete(c, "s1").unwrap());
        assert!(!delete(c, "s1").unwrap());
        assert!(list(c).unwrap().is_empty() && marks(c, "s1").unwrap().is_empty());
    }

    #[test]
    fn usage_counts_each_row_as_its_stored_bytes_say() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open_writer(&dir.path().join("boltwatch.db")).unwrap();
        let c = db.conn();
        let mut s = soak("grüße");
        s.labels.insert("ort".into(), "zürich".into());
        insert(c, &s, 1).unwrap();
        let m = MarkRow {
            text: "café build".into(),
            at_unix_ns: 150,
            until_unix_ns: None,
        };
        insert_mark(c, "grüße", &m).unwrap();
        let u = usage(c, 120).unwrap();
        assert_eq!((u.soaks, u.open), (1, 1));
        // Bytes, not characters: the domain's budget adds a row's
        // `stored_bytes` to this sum.
        assert_eq!(u.bytes, s.stored_bytes() + m.stored_bytes("grüße"));
    }
}
