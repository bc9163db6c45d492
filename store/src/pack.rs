//! Packed rows (schema version 7): one `stored` row holds a run of records
//! of one boot and one kind within one minute, so a batch of thousands of
//! records is a few dozen rows, not thousands. SQLite's cost is per row
//! (a b-tree insert per index, a WAL frame per touched page): packing is
//! what lets a 2-core machine ingest a million records per CPU-second.
//!
//! A row with `n = 1` is one record exactly as in version 5 (its `seq`,
//! `unix_ns`, `whole` and `body` columns are the record's). A row with
//! `n > 1` is a pack: `seq` is its first record's, `unix_ns` its earliest
//! record's, `whole` is 0 (only records that start with their boot's head
//! are packed) and `body` is a Snappy block (raw format, the `snap` crate
//! remote write already uses) of, per record in sequence order:
//!
//! ```text
//! varint(seq - previous seq)       (the first: 0, it is the row's seq)
//! varint(unix_ns - row unix_ns)
//! varint(length) body-bytes        (the record after the boot's head)
//! ```
//!
//! Snappy halves a pack (the records of one link repeat their peer,
//! interface and field tags) for about 0.1 us of CPU per record, which
//! the commit more than wins back: the WAL and its checkpoint write
//! each byte twice.
//!
//! The row's `pos` (rowid) is the position of its *last* record; its
//! records hold positions `pos - n + 1 ..= pos`, so positions stay dense
//! integers in store order and a remote_write position written before
//! version 7 still names the same record.
//!
//! Every record of a pack lies in the minute of the row's `unix_ns`, so a
//! time range's rows are found by the time index from the start of the
//! range's first minute, and raw-record retention (which works in whole
//! minutes) deletes whole rows.

use prost::encoding::{decode_varint, encode_varint};

use super::canon::Body;

/// Records in one pack at most: bounds the memory a reader holds per row
/// and what one row costs to rewrite.
pub const MAX_RECORDS: usize = 1024;

/// Bytes of record bodies in one pack at most (SQLite keeps a large blob
/// in overflow pages, read whole). A record that does not fit joins no
/// pack: it is stored as a row of its own.
pub const MAX_BYTES: usize = 256 * 1024;

/// The largest record the collector accepts at all (the top of its
/// `max_record_bytes`). Packs written before the byte bound was kept
/// strictly could exceed [`MAX_BYTES`] by one record, so readers allow it.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// One record of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// Its position in store order.
    pub pos: i64,
    /// Sequence number.
    pub seq: u64,
    /// Agent time.
    pub unix_ns: u64,
    /// Whether `body` is the whole encoded record (else it follows the
    /// boot's head).
    pub whole: bool,
    /// The stored bytes.
    pub body: &'a [u8],
}

/// A stored row's columns, as read.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// `stored.pos`: the last record's position.
    pub pos: i64,
    /// First (or only) seq.
    pub seq: u64,
    /// Earliest (or only) time.
    pub unix_ns: u64,
    /// Whether a single record's body is whole.
    pub whole: bool,
    /// Records in the row.
    pub n: u64,
    /// The record, or the pack.
    pub body: &'a [u8],
}

/// A pack's body that does not parse: framing cut short or past its
/// record count. Never written by this build; seen on a damaged file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("packed row at position {pos} is damaged after {read} of its {n} records")]
pub struct Damaged {
    /// The row's position.
    pub pos: i64,
    /// Records read before the damage.
    pub read: u64,
    /// Records the row says it has.
    pub n: u64,
}

/// Whether a pack holding `records` records of `bytes` bytes of bodies
/// takes one more of `len` bytes: at most [`MAX_RECORDS`] records, and
/// [`MAX_BYTES`] bytes unless it is the pack's first record.
pub fn fits(records: usize, bytes: usize, len: usize) -> bool {
    records == 0 || (records < MAX_RECORDS && bytes + len <= MAX_BYTES)
}

