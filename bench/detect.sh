#!/usr/bin/env bash
# Detection of a path that dies with carrier up, at the fast profile
# (100 Hz, `probe_interval = "fast"`, `probe_late_floor = "5ms"`): on a
# two-namespace veth bed, an agent probes a reflector (a second agent); N
# times (default 20) an nftables rule in the reflector's namespace drops
# its STAMP traffic while the carrier stays up, and the time from the
# rule's insertion to the outage on the agent's own /metrics
# (boltwatch_outages_total, polled every ms) is taken, split into stages
# from the agent's debug log (bench/detect-drops.py); the rule goes, the
# outage ends, the next drop waits. Prints median and worst beside BFD
# (software 3 x 50 ms = 150 ms, hardware 30 ms) and the targets (50 ms
# median, 100 ms worst), with `uptime` before and after.
# Then agent CPU at 100 Hz, one peer, no drops, and
# prometheus-smokeping-prober at the same rate against the same address,
# over CPU_SECONDS (default 30) each, and their ratio.
# With --no-false-outage-minutes M (or SOAK_MINUTES=M) it also runs the
# no-false-outage soak: 100 Hz with late detection on for M minutes under
# an iperf3 test at line rate (tbf-shaped; its window fits the shaper's
# queue unless WINDOW=0), counting outages (must be 0).
#
# Needs root, iproute2, nftables, iperf3, prometheus-smokeping-prober.
# Builds the release agent (PROFILE=debug for the debug build; AGENT_BIN=path
# runs a binary built earlier).
# Usage: bench/detect.sh [DROPS] [--no-false-outage-minutes M]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "detect: needs root (network namespaces)" >&2; exit 1; }
DROPS=20
CPU_SECONDS=${CPU_SECONDS:-30}
SOAK_MINUTES=${SOAK_MINUTES:-0}
PROFILE=${PROFILE:-release}
while [ $# -gt 0 ]; do
    case "$1" in
        --no-false-outage-minutes) SOAK_MINUTES=$2; shift 2 ;;
        [0-9]*) DROPS=$1; shift ;;
        *) echo "usage: $0 [DROPS] [--no-false-outage-minutes M]" >&2; exit 2 ;;
    esac
done
if [ -n "${AGENT_BIN:-}" ]; then
    # A binary built earlier (a before/after comparison).
    AGENT=$AGENT_BIN
    echo "detect: agent $AGENT"
else
    if [ "$PROFILE" = release ]; then
        cargo build -q --release -p boltwatch-agent --bin boltwatch-agent
    else
        cargo build -q -p boltwatch-agent --bin boltwatch-agent
    fi
    AGENT=$PWD/target/$PROFILE/boltwatch-agent
    echo "detect: $PROFILE agent, $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- agent || echo +changes)"
fi
A=bwdet-a-$$ B=bwdet-b-$$
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    [ -z "${KEEP_LOG:-}" ] || cp "$WORK/a.log" "$KEEP_LOG" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$A"
ip netns add "$B"
ip link add va-$$ netns "$A" type veth peer name vb-$$ netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev va-$$
ip -n "$B" addr add 10.77.0.2/24 dev vb-$$
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set va-$$ up
ip -n "$B" link set vb-$$ up
ip netns exec "$B" nft -f - <<'EOF'
table inet bwdetect {
    chain input { type filter hook input priority 0; }
}
EOF

cat >"$WORK/a.toml" <<EOF
node = "a"
collector = "http://127.0.0.1:9"
listen = "10.77.0.1:862"
metrics_listen = "127.0.0.1:9472"
peers = ["b=10.77.0.2:862"]
probe_interval = "fast"
probe_late_floor = "5ms"
interface = "va-$$"
[spool]
dir = "$WORK/spool-a"
EOF
cat >"$WORK/b.toml" <<EOF
node = "b"
collector = "http://127.0.0.1:9"
listen = "10.77.0.2:862"
[spool]
dir = "$WORK/spool-b"
EOF
ip netns exec "$B" env BOLTWATCH_LOG=info "$AGENT" run --config "$WORK/b.toml" >"$WORK/b.log" 2>&1 &
PIDS+=($!)
ip netns exec "$A" env BOLTWATCH_LOG=info,boltwatch_agent::stamp::session=debug,boltwatch_agent::run::outage_tracker=debug "$AGENT" run --config "$WORK/a.toml" >"$WORK/a.log" 2>&1 &
APID=$!
PIDS+=($APID)

