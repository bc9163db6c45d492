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
