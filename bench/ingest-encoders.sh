#!/usr/bin/env bash
# Ingest speed from an encoder that is not prost: the same simulated mesh
# (examples/store_load.rs) is encoded once by prost, as the agent does, and
# once more by Python's protobuf (bench/reencode.py parses and serializes
# every message again: fields in number order), and once more with every
# message's fields in reverse number order (a conforming encoder may write
# any order), then each file goes into a
# fresh store through the real gRPC ingest of a release collector, sent by
# the same client. Prints records per collector CPU-second for both and
# the ratios (over prost; 1.00 means the encoder costs nothing).
# Usage: bench/ingest-encoders.sh [--hours H] [--nodes N]
set -euo pipefail
cd "$(dirname "$0")/.."
hours=24 nodes=4
. bench/lib.sh
bench_store_args "$@"
bench_store_build
scratch=$(mktemp -d)
collector=""
dir=$scratch/unused
trap bench_store_cleanup EXIT

# Python's protobuf and a protoc for it, from PyPI, in a venv of the run.
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q 'protobuf>=5,<7' 'grpcio-tools>=1.60'
mkdir -p "$scratch/pb2"
"$scratch/venv/bin/python" -m grpc_tools.protoc -Iproto/boltwatch/v1 \
    --python_out="$scratch/pb2" proto/boltwatch/v1/telemetry.proto

"$load" --write-batches "$scratch/prost.bwb" --hours "$hours" --nodes "$nodes"
"$scratch/venv/bin/python" bench/reencode.py "$scratch/pb2" "$scratch/prost.bwb" "$scratch/python.bwb"
"$scratch/venv/bin/python" bench/reencode.py "$scratch/pb2" "$scratch/prost.bwb" "$scratch/reversed.bwb" --reverse

declare -A per_cpu bytes
for enc in prost python reversed; do
    dir=$scratch/$enc
    grpc=127.0.0.1:$(bench_port)
    http=127.0.0.1:$(bench_port)
    bench_serve "$dir"
    line=$("$load" --grpc "$grpc" --read-batches "$scratch/$enc.bwb" --pid "$collector")
    echo "$enc: $line" >&2
    per_cpu[$enc]=$(sed -n 's/.*records_per_cpu_second=\([^ ]*\).*/\1/p' <<<"$line")
    bytes[$enc]=$(sed -n 's/.*\bbytes=\([^ ]*\).*/\1/p' <<<"$line")
    records=$(sed -n 's/.*records=\([^ ]*\).*/\1/p' <<<"$line")
    bench_stop
done
echo
echo "| nodes | hours | records | encoder | bytes | records/CPU-s | over prost |"
echo "|---|---|---|---|---|---|---|"
for enc in prost python reversed; do
    printf '| %s | %s | %s | %s | %s | %s | %.2f |\n' "$nodes" "$hours" "$records" "$enc" \
        "${bytes[$enc]}" "${per_cpu[$enc]}" "$(echo "${per_cpu[$enc]} / ${per_cpu[prost]}" | bc -l)"
done