if [ "$DROPS" -gt 0 ]; then
    echo "detect: load before the drops: $(uptime)"
    ip netns exec "$A" python3 -u bench/detect-drops.py "$DROPS" "$B" "$WORK/a.log"
    echo "detect: load after the drops: $(uptime)"
else
    sleep 8 # the late bound learns the link (512 replies)
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
cpu_share() { # pid seconds -> percent of one core
    local a b
    a=$(cpu_ticks "$1"); sleep "$2"; b=$(cpu_ticks "$1")
    echo "scale=2; 100 * ($b - $a) / ($HZ * $2)" | bc
}
if [ "$CPU_SECONDS" -gt 0 ]; then
    AGENT_CPU=$(cpu_share "$APID" "$CPU_SECONDS")
    ip netns exec "$A" prometheus-smokeping-prober --privileged --ping.interval=10ms \
        --web.listen-address=127.0.0.1:9374 10.77.0.2 >"$WORK/sp.log" 2>&1 &
    SPID=$!
    PIDS+=($SPID)
    sleep 2
    SP_CPU=$(cpu_share "$SPID" "$CPU_SECONDS")
    echo "detect: CPU at 100 Hz, one peer, over ${CPU_SECONDS}s: agent ${AGENT_CPU}% of a core (whole process: reflector, sampler, /metrics), smokeping_prober ${SP_CPU}%, ratio $(echo "scale=2; $AGENT_CPU / $SP_CPU" | bc)"
    kill "$SPID"
fi

if [ "$SOAK_MINUTES" -gt 0 ]; then
    ip -n "$A" link set va-$$ qlen 1000
    # A FIFO shaper (this bed's kernel has no fq_codel): TCP fills it until
    # it tail-drops, and drops runs of probes with it, a real loss. With
    # WINDOW (default 128K per stream, WINDOW=0 for none) iperf3's flows fit
    # the shaper's queue (1.5 MB): line rate, probes queued, none dropped.
    tc -n "$A" qdisc add dev va-$$ root tbf rate 2gbit burst 256kb latency 5ms
    ip netns exec "$B" iperf3 -s -B 10.77.0.2 -D -I "$WORK/iperf.pid" --logfile "$WORK/iperf.log"
    sleep 1
    PIDS+=("$(cat "$WORK/iperf.pid")")
    before=$(ip netns exec "$A" curl -s 127.0.0.1:9472/metrics | awk '/^boltwatch_outages_total\{.*peer="b"/{print $2}')
    echo "detect: load before the soak: $(uptime)"
    WINDOW=${WINDOW:-128K}
    ip netns exec "$A" iperf3 -c 10.77.0.2 -t $((SOAK_MINUTES * 60)) -P 4 \
        $([ "$WINDOW" = 0 ] || echo "-w $WINDOW") >"$WORK/iperf-c.log"
    echo "detect: load after the soak: $(uptime)"
    after=$(ip netns exec "$A" curl -s 127.0.0.1:9472/metrics | awk '/^boltwatch_outages_total\{.*peer="b"/{print $2}')
    late=$(ip netns exec "$A" curl -s 127.0.0.1:9472/metrics | awk '/^boltwatch_probe_late_total\{.*peer="b"/{print $2}')
    opened=$((${after%.*} - ${before%.*}))
    echo "detect: ${SOAK_MINUTES} min at 100 Hz under iperf3 at line rate (tbf 2 Gbit/s, window $WINDOW): $opened outages, ${late} late replies; $(tail -3 "$WORK/iperf-c.log" | head -1)"
    if [ "$opened" != 0 ]; then
        # What the agent knew when it opened them: the outages and the
        # late bound's moves (the peer's stalls) before each.
        grep -E "outage record emitted|late bound moved" "$WORK/a.log" | tail -20 >&2
        echo "detect: FAILED: a false outage under load" >&2
        exit 1
    fi
fi