/// The records of `row`, in order, handed to `each`. On a damaged pack the
/// records before the damage have been handed over and the error says
/// where it stopped.
pub fn each(row: &Row<'_>, mut each: impl FnMut(Item<'_>)) -> Result<(), Damaged> {
    if row.n <= 1 {
        each(Item {
            pos: row.pos,
            seq: row.seq,
            unix_ns: row.unix_ns,
            whole: row.whole,
            body: row.body,
        });
        return Ok(());
    }
    let unpacked = unpack(row)?;
    let mut buf = unpacked.as_slice();
    let mut seq = row.seq;
    let first_pos = row.pos - (row.n as i64 - 1);
    for i in 0..row.n {
        let damaged = Damaged {
            pos: row.pos,
            read: i,
            n: row.n,
        };
        let mut field = || decode_varint(&mut buf).map_err(|_| damaged);
        let dseq = field()?;
        let dt = field()?;
        let len = field()?;
        let len = usize::try_from(len).map_err(|_| damaged)?;
        if len > buf.len() {
            return Err(damaged);
        }
        let (body, rest) = buf.split_at(len);
        buf = rest;
        seq = seq.checked_add(dseq).ok_or(damaged)?;
        each(Item {
            pos: first_pos + i as i64,
            seq,
            unix_ns: row.unix_ns.checked_add(dt).ok_or(damaged)?,
            whole: false,
            body,
        });
    }
    if buf.is_empty() {
        Ok(())
    } else {
        Err(Damaged {
            pos: row.pos,
            read: row.n,
            n: row.n,
        })
    }
}

/// A pack's frames, out of their Snappy block. The block's stated length
/// is checked against what the row can hold before anything is allocated,
/// so a damaged length cannot ask for gigabytes.
fn unpack(row: &Row<'_>) -> Result<Vec<u8>, Damaged> {
    let damaged = Damaged {
        pos: row.pos,
        read: 0,
        n: row.n,
    };
    let len = snap::raw::decompress_len(row.body).map_err(|_| damaged)?;
    if len > MAX_BYTES + MAX_RECORD_BYTES + row.n as usize * FRAME_OVERHEAD {
        return Err(damaged);
    }
    snap::raw::Decoder::new()
        .decompress_vec(row.body)
        .map_err(|_| damaged)
}

/// A frame's bytes besides its record: three varints of at most 10 bytes.
pub const FRAME_OVERHEAD: usize = 30;

/// One record going into a pack: its seq, time and bytes after the head.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// Sequence number; strictly increasing within a pack.
    pub seq: u64,
    /// Agent time.
    pub unix_ns: u64,
    /// The record after its boot's head.
    pub body: Body<'a>,
}

