#!/usr/bin/env bash
# Detection latency of a link drop: from `ip link set down` until the
# carrier-down event is stored at the collector, median and max over N
# flaps (default 20) on a two-node network-namespace test bed, printed
# beside the usual BFD setting of 3 x 50 ms = 150 ms.
#
# Needs root, iproute2 and nftables (the test bed); builds the agent, the
# collector and the bench binary (debug profile, like the tests).
# Usage: bench/link-detect.sh [--urgent] [FLAPS]
# (--urgent: veth ends with distinct ifindexes, so the kernel reports
# carrier changes at once; by default they are batched by linkwatch, as
# for thunderbolt-net.)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "link-detect: needs root (network namespaces)" >&2; exit 1; }
cargo build -q -p boltwatch-agent -p boltwatch-collector -p boltwatch-tests --bins
exec target/debug/bw-link-detect "$@"
