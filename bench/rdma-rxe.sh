#!/usr/bin/env bash
# Soft-RoCE check for the RDMA probe's verbs layer, on a Linux kernel that
# has the rdma_rxe module (the build machines do not). Creates two network
# namespaces joined by a veth pair, puts an rxe device on each end, and runs
# the dlopen test against them; removes both namespaces and devices on exit,
# also on failure. Needs root, rdma-core, ibverbs-providers, iproute2.
set -euo pipefail
cd "$(dirname "$0")/.."
modprobe rdma_rxe || { echo "this kernel has no rdma_rxe" >&2; exit 1; }
a=bwrxe-a b=bwrxe-b
cleanup() {
    ip netns exec "$a" rdma link delete rxe-a 2>/dev/null || true
    ip netns exec "$b" rdma link delete rxe-b 2>/dev/null || true
    ip netns delete "$a" 2>/dev/null || true
    ip netns delete "$b" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add veth-a netns "$a" type veth peer name veth-b netns "$b"
ip -n "$a" addr add 169.254.77.1/30 dev veth-a
ip -n "$b" addr add 169.254.77.2/30 dev veth-b
ip -n "$a" link set veth-a up
ip -n "$b" link set veth-b up
ip netns exec "$a" rdma link add rxe-a type rxe netdev veth-a
ip netns exec "$b" rdma link add rxe-b type rxe netdev veth-b
# The test compares libibverbs' device list with the kernel's uverbs nodes.
ip netns exec "$a" cargo test -p boltwatch-agent --test rdma_abi -- --test-threads=1
