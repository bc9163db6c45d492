#!/usr/bin/env bash
# Raw retention on the store sized for a 72-hour soak: bench/store.sh
# fills a fresh store (4-node full mesh, 72 simulated hours, through the
# real gRPC ingest), then `boltwatch-collector prune` replaces every raw
# RTT summary and counters record by per-minute rollups. Prints the store
# and report figures before and after, the prune's cost, and whether the
# JSON report over the rollups is the report over the raw records.
# Usage: bench/retention.sh [--hours H] [--nodes N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
hours=72 nodes=4
bench_store_args "$@"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dir=$scratch/data
STORE_BENCH_KEEP=$dir bash bench/store.sh --hours "$hours" --nodes "$nodes" >"$scratch/store.md"
bin=${CARGO_TARGET_DIR:-target}/release/boltwatch-collector

from=1793491200
to=$((from + hours * 3600))
TIMEFORMAT='%R %U %S'
report() { # $1: label; times each format on core 0, keeps the JSON
    for f in table json html; do
        { time taskset -c 0 "$bin" report --data-dir "$dir" --from "$from" --to "$to" --format "$f" \
            --out "$scratch/$1.$f" >/dev/null; } 2>"$scratch/time.$1.$f"
        read -r wall user sys <"$scratch/time.$1.$f"
        printf '%s / %.2f' "$wall" "$(echo "$user + $sys" | bc -l)" >"$scratch/secs.$1.$f"
    done
}

read -r before_bytes _ before_rows < <(bench_store_sizes "$dir")
report raw
{ time taskset -c 0 "$bin" prune --data-dir "$dir" --before "$to" >"$scratch/prune.out"; } 2>"$scratch/time.prune"
cat "$scratch/prune.out" >&2
read -r pwall puser psys <"$scratch/time.prune"
read -r after_bytes _ after_rows < <(bench_store_sizes "$dir")
report rollups
taskset -c 0 "$bin" prune --data-dir "$dir" --before "$to" --vacuum >/dev/null
file_bytes=$(stat -c %s "$dir/boltwatch.db")
same=no
cmp -s "$scratch/raw.json" "$scratch/rollups.json" && same=yes

cat "$scratch/store.md"
echo
echo "| store | records | bytes in use | file bytes after VACUUM | report table s (wall / CPU) | json s | html s |"
echo "|---|---|---|---|---|---|---|"
s() { cat "$scratch/secs.$1.$2"; }
echo "| raw | $before_rows | $before_bytes | | $(s raw table) | $(s raw json) | $(s raw html) |"
echo "| rollups | $after_rows | $after_bytes | $file_bytes | $(s rollups table) | $(s rollups json) | $(s rollups html) |"
echo
printf 'prune: %s s wall, %.2f s CPU; JSON report over rollups identical to raw: %s\n' \
    "$pwall" "$(echo "$puser + $psys" | bc -l)" "$same"
