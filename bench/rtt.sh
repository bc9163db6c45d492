#!/usr/bin/env bash
# RTT accuracy of boltwatch's STAMP probes against ping(8) on loopback.
#
# Builds the agent (release), starts its standalone reflector on 127.0.0.1
# (ephemeral port), then runs side by side:
#   boltwatch-agent ping -i 0.1 -c 200   (STAMP: kernel TX t1 and RX t4, t3-t2 removed)
#   boltwatch-agent ping -i 0.1 -c 200 --userspace-tx   (same, t1 read in userspace)
#   ping -i 0.1 -c 200 127.0.0.1         (ICMP at the same rate)
# and afterwards, alone, the floor:
#   ping -i 0.002 -c 500 127.0.0.1       (CPUs kept awake: path cost only)
# and prints min and p50 (nearest rank) of each, and the ratios.
#
# Usage: bench/rtt.sh [COUNT]   (COUNT scales the 200/500 probe counts down
# for a quick check, e.g. bench/rtt.sh 50). Needs root for ping -i 0.002.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${1:-200}
FLOOR_N=$(( N * 5 / 2 ))

for tool in ping awk sort cargo; do
  command -v "$tool" >/dev/null || { echo "rtt.sh: $tool is missing" >&2; exit 1; }
done

cargo build --release -p boltwatch-agent >&2
AGENT=target/release/boltwatch-agent

work=$(mktemp -d)
refl_pid=""
cleanup() {
  if [[ -n "$refl_pid" ]]; then kill "$refl_pid" 2>/dev/null || true; wait "$refl_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$AGENT" reflect --listen 127.0.0.1:0 2>"$work/reflector.log" &
refl_pid=$!
addr=""
for _ in $(seq 1 50); do
  addr=$(sed -n 's/^STAMP reflector listening on //p' "$work/reflector.log")
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "rtt.sh: reflector did not start:" >&2; cat "$work/reflector.log" >&2; exit 1; }
echo "reflector on $addr" >&2

# Same rate, same time: all three see the same machine state.
"$AGENT" ping "$addr" -i 0.1 -c "$N" >"$work/stamp.txt" &
stamp_pid=$!
"$AGENT" ping "$addr" -i 0.1 -c "$N" --userspace-tx >"$work/stamp_u.txt" &
stamp_u_pid=$!
ping -n -i 0.1 -c "$N" 127.0.0.1 >"$work/ping.txt" &
ping_pid=$!
wait "$stamp_pid" "$stamp_u_pid" "$ping_pid"
ping -n -i 0.002 -c "$FLOOR_N" 127.0.0.1 >"$work/floor.txt"

# Per-reply values in ms, one per line.
sed -n 's/.* rtt=\([0-9.]*\) ms.*/\1/p' "$work/stamp.txt" >"$work/stamp.ms"
sed -n 's/.* rtt=\([0-9.]*\) ms.*/\1/p' "$work/stamp_u.txt" >"$work/stamp_u.ms"
sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' "$work/ping.txt" >"$work/ping.ms"
sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' "$work/floor.txt" >"$work/floor.ms"

# min and nearest-rank p50, in microseconds.
stats() {
  sort -g "$1" | awk '{ v[NR] = $1 * 1000 }
    END {
      if (NR == 0) { print "0 0 0"; exit }
      r = int((NR * 50 + 99) / 100); if (r < 1) r = 1
      printf "%d %.1f %.1f\n", NR, v[1], v[r]
    }'
}
read -r sn smin sp50 < <(stats "$work/stamp.ms")
read -r un umin up50 < <(stats "$work/stamp_u.ms")
read -r pn pmin pp50 < <(stats "$work/ping.ms")
read -r fn fmin fp50 < <(stats "$work/floor.ms")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

printf '%-34s %8s %10s %10s\n' "probe" "replies" "min_us" "p50_us"
printf '%-34s %8s %10s %10s\n' "boltwatch-agent ping -i 0.1" "$sn/$N" "$smin" "$sp50"
printf '%-34s %8s %10s %10s\n' "  ... --userspace-tx" "$un/$N" "$umin" "$up50"
printf '%-34s %8s %10s %10s\n' "ping -i 0.1" "$pn/$N" "$pmin" "$pp50"
printf '%-34s %8s %10s %10s\n' "ping -i 0.002 (floor)" "$fn/$FLOOR_N" "$fmin" "$fp50"
echo "ratio stamp/ping   p50 $(ratio "$sp50" "$pp50")  min $(ratio "$smin" "$pmin")"
echo "ratio stamp-userspace-tx/ping  p50 $(ratio "$up50" "$pp50")  min $(ratio "$umin" "$pmin")"
echo "ratio stamp/floor  p50 $(ratio "$sp50" "$fp50")  min $(ratio "$smin" "$fmin")"
echo "ratio ping/floor   p50 $(ratio "$pp50" "$fp50")  min $(ratio "$pmin" "$fmin")"
echo "agent summary:               $(tail -n 1 "$work/stamp.txt")"
echo "agent summary, userspace t1: $(tail -n 1 "$work/stamp_u.txt")"
