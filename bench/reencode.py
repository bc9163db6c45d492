#!/usr/bin/env python3
"""Re-encodes a `store_load --write-batches` file with Python's protobuf
(upb): every AgentMessage is parsed and serialized again, so the records
are the same and the bytes are what another protobuf library writes
(fields in number order). With --reverse, every message down to the
histogram buckets then has its fields written in reverse number order
(one field's occurrences keep their order), as a conforming encoder may.
With --shuffle, every such message has its fields in a seeded random
order (one per message type) and every absent singular scalar or string
field written out at its default (0, empty), as an encoder that writes
defaults does. (The schema has no repeated scalar field, so a packed or
unpacked variant does not arise.)
Usage: reencode.py PB2_DIR IN OUT [--reverse | --shuffle]; PB2_DIR holds
telemetry_pb2.py generated from proto/boltwatch/v1/telemetry.proto."""
import random
import struct
import sys

sys.path.insert(0, sys.argv[1])
import telemetry_pb2  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

src, dst = sys.argv[2], sys.argv[3]
reverse = "--reverse" in sys.argv[4:]
shuffle = "--shuffle" in sys.argv[4:]
rng = random.Random(27)
# --shuffle: one seeded order per message type, kept for the whole run, as
# an encoder has its own fixed order (a new order per message would only
# make the records compress worse).
RANKS = {}

# Message fields walked into, per message: (message, tag) -> message.
NESTED = {
    ("agent", 2): "batch",
    ("batch", 1): "record",
    ("record", 10): "rtt",
    ("record", 12): "counters",
    ("rtt", 16): "bucket",
}

# The message types walked into, for their fields' defaults.
TYPES = {
    "agent": telemetry_pb2.AgentMessage,
    "batch": telemetry_pb2.RecordBatch,
    "record": telemetry_pb2.Record,
    "rtt": telemetry_pb2.RttSummary,
    "counters": telemetry_pb2.InterfaceCounters,
    "bucket": telemetry_pb2.HistogramBucket,
}


def defaults(kind):
    """Encoded default values of `kind`'s singular scalar and string
    fields, by field number (a oneof's members and messages have none)."""
    out = {}
    for f in TYPES[kind].DESCRIPTOR.fields:
        # protobuf 6 deprecates `label` for `is_repeated`.
        repeated = f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED
        if callable(repeated):
            repeated = repeated()
        if f.containing_oneof is not None or repeated:
            continue
        if f.type == f.TYPE_MESSAGE:
            continue
        if f.type in (f.TYPE_STRING, f.TYPE_BYTES):
            out[f.number] = put_varint(f.number << 3 | 2) + b"\x00"
        elif f.type in (f.TYPE_DOUBLE, f.TYPE_FIXED64, f.TYPE_SFIXED64):
            out[f.number] = put_varint(f.number << 3 | 1) + bytes(8)
        elif f.type in (f.TYPE_FLOAT, f.TYPE_FIXED32, f.TYPE_SFIXED32):
            out[f.number] = put_varint(f.number << 3 | 5) + bytes(4)
        else:
            out[f.number] = put_varint(f.number << 3) + b"\x00"
    return out


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def reordered(b, kind):
    """`b`, a message of `kind`, with its fields in reverse number order,
    or (--shuffle) in a random order with defaults written out."""
    fields = []
    i = 0
    while i < len(b):
        key, j = varint(b, i)
        tag, wt = key >> 3, key & 7
        if wt == 0:
            _, k = varint(b, j)
            fields.append((tag, b[i:k]))
        elif wt == 2:
            n, k = varint(b, j)
            value = b[k : k + n]
            sub = NESTED.get((kind, tag))
            if sub:
                value = reordered(value, sub)
            fields.append((tag, b[i:j] + put_varint(len(value)) + value))
            k += n
        elif wt == 1:
            k = j + 8
            fields.append((tag, b[i:k]))
        elif wt == 5:
            k = j + 4
            fields.append((tag, b[i:k]))
        else:
            raise ValueError(f"wire type {wt} in {kind}")
        i = k
    if not shuffle:
        fields.sort(key=lambda f: -f[0])  # stable: repeated fields keep order
        return b"".join(f[1] for f in fields)
    present = {f[0] for f in fields}
    fields += [(t, v) for t, v in DEFAULTS[kind].items() if t not in present]
    rank = RANKS.setdefault(kind, {})
    for t, _ in fields:
        rank.setdefault(t, rng.random())
    fields.sort(key=lambda f: rank[f[0]])  # stable, as above
    return b"".join(f[1] for f in fields)

DEFAULTS = {kind: defaults(kind) for kind in TYPES}
raw = open(src, "rb").read()
assert raw[:4] == b"BWB1", "not a batches file"
at = 4
(nodes,) = struct.unpack_from("<I", raw, at)
at += 4
out = [b"BWB1", struct.pack("<I", nodes)]
same = changed = 0
for _ in range(nodes):
    last, count = struct.unpack_from("<QI", raw, at)
    at += 12
    out.append(struct.pack("<QI", last, count))
    for _ in range(count):
        (n,) = struct.unpack_from("<I", raw, at)
        at += 4
        msg = telemetry_pb2.AgentMessage()
        msg.ParseFromString(raw[at : at + n])
        again = msg.SerializeToString()
        if reverse or shuffle:
            again = reordered(again, "agent")
            # The same message, whatever the order.
            assert telemetry_pb2.AgentMessage.FromString(again) == msg
        if again == raw[at : at + n]:
            same += 1
        else:
            changed += 1
        at += n
        out.append(struct.pack("<I", len(again)))
        out.append(again)
open(dst, "wb").write(b"".join(out))
print(
    f"python protobuf implementation={api_implementation.Type()} "
    f"messages_identical={same} messages_changed={changed}",
    file=sys.stderr,
)
