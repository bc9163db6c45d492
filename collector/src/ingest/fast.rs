//! A strict decoder for the shapes nearly every record has: an RTT
//! summary or an interface counters reading, encoded as agents encode
//! them. prost's generated decoder spends most of its time on generic
//! machinery (a `Buf` per field, error plumbing, a recursion context per
//! histogram bucket); for these two messages, which are nearly all of a
//! busy collector's records, this one reads the bytes directly.
//!
//! It never decides anything prost would decide differently: it takes a
//! record only when every field is one it knows with its declared wire
//! type, every varint is at most 9 bytes, every length fits, every string
//! is UTF-8 and the record has exactly one payload field. Then the result
//! is what prost's would be (last value wins for scalars and strings,
//! buckets append, the same integer conversions). Anything else (another
//! payload kind, an unknown field, a malformed byte) is declined, and the
//! caller decodes the record with prost, which accepts or refuses it with
//! its own error. The tests hold both decoders to the same results.

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{HistogramBucket, InterfaceCounters, Record, RttSummary};
use prost::Message;

/// Wire types.
const VARINT: u64 = 0;
const LEN: u64 = 2;

/// The envelope fields of a record and its one payload field.
pub struct Envelope<'a> {
    /// `Record.node`.
    pub node: &'a str,
    /// `Record.boot_id`.
    pub boot_id: &'a str,
    /// `Record.seq`.
    pub seq: u64,
    /// `Record.unix_ns`.
    pub unix_ns: u64,
    /// The payload's field number and encoded message.
    pub payload: (u64, &'a [u8]),
}

/// Payload field numbers this decoder reads.
pub const RTT: u64 = 10;
/// See [`RTT`].
pub const COUNTERS: u64 = 12;

/// Reads a record's envelope, if the record has the common shape: the
/// envelope fields and one payload field, of a kind read here.
pub fn envelope(raw: &[u8]) -> Option<Envelope<'_>> {
    let mut c = Cursor(raw);
    let (mut node, mut boot_id, mut seq, mut unix_ns) = ("", "", 0, 0);
    let mut payload = None;
    while !c.0.is_empty() {
        match c.key()? {
            (1, LEN) => node = c.str()?,
            (2, LEN) => boot_id = c.str()?,
            (3, VARINT) => seq = c.varint()?,
            (4, VARINT) => unix_ns = c.varint()?,
            (tag @ (RTT | COUNTERS), LEN) if payload.is_none() => {
                payload = Some((tag, c.bytes()?));
            }
            _ => return None,
        }
    }
    Some(Envelope {
        node,
        boot_id,
        seq,
        unix_ns,
        payload: payload?,
    })
}

/// Fills `r` (whose payload, when it has one of the envelope's kind, is
/// reused) from `e`; `None` when the payload is not of the common shape,
/// leaving `r` to be cleared by the caller.
pub fn fill(r: &mut Record, e: &Envelope<'_>) -> Option<()> {
    let (tag, bytes) = e.payload;
    match (tag, &mut r.payload) {
        (RTT, Some(Payload::Rtt(m))) => m.clear(),
        (RTT, p) => *p = Some(Payload::Rtt(RttSummary::default())),
        (COUNTERS, Some(Payload::Counters(m))) => m.clear(),
        (COUNTERS, p) => *p = Some(Payload::Counters(InterfaceCounters::default())),
        _ => return None,
    }
    match &mut r.payload {
        Some(Payload::Rtt(m)) => rtt(m, bytes)?,
        Some(Payload::Counters(m)) => counters(m, bytes)?,
        _ => return None,
    }
    set(&mut r.node, e.node);
    set(&mut r.boot_id, e.boot_id);
    r.seq = e.seq;
    r.unix_ns = e.unix_ns;
    Some(())
}

fn set(s: &mut String, v: &str) {
    s.clear();
    s.push_str(v);
}