/// A pack's columns from its entries (at least two, seqs strictly
/// increasing): `(seq, unix_ns, body)`.
pub fn encode(entries: &[Entry<'_>]) -> (u64, u64, Vec<u8>) {
    debug_assert!(entries.len() >= 2);
    debug_assert!(entries.windows(2).all(|w| w[0].seq < w[1].seq));
    let first = entries[0].seq;
    let min_t = entries.iter().map(|e| e.unix_ns).min().unwrap_or(0);
    let size: usize = entries.iter().map(|e| e.body.len() + 12).sum();
    let mut out = Vec::with_capacity(size);
    let mut prev = first;
    for e in entries {
        encode_varint(e.seq - prev, &mut out);
        encode_varint(e.unix_ns - min_t, &mut out);
        encode_varint(e.body.len() as u64, &mut out);
        e.body.write_to(&mut out);
        prev = e.seq;
    }
    let block = snap::raw::Encoder::new()
        .compress_vec(&out)
        .expect("a pack is far below Snappy's 4 GiB limit");
    (first, min_t, block)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pos, seq, unix_ns, body) of each record read, and how it ended.
    type Read = (Vec<(i64, u64, u64, Vec<u8>)>, Result<(), Damaged>);

    fn items(row: &Row<'_>) -> Read {
        let mut got = Vec::new();
        let r = each(row, |i| {
            got.push((i.pos, i.seq, i.unix_ns, i.body.to_vec()))
        });
        (got, r)
    }

    #[test]
    fn a_pack_reads_back_its_records_at_their_positions() {
        let bodies: Vec<Vec<u8>> = vec![vec![1, 2, 3], vec![], vec![9; 300]];
        let entries = [
            Entry {
                seq: 10,
                unix_ns: 5_000,
                body: Body::one(&bodies[0]),
            },
            Entry {
                seq: 11,
                unix_ns: 4_000,
                body: Body::one(&bodies[1]),
            },
            Entry {
                seq: 400,
                unix_ns: 59_000,
                body: Body::one(&bodies[2]),
            },
        ];
        let (seq, t, body) = encode(&entries);
        assert_eq!((seq, t), (10, 4_000));
        let row = Row {
            pos: 42,
            seq,
            unix_ns: t,
            whole: false,
            n: 3,
            body: &body,
        };
        let (got, r) = items(&row);
        assert_eq!(r, Ok(()));
        assert_eq!(
            got,
            [
                (40, 10, 5_000, bodies[0].clone()),
                (41, 11, 4_000, bodies[1].clone()),
                (42, 400, 59_000, bodies[2].clone()),
            ]
        );
    }

    #[test]
    fn a_single_row_is_its_record() {
        let row = Row {
            pos: 7,
            seq: 3,
            unix_ns: 9,
            whole: true,
            n: 1,
            body: &[1, 2],
        };
        let mut got = Vec::new();
        each(&row, |i| {
            got.push((i.pos, i.seq, i.unix_ns, i.whole, i.body.to_vec()))
        })
        .unwrap();
        assert_eq!(got, [(7, 3, 9, true, vec![1, 2])]);
    }

    #[test]
    fn damage_stops_the_row_after_the_good_records() {
        let b = [7u8; 4];
        let frames = |n: usize| -> Vec<u8> {
            let mut f = Vec::new();
            for i in 0..n {
                encode_varint(u64::from(i > 0), &mut f);
                encode_varint(0, &mut f);
                encode_varint(b.len() as u64, &mut f);
                f.extend_from_slice(&b);
            }
            f
        };
        let block = |f: &[u8]| snap::raw::Encoder::new().compress_vec(f).unwrap();
        let read = |n, body: Vec<u8>| {
            items(&Row {
                pos: 2,
                seq: 1,
                unix_ns: 1,
                whole: false,
                n,
                body: &body,
            })
        };
        let two = frames(2);
        assert_eq!(read(2, block(&two)).1, Ok(()));
        // Cut inside the second record's bytes.
        let (got, r) = read(2, block(&two[..two.len() - 1]));
        assert_eq!(got.len(), 1);
        assert_eq!(
            r,
            Err(Damaged {
                pos: 2,
                read: 1,
                n: 2
            })
        );
        // More records claimed than stored, and bytes left over.
        assert_eq!(read(3, block(&two)).1.unwrap_err().read, 2);
        let mut longer = two.clone();
        longer.push(0);
        assert_eq!(read(2, block(&longer)).1.unwrap_err().read, 2);
        // A length beyond the row.
        let (_, r) = read(2, block(&[0, 0, 0xff, 0xff, 0x03]));
        assert_eq!(r.unwrap_err().read, 0);
        // Not a Snappy block, and one that claims more than a row holds.
        assert_eq!(read(2, two.clone()).1.unwrap_err().read, 0);
        let mut huge = Vec::new();
        encode_varint(1 << 30, &mut huge);
        assert_eq!(read(2, huge).1.unwrap_err().read, 0);
    }

    #[test]
    fn a_pack_takes_a_record_only_within_its_bounds() {
        assert!(fits(0, 0, MAX_RECORD_BYTES));
        assert!(fits(1, 100, MAX_BYTES - 100));
        assert!(!fits(1, 100, MAX_BYTES - 99));
        assert!(!fits(MAX_RECORDS, 0, 0));
    }

    /// Packs an earlier writer let grow past [`MAX_BYTES`] by their last
    /// record still read back.
    #[test]
    fn an_oversize_pack_of_an_earlier_writer_reads_back() {
        let bodies = [vec![1u8; 200 << 10], vec![2u8; 200 << 10]];
        let entries: Vec<Entry<'_>> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| Entry {
                seq: i as u64 + 1,
                unix_ns: 5,
                body: Body::one(b),
            })
            .collect();
        let (seq, unix_ns, body) = encode(&entries);
        let row = Row {
            pos: 2,
            seq,
            unix_ns,
            whole: false,
            n: 2,
            body: &body,
        };
        let (got, done) = items(&row);
        assert_eq!(done, Ok(()));
        assert_eq!(got.len(), 2);
        assert!(got[1].3 == bodies[1]);
    }
}
