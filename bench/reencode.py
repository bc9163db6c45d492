#!/usr/bin/env python3
"""Re-encodes a `store_load --write-batches` file with Python's protobuf
(upb): every AgentMessage is parsed and serialized again, so the records
are the same and the bytes are what another protobuf library writes
(fields in number order). With --reverse, every message down to the
histogram buckets then has its fields written in reverse number order
(one field's occurrences keep their order), as a conforming encoder may.
Usage: reencode.py PB2_DIR IN OUT [--reverse]; PB2_DIR holds
telemetry_pb2.py generated from proto/boltwatch/v1/telemetry.proto."""
import struct
import sys

sys.path.insert(0, sys.argv[1])
import telemetry_pb2  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

src, dst = sys.argv[2], sys.argv[3]
reverse = "--reverse" in sys.argv[4:]

# Message fields walked into, per message: (message, tag) -> message.
NESTED = {
    ("agent", 2): "batch",
    ("batch", 1): "record",
    ("record", 10): "rtt",
    ("record", 12): "counters",
    ("rtt", 16): "bucket",
}


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


def reversed_fields(b, kind):
    """`b`, a message of `kind`, with its fields in reverse number order."""
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
                value = reversed_fields(value, sub)
            fields.append((tag, b[i:j] + put_varint(len(value)) + value))
            k += n
        else:
            raise ValueError(f"wire type {wt} in {kind}")
        i = k
    fields.sort(key=lambda f: -f[0])  # stable: repeated fields keep order
    return b"".join(f[1] for f in fields)
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
        if reverse:
            again = reversed_fields(again, "agent")
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
