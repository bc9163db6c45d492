# What install-linux.sh and install-macos.sh share; sourced by them, not run.
# Takes the scripts' arguments: [agent|collector|both] (default: agent).
# Leaves the caller at the top of the tree with $what set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

what=${1:-agent}
case $what in
    agent | collector | both) ;;
    *) echo "usage: $0 [agent|collector|both]" >&2; exit 2 ;;
esac

[[ $(id -u) -eq 0 ]] || { echo "run with sudo" >&2; exit 1; }

# wants ROLE: whether this install includes ROLE (agent or collector).
wants() { [[ $what == "$1" || $what == both ]]; }

# build: the release binaries this install needs, built as the user who ran
# sudo (cargo and the target/ tree stay theirs), or as root without sudo.
build() {
    local packages=()
    wants agent && packages+=(-p boltwatch-agent)
    wants collector && packages+=(-p boltwatch-collector)
    local builder=${SUDO_USER:-}
    if [[ -n $builder && $builder != root ]]; then
        sudo -u "$builder" -H cargo build --release "${packages[@]}"
    else
        cargo build --release "${packages[@]}"
    fi
}

# install_binary ROLE EXAMPLE CONFIG MODE: boltwatch-ROLE into /usr/local/bin
# and, unless CONFIG exists, the commented EXAMPLE as CONFIG with MODE.
install_binary() {
    local role=$1 example=$2 config=$3 mode=$4
    install -m 0755 "target/release/boltwatch-$role" /usr/local/bin/
    [[ -e $config ]] || install -m "$mode" "$example" "$config"
}
