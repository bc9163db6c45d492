#!/usr/bin/env bash
# Ingest speed from an encoder that is not prost: the same simulated mesh
# (examples/store_load.rs) is encoded once by prost, as the agent does, and
# once more by Python's protobuf (bench/reencode.py parses and serializes
# every message again: fields in number order), and once more with every
# message's fields in reverse number order (a conforming encoder may write
# any order), and once more in a seeded random order per message with
# every default value written out, then each file goes into a
# fresh store through the real gRPC ingest of a release collector, sent by
# the same client. Prints records per collector CPU-second for each, the
# ratios (over prost; 1.00 means the encoder costs nothing), the records
# the store kept whole (verbatim), and the machine's load.
# Usage: [ROUNDS=3] bench/ingest-encoders.sh [--hours H] [--nodes N]
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
"$scratch/venv/bin/python" bench/reencode.py "$scratch/pb2" "$scratch/prost.bwb" "$scratch/shuffled.bwb" --shuffle
encoders="prost python reversed shuffled"

# Each encoding $ROUNDS times, the encodings taking turns, so that load
# from elsewhere on a shared machine falls on all of them alike; the
# median run counts.
rounds=${ROUNDS:-3}
declare -A runs bytes whole
for round in $(seq "$rounds"); do
    for enc in $encoders; do
        dir=$scratch/$enc.$round
        grpc=127.0.0.1:$(bench_port)
        http=127.0.0.1:$(bench_port)
        bench_serve "$dir"
        line=$("$load" --grpc "$grpc" --read-batches "$scratch/$enc.bwb" --pid "$collector")
        echo "$enc round $round: $line; load $(uptime | sed 's/.*load average: //')" >&2
        runs[$enc]+=" $(sed -n 's/.*records_per_cpu_second=\([^ ]*\).*/\1/p' <<<"$line")"
        bytes[$enc]=$(sed -n 's/.*\bbytes=\([^ ]*\).*/\1/p' <<<"$line")
        records=$(sed -n 's/.*records=\([^ ]*\).*/\1/p' <<<"$line")
        bench_stop
        whole[$enc]=$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM stored WHERE whole = 1").fetchone()[0])' "$dir/boltwatch.db")
        rm -rf "$dir"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo
echo "| nodes | hours | records | encoder | bytes | records/CPU-s (median of $rounds) | runs | over prost | kept whole |"
echo "|---|---|---|---|---|---|---|---|---|"
prost=$(median <<<"${runs[prost]}")
for enc in $encoders; do
    m=$(median <<<"${runs[$enc]}")
    printf '| %s | %s | %s | %s | %s | %s | %s | %.2f | %s |\n' "$nodes" "$hours" "$records" "$enc" \
        "${bytes[$enc]}" "$m" "${runs[$enc]# }" "$(echo "$m / $prost" | bc -l)" "${whole[$enc]}"
done
echo "load at the end: $(uptime)"
