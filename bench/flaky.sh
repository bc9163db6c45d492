#!/usr/bin/env bash
# Runs the whole suite (`bash .ci/test`) N times on a fresh clone of the
# current HEAD and tallies failures per test, to tell a flaky test from a
# broken one. What is tested is what is committed: uncommitted changes are
# not in the clone.
#
# Usage:
#   bench/flaky.sh [options] N
#   bench/flaky.sh --tally LOG...      tally saved run logs, run nothing
#
# Options:
#   --dry-run          print what would run (clone, commands, log paths)
#                      and exit without cloning or testing
#   --load CMD         run CMD (e.g. a bench/ load script) in the background
#                      during one run, to test under CPU contention
#   --load-run K       which run gets the load (default: the last)
#   --keep             keep the clone and logs (default: logs only)
#
# Environment:
#   FLAKY_TARGET_DIR   cargo target dir shared by the runs (default: one
#                      inside the temporary directory; point it at an
#                      existing target/ to skip the cold build)
#   FLAKY_LOG_DIR      where run logs go (default: a temporary directory,
#                      printed at the end)
#
# Output: one line per run (exit status, failed tests), then the tally:
# "failures/runs  binary::test" per test that failed at least once, and
# "0 failures in N runs" when none did. Exit status 1 if any run failed.
#
# The machine is shared: every run is the whole suite (minutes, both
# cores). Run it with N > 1 only when nothing else needs the machine.
set -euo pipefail

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

# Tallies libtest output in the given logs. A test is named after the test
# binary that ran it (the `Running ... (target/.../deps/NAME-HASH)` or
# `Doc-tests NAME` line before it), so `e2e::starts` and a unit test of the
# same name stay apart. A run that failed without a failing test line (a
# build error, a crash, a timeout) is counted as `<run failed: no test
# named>`.
tally() {
    local runs=$#
    awk -v runs="$runs" '
        FNR == 1 { file++; bin = "?"; named = 0 }
        /^ *Running / {
            # "Running tests/e2e.rs (target/debug/deps/e2e-0123abcd)"
            p = $0
            if (match(p, /\(([^()]*)\)/)) {
                p = substr(p, RSTART + 1, RLENGTH - 2)
                n = split(p, parts, "/")
                bin = parts[n]
                sub(/-[0-9a-f]+$/, "", bin)
            }
        }
        /^ *Doc-tests / { bin = "doc:" $2 }
        /^test .* \.\.\. FAILED$/ {
            name = $0
            sub(/^test /, "", name)
            sub(/ \.\.\. FAILED$/, "", name)
            key = bin "::" name
            if (!((file, key) in seen)) {
                seen[file, key] = 1
                fails[key]++
                named = 1
            }
        }
        /^FLAKY-RUN-EXIT [1-9]/ {
            if (!named) fails["<run failed: no test named>"]++
        }
        END {
            total = 0
            for (k in fails) { printf "%d/%d  %s\n", fails[k], runs, k; total++ }
            if (total == 0) printf "0 failures in %d runs\n", runs
        }
    ' "$@" | sort -t/ -k1,1nr -k2
}

dry=0 keep=0 load="" load_run="" n=""
while (($#)); do
    case "$1" in
        --tally) shift; (($#)) || usage; tally "$@"; exit 0 ;;
        --dry-run) dry=1 ;;
        --keep) keep=1 ;;
        --load) shift; load="${1:?--load needs a command}" ;;
        --load-run) shift; load_run="${1:?--load-run needs a run number}" ;;
        -h|--help) usage ;;
        -*) echo "unknown option $1" >&2; usage ;;
        *) [[ -z "$n" ]] || usage; n="$1" ;;
    esac
    shift
done
[[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
load_run="${load_run:-$n}"

repo="$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)"
head="$(git -C "$repo" rev-parse HEAD)"
work="$(mktemp -d -t boltwatch-flaky.XXXXXX)"
logs="${FLAKY_LOG_DIR:-$work/logs}"
target="${FLAKY_TARGET_DIR:-$work/target}"

if ((dry)); then
    echo "would clone $repo at $head into $work/src"
    echo "would run $n time(s): (cd $work/src && CARGO_TARGET_DIR=$target bash .ci/test)"
    [[ -n "$load" ]] && echo "would run load '$load' during run $load_run"
    echo "would write logs to $logs/run-<i>.log and tally them with: $0 --tally $logs/run-*.log"
    rmdir "$work"
    exit 0
fi

load_pid=""
cleanup() {
    # Only the load this script started, by its process group.
    if [[ -n "$load_pid" ]]; then kill -- "-$load_pid" 2>/dev/null || true; fi
    if ((!keep)); then rm -rf "$work/src"; [[ -n "${FLAKY_TARGET_DIR:-}" ]] || rm -rf "$work/target"; fi
}
trap cleanup EXIT

mkdir -p "$logs"
git clone --quiet --no-hardlinks "$repo" "$work/src"
git -C "$work/src" checkout --quiet --detach "$head"
echo "suite of $head, $n run(s), logs in $logs"

any_failed=0
for ((i = 1; i <= n; i++)); do
    log="$logs/run-$i.log"
    if [[ -n "$load" && "$i" == "$load_run" ]]; then
        setsid bash -c "$load" >"$logs/load-$i.log" 2>&1 &
        load_pid=$!
        echo "run $i: under load '$load' (pid $load_pid)"
    fi
    set +e
    (cd "$work/src" && CARGO_TARGET_DIR="$target" bash .ci/test) >"$log" 2>&1
    rc=$?
    set -e
    echo "FLAKY-RUN-EXIT $rc" >>"$log"
    if [[ -n "$load_pid" ]]; then
        kill -- "-$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
        load_pid=""
    fi
    failed="$(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u | paste -sd, -)"
    echo "run $i: exit $rc${failed:+, failed: $failed}"
    ((rc == 0)) || any_failed=1
done

echo "--- failures per test over $n run(s)"
tally "$logs"/run-*.log
exit "$any_failed"
