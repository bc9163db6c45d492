#!/usr/bin/env bash
# Memory soak: a collector and two agents on loopback, probing each other
# fast (10 ms), for a while. Prints agent and collector RSS at start (after a
# short warm-up) and at the end, and the growth in %. The goal is growth
# under 5% over 10 minutes (long-running probers are known to leak).
# Scheduled bandwidth tests are off: a test's buffers and stream threads
# are a one-off step in RSS, not growth, and would hide a slow leak.
# Usage: bench/soak-memory.sh [SECONDS] [INTERVAL]   (defaults 600, 10ms)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
interval=${2:-10ms}
warmup=20
. bench/lib.sh
bench_release_setup

grpc=127.0.0.1:50181; http=127.0.0.1:9581
printf 'a %s\nb %s\n' "$(head -c16 /dev/urandom | xxd -p)" "$(head -c16 /dev/urandom | xxd -p)" >"$tmp/tokens"
awk '$1=="a"{print $2}' "$tmp/tokens" >"$tmp/a.token"
awk '$1=="b"{print $2}' "$tmp/tokens" >"$tmp/b.token"
"$bin/boltwatch-collector" serve --grpc-listen $grpc --http-listen $http --data-dir "$tmp/data" \
    --auth-tokens "$tmp/tokens" >"$tmp/collector.log" 2>&1 &
coll=$!; pids+=($coll)
for n in a b; do
    if [ $n = a ]; then me=18681; peer=18682; other=b; else me=18682; peer=18681; other=a; fi
    "$bin/boltwatch-agent" run --node $n --listen 127.0.0.1:$me --peer $other=127.0.0.1:$peer \
        --probe-interval "$interval" --no-services --no-bandwidth --collector http://$grpc \
        --spool-dir "$tmp/spool-$n" --token-file "$tmp/$n.token" >"$tmp/agent-$n.log" 2>&1 &
    pids+=($!)
done
agent_a=${pids[1]}; agent_b=${pids[2]}

rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
sleep "$warmup"
ra0=$(rss $agent_a); rb0=$(rss $agent_b); rc0=$(rss $coll)
sleep "$secs"
ra1=$(rss $agent_a); rb1=$(rss $agent_b); rc1=$(rss $coll)
records=$(curl -s http://$http/api/v1/nodes | tr ',' '\n' | awk -F: '/"records"/ {s+=$2} END {print s+0}')
gaps=$(curl -s http://$http/api/v1/nodes | tr ',' '\n' | awk -F: '/"gaps"/ {s+=$2} END {print s+0}')
printf "soak: %ss at %s probing, 2 agents + collector (RSS after %ss warm-up -> end)\n" "$secs" "$interval" "$warmup"
printf "%-12s %10s %10s %8s\n" process "start KiB" "end KiB" growth
for row in "agent-a $ra0 $ra1" "agent-b $rb0 $rb1" "collector $rc0 $rc1"; do
    set -- $row
    awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%-12s %10d %10d %7.1f%%\n", n, a, b, (b - a) * 100 / a }'
done
echo "records stored: $records, gaps: $gaps"
