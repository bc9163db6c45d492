//! What of a record the store keeps, whichever encoder wrote it: the
//! record without its node and boot id fields, which its boot's head
//! (their canonical encoding, see [`super::layout::head`]) stands for.
//! Pure: bytes in, slices of them out.
//!
//! prost writes those two fields first, so the head is a prefix to cut
//! off. Protobuf lets a conforming encoder write fields in any order,
//! write an empty string out or leave it away: there the two fields are
//! cut out wherever they are, and the record left is stored in up to
//! three pieces. Read back as `head || body`, the record decodes to what
//! it decoded to before: each cut field occurred once and had the head's
//! value, moving a field that occurs once to the front changes nothing
//! for a decoder, and every other field keeps its bytes and its order
//! (repeated fields, the payload oneof and unknown fields included).
//!
//! A record where either field occurs twice, has another value than the
//! head's, another wire type, or that does not parse at top level is kept
//! whole (verbatim): nothing is claimed about bytes that might decode
//! otherwise once moved.

/// A record's bytes after its boot's head: up to three pieces of the
/// received bytes, in order (the record with its node and boot id fields
/// cut out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Body<'a>(pub [&'a [u8]; 3]);

impl<'a> Body<'a> {
    /// Bytes kept as they are, in one piece.
    pub fn one(bytes: &'a [u8]) -> Body<'a> {
        Body([bytes, &[], &[]])
    }

    /// Bytes in all.
    pub fn len(&self) -> usize {
        self.0.iter().map(|p| p.len()).sum()
    }

    /// Appends the pieces to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        for p in self.0 {
            out.extend_from_slice(p);
        }
    }

    /// The bytes in one slice: borrowed when they are one piece (as
    /// prost's records are), else gathered into `buf`.
    pub fn contiguous<'b>(&self, buf: &'b mut Vec<u8>) -> &'b [u8]
    where
        'a: 'b,
    {
        let mut full = self.0.into_iter().filter(|p| !p.is_empty());
        match (full.next(), full.next()) {
            (None, _) => &[],
            (Some(p), None) => p,
            _ => {
                buf.clear();
                self.write_to(buf);
                buf
            }
        }
    }
}

/// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// `Record.node` and `Record.boot_id`: the fields the head holds.
const HEAD_TAGS: [u64; 2] = [1, 2];

/// What to store of `raw`, a record of the boot whose head is `head`:
/// its body, or `None` when it must be kept whole (see the module).
pub fn split<'a>(raw: &'a [u8], head: &[u8]) -> Option<Body<'a>> {
    if let Some(rest) = after_head(raw, head) {
        return Some(Body::one(rest));
    }
    let want = head_values(head)?;
    // Per head field: the byte range of its one occurrence in `raw`.
    let mut cut: [Option<(usize, usize)>; 2] = [None, None];
    let mut at = 0;
    while at < raw.len() {
        let f = field(raw, at)?;
        if let Some(i) = HEAD_TAGS.iter().position(|t| *t == f.tag) {
            let value = f.value.map(|(s, e)| &raw[s..e]);
            if cut[i].is_some() || value != Some(want[i]) {
                return None;
            }
            cut[i] = Some((at, f.end));
        }
        at = f.end;
    }
    for (c, w) in cut.iter().zip(want) {
        // A field the head holds but the record lacks: another boot's.
        if c.is_none() && !w.is_empty() {
            return None;
        }
    }
    Some(without(raw, cut))
}

/// The bytes of `raw` after `head` when it starts with it (as prost's
/// records do): kept byte for byte. An empty head never matches.
pub fn after_head<'a>(raw: &'a [u8], head: &[u8]) -> Option<&'a [u8]> {
    raw.strip_prefix(head).filter(|_| !head.is_empty())
}

/// What to store of `raw` as a row of its own: whether it is kept whole,
/// and the bytes (after the head unless whole; gathered into `buf` when
/// in pieces).
pub fn row<'b>(raw: &'b [u8], head: &[u8], buf: &'b mut Vec<u8>) -> (bool, &'b [u8]) {
    match split(raw, head) {
        Some(body) => (false, body.contiguous(buf)),
        None => (true, raw),
    }
}

/// `raw` without the ranges in `cut` (at most two, not overlapping).
fn without(raw: &[u8], cut: [Option<(usize, usize)>; 2]) -> Body<'_> {
    let ranges = match cut {
        [Some(a), Some(b)] if b < a => [Some(b), Some(a)],
        other => other,
    };
    let mut pieces: [&[u8]; 3] = [&[], &[], &[]];
    let (mut from, mut n) = (0, 0);
    for (s, e) in ranges.into_iter().flatten() {
        pieces[n] = &raw[from..s];
        (from, n) = (e, n + 1);
    }
    pieces[n] = &raw[from..];
    Body(pieces)
}

/// The values of the head's node and boot id fields (empty when the head
/// leaves one out, as it does an empty string), or `None` when `head` is
/// not a head.
fn head_values(head: &[u8]) -> Option<[&[u8]; 2]> {
    let mut values: [&[u8]; 2] = [&[], &[]];
    let mut at = 0;
    while at < head.len() {
        let f = field(head, at)?;
        let i = HEAD_TAGS.iter().position(|t| *t == f.tag)?;
        let (s, e) = f.value?;
        values[i] = &head[s..e];
        at = f.end;
    }
    Some(values)
}

/// One top-level field: its number, the range of a length-delimited
/// value, and where it ends.
struct Field {
    tag: u64,
    value: Option<(usize, usize)>,
    end: usize,
}

/// The field starting at `at`, or `None` when the bytes there are not
/// one this module can skip exactly (a group, a reserved wire type, field
/// number 0, a cut varint or length).
fn field(b: &[u8], at: usize) -> Option<Field> {
    let (key, at) = varint(b, at)?;
    let tag = key >> 3;
    if tag == 0 {
        return None;
    }
    let (value, end) = match (key & 7) as u8 {
        VARINT => (None, varint(b, at)?.1),
        FIXED64 => (None, at.checked_add(8)?),
        FIXED32 => (None, at.checked_add(4)?),
        LEN => {
            let (n, at) = varint(b, at)?;
            let end = at.checked_add(usize::try_from(n).ok()?)?;
            (Some((at, end)), end)
        }
        _ => return None,
    };
    (end <= b.len()).then_some(Field { tag, value, end })
}

/// A varint of at most 10 bytes at `at`, and where it ends.
#[inline]
fn varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    // Keys and lengths: nearly always one byte.
    match b.get(at) {
        Some(&byte) if byte < 0x80 => Some((u64::from(byte), at + 1)),
        _ => long_varint(b, at),
    }
}

fn long_varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.get(at..)?.iter().take(10).enumerate() {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some((v, at + i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests;
