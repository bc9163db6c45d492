//! Decoding a batch's records into `Record`s kept from batch to batch.
//!
//! `Record::decode` allocates every string and list of every record and
//! moves its payload (a few hundred bytes) out of a temporary; at a million
//! records per second that was most of ingest's decode time. Here each
//! record is decoded the way `Record::decode` does it, field by field with
//! prost's generated `merge_field` (so the same bytes are accepted, and
//! refused with the same error), but into a `Record` an earlier record
//! left behind: its strings and lists keep their capacity, and nothing is
//! moved.
//!
//! The kept records are pooled by payload kind, so the record a payload
//! is decoded into already holds a payload of that kind (its message is
//! cleared, keeping the allocations). The envelope fields (node, boot id,
//! seq, time) come first on the wire, before the payload says which pool
//! the record belongs to: they are decoded into a record of the
//! no-payload pool and move over when the payload starts.
//!
//! Records of the common shapes (RTT summaries, interface counters) are
//! read by [`super::fast`] instead when it takes them; it declines
//! anything prost might decide differently.
//!
//! Memory: the pools keep at most the records of the last batch (a batch
//! is bounded by the ingest policy's `max_batch_records`). A record over
//! [`ALONE_BYTES`] encoded is decoded on its own and dropped with its
//! batch, so the capacity a kept record holds stays small whatever an
//! agent sends.

use boltwatch_proto::v1::Record;
use boltwatch_proto::PAYLOAD_TAGS;
use prost::bytes::Buf;
use prost::encoding::{decode_key, DecodeContext};
use prost::{DecodeError, Message};

use super::fast;

/// Payload kinds this build knows.
const KINDS: usize = PAYLOAD_TAGS.len();
/// The pool of records without a payload this build knows.
const NO_PAYLOAD: usize = KINDS;
/// Where [`Decoded::order`] points for records decoded on their own.
const ALONE: usize = KINDS + 1;

/// Encoded records larger than this (several times a typical record) are
/// decoded into a record of their own, not kept after their batch.
pub const ALONE_BYTES: usize = 1024;

/// One batch's decoded records, in order; the storage stays for the next
/// batch.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Per payload kind (in `PAYLOAD_TAGS` order), then [`NO_PAYLOAD`]:
    /// the records, of this batch and kept from earlier ones.
    pools: [Vec<Record>; KINDS + 1],
    /// Per pool, how many of its records this batch holds.
    used: [usize; KINDS + 1],
    /// The batch's large records ([`ALONE_BYTES`]).
    alone: Vec<Record>,
    /// The batch's records in arrival order: (pool, index in the pool), or
    /// ([`ALONE`], index in `alone`).
    order: Vec<(usize, usize)>,
}

impl Decoded {
    /// Starts a new batch. The records kept are those the batch before
    /// used, no more.
    pub fn clear(&mut self) {
        for (pool, used) in self.pools.iter_mut().zip(&mut self.used) {
            pool.truncate(*used);
            *used = 0;
        }
        self.alone = Vec::new();
        self.order.clear();
    }

    /// Decodes `raw` as the batch's next record. On an error the batch
    /// holds the records before it.
    pub fn push(&mut self, raw: &[u8]) -> Result<&Record, DecodeError> {
        if raw.len() > ALONE_BYTES {
            self.alone.push(Record::decode(raw)?);
            self.order.push((ALONE, self.alone.len() - 1));
            return Ok(self.alone.last().expect("pushed above"));
        }
        if let Some(e) = fast::envelope(raw) {
            let tag = e.payload.0;
            if let Some(pool) = PAYLOAD_TAGS.iter().position(|t| u64::from(*t) == tag) {
                if fast::fill(self.slot(pool), &e).is_some() {
                    return Ok(self.keep(pool));
                }
            }
        }
        self.push_with_prost(raw)
    }

