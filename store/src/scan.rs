//! The one record scan a report makes over a time range: every raw
//! record in time order, then every per-minute rollup that replaced raw
//! records under retention, behind one type ([`Scanned`]), so the report
//! reads both without knowing how either is kept.

use boltwatch_proto::v1::RttSummary;
use rusqlite::{Connection, OptionalExtension};

use crate::layout;
use crate::ordered::{Ordered, Timed};
use crate::rollup::{minute_of, Rollup, RttMinute};

pub use crate::rollup::Window;

/// What [`scan`] hands over.
pub enum Scanned<'a> {
    /// A raw record, encoded as the agent sent it.
    Record {
        /// Node.
        node: &'a str,
        /// Agent boot.
        boot_id: &'a str,
        /// Sequence number.
        seq: u64,
        /// Record time.
        unix_ns: u64,
        /// The encoded `Record`.
        raw: &'a [u8],
    },
    /// One boot's minute of dense records (RTT summaries or counters)
    /// that raw retention replaced by a rollup.
    Minute(Minute<'a>),
}

/// One boot's rolled-up minute, read as the records it replaced.
pub struct Minute<'a> {
    /// Node.
    pub node: &'a str,
    /// Agent boot.
    pub boot_id: &'a str,
    /// Start of the minute.
    pub minute: u64,
    rollup: &'a Rollup,
}

/// One (peer, interface) of a rolled-up minute: the windows merged at
/// rest and under load, with how many windows each merged, and each
/// window's own figures.
pub struct MinuteLink<'a> {
    m: &'a RttMinute,
    minute: u64,
}

impl<'a> Minute<'a> {
    /// Records it replaced.
    pub fn records(&self) -> u64 {
        self.rollup.records
    }

    /// The lowest and highest sequence numbers it replaced.
    pub fn seq_bounds(&self) -> Option<(u64, u64)> {
        self.rollup.seq_bounds()
    }

    /// Its counters: the minute's newest `InterfaceCounters` record, whole
    /// (encoded), and its time; None for an RTT minute.
    pub fn counters(&self) -> Option<(u64, &'a [u8])> {
        let r = self.rollup;
        (!r.last_record.is_empty()).then_some((r.last_unix_ns, r.last_record.as_slice()))
    }

    /// Its RTT, per (peer, interface).
    pub fn links(&self) -> impl Iterator<Item = MinuteLink<'a>> + 'a {
        let minute = self.minute;
        self.rollup
            .rtt
            .iter()
            .map(move |m| MinuteLink { m, minute })
    }
}

impl<'a> MinuteLink<'a> {
    /// Peer node.
    pub fn peer(&self) -> &'a str {
        &self.m.peer
    }

    /// The windows at rest merged, and how many.
    pub fn rest(&self) -> Option<(&'a RttSummary, u64)> {
        self.m.rest.as_ref().map(|s| (s, self.m.rest_windows))
    }

    /// The windows under load merged, and how many.
    pub fn load(&self) -> Option<(&'a RttSummary, u64)> {
        self.m.load.as_ref().map(|s| (s, self.m.load_windows))
    }

    /// Each window, with its absolute start.
    pub fn windows(&self) -> impl Iterator<Item = Window> + 'a {
        self.m.windows(self.minute)
    }
}

/// Calls `f` with every outage record before `from_ns` (an outage that
/// began before the range may still be open in it; the report clips) and
/// every record with `from_ns <= unix_ns < to_ns`, in time order (see
/// [`raw_range`]), then every rollup whose minute starts in the range,
/// oldest first. A rollup belongs to the range when its minute starts in
/// it, so a range that does not start and end on a minute reads its first
/// and last minutes whole.
pub fn scan(
    conn: &Connection,
    from_ns: u64,
    to_ns: u64,
    mut f: impl FnMut(Scanned<'_>),
) -> rusqlite::Result<()> {
    raw_range(conn, from_ns, to_ns, |node, boot_id, seq, unix_ns, raw| {
        f(Scanned::Record {
            node,
            boot_id,
            seq,
            unix_ns,
            raw,
        })
    })?;
    crate::retention::scan(conn, from_ns, to_ns, |s| {
        f(Scanned::Minute(Minute {
            node: s.node,
            boot_id: s.boot_id,
            minute: s.minute,
            rollup: &s.rollup,
        }))
    })
}

/// A record found by [`raw_range`], in its output order: time, then
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
/// [`crate::ordered`]).
fn raw_range(
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

    #[test]
    fn range_scan_adds_earlier_outage_records_only() {
        let c = crate::schema::memory();
        for (seq, t, kind) in [
            (1, 5, "outage"),
            (2, 6, "rtt"),
            (3, 15, "rtt"),
            (4, 16, "outage"),
            (5, 25, "rtt"),
        ] {
            let r = crate::NewRecord {
                node: "a".into(),
                boot_id: "b".into(),
                seq,
                unix_ns: t,
                kind,
                raw: vec![seq as u8],
            };
            crate::queries::insert_record(&c, &r).unwrap();
        }
        crate::queries::add_boot_records(&c, "a", "b", 1, 5, 5).unwrap();
        let mut got = Vec::new();
        scan(&c, 10, 20, |s| match s {
            Scanned::Record { seq, .. } => got.push(seq),
            Scanned::Minute(_) => panic!("no rollups here"),
        })
        .unwrap();
        assert_eq!(got, [1, 3, 4]);
    }
}
