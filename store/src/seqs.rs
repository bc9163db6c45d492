//! Which sequence numbers each boot has stored, as runs of consecutive
//! numbers (schema version 7): the duplicate check.
//!
//! Before packed rows, a unique (boot, seq) index on `stored` said whether
//! a record was new. A packed row holds many sequence numbers, so the
//! index would see only its first. `seq_runs` keeps, per boot, maximal
//! runs `lo..=hi` of stored sequence numbers: an agent streaming live
//! numbers its records without holes, so a boot is one run (plus one per
//! hole a spool overflow left) and the check is one index seek. A record
//! raw retention replaced with a rollup stays in its run, so a replay of
//! it is a duplicate exactly as before it was pruned.

use rusqlite::{params, Connection, OptionalExtension};

/// The table (created by migration 7).
pub(super) const TABLE: &str = "
    CREATE TABLE seq_runs (
        boot INTEGER NOT NULL,
        lo   INTEGER NOT NULL,
        hi   INTEGER NOT NULL,
        PRIMARY KEY (boot, lo)
    ) WITHOUT ROWID;";

/// The run of `boot` that starts at or below `seq`, nearest first.
fn run_at_or_below(conn: &Connection, boot: i64, seq: u64) -> rusqlite::Result<Option<(u64, u64)>> {
    conn.prepare_cached(
        "SELECT lo, hi FROM seq_runs WHERE boot = ?1 AND lo <= ?2 ORDER BY lo DESC LIMIT 1",
    )?
    .query_row(params![boot, seq as i64], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })
    .optional()
}

/// The highest sequence number stored for `boot` (0 when none).
pub fn highest(conn: &Connection, boot: i64) -> rusqlite::Result<u64> {
    Ok(run_at_or_below(conn, boot, i64::MAX as u64)?.map_or(0, |(_, hi)| hi))
}

/// Whether `boot`'s record `seq` is stored (or was, before a rollup
/// replaced it).
pub fn contains(conn: &Connection, boot: i64, seq: u64) -> rusqlite::Result<bool> {
    Ok(run_at_or_below(conn, boot, seq)?.is_some_and(|(_, hi)| hi >= seq))
}

/// Records `lo..=hi` of `boot` as stored (none of them was), joining the
/// runs it touches.
pub fn add(conn: &Connection, boot: i64, lo: u64, hi: u64) -> rusqlite::Result<()> {
    debug_assert!(lo <= hi);
    let below = match lo.checked_sub(1) {
        Some(prev) => run_at_or_below(conn, boot, prev)?.filter(|&(_, h)| h == prev),
        None => None,
    };
    let above: Option<u64> = conn
        .prepare_cached("SELECT hi FROM seq_runs WHERE boot = ?1 AND lo = ?2")?
        .query_row(params![boot, hi as i64 + 1], |r| {
            r.get::<_, i64>(0).map(|h| h as u64)
        })
        .optional()?;
    if above.is_some() {
        conn.prepare_cached("DELETE FROM seq_runs WHERE boot = ?1 AND lo = ?2")?
            .execute(params![boot, hi as i64 + 1])?;
    }
    let hi = above.unwrap_or(hi);
    match below {
        Some((start, _)) => conn
            .prepare_cached("UPDATE seq_runs SET hi = ?3 WHERE boot = ?1 AND lo = ?2")?
            .execute(params![boot, start as i64, hi as i64])?,
        None => conn
            .prepare_cached("INSERT INTO seq_runs (boot, lo, hi) VALUES (?1, ?2, ?3)")?
            .execute(params![boot, lo as i64, hi as i64])?,
    };
    Ok(())
}

/// Runs of consecutive numbers in `seqs` (ascending, no repeats).
pub fn runs(seqs: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for s in seqs {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == s => *hi = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// One boot's new sequence numbers of a batch, in ascending order, kept as
/// the run being extended: written when a number does not continue it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pending(Option<(u64, u64)>);

impl Pending {
    /// Adds `seq` (above every number added before); writes the run it
    /// ends, if any.
    pub fn push(&mut self, conn: &Connection, boot: i64, seq: u64) -> rusqlite::Result<()> {
        match &mut self.0 {
            Some((_, hi)) if *hi + 1 == seq => *hi = seq,
            _ => {
                self.flush(conn, boot)?;
                self.0 = Some((seq, seq));
            }
        }
        Ok(())
    }

    /// Writes the run being extended.
    pub fn flush(&mut self, conn: &Connection, boot: i64) -> rusqlite::Result<()> {
        if let Some((lo, hi)) = self.0.take() {
            add(conn, boot, lo, hi)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(c: &Connection) -> Vec<(i64, u64, u64)> {
        let mut s = c
            .prepare("SELECT boot, lo, hi FROM seq_runs ORDER BY boot, lo")
            .unwrap();
        let rows = s
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get::<_, i64>(1)? as u64,
                    r.get::<_, i64>(2)? as u64,
                ))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    }

    #[test]
    fn runs_join_and_answer_membership() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(TABLE).unwrap();
        assert_eq!(highest(&c, 1).unwrap(), 0);
        add(&c, 1, 1, 5).unwrap();
        add(&c, 1, 10, 12).unwrap();
        add(&c, 2, 3, 3).unwrap();
        assert_eq!(all(&c), [(1, 1, 5), (1, 10, 12), (2, 3, 3)]);
        // Filling the hole joins the three into one.
        add(&c, 1, 6, 9).unwrap();
        assert_eq!(all(&c), [(1, 1, 12), (2, 3, 3)]);
        // Touching from below and from above.
        add(&c, 2, 2, 2).unwrap();
        add(&c, 2, 4, 4).unwrap();
        add(&c, 2, 0, 0).unwrap();
        assert_eq!(all(&c), [(1, 1, 12), (2, 0, 0), (2, 2, 4)]);
        let cases = [
            (1, 0, false),
            (1, 1, true),
            (1, 12, true),
            (1, 13, false),
            (2, 0, true),
            (2, 1, false),
            (3, 1, false),
        ];
        for (boot, seq, want) in cases {
            assert_eq!(contains(&c, boot, seq).unwrap(), want, "{boot}/{seq}");
        }
        assert_eq!(highest(&c, 1).unwrap(), 12);
        assert_eq!(highest(&c, 2).unwrap(), 4);
    }

    #[test]
    fn pending_writes_one_row_per_stretch() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(TABLE).unwrap();
        let mut p = Pending::default();
        for s in [1, 2, 3, 7, 8, 20] {
            p.push(&c, 1, s).unwrap();
        }
        assert_eq!(all(&c), [(1, 1, 3), (1, 7, 8)]);
        p.flush(&c, 1).unwrap();
        assert_eq!(all(&c), [(1, 1, 3), (1, 7, 8), (1, 20, 20)]);
        assert_eq!(runs([1, 2, 4, 5, 6, 9]), [(1, 2), (4, 6), (9, 9)]);
        assert!(runs([]).is_empty());
    }
}
