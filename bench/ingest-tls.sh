#!/usr/bin/env bash
# Collector ingest with many simulated agents connected at once, all over
# TLS: the release `boltwatch-collector` in its own process (TLS from a
# throwaway CA), and collector/examples/ingest_tls_load.rs connecting AGENTS
# streams, each a node of its own with a real agent's record mix (one RTT
# summary per peer per second for 3 peers, counters for 2 interfaces every
# second, thermals every 5 s; one batch a second awaited for its Ack).
# Prints connected streams, records/s acked, the collector's CPU % and RSS
# (from /proc) and the ack latency p50/p99 over SECONDS once all are
# connected. Loopback only; everything bounded (AGENTS <= 4000, SECONDS <= 600).
#
# Loopback clients all come from 127.0.0.1, so the collector's per-address
# limit (max_connections_per_address, default 32) is raised to AGENTS + 64
# in its config file (max_pending_per_address, default 4, too), and
# max_connections (default 1024) to at least that;
# file descriptors are raised to match.
# Usage: bench/ingest-tls.sh [AGENTS] [SECONDS]   (default 1000 60)
set -euo pipefail
cd "$(dirname "$0")/.."
agents=${1:-1000}
secs=${2:-60}
[ "$agents" -ge 1 ] && [ "$agents" -le 4000 ] || { echo "AGENTS: 1..4000" >&2; exit 2; }
[ "$secs" -ge 1 ] && [ "$secs" -le 600 ] || { echo "SECONDS: 1..600" >&2; exit 2; }
. bench/lib.sh

cargo build --release -q -p boltwatch-collector --bin boltwatch-collector --example ingest_tls_load
bin=target/release
load=$bin/examples/ingest_tls_load
tmp=$(mktemp -d)
pids=()
trap bench_cleanup EXIT
# Each side holds one socket per agent, plus the store and listeners.
ulimit -n $((agents * 2 + 1024))

"$load" certs "$tmp"
limit=$((agents + 64))
cat >"$tmp/collector.toml" <<TOML
max_connections = $((limit > 1024 ? limit : 1024))
max_connections_per_address = $limit
max_pending_per_address = $limit
TOML
grpc=127.0.0.1:50271
http=127.0.0.1:9671
"$bin/boltwatch-collector" serve --config "$tmp/collector.toml" --data-dir "$tmp/data" \
    --grpc-listen "$grpc" --http-listen "$http" \
    --tls-cert "$tmp/server.pem" --tls-key "$tmp/server.key" 2>"$tmp/collector.log" &
collector=$!
pids+=("$collector")
for _ in $(seq 100); do curl -fs "http://$http/healthz" >/dev/null && break; sleep 0.1; done
curl -fs "http://$http/healthz" >/dev/null || { cat "$tmp/collector.log" >&2; exit 1; }

echo "collector: max_connections_per_address = $limit (loopback clients share 127.0.0.1), $(nproc) cores"
"$load" run --url "https://$grpc" --ca "$tmp/ca.pem" --agents "$agents" --seconds "$secs" \
    --collector-pid "$collector" --metrics "http://$http/metrics"
echo "store: $(du -sh "$tmp/data" | cut -f1); collector log warnings/errors: $(grep -ciE 'warn|error' "$tmp/collector.log" || true)"