fn rtt(m: &mut RttSummary, bytes: &[u8]) -> Option<()> {
    let mut c = Cursor(bytes);
    while !c.0.is_empty() {
        match c.key()? {
            (1, LEN) => set(&mut m.peer, c.str()?),
            (2, LEN) => set(&mut m.peer_address, c.str()?),
            (3, LEN) => set(&mut m.interface, c.str()?),
            (4, VARINT) => m.window_start_unix_ns = c.varint()?,
            (5, VARINT) => m.window_ns = c.varint()?,
            (6, VARINT) => m.sent = c.varint()?,
            (7, VARINT) => m.received = c.varint()?,
            (8, VARINT) => m.lost = c.varint()?,
            (9, VARINT) => m.duplicates = c.varint()?,
            (10, VARINT) => m.min_ns = c.varint()?,
            (11, VARINT) => m.mean_ns = c.varint()?,
            (12, VARINT) => m.max_ns = c.varint()?,
            (13, VARINT) => m.p50_ns = c.varint()?,
            (14, VARINT) => m.p99_ns = c.varint()?,
            (15, VARINT) => m.sum_ns = c.varint()?,
            (16, LEN) => m.buckets.push(bucket(c.bytes()?)?),
            // prost's int32 (and enum) conversion.
            (17, VARINT) => m.timestamp_source = c.varint()? as i32,
            (18, VARINT) => m.under_load = c.varint()? != 0,
            (19, VARINT) => m.discarded = c.varint()?,
            (20, VARINT) => m.timestamp_clock = c.varint()? as i32,
            (21, VARINT) => m.timestamp_resolution_ns = c.varint()?,
            _ => return None,
        }
    }
    Some(())
}

fn bucket(bytes: &[u8]) -> Option<HistogramBucket> {
    let mut b = HistogramBucket::default();
    let mut c = Cursor(bytes);
    while !c.0.is_empty() {
        match c.key()? {
            (1, VARINT) => {
                // prost's sint32 conversion (zigzag of the low 32 bits).
                let v = c.varint()? as u32;
                b.index = ((v >> 1) as i32) ^ (-((v & 1) as i32));
            }
            (2, VARINT) => b.count = c.varint()?,
            _ => return None,
        }
    }
    Some(b)
}

fn counters(m: &mut InterfaceCounters, bytes: &[u8]) -> Option<()> {
    let mut c = Cursor(bytes);
    while !c.0.is_empty() {
        match c.key()? {
            (1, LEN) => set(&mut m.interface, c.str()?),
            (2, VARINT) => m.receive_bytes = c.varint()?,
            (3, VARINT) => m.transmit_bytes = c.varint()?,
            (4, VARINT) => m.receive_packets = c.varint()?,
            (5, VARINT) => m.transmit_packets = c.varint()?,
            (6, VARINT) => m.receive_errors = c.varint()?,
            (7, VARINT) => m.transmit_errors = c.varint()?,
            (8, VARINT) => m.receive_drops = c.varint()?,
            (9, VARINT) => m.transmit_drops = c.varint()?,
            (10, VARINT) => m.carrier = c.varint()? != 0,
            (11, VARINT) => m.carrier_known = c.varint()? != 0,
            (12, VARINT) => m.carrier_up_count = c.varint()?,
            (13, VARINT) => m.carrier_down_count = c.varint()?,
            (14, VARINT) => m.speed_bits_per_second = c.varint()?,
            // prost's uint32 conversion.
            (15, VARINT) => m.mtu = c.varint()? as u32,
            _ => return None,
        }
    }
    Some(())
}

