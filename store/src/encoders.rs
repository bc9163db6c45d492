//! Other encoders' ways of writing a record, for the store's tests: the
//! record's top-level fields as prost writes them (declaration order,
//! which is also Python protobuf's number order), in reverse, or in a
//! seeded order; default values written out or not; unknown fields
//! (a newer schema's) among them; and, as no conforming encoder does but
//! a careless one might, the node field twice. The store only ever cuts
//! top-level fields, so payloads are kept as prost wrote them.

use boltwatch_proto::v1::record::Payload;
use boltwatch_proto::v1::{AgentStats, HistogramBucket, InterfaceCounters, Record, RttSummary};
use proptest::prelude::*;
use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};

/// The order an encoder writes fields in.
#[derive(Debug, Clone)]
pub enum Order {
    /// prost's (and Python's: field number order).
    AsIs,
    /// Highest field number first.
    Reverse,
    /// By a seeded rank per field number (one field's occurrences keep
    /// their order).
    Ranked(Vec<u32>),
}

/// How one encoder writes a record.
#[derive(Debug, Clone)]
pub struct Encoding {
    pub order: Order,
    /// Envelope fields at their default (empty, 0) written out.
    pub defaults: bool,
    /// Unknown fields: (number, wire type 0, 1, 2 or 5, value).
    pub unknown: Vec<(u32, u8, u64)>,
    /// The node field written a second time, in front.
    pub node_twice: bool,
}

pub fn arb_encoding() -> impl Strategy<Value = Encoding> {
    let order = prop_oneof![
        Just(Order::AsIs),
        Just(Order::Reverse),
        prop::collection::vec(any::<u32>(), 1..12).prop_map(Order::Ranked),
    ];
    let unknown = prop::collection::vec(
        (
            1000u32..1100,
            prop::sample::select(vec![0u8, 1, 2, 5]),
            any::<u64>(),
        ),
        0..3,
    );
    (order, any::<bool>(), unknown, prop::bool::weighted(0.1)).prop_map(
        |(order, defaults, unknown, node_twice)| Encoding {
            order,
            defaults,
            unknown,
            node_twice,
        },
    )
}

/// A record as agents make them, of a few payload kinds (or none), with
/// an empty or long node name at times.
pub fn arb_record() -> impl Strategy<Value = Record> {
    let node = prop_oneof![Just(String::new()), "[a-z-]{1,12}", Just("n".repeat(200))];
    let payload = prop_oneof![
        Just(None),
        (
            "[a-z]{0,8}",
            any::<u64>(),
            prop::collection::vec((any::<i32>(), any::<u64>()), 0..6)
        )
            .prop_map(|(peer, sum, b)| Some(Payload::Rtt(RttSummary {
                peer,
                sum_ns: sum,
                buckets: b
                    .into_iter()
                    .map(|(index, count)| HistogramBucket { index, count })
                    .collect(),
                ..Default::default()
            }))),
        ("[a-z0-9]{0,6}", any::<u64>()).prop_map(|(interface, b)| Some(Payload::Counters(
            InterfaceCounters {
                interface,
                receive_bytes: b,
                mtu: 9000,
                ..Default::default()
            }
        ))),
        any::<(u64, f64)>().prop_map(|(r, cpu)| Some(Payload::AgentStats(AgentStats {
            reconnects: r,
            cpu_seconds: cpu,
            ..Default::default()
        }))),
    ];
    (node, "[0-9a-f]{1,16}", 0..i64::MAX as u64, payload).prop_map(
        |(node, boot_id, unix_ns, payload)| Record {
            node,
            boot_id,
            seq: 1,
            unix_ns,
            payload,
        },
    )
}

/// `raw`, a well-formed record, written again as `e` says.
pub fn reencode(mut raw: &[u8], e: &Encoding) -> Vec<u8> {
    let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
    while !raw.is_empty() {
        let start = raw;
        let (tag, wt) = decode_key(&mut raw).expect("a key");
        match wt {
            WireType::Varint => drop(decode_varint(&mut raw).expect("a varint")),
            WireType::LengthDelimited => {
                let n = decode_varint(&mut raw).expect("a length") as usize;
                raw = &raw[n..];
            }
            WireType::SixtyFourBit => raw = &raw[8..],
            WireType::ThirtyTwoBit => raw = &raw[4..],
            other => panic!("no {other:?} field in a record"),
        }
        fields.push((tag, start[..start.len() - raw.len()].to_vec()));
    }
    if e.defaults {
        for (tag, wt) in [
            (1, WireType::LengthDelimited),
            (2, WireType::LengthDelimited),
            (3, WireType::Varint),
            (4, WireType::Varint),
        ] {
            if !fields.iter().any(|f| f.0 == tag) {
                let mut out = Vec::new();
                encode_key(tag, wt, &mut out);
                encode_varint(0, &mut out);
                fields.push((tag, out));
            }
        }
    }
    for &(tag, wt, v) in &e.unknown {
        fields.push((tag, unknown_field(tag, wt, v)));
    }
    match &e.order {
        Order::AsIs => {}
        Order::Reverse => fields.sort_by_key(|f| std::cmp::Reverse(f.0)),
        Order::Ranked(ranks) => fields.sort_by_key(|f| (ranks[f.0 as usize % ranks.len()], f.0)),
    }
    let mut out = Vec::new();
    if e.node_twice {
        // Twice even when the record leaves an empty node out.
        let node = fields.iter().find(|f| f.0 == 1).map(|f| f.1.clone());
        let node = node.unwrap_or_else(|| {
            fields.insert(0, (1, vec![0x0a, 0]));
            vec![0x0a, 0]
        });
        out.extend(node);
    }
    out.extend(fields.into_iter().flat_map(|f| f.1));
    out
}

/// An unknown field `tag` of wire type `wt` (0, 1, 5, else 2) made from `v`.
fn unknown_field(tag: u32, wt: u8, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    match wt {
        0 => {
            encode_key(tag, WireType::Varint, &mut out);
            encode_varint(v, &mut out);
        }
        1 => {
            encode_key(tag, WireType::SixtyFourBit, &mut out);
            out.extend(v.to_le_bytes());
        }
        5 => {
            encode_key(tag, WireType::ThirtyTwoBit, &mut out);
            out.extend((v as u32).to_le_bytes());
        }
        _ => {
            encode_key(tag, WireType::LengthDelimited, &mut out);
            let n = (v % 9) as usize;
            encode_varint(n as u64, &mut out);
            out.extend(&v.to_le_bytes()[..n]);
        }
    }
    out
}
