#!/usr/bin/env bash
# Report speed and size: fills the simulated soak (collector/examples/
# soak_sim.rs: 72 hours, 4 nodes by default, real gRPC ingest into a
# store), then times `boltwatch-collector report --soak sim` in every
# format on one core (taskset -c 0) and prints seconds per format and the
# size of each output. Targets (issue 22): every format <= 10 s, the HTML
# <= 5 MB. A bench prints figures; nothing here asserts them.
#
# Usage: bench/report.sh [--hours H] [--nodes N] [--data-dir DIR] [--bin PATH]
#   --data-dir DIR  keep the filled store there; a DIR that already holds
#                   one is reused (no fill), so two builds time one store
#   --bin PATH      the collector binary to time (default: this tree's
#                   release build), e.g. an older build for a before figure
set -euo pipefail
cd "$(dirname "$0")/.."
hours=72
nodes=4
dir=
bin=
while [ $# -gt 0 ]; do
    case "$1" in
        --hours) hours=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        --data-dir) dir=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        *) echo "usage: $0 [--hours H] [--nodes N] [--data-dir DIR] [--bin PATH]" >&2; exit 2 ;;
    esac
done
command -v taskset >/dev/null || { echo "need taskset (util-linux)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-target}
if [ -z "$bin" ]; then
    cargo build --release -q -p boltwatch-collector --bin boltwatch-collector
    bin=$target/release/boltwatch-collector
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if [ -z "$dir" ]; then
    dir=$scratch/store
fi
if [ -f "$dir/boltwatch.db" ]; then
    echo "reusing the store in $dir"
else
    echo "filling a ${hours}-hour, ${nodes}-node simulated soak into $dir ..."
    cargo build --release -q -p boltwatch-collector --example soak_sim
    "$target/release/examples/soak_sim" --hours "$hours" --nodes "$nodes" --data-dir "$dir" \
        >"$scratch/sim.txt" 2>"$scratch/sim.log"
    tail -n 2 "$scratch/sim.log"
fi
echo "store: $(du -h "$dir/boltwatch.db" | cut -f1); timing $bin on core 0"
printf '%-6s %9s %12s\n' format seconds bytes
for f in table md json html; do
    out=$scratch/report.$f
    start=$(date +%s.%N)
    # --check is not given: a FAIL verdict is an answer, not an error.
    taskset -c 0 "$bin" report --data-dir "$dir" --soak sim --format "$f" --out "$out"
    end=$(date +%s.%N)
    printf '%-6s %9.2f %12d\n' "$f" "$(echo "$end - $start" | bc)" "$(stat -c %s "$out")"
done
html=$(stat -c %s "$scratch/report.html")
echo "HTML: $(echo "scale=2; $html / 1048576" | bc) MiB (target <= 5 MB); every format target <= 10 s"
