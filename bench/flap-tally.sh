#!/usr/bin/env bash
# Runs the link-flap acceptance test N times on the batched bed (the
# default: veth ends share an ifindex, so the kernel's linkwatch batches
# their carrier events as it does for thunderbolt-net) and tallies passes,
# failures and what each failure said.
#   20 flaps per run; each run must see exactly 20 down events and 20
#   outages per side, durations within +-100 ms of the injected drops, and
#   no outage a flap does not explain.
# Needs root, iproute2, nftables and promtool (the test fails loudly
# without them). Runs one test at a time: it measures timestamps.
# Usage: bench/flap-tally.sh [N]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
test_name=twenty_flaps_are_twenty_events_and_outages_on_each_side
cargo build -q -p boltwatch-agent -p boltwatch-collector
cargo test -q -p boltwatch-tests --test link_truth --no-run
# Each run's output is kept for reading failures afterwards.
logs=target/flap-tally
rm -rf "$logs"
mkdir -p "$logs"
pass=0
fail=0
for i in $(seq 1 "$n"); do
    log="$logs/run-$i.log"
    start=$(date +%s)
    if cargo test -q -p boltwatch-tests --test link_truth -- --exact "$test_name" --nocapture >"$log" 2>&1; then
        pass=$((pass + 1))
        verdict=pass
    else
        fail=$((fail + 1))
        verdict=FAIL
    fi
    # The per-node "recorded minus injected" line: how far off the ledger was.
    worst=$({ grep -o 'recorded minus injected down time, ms: \[.*\]' "$log" || true; } |
        sed 's/.*\[\(.*\)\]/\1/' | tr ',' '\n' |
        awk '{v=$1<0?-$1:$1; if (v>m) m=v} END {if (NR) printf "%.1f", m; else print "-"}')
    printf 'run %2d: %-4s  %3ss  worst |recorded - injected| %s ms\n' "$i" "$verdict" "$(($(date +%s) - start))" "$worst"
    if [ "$verdict" = FAIL ]; then
        { grep -E "panicked|assertion|outage [0-9]+:|unexplained" "$log" || true; } | head -5 | sed 's/^/        /'
    fi
done
echo "flap tally: $pass passed, $fail failed of $n runs (batched linkwatch bed); logs in $logs/"
[ "$fail" -eq 0 ]
