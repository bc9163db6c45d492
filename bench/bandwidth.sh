#!/usr/bin/env bash
# boltwatch bandwidth engine vs Debian iperf3, on loopback and on a veth pair
# between two network namespaces created here (and deleted on exit, even on
# error or Ctrl-C). Runs alternate (iperf3, boltwatch, iperf3, ...) so slow
# drifts in machine load hit both tools alike; prints Gb/s at the receiver
# for each run and the ratio of the medians per case.
#
# Usage: sudo bench/bandwidth.sh [-t SECS] [-r ROUNDS] [-c CASES]
#   -t  seconds per run (default 5)
#   -r  runs per tool per case (default 2)
#   -c  cases, comma-separated from lo1,lo4,veth1,veth4 (default all)
# BIN=path/to/boltwatch-agent overrides target/release/boltwatch-agent.
set -euo pipefail

SECS=5
ROUNDS=2
CASES="lo1,lo4,veth1,veth4"
while getopts "t:r:c:" o; do
  case "$o" in
    t) SECS="$OPTARG" ;;
    r) ROUNDS="$OPTARG" ;;
    c) CASES="$OPTARG" ;;
    *) echo "usage: $0 [-t SECS] [-r ROUNDS] [-c CASES]" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/target/release/boltwatch-agent}"
for tool in iperf3 jq ip; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "missing $BIN (cargo build --release -p boltwatch-agent)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root for network namespaces" >&2; exit 1; }

NS_A="bwbench-a-$$"
NS_B="bwbench-b-$$"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "veth-a$$" type veth peer name "veth-b$$"
ip link set "veth-a$$" netns "$NS_A"
ip link set "veth-b$$" netns "$NS_B"
ip -n "$NS_A" addr add 10.203.0.1/24 dev "veth-a$$"
ip -n "$NS_B" addr add 10.203.0.2/24 dev "veth-b$$"
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
done
ip -n "$NS_A" link set "veth-a$$" up
ip -n "$NS_B" link set "veth-b$$" up

PORT=$((20000 + $$ % 20000))

# run_ns NS CMD...: run in namespace NS, or in the current one for "-".
run_ns() {
  local ns="$1"; shift
  if [ "$ns" = "-" ]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

# spawn_ns NS CMD...: like run_ns, for use with `&`: the background job
# execs the command, so $! is the server's own pid and `kill $!` stops it.
spawn_ns() {
  local ns="$1"; shift
  if [ "$ns" = "-" ]; then exec "$@"; else exec ip netns exec "$ns" "$@"; fi
}

wait_listen() { # ns port
  for _ in $(seq 1 100); do
    if run_ns "$1" ss -ltnH "sport = :$2" | grep -q .; then return 0; fi
    sleep 0.05
  done
  echo "server on port $2 did not come up" >&2; return 1
}

# One iperf3 run: prints receiver Gb/s.
run_iperf3() { # client_ns server_ns addr streams
  PORT=$((PORT + 1))
  spawn_ns "$2" iperf3 -s -1 -B "$3" -p "$PORT" >/dev/null 2>&1 &
  PIDS+=($!)
  wait_listen "$2" "$PORT"
  run_ns "$1" iperf3 -c "$3" -p "$PORT" -t "$SECS" -P "$4" -J \
    | jq -r '.end.sum_received.bits_per_second / 1e9'
  wait "${PIDS[-1]}" 2>/dev/null || true
}

# One boltwatch run: prints receiver Gb/s.
run_bolt() { # client_ns server_ns addr streams
  PORT=$((PORT + 1))
  # The bench namespaces are ours alone: let any client in.
  spawn_ns "$2" "$BIN" bandwidth-server --listen "$3:$PORT" --allow 0.0.0.0/0 --allow ::/0 >/dev/null 2>&1 &
  local spid=$!
  PIDS+=($spid)
  wait_listen "$2" "$PORT"
  run_ns "$1" "$BIN" bandwidth --iperf3 "$3:$PORT" -t "$SECS" -P "$4" --json \
    | jq -r '.[0].bits_per_second / 1e9'
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

printf "%-8s %-30s %-30s %s\n" case "iperf3 Gb/s (runs)" "boltwatch Gb/s (runs)" "ratio (medians)"
IFS=, read -ra CASE_LIST <<<"$CASES"
for c in "${CASE_LIST[@]}"; do
  case "$c" in
    lo1)   cn=-; sn=-; addr=127.0.0.1; p=1 ;;
    lo4)   cn=-; sn=-; addr=127.0.0.1; p=4 ;;
    veth1) cn="$NS_A"; sn="$NS_B"; addr=10.203.0.2; p=1 ;;
    veth4) cn="$NS_A"; sn="$NS_B"; addr=10.203.0.2; p=4 ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  I=(); B=()
  for _ in $(seq 1 "$ROUNDS"); do
    I+=("$(run_iperf3 "$cn" "$sn" "$addr" "$p")")
    B+=("$(run_bolt "$cn" "$sn" "$addr" "$p")")
  done
  mi=$(printf "%s\n" "${I[@]}" | median)
  mb=$(printf "%s\n" "${B[@]}" | median)
  ratio=$(awk -v a="$mb" -v b="$mi" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')
  printf "%-8s %-30s %-30s %s\n" "$c" \
    "$(printf "%.1f " "${I[@]}")" "$(printf "%.1f " "${B[@]}")" "$ratio"
done
