use super::*;
use crate::encoders::{arb_encoding, arb_record, reencode};
use crate::layout::{head, join};
use boltwatch_common::testing::proptest_config;
use boltwatch_proto::v1::Record;
use proptest::prelude::*;
use prost::Message;

/// `head || body`, as a reader puts a stored record together.
fn joined(head: &[u8], body: Body<'_>) -> Vec<u8> {
    let mut b = Vec::new();
    body.write_to(&mut b);
    let mut out = Vec::new();
    join(false, head, &b, &mut out);
    out
}

fn record(node: &str, boot: &str) -> Record {
    Record {
        node: node.into(),
        boot_id: boot.into(),
        seq: 7,
        unix_ns: 9,
        payload: None,
    }
}

#[test]
fn prost_s_record_loses_its_head_and_nothing_else() {
    let raw = record("mini-a", "b1").encode_to_vec();
    let h = head("mini-a", "b1");
    let body = split(&raw, &h).expect("a body");
    assert_eq!(body, Body::one(&raw[h.len()..]));
    assert_eq!(joined(&h, body), raw);
}

#[test]
fn fields_elsewhere_are_cut_out_where_they_are() {
    let h = head("a", "b");
    // seq, boot id, unix_ns, node: the three pieces around the two cuts.
    let raw = [0x18, 1, 0x12, 1, b'b', 0x20, 2, 0x0a, 1, b'a', 0x28, 3];
    let body = split(&raw, &h).expect("a body");
    assert_eq!(body, Body([&[0x18, 1][..], &[0x20, 2][..], &[0x28, 3][..]]));
    let mut buf = Vec::new();
    assert_eq!(body.contiguous(&mut buf), [0x18, 1, 0x20, 2, 0x28, 3]);
    // Both at the end (reverse number order): one piece, borrowed.
    let raw = [0x20, 2, 0x18, 1, 0x12, 1, b'b', 0x0a, 1, b'a'];
    let body = split(&raw, &h).expect("a body");
    assert_eq!(body.contiguous(&mut Vec::new()), [0x20, 2, 0x18, 1]);
    // An empty node written out, where the head leaves it away: cut out,
    // unless the head is a prefix (then it stays in the body, harmless).
    let h = head("", "b");
    let raw = [0x18, 1, 0x12, 1, b'b', 0x0a, 0];
    let body = Body([&[0x18, 1][..], &[][..], &[][..]]);
    assert_eq!(split(&raw, &h), Some(body));
    let raw = [0x12, 1, b'b', 0x0a, 0, 0x18, 1];
    assert_eq!(split(&raw, &h), Some(Body::one(&raw[3..])));
}

#[test]
fn records_that_contradict_the_head_are_kept_whole() {
    let h = head("a", "b");
    for raw in [
        // Node twice (with the same value), after another field.
        &[0x18, 1, 0x0a, 1, b'a', 0x12, 1, b'b', 0x0a, 1, b'a'][..],
        // Another node, no node, no boot id.
        &[0x18, 1, 0x0a, 1, b'z', 0x12, 1, b'b'],
        &[0x18, 1, 0x12, 1, b'b'],
        &[0x18, 1, 0x0a, 1, b'a'],
        // The node field as a varint.
        &[0x18, 1, 0x08, 1, 0x12, 1, b'b'],
        // A group, a reserved wire type, field 0, a cut length, a cut
        // varint, a cut fixed64.
        &[0x1b, 0x1c, 0x0a, 1, b'a', 0x12, 1, b'b'],
        &[0x1e, 0x0a, 1, b'a', 0x12, 1, b'b'],
        &[0x00, 1, 0x0a, 1, b'a', 0x12, 1, b'b'],
        &[0x18, 1, 0x0a, 1, b'a', 0x12, 5, b'b'],
        &[0x18, 1, 0x0a, 1, b'a', 0x12, 1, b'b', 0x18, 0x80],
        &[0x18, 1, 0x12, 1, b'b', 0x0a, 1, b'a', 0x19, 1, 2],
    ] {
        assert_eq!(split(raw, &h), None, "{raw:?}");
        let mut buf = Vec::new();
        assert_eq!(row(raw, &h, &mut buf), (true, raw));
    }
    // Not a head at all: nothing is cut.
    assert_eq!(split(&[0x18, 1], &[0x18, 1, 0]), None);
}

proptest! {
    #![proptest_config(proptest_config(1024))]

    /// Whatever order, defaults and unknown fields an encoder writes, a
    /// record is stored without its head and reads back as bytes prost
    /// decodes to the same record; only one that repeats its node field
    /// (not right after its head) is kept whole.
    #[test]
    fn a_split_record_decodes_as_it_did(r in arb_record(), e in arb_encoding()) {
        let raw = reencode(&r.encode_to_vec(), &e);
        prop_assert_eq!(&Record::decode(&raw[..]).unwrap(), &r);
        let h = head(&r.node, &r.boot_id);
        let body = split(&raw, &h);
        // Twice, unless the head happens to be a prefix (then the record
        // is kept byte for byte after it).
        prop_assert_eq!(body.is_none(), e.node_twice && !raw.starts_with(&h));
        if let Some(body) = body {
            // Less the head, and the empty strings written out unless the
            // head was a prefix.
            let cut = raw.len() - h.len() - body.len();
            prop_assert!(cut == 0 || cut == extra_defaults(&r, &e), "cut {}", cut);
            prop_assert_eq!(Record::decode(&joined(&h, body)[..]).unwrap(), r);
        }
    }
}

/// Bytes of empty node and boot id fields the encoder wrote out and the
/// head leaves away.
fn extra_defaults(r: &Record, e: &crate::encoders::Encoding) -> usize {
    let empty = [&r.node, &r.boot_id]
        .iter()
        .filter(|s| s.is_empty())
        .count();
    if e.defaults {
        2 * empty
    } else {
        0
    }
}
