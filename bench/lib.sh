# Sourced by the bench scripts that run release binaries in the background:
# builds them, makes a scratch directory, and on exit kills every pid the
# script appended to `pids` and removes the scratch directory.
# Sets: bin (the release binaries), tmp (scratch dir), pids (array).
bench_release_setup() {
    cargo build --release -q -p boltwatch-agent -p boltwatch-collector
    bin=target/release
    tmp=$(mktemp -d)
    pids=()
    trap bench_cleanup EXIT
}

bench_cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}

# --- The store benches (store.sh, retention.sh, compaction.sh) ---

# Parses --hours H and --nodes N into $hours and $nodes (their defaults set
# before the call) and checks the tools the store benches use.
bench_store_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --hours) hours=$2; shift 2 ;;
            --nodes) nodes=$2; shift 2 ;;
            *) echo "usage: $0 [--hours H] [--nodes N]" >&2; exit 2 ;;
        esac
    done
    command -v python3 >/dev/null || { echo "need python3 (sqlite3 module)" >&2; exit 1; }
    command -v taskset >/dev/null || { echo "need taskset (util-linux)" >&2; exit 1; }
}

# Builds the release collector and the store_load client (the store
# benches' load); sets $bin and $load.
bench_store_build() {
    CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0} cargo build --release -q -p boltwatch-collector \
        --bin boltwatch-collector --example store_load
    local rel=${CARGO_TARGET_DIR:-target}/release
    bin=$rel/boltwatch-collector
    load=$rel/examples/store_load
}

# A free loopback port.
bench_port() {
    while :; do
        p=$((20000 + RANDOM % 20000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Starts `$bin serve` on the store in $1 (the rest: serve flags) at $grpc
# and $http with the ingest limits lifted, logging to
# $scratch/collector.log; sets $collector; returns once /healthz answers.
bench_serve() {
    local dir=$1
    shift
    mkdir -p "$dir"
    cat >"$scratch/collector.toml" <<TOML
data_dir = "$dir"
grpc_listen = "$grpc"
http_listen = "$http"
max_records_per_second = 10000000
max_bytes_per_second = 1099511627776
TOML
    "$bin" serve --config "$scratch/collector.toml" "$@" >>"$scratch/collector.log" 2>&1 &
    collector=$!
    for _ in $(seq 600); do
        curl -fs "http://$http/healthz" >/dev/null 2>&1 && return
        kill -0 "$collector" 2>/dev/null || { cat "$scratch/collector.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "collector did not come up" >&2
    exit 1
}

# Stops $collector cleanly (which checkpoints the WAL into the database).
bench_stop() {
    kill -TERM "$collector"
    wait "$collector" || { cat "$scratch/collector.log" >&2; exit 1; }
    collector=""
}

# Of the store in $1: bytes of pages in use (a pruned or compacted file
# keeps its free pages for reuse), rows, records.
bench_store_sizes() {
    python3 - "$1/boltwatch.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = lambda s: c.execute(s).fetchone()[0]
print((q("PRAGMA page_count") - q("PRAGMA freelist_count")) * q("PRAGMA page_size"),
      q("SELECT count(*) FROM stored"), q("SELECT coalesce(sum(n), 0) FROM stored"))
PY
}

# Kills a collector still running and removes $scratch.
bench_store_cleanup() {
    [ -n "$collector" ] && kill "$collector" 2>/dev/null && wait "$collector" 2>/dev/null
    rm -rf "$scratch"
}