    /// [`Decoded::push`] by prost's generated decoder.
    fn push_with_prost(&mut self, mut raw: &[u8]) -> Result<&Record, DecodeError> {
        let mut pool = NO_PAYLOAD;
        let r = self.slot(pool);
        r.node.clear();
        r.boot_id.clear();
        r.seq = 0;
        r.unix_ns = 0;
        let ctx = DecodeContext::default();
        // `Message::merge`'s loop: the same calls in the same order.
        while raw.has_remaining() {
            let (tag, wire_type) = decode_key(&mut raw)?;
            if let Some(kind) = PAYLOAD_TAGS.iter().position(|t| *t == tag) {
                if kind != pool {
                    // A payload of another kind than the one decoded so far
                    // replaces it, as prost's oneof merge does.
                    self.switch(pool, kind);
                    pool = kind;
                }
            }
            self.slot(pool)
                .merge_field(tag, wire_type, &mut raw, ctx.clone())?;
        }
        Ok(self.keep(pool))
    }

    /// Adds the record decoded into `pool`'s next free one to the batch.
    fn keep(&mut self, pool: usize) -> &Record {
        let index = self.used[pool];
        self.used[pool] += 1;
        self.order.push((pool, index));
        &self.pools[pool][index]
    }

    /// The next free record of `pool`, made if the pool has none.
    fn slot(&mut self, pool: usize) -> &mut Record {
        let (records, i) = (&mut self.pools[pool], self.used[pool]);
        if records.len() == i {
            records.push(Record::default());
        }
        &mut records[i]
    }

    /// Moves the record being decoded from pool `from` to pool `to` (a
    /// different one): its envelope fields go over, its payload starts
    /// afresh. The record left in `from` stays free.
    fn switch(&mut self, from: usize, to: usize) {
        let target = self.slot(to);
        if let Some(p) = &mut target.payload {
            p.clear_message();
        }
        let (lo, hi) = self.pools.split_at_mut(from.max(to));
        let (a, b) = (&mut lo[from.min(to)], &mut hi[0]);
        let (src, dst) = if from < to { (a, b) } else { (b, a) };
        let (src, dst) = (&mut src[self.used[from]], &mut dst[self.used[to]]);
        std::mem::swap(&mut src.node, &mut dst.node);
        std::mem::swap(&mut src.boot_id, &mut dst.boot_id);
        dst.seq = src.seq;
        dst.unix_ns = src.unix_ns;
    }

