#!/usr/bin/env bash
# Runs the link-flap test once while capturing both ends of its link
# (tcpdump, nanosecond stamps) and `ip -ts monitor link neigh` in both
# namespaces, then reads the captures with bench/stamp-pcap.py: probes no
# reply answered on the wire, and replies a reflector held in userspace
# (its own t3 - t2) longer than THRESHOLD_MS. Compare what it prints with
# the test's "unexplained outage" lines (unix ns) to tell a lost probe from
# a late reflector. This is how the 98 ms "probe-loss" outages of the
# batched bed were traced to a starved reflector thread (no packet lost).
# Usage: bench/flap-capture.sh [OUT_DIR=target/flap-capture] [THRESHOLD_MS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/flap-capture}
threshold=${2:-20}
test_name=twenty_flaps_are_twenty_events_and_outages_on_each_side
cargo build -q -p boltwatch-agent -p boltwatch-collector
cargo test -q -p boltwatch-tests --test link_truth --no-run
rm -rf "$out"
mkdir -p "$out"
cargo test -q -p boltwatch-tests --test link_truth -- --exact "$test_name" --nocapture \
    >"$out/test.log" 2>&1 &
test_pid=$!
ns0=
for _ in $(seq 1 600); do
    ns0=$(ip netns list | awk '{print $1}' | grep -E '^bw-[0-9]+-0$' | head -1 || true)
    [ -n "$ns0" ] && break
    sleep 0.1
done
[ -n "$ns0" ] || { echo "no bed namespace appeared" >&2; exit 1; }
ns1=${ns0%-0}-1
sleep 0.5 # the bed adds the link right after the namespaces
ip netns exec "$ns0" tcpdump -p -U -ni tb1 --time-stamp-precision=nano -w "$out/n0.pcap" 2>"$out/tcpdump0.err" &
cap0=$!
ip netns exec "$ns1" tcpdump -p -U -ni tb0 --time-stamp-precision=nano -w "$out/n1.pcap" 2>"$out/tcpdump1.err" &
cap1=$!
ip -n "$ns0" -ts monitor link neigh >"$out/monitor0.txt" 2>&1 &
mon0=$!
ip -n "$ns1" -ts monitor link neigh >"$out/monitor1.txt" 2>&1 &
mon1=$!
rc=0
wait "$test_pid" || rc=$?
kill "$cap0" "$cap1" "$mon0" "$mon1" 2>/dev/null || true
wait "$cap0" "$cap1" "$mon0" "$mon1" 2>/dev/null || true
echo "test exit status $rc; its outages not explained by a flap:"
grep "unexplained" "$out/test.log" || echo "  (none)"
for n in 0 1; do
    python3 bench/stamp-pcap.py "$out/n$n.pcap" 8620 "$threshold"
done
