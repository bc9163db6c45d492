#!/usr/bin/env bash
# Compaction of a live soak's store. A live agent sends each record as
# soon as it is spooled, so its rows hold one record each; compaction
# rewrites closed minutes as packs. The same simulated N-node mesh over H
# hours as bench/store.sh goes, through the real gRPC ingest of a release
# `boltwatch-collector serve`:
#   1. live: a record a batch into a collector with `--no-compact`;
#   2. the same store after a collector with compaction has packed it
#      (timed: collector CPU from /proc between serving and done);
#   3. the anchor: the catch-up store, full 4096-record batches.
# Prints one markdown table, the compacted/anchor byte ratio, the
# compaction's CPU per record, and whether the JSON report over the
# compacted store is the report over the live one, byte for byte.
# Usage: bench/compaction.sh [--hours H] [--nodes N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
hours=6 nodes=4
bench_store_args "$@"

bench_store_build

scratch=$(mktemp -d)
collector=""
trap bench_store_cleanup EXIT
grpc=127.0.0.1:$(bench_port)
http=127.0.0.1:$(bench_port)

cpu() { # the collector's user + system CPU seconds so far
    awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$collector/stat"
}

sql() { # $1: database, $2: Python expression over q (one value per query)
    python3 - "$1" "$2" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = lambda s: c.execute(s).fetchone()[0]
print(eval(sys.argv[2]))
PY
}


from=1793491200
to=$((from + hours * 3600))
TIMEFORMAT='%R %U %S'
report() { # $1: data dir, $2: label; table timed on core 0, JSON kept
    { time taskset -c 0 "$bin" report --data-dir "$1" --from "$from" --to "$to" --format table \
        --out "$scratch/$2.table" >/dev/null; } 2>"$scratch/time.$2"
    read -r _ user sys <"$scratch/time.$2"
    echo "$user + $sys" | bc -l | xargs printf '%.2f' >"$scratch/secs.$2"
    "$bin" report --data-dir "$1" --from "$from" --to "$to" --format json --out "$scratch/$2.json" >/dev/null
}

vacuumed() { # file bytes of a VACUUMed copy
    sql "$1/boltwatch.db" 'c.execute("VACUUM INTO ?", ("'"$scratch"'/vacuumed.db",)) and 0' >/dev/null
    stat -c %s "$scratch/vacuumed.db"
    rm -f "$scratch/vacuumed.db"
}

# 1. Live: a record a batch, nothing compacted.
live=$scratch/live
bench_serve "$live" --no-compact
"$load" --grpc "$grpc" --hours "$hours" --nodes "$nodes" --batch 1 --window 2 --pid "$collector" >&2
bench_stop
read -r live_bytes live_rows live_records < <(bench_store_sizes "$live")
live_file=$(vacuumed "$live")
report "$live" live

# 2. The same store, compacted by a collector's own task (every row
# arrived before it started; no remote_write endpoint holds any back).
bench_serve "$live"
cpu0=$(cpu)
for _ in $(seq 3000); do
    done_=$(sql "$live/boltwatch.db" 'int(q("SELECT coalesce((SELECT pos FROM compaction WHERE id = 1), 0)") >= q("SELECT max(pos) FROM stored"))')
    [ "$done_" = 1 ] && break
    sleep 0.2
done
[ "$done_" = 1 ] || { echo "compaction did not finish" >&2; exit 1; }
compact_cpu=$(echo "$(cpu) - $cpu0" | bc -l)
bench_stop
read -r packed_bytes packed_rows packed_records < <(bench_store_sizes "$live")
packed_file=$(vacuumed "$live")
report "$live" packed

# 3. The anchor: the catch-up store, full batches.
anchor=$scratch/anchor
bench_serve "$anchor" --no-compact
"$load" --grpc "$grpc" --hours "$hours" --nodes "$nodes" --pid "$collector" >&2
bench_stop
read -r anchor_bytes anchor_rows anchor_records < <(bench_store_sizes "$anchor")
anchor_file=$(vacuumed "$anchor")
report "$anchor" anchor

same=no
cmp -s "$scratch/live.json" "$scratch/packed.json" && same=yes
[ "$live_records" = "$packed_records" ] || { echo "records differ: $live_records vs $packed_records" >&2; exit 1; }

echo
echo "| store ($nodes nodes, $hours h) | records | rows | bytes in use | bytes/record | file after VACUUM | report table CPU s |"
echo "|---|---|---|---|---|---|---|"
row() { printf '| %s | %s | %s | %s | %.1f | %s | %s |\n' "$1" "$2" "$3" "$4" "$(echo "$4 / $2" | bc -l)" "$5" "$6"; }
row "live, a record a batch" "$live_records" "$live_rows" "$live_bytes" "$live_file" "$(cat "$scratch/secs.live")"
row "live, compacted" "$packed_records" "$packed_rows" "$packed_bytes" "$packed_file" "$(cat "$scratch/secs.packed")"
row "anchor: catch-up, 4096-record batches" "$anchor_records" "$anchor_rows" "$anchor_bytes" "$anchor_file" "$(cat "$scratch/secs.anchor")"
echo
printf 'compacted / live bytes in use: %.2f; compacted / anchor: %.2f\n' \
    "$(echo "$packed_bytes / $live_bytes" | bc -l)" "$(echo "$packed_bytes / $anchor_bytes" | bc -l)"
printf 'compaction: %.2f collector CPU s, %.2f us a record\n' \
    "$compact_cpu" "$(echo "$compact_cpu * 1000000 / $live_records" | bc -l)"
echo "JSON report after compaction identical to before: $same"
