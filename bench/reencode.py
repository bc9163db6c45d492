#!/usr/bin/env python3
"""Re-encodes a `store_load --write-batches` file with Python's protobuf
(upb): every AgentMessage is parsed and serialized again, so the records
are the same and the bytes are what another protobuf library writes
(fields in number order). Usage: reencode.py PB2_DIR IN OUT; PB2_DIR holds
telemetry_pb2.py generated from proto/boltwatch/v1/telemetry.proto."""
import struct
import sys

sys.path.insert(0, sys.argv[1])
import telemetry_pb2  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402

src, dst = sys.argv[2], sys.argv[3]
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
