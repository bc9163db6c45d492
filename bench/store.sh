#!/usr/bin/env bash
# The store sized for a 72-hour soak: a simulated N-node full
# mesh over H hours (RTT summary per directed link per second, interface
# counters every second, thermals every 5 s, bandwidth tests every 5 min,
# agent stats every minute) goes into a fresh store through the real gRPC
# ingest of a release `boltwatch-collector serve`, sent by a separate
# process (examples/store_load.rs) as pre-encoded batches; then every
# report format is timed on one core. Prints one markdown table.
# Usage: bench/store.sh [--hours H] [--nodes N] [--dir DIR] [--window W]
#   --dir: where the store goes (default a scratch directory under $TMPDIR,
#   removed at exit; the 72-hour store needs about 1-2 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
hours=72 nodes=4 dir="" window=2
while [ $# -gt 0 ]; do
    case "$1" in
        --hours) hours=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --window) window=$2; shift 2 ;;
        *) echo "usage: $0 [--hours H] [--nodes N] [--dir DIR] [--window W]" >&2; exit 2 ;;
    esac
done
command -v taskset >/dev/null || { echo "need taskset (util-linux)" >&2; exit 1; }

# STORE_BENCH_BIN=DIR: use DIR/boltwatch-collector and DIR/examples/store_load
# as they are (to measure a build kept aside) instead of building.
if [ -n "${STORE_BENCH_BIN:-}" ]; then
    rel=$STORE_BENCH_BIN
else
    CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0} cargo build --release -q -p boltwatch-collector \
        --bin boltwatch-collector --example store_load
    rel=${CARGO_TARGET_DIR:-target}/release
fi
bin=$rel/boltwatch-collector
load=$rel/examples/store_load

. bench/lib.sh
scratch=$(mktemp -d)
[ -n "$dir" ] || dir=$scratch/data
mkdir -p "$dir"
[ -z "$(ls -A "$dir")" ] || { echo "$dir is not empty: the bench needs a fresh store" >&2; exit 1; }
collector=""
trap bench_store_cleanup EXIT
[ -n "${STORE_BENCH_KEEP:-}" ] && dir=$STORE_BENCH_KEEP && mkdir -p "$dir"

grpc=127.0.0.1:$(bench_port)
http=127.0.0.1:$(bench_port)
bench_serve "$dir"

line=$("$load" --grpc "$grpc" --hours "$hours" --nodes "$nodes" --window "$window" --pid "$collector")
echo "$line" >&2
val() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$line"; }
records=$(val records)
rate=$(val records_per_second)
per_cpu=$(val records_per_cpu_second)
cpu=$(val collector_cpu_seconds)

bench_stop
db=$(stat -c %s "$dir/boltwatch.db")
wal=$(stat -c %s "$dir/boltwatch.db-wal" 2>/dev/null || echo 0)
bytes=$((db + wal))

from=1793491200
to=$((from + hours * 3600))
# Wall and CPU (user + sys) seconds: on a shared machine the CPU time is
# what one core spends, the wall time what a user waits.
declare -A secs
TIMEFORMAT='%R %U %S'
for f in table md json html; do
    { time taskset -c 0 "$bin" report --data-dir "$dir" --from "$from" --to "$to" --format "$f" \
        --out "$scratch/report.$f" >/dev/null 2>"$scratch/report.err"; } 2>"$scratch/time.$f"
    read -r wall user sys <"$scratch/time.$f"
    secs[$f]="$wall / $(echo "$user + $sys" | bc -l | xargs printf '%.2f')"
done
[ -s "$scratch/report.table" ] || { echo "empty report" >&2; exit 1; }
head -n 12 "$scratch/report.table" >&2

echo
echo "| nodes | hours | records | store bytes | bytes/record | ingest records/s (wall) | collector CPU s | ingest records/CPU-s | report table s (wall / CPU) | md s | json s | html s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '| %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$nodes" "$hours" "$records" "$bytes" "$(echo "$bytes / $records" | bc -l)" "$rate" "$cpu" "$per_cpu" \
    "${secs[table]}" "${secs[md]}" "${secs[json]}" "${secs[html]}"