    /// The batch's records, in order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &Record> + '_ {
        self.order.iter().map(|&(pool, i)| match pool {
            ALONE => &self.alone[i],
            _ => &self.pools[pool][i],
        })
    }

    /// Number of records in the batch.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the batch has no record.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use boltwatch_proto::v1::record::Payload;
    use boltwatch_proto::v1::{
        HistogramBucket, InterfaceCounters, RttSummary, TemperatureSensor, ThermalReading,
    };

    fn rec(seq: u64, payload: Option<Payload>) -> Record {
        Record {
            node: format!("node-{seq}"),
            boot_id: if seq.is_multiple_of(2) {
                "b".into()
            } else {
                String::new()
            },
            seq,
            unix_ns: seq * 10,
            payload,
        }
    }

    fn rtt(peer: &str, buckets: usize) -> Payload {
        Payload::Rtt(RttSummary {
            peer: peer.into(),
            buckets: (0..buckets as i32)
                .map(|index| HistogramBucket { index, count: 1 })
                .collect(),
            sent: buckets as u64,
            ..Default::default()
        })
    }

    fn thermal(n: usize) -> Payload {
        Payload::Thermal(ThermalReading {
            sensors: (0..n)
                .map(|i| TemperatureSensor {
                    name: format!("s{i}"),
                    ..Default::default()
                })
                .collect(),
            throttle: None,
        })
    }

    /// Each batch decodes as `Record::decode` would, also when records
    /// reuse those of a bigger batch with other kinds and longer lists.
    #[test]
    fn batches_decode_like_record_decode_whatever_was_there_before() {
        let counters = |i: &str| {
            Payload::Counters(InterfaceCounters {
                interface: i.into(),
                receive_bytes: 7,
                ..Default::default()
            })
        };
        let batches = [
            vec![
                rec(1, Some(rtt("long-peer-name", 9))),
                rec(2, Some(thermal(3))),
                rec(3, Some(counters("en0"))),
                rec(4, None),
                rec(5, Some(rtt("p", 4))),
            ],
            vec![
                rec(6, Some(rtt("q", 1))),
                rec(7, None),
                rec(8, Some(rtt("", 0))),
                rec(9, Some(thermal(1))),
            ],
            vec![rec(10, Some(counters(""))), rec(11, Some(rtt("r", 2)))],
        ];
        let mut d = Decoded::default();
        for batch in &batches {
            d.clear();
            for r in batch {
                let raw = r.encode_to_vec();
                assert_eq!(d.push(&raw).unwrap(), &Record::decode(&raw[..]).unwrap());
            }
            let got: Vec<&Record> = d.records().collect();
            assert_eq!(got, batch.iter().collect::<Vec<_>>());
        }
    }

    /// Fields in any order, a payload replaced by one of another kind and
    /// back, a payload merged twice, unknown fields: prost's rules.
    #[test]
    fn unusual_field_orders_follow_prost() {
        let mut raw = Vec::new();
        // Payload first, envelope after.
        raw.extend(
            Record {
                payload: Some(rtt("a", 2)),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        raw.extend(rec(2, None).encode_to_vec());
        // Another kind, then the first kind again: only the last counts.
        raw.extend(
            Record {
                payload: Some(thermal(2)),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        raw.extend(
            Record {
                payload: Some(rtt("b", 1)),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        // The same kind again merges into it.
        raw.extend(
            Record {
                payload: Some(rtt("", 3)),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        // An unknown field (99, length-delimited) is skipped.
        raw.extend([0x9a, 0x06, 0x02, 0x08, 0x01]);
        let want = Record::decode(&raw[..]).unwrap();
        let mut d = Decoded::default();
        // Dirty the pools first.
        d.push(&rec(1, Some(rtt("zzz", 12))).encode_to_vec())
            .unwrap();
        d.push(&rec(3, Some(thermal(5))).encode_to_vec()).unwrap();
        d.clear();
        assert_eq!(d.push(&raw).unwrap(), &want);
        let Some(Payload::Rtt(s)) = &want.payload else {
            panic!("{want:?}")
        };
        assert_eq!((s.peer.as_str(), s.buckets.len()), ("b", 4));
    }

    #[test]
    fn errors_are_prosts_and_keep_the_records_before() {
        let mut d = Decoded::default();
        let good = rec(2, Some(rtt("p", 2))).encode_to_vec();
        d.push(&good).unwrap();
        for bad in [
            vec![0xff, 0xff],
            // node (field 1) with invalid UTF-8.
            vec![0x0a, 0x01, 0xff],
            // An rtt payload whose length runs past the end.
            vec![0x52, 0x05, 0x0a],
            // seq (field 3) as length-delimited.
            vec![0x1a, 0x00],
        ] {
            let want = Record::decode(&bad[..]).unwrap_err();
            assert_eq!(d.push(&bad).unwrap_err(), want);
        }
        assert_eq!(d.len(), 1);
        assert_eq!(d.push(&good).unwrap(), &Record::decode(&good[..]).unwrap());
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn large_records_are_not_kept_after_their_batch() {
        let mut d = Decoded::default();
        let big = rec(2, Some(rtt(&"p".repeat(ALONE_BYTES), 3)));
        let small = rec(4, Some(rtt("p", 1)));
        for r in [&small, &big, &small] {
            let raw = r.encode_to_vec();
            assert_eq!(d.push(&raw).unwrap(), &Record::decode(&raw[..]).unwrap());
        }
        assert_eq!(d.records().collect::<Vec<_>>(), [&small, &big, &small]);
        d.clear();
        let held = |d: &Decoded| -> usize {
            let peers = d.pools.iter().flatten().filter_map(|r| match &r.payload {
                Some(Payload::Rtt(s)) => Some(s.peer.capacity()),
                _ => None,
            });
            peers.sum::<usize>() + d.alone.len()
        };
        assert!(held(&d) < ALONE_BYTES, "{}", held(&d));
    }

    #[test]
    fn pools_keep_only_the_last_batch() {
        let mut d = Decoded::default();
        for s in 0..100 {
            d.push(&rec(s, Some(rtt("p", 1))).encode_to_vec()).unwrap();
        }
        d.clear();
        d.push(&rec(1, None).encode_to_vec()).unwrap();
        d.clear();
        assert!(d.pools.iter().all(|p| p.len() <= 1), "{:?}", d.used);
        assert!(d.is_empty());
    }
}
