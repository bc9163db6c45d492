#!/usr/bin/env bash
# Agent footprint beside the anchor, same run, same target:
#   boltwatch-agent probing one peer at 10 Hz (STAMP, streaming to a collector)
#   prometheus-smokeping-prober -i 100ms probing the same address (ICMP)
# Prints RSS (MiB) and CPU% of each over the window, and the ratios.
# Usage: bench/agent-footprint.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
command -v prometheus-smokeping-prober >/dev/null || { echo "need prometheus-smokeping-prober (apt-get install -y prometheus-smokeping-prober)" >&2; exit 1; }
. bench/lib.sh
bench_release_setup

"$bin/boltwatch-collector" serve --grpc-listen 127.0.0.1:50171 --http-listen 127.0.0.1:9571 --data-dir "$tmp/data" 2>"$tmp/collector.log" &
pids+=($!)
# The peer: a second agent whose reflector the first one probes.
"$bin/boltwatch-agent" run --node peer --listen 127.0.0.1:18620 --collector http://127.0.0.1:50171 --no-services --no-bandwidth --spool-dir "$tmp/spool-peer" 2>"$tmp/peer.log" &
pids+=($!)
"$bin/boltwatch-agent" run --node probe --listen 127.0.0.1:18621 --peer peer=127.0.0.1:18620 \
    --probe-interval 100ms --collector http://127.0.0.1:50171 --no-services --no-bandwidth --spool-dir "$tmp/spool-probe" 2>"$tmp/agent.log" &
agent=$!; pids+=($agent)
prometheus-smokeping-prober --privileged -i 100ms --web.listen-address=127.0.0.1:9574 127.0.0.1 2>"$tmp/smokeping.log" &
smoke=$!; pids+=($smoke)

sleep 5   # let both settle past start-up allocations
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
a0=$(cpu $agent); s0=$(cpu $smoke)
sleep "$secs"
a1=$(cpu $agent); s1=$(cpu $smoke)
ar=$(rss $agent); sr=$(rss $smoke)
awk -v a0="$a0" -v a1="$a1" -v s0="$s0" -v s1="$s1" -v ar="$ar" -v sr="$sr" -v t="$ticks" -v secs="$secs" 'BEGIN {
    acpu = (a1 - a0) * 100 / t / secs; scpu = (s1 - s0) * 100 / t / secs
    printf "%-34s %10s %8s\n", "prober (10 Hz, one target, " secs "s)", "RSS MiB", "CPU %"
    printf "%-34s %10.1f %8.2f\n", "boltwatch-agent (STAMP+gRPC)", ar / 1024, acpu
    printf "%-34s %10.1f %8.2f\n", "prometheus-smokeping-prober", sr / 1024, scpu
    printf "ratio agent/smokeping: RSS %.2fx, CPU %s\n", ar / sr, (scpu > 0 ? sprintf("%.2fx", acpu / scpu) : "n/a")
}'
