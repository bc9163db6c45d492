#!/usr/bin/env bash
# The chaos soak (issue 27 §2): a collector and three agents on a
# namespace bed, probes at 10 Hz, bandwidth tests, and a seeded random
# schedule of faults (bench/chaos/plan.py); its own ledger checked against
# the store and a range report at the end (bench/chaos/verdict.py). Exits
# non-zero with a table of what disagreed.
# Usage (root): bench/chaos.sh --minutes N [--seed S] [--release]
# The same seed gives the same schedule; the seed is printed either way.
# --release runs release binaries (the long runs: debug builds measure
# the debug allocator and unoptimised code, not what operators run).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=2
seed=$(( $(date +%s) % 100000 ))
profile=debug
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --release) profile=release; shift ;;
        *) echo "usage: $0 --minutes N [--seed S] [--release]" >&2; exit 2 ;;
    esac
done
for t in ip nft dd mount umount python3; do
    command -v "$t" >/dev/null || { echo "chaos: need $t" >&2; exit 1; }
done
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] ||
    { echo "chaos: need libfaketime (apt-get install libfaketime) for the clock step" >&2; exit 1; }
if [ "$profile" = release ]; then
    cargo build -q --release -p boltwatch-agent -p boltwatch-collector
else
    cargo build -q -p boltwatch-agent -p boltwatch-collector
fi
work=$(mktemp -d /tmp/boltwatch-chaos.XXXXXX)
prefix="bwchaos$$"

# Whatever ends the run (a failed check, an error, Ctrl-C), the
# processes, mounts and namespaces (with their veths, qdiscs and nft
# tables) go; the host ends of the management veths go with their peers.
cleanup() {
    if [ -f "$work/pids" ]; then
        while read -r p; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done <"$work/pids"
    fi
    sleep 0.5
    for m in $(awk -v w="$work" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
    for n in $(ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 {print $1}'); do ip netns delete "$n" || true; done
    if [ "${keep:-0}" = 1 ]; then echo "chaos: logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
status=0
python3 bench/chaos/driver.py --minutes "$minutes" --seed "$seed" --bin "target/$profile" \
    --work "$work" --prefix "$prefix" || status=$?
# The memory series and the report of every run stay for the results
# (bench/chaos-results.md quotes them), passed or not.
out="target/chaos/seed$seed-${minutes}min-$profile"
mkdir -p "$out" && cp "$work"/rss.csv "$work"/report.json "$work"/ledger.json "$out"/ 2>/dev/null || true
if [ "$status" != 0 ]; then
    keep=1
    echo "chaos: FAILED (seed $seed); collector log tail:" >&2
    tail -n 20 "$work/collector.log" >&2 || true
    cp "$work"/*.log "$out"/ 2>/dev/null || true
fi
exit "$status"