/// The unread bytes of a message.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    /// A varint of at most 9 bytes (values below 2^63; a longer one, which
    /// prost may refuse, declines).
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        // Keys, lengths and small counts: one byte.
        match self.0 {
            [b, rest @ ..] if *b < 0x80 => {
                self.0 = rest;
                Some(u64::from(*b))
            }
            _ => self.long_varint(),
        }
    }

    fn long_varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for (i, &b) in self.0.iter().take(9).enumerate() {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.0 = &self.0[i + 1..];
                return Some(v);
            }
        }
        None
    }

    /// A field key as (field number, wire type).
    fn key(&mut self) -> Option<(u64, u64)> {
        let k = self.varint()?;
        Some((k >> 3, k & 7))
    }

    /// A length-delimited field's bytes.
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (v, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(v)
    }

    /// A string field (UTF-8, as prost requires).
    fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::decode::Decoded;
    use boltwatch_common::testing::proptest_config;
    use proptest::prelude::*;

    fn arb_rtt() -> impl Strategy<Value = Payload> {
        let strings = (".{0,8}", ".{0,8}", ".{0,8}");
        let scalars = prop::array::uniform12(any::<u64>());
        let buckets = prop::collection::vec((any::<i32>(), any::<u64>()), 0..12);
        let rest = (
            any::<i32>(),
            any::<bool>(),
            any::<u64>(),
            any::<i32>(),
            any::<u64>(),
        );
        (strings, scalars, buckets, rest).prop_map(|((p, a, i), s, b, r)| {
            Payload::Rtt(RttSummary {
                peer: p,
                peer_address: a,
                interface: i,
                window_start_unix_ns: s[0],
                window_ns: s[1],
                sent: s[2],
                received: s[3],
                lost: s[4],
                duplicates: s[5],
                min_ns: s[6],
                mean_ns: s[7],
                max_ns: s[8],
                p50_ns: s[9],
                p99_ns: s[10],
                sum_ns: s[11],
                buckets: b
                    .into_iter()
                    .map(|(index, count)| HistogramBucket { index, count })
                    .collect(),
                timestamp_source: r.0,
                under_load: r.1,
                discarded: r.2,
                timestamp_clock: r.3,
                timestamp_resolution_ns: r.4,
            })
        })
    }

    fn arb_counters() -> impl Strategy<Value = Payload> {
        let scalars = prop::array::uniform11(any::<u64>());
        (".{0,8}", scalars, any::<(bool, bool, u32)>()).prop_map(|(i, s, (c, k, mtu))| {
            Payload::Counters(InterfaceCounters {
                interface: i,
                receive_bytes: s[0],
                transmit_bytes: s[1],
                receive_packets: s[2],
                transmit_packets: s[3],
                receive_errors: s[4],
                transmit_errors: s[5],
                receive_drops: s[6],
                transmit_drops: s[7],
                carrier: c,
                carrier_known: k,
                carrier_up_count: s[8],
                carrier_down_count: s[9],
                speed_bits_per_second: s[10],
                mtu,
            })
        })
    }

    /// Values as agents send them (below 2^63, enums not negative): the
    /// fast path takes these.
    fn small(mut p: Payload) -> Payload {
        match &mut p {
            Payload::Rtt(m) => {
                for v in [
                    &mut m.window_start_unix_ns,
                    &mut m.sum_ns,
                    &mut m.discarded,
                    &mut m.timestamp_resolution_ns,
                ] {
                    *v &= i64::MAX as u64;
                }
                for v in [&mut m.sent, &mut m.received, &mut m.lost, &mut m.min_ns] {
                    *v %= 1 << 20;
                }
                m.timestamp_source &= 0xff;
                m.timestamp_clock &= 0xff;
                for b in &mut m.buckets {
                    b.count %= 1 << 40;
                }
                m.window_ns = 0;
                m.duplicates = 0;
                m.mean_ns = 1;
                m.max_ns = 1;
                m.p50_ns = 1;
                m.p99_ns = 1;
            }
            Payload::Counters(m) => {
                for v in [
                    &mut m.receive_bytes,
                    &mut m.transmit_bytes,
                    &mut m.receive_packets,
                    &mut m.transmit_packets,
                    &mut m.receive_errors,
                    &mut m.transmit_errors,
                    &mut m.receive_drops,
                    &mut m.transmit_drops,
                    &mut m.carrier_up_count,
                    &mut m.carrier_down_count,
                    &mut m.speed_bits_per_second,
                ] {
                    *v &= i64::MAX as u64;
                }
            }
            _ => {}
        }
        p
    }

    fn record(payload: Payload, seq: u64) -> Record {
        Record {
            node: "mini-a".into(),
            boot_id: "0123456789abcdef".into(),
            seq,
            unix_ns: 1_795_996_800_000_000_000 + seq,
            payload: Some(payload),
        }
    }

    /// `Decoded::push` and `Record::decode` agree on `raw`: the same
    /// record or the same error.
    fn agree(d: &mut Decoded, raw: &[u8]) -> Result<(), TestCaseError> {
        let want = Record::decode(raw);
        let got = d.push(raw).cloned();
        prop_assert_eq!(got, want);
        Ok(())
    }

    /// Agrees on `raw`, then on it after each edit in turn: overwrite a
    /// byte, cut there, or insert one.
    fn agree_damaged(
        d: &mut Decoded,
        raw: &mut Vec<u8>,
        edits: &[(prop::sample::Index, u8, u8)],
    ) -> Result<(), TestCaseError> {
        agree(d, raw)?;
        for (at, byte, how) in edits {
            let i = at.index(raw.len() + 1);
            match how {
                0 if i < raw.len() => raw[i] = *byte,
                1 => raw.truncate(i),
                _ => raw.insert(i, *byte),
            }
            agree(d, raw)?;
        }
        Ok(())
    }

    fn arb_payload() -> impl Strategy<Value = Payload> {
        prop_oneof![arb_rtt(), arb_counters()]
    }

    fn arb_any_or_small() -> impl Strategy<Value = Payload> {
        prop_oneof![arb_payload(), arb_payload().prop_map(small)]
    }

    proptest! {
        #![proptest_config(proptest_config(512))]

        /// Agent-shaped records take the fast path and read as prost reads
        /// them.
        #[test]
        fn common_records_take_the_fast_path(p in arb_payload(), seq in 1u64..1 << 40) {
            let r = record(small(p), seq);
            let raw = r.encode_to_vec();
            let e = envelope(&raw).expect("common shape");
            let mut into = Record::default();
            prop_assert!(fill(&mut into, &e).is_some());
            prop_assert_eq!(&into, &r);
            prop_assert_eq!(into, Record::decode(&raw[..]).unwrap());
        }

        /// Any values, and the same records damaged: one byte changed, cut
        /// short, or bytes inserted. Whatever the fast path declines prost
        /// decides, so the results are prost's every time.
        #[test]
        fn every_record_decodes_as_prost_decodes_it(
            ps in prop::collection::vec(arb_any_or_small(), 1..6),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..3),
        ) {
            let mut d = Decoded::default();
            for (seq, p) in ps.into_iter().enumerate() {
                let mut raw = record(p, seq as u64 + 1).encode_to_vec();
                agree_damaged(&mut d, &mut raw, &edits)?;
            }
        }

        #[test]
        fn arbitrary_bytes_decode_as_prost_decodes_them(
            raw in prop::collection::vec(any::<u8>(), 0..96),
        ) {
            agree(&mut Decoded::default(), &raw)?;
        }
    }

    /// Varints out of their field's range convert as prost converts them
    /// (bool: not 0; uint32, int32, sint32: the low 32 bits).
    #[test]
    fn out_of_range_values_convert_as_prost_converts_them() {
        use prost::encoding::{encode_key, encode_varint, WireType};
        let big = (1u64 << 40) + 0x8000_0005;
        let field = |buf: &mut Vec<u8>, tag: u32, v: u64| {
            encode_key(tag, WireType::Varint, buf);
            encode_varint(v, buf);
        };
        let mut bucket = Vec::new();
        field(&mut bucket, 1, big);
        let mut rtt = Vec::new();
        for (tag, v) in [(17, big), (18, 2), (20, big)] {
            field(&mut rtt, tag, v);
        }
        encode_key(16, WireType::LengthDelimited, &mut rtt);
        encode_varint(bucket.len() as u64, &mut rtt);
        rtt.extend(&bucket);
        let mut counters = Vec::new();
        for (tag, v) in [(10, 2), (11, 256), (15, big)] {
            field(&mut counters, tag, v);
        }
        for (tag, payload) in [(10, rtt), (12, counters)] {
            let mut raw = Vec::new();
            encode_key(tag, WireType::LengthDelimited, &mut raw);
            encode_varint(payload.len() as u64, &mut raw);
            raw.extend(&payload);
            let e = envelope(&raw).expect("common shape");
            let mut r = Record::default();
            assert!(fill(&mut r, &e).is_some());
            assert_eq!(r, Record::decode(&raw[..]).unwrap());
        }
    }

    #[test]
    fn other_shapes_are_declined() {
        use boltwatch_proto::v1::AgentStats;
        let mut stats = record(Payload::AgentStats(AgentStats::default()), 1).encode_to_vec();
        assert!(envelope(&stats).is_none());
        let rtt = record(Payload::Rtt(RttSummary::default()), 1).encode_to_vec();
        assert!(envelope(&rtt).is_some());
        // Two payload fields, an unknown field, a 10-byte varint.
        let mut twice = rtt.clone();
        twice.extend_from_slice(&rtt[rtt.len() - 2..]);
        assert!(envelope(&twice).is_none());
        stats.truncate(0);
        stats.extend_from_slice(&rtt);
        stats.extend([0x9a, 0x06, 0x00]);
        assert!(envelope(&stats).is_none());
        let mut long = vec![0x18];
        long.extend([0xff; 9]);
        long.push(0x01);
        assert!(envelope(&long).is_none());
        assert_eq!(Cursor(&[0xff; 9]).varint(), None);
    }

    /// Another encoder's way of writing the same record, as protobuf
    /// allows any conforming encoder to: every message's fields in a
    /// seeded order (the occurrences of one field keep theirs, so repeated
    /// buckets stay in order), and, when `defaults`, every absent field
    /// written out at its default value (empty string, 0). Python's
    /// protobuf writes fields in number order, prost in declaration order;
    /// neither is special here.
    mod other_encoder {
        use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};

        /// The fields of the messages read here: (tag, wire type, nested
        /// message kind for a message field).
        fn schema(kind: u8) -> Vec<(u32, WireType, Option<u8>)> {
            let (v, l) = (WireType::Varint, WireType::LengthDelimited);
            match kind {
                // Record: node, boot_id, seq, unix_ns; payloads not listed
                // (one of them is present, a default would add another).
                0 => vec![(1, l, None), (2, l, None), (3, v, None), (4, v, None)],
                // RttSummary.
                1 => (1..=21)
                    .map(|t| match t {
                        1..=3 => (t, l, None),
                        16 => (t, l, Some(3)),
                        _ => (t, v, None),
                    })
                    .collect(),
                // InterfaceCounters.
                2 => (1..=15)
                    .map(|t| (t, if t == 1 { l } else { v }, None))
                    .collect(),
                // HistogramBucket.
                _ => vec![(1, v, None), (2, v, None)],
            }
        }

        /// The nested kind of a field of `kind`.
        fn nested(kind: u8, tag: u32) -> Option<u8> {
            match (kind, tag) {
                (0, 10) => Some(1),
                (0, 12) => Some(2),
                _ => schema(kind)
                    .into_iter()
                    .find(|f| f.0 == tag)
                    .and_then(|f| f.2),
            }
        }

        /// Re-encodes a well-formed message of `kind`, with field
        /// `unknown` (a newer schema's, as a varint) added to every
        /// message when given.
        pub fn reencode(
            mut raw: &[u8],
            kind: u8,
            ranks: &[u32],
            defaults: bool,
            unknown: Option<u32>,
        ) -> Vec<u8> {
            let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
            while !raw.is_empty() {
                let (tag, wt) = decode_key(&mut raw).expect("a key");
                let mut out = Vec::new();
                encode_key(tag, wt, &mut out);
                match wt {
                    WireType::Varint => encode_varint(decode_varint(&mut raw).unwrap(), &mut out),
                    WireType::LengthDelimited => {
                        let n = decode_varint(&mut raw).unwrap() as usize;
                        let (value, rest) = raw.split_at(n);
                        raw = rest;
                        let value = match nested(kind, tag) {
                            Some(k) => reencode(value, k, ranks, defaults, unknown),
                            None => value.to_vec(),
                        };
                        encode_varint(value.len() as u64, &mut out);
                        out.extend(value);
                    }
                    other => panic!("no {other:?} field here"),
                }
                fields.push((tag, out));
            }
            if defaults {
                // A repeated field's default is its absence: none is added.
                let singular = schema(kind).into_iter().filter(|f| f.2.is_none());
                for (tag, wt, _) in singular {
                    if !fields.iter().any(|f| f.0 == tag) {
                        let mut out = Vec::new();
                        encode_key(tag, wt, &mut out);
                        encode_varint(0, &mut out);
                        fields.push((tag, out));
                    }
                }
            }
            if let Some(tag) = unknown {
                let mut out = Vec::new();
                encode_key(tag, WireType::Varint, &mut out);
                encode_varint(u64::from(tag), &mut out);
                fields.push((tag, out));
            }
            let rank = |tag: u32| ranks[tag as usize % ranks.len()];
            // Stable: one field's occurrences keep their order.
            fields.sort_by_key(|f| (rank(f.0), f.0));
            fields.into_iter().flat_map(|f| f.1).collect()
        }
    }

    proptest! {
        #![proptest_config(proptest_config(512))]

        /// The same records from another encoder (any field order, default
        /// values written out or not) take the fast path too and read as
        /// prost reads them: a conforming encoder that is not prost costs
        /// the collector nothing more.
        #[test]
        fn another_encoders_records_take_the_fast_path(
            p in arb_payload(),
            seq in 1u64..1 << 40,
            ranks in prop::collection::vec(any::<u32>(), 1..24),
            defaults in any::<bool>(),
        ) {
            let r = record(small(p), seq);
            let raw = other_encoder::reencode(&r.encode_to_vec(), 0, &ranks, defaults, None);
            prop_assert_eq!(Record::decode(&raw[..]).unwrap(), r.clone());
            let e = envelope(&raw).expect("common shape");
            let mut into = Record::default();
            prop_assert!(fill(&mut into, &e).is_some());
            prop_assert_eq!(&into, &r);
            agree(&mut Decoded::default(), &raw)?;
        }
    }

    /// Field orders of several encoders: prost's (declaration order, also
    /// Python protobuf's number order), the reverse, and seeded ones.
    fn arb_ranks() -> impl Strategy<Value = Vec<u32>> {
        prop_oneof![
            Just((0..32).collect::<Vec<u32>>()),
            Just((0..32).rev().collect::<Vec<u32>>()),
            prop::collection::vec(any::<u32>(), 1..24),
        ]
    }

    proptest! {
        #![proptest_config(proptest_config(512))]

        /// Records of several encoders (any field order, defaults written
        /// out or not, a newer schema's unknown field in every message or
        /// not), whole and damaged: both decoders give the same record or
        /// the same error every time. (The schema has no repeated scalar
        /// field, so packed and unpacked encodings do not arise.)
        #[test]
        fn every_encoders_records_decode_as_prost_decodes_them(
            ps in prop::collection::vec((arb_any_or_small(), arb_ranks(), any::<bool>()), 1..5),
            unknown in prop::option::of(22u32..4096),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..3),
        ) {
            let mut d = Decoded::default();
            for (seq, (p, ranks, defaults)) in ps.into_iter().enumerate() {
                let r = record(p, seq as u64 + 1);
                let mut raw = other_encoder::reencode(&r.encode_to_vec(), 0, &ranks, defaults, unknown);
                prop_assert_eq!(Record::decode(&raw[..]).unwrap(), r);
                agree_damaged(&mut d, &mut raw, &edits)?;
            }
        }
    }
}
