#!/usr/bin/env bash
# Remote write figures against a local victoria-metrics (Debian package):
# a simulated soak of N nodes over H hours ending now goes into a fresh
# store through gRPC; prints the startup rebuild time of the /metrics state
# and the samples/s of the whole-store backfill into VictoriaMetrics.
# Usage: bench/remote-write.sh [HOURS] [NODES]   (default 1 4)
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-1}
nodes=${2:-4}
command -v victoria-metrics >/dev/null || { echo "need victoria-metrics (apt-get install -y victoria-metrics)" >&2; exit 1; }
tmp=$(mktemp -d)
vm=""
cleanup() { [ -n "$vm" ] && kill "$vm" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
victoria-metrics -httpListenAddr=127.0.0.1:18428 -storageDataPath="$tmp/vm" -retentionPeriod=1y >"$tmp/vm.log" 2>&1 &
vm=$!
for _ in $(seq 100); do curl -fs http://127.0.0.1:18428/health >/dev/null && break; sleep 0.1; done
cargo run --release -q -p boltwatch-collector --example remote_write_bench -- \
    --hours "$hours" --nodes "$nodes" --data-dir "$tmp/data" --url http://127.0.0.1:18428/api/v1/write
curl -fs http://127.0.0.1:18428/internal/force_flush >/dev/null
echo "series in VictoriaMetrics: $(curl -fs 'http://127.0.0.1:18428/api/v1/series/count')"
