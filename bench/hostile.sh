#!/usr/bin/env bash
# An agent's records under the attacks of issue 24 items 3, 4 and 8 at
# once (collector/examples/hostile_load.rs): 1100 idle HTTP connections,
# 50 header drips, 300 clients looping on a soak report and the node list,
# and 40 source addresses x 32 gRPC connections that send only `PRI`;
# against a release `boltwatch-collector serve` (default limits) holding
# an hour of a simulated 4-node mesh (bench/store.sh's), so the report
# does real work. The anchor is the same agent on the same collector
# without the attacks, in the same run: ack latency p50/p99 of a 10-record
# batch every 100 ms, the collector's peak RSS, and the ratios.
# Loopback only; bounded by SECONDS (default 30, at most 600).
# Usage: bench/hostile.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
[ "$secs" -ge 5 ] && [ "$secs" -le 600 ] || { echo "SECONDS: 5..600" >&2; exit 2; }
CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0} cargo build --release -q -p boltwatch-collector \
    --bin boltwatch-collector --example store_load --example hostile_load
rel=${CARGO_TARGET_DIR:-target}/release
bin=$rel/boltwatch-collector

. bench/lib.sh
scratch=$(mktemp -d)
collector=""
trap bench_store_cleanup EXIT
# The attack holds about 2,500 sockets; the collector's own caps decide.
ulimit -n 16384
dir=$scratch/data
grpc=127.0.0.1:$(bench_port)
http=127.0.0.1:$(bench_port)
bench_serve "$dir"
"$rel/examples/store_load" --grpc "$grpc" --hours 1 --nodes 4 --window 2 --pid "$collector" >/dev/null
from=1793491200
"$bin" soak start mesh --from "$from" --to $((from + 3600)) --data-dir "$dir" >/dev/null

run() {
    "$rel/examples/hostile_load" --grpc "$grpc" --http "$http" --pid "$collector" \
        --seconds "$secs" --soak mesh "$@"
}
quiet=$(run)
attacked=$(run --attack)
bench_stop
val() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1"; }
echo "quiet:    $quiet" >&2
echo "attacked: $attacked" >&2
echo
echo "| run | batches acked | refused | ack p50 ms | ack p99 ms | collector peak RSS KiB | API 200 | API 503 | API other |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in quiet attacked; do
    line=${!r}
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$r" "$(val "$line" acks)" \
        "$(val "$line" refused)" "$(val "$line" ack_p50_ms)" "$(val "$line" ack_p99_ms)" \
        "$(val "$line" rss_peak_kib)" "$(val "$line" http_ok)" "$(val "$line" http_503)" \
        "$(val "$line" http_other)"
done
printf '\nattacked / quiet: ack p50 %.2fx, ack p99 %.2fx, peak RSS %.2fx\n' \
    "$(echo "$(val "$attacked" ack_p50_ms) / $(val "$quiet" ack_p50_ms)" | bc -l)" \
    "$(echo "$(val "$attacked" ack_p99_ms) / $(val "$quiet" ack_p99_ms)" | bc -l)" \
    "$(echo "$(val "$attacked" rss_peak_kib) / $(val "$quiet" rss_peak_kib)" | bc -l)"
