# What install-linux.sh and install-macos.sh share; sourced by them, not run.
# Takes the scripts' arguments:
#   [--node NAME] [--root DIR] [agent|collector|both]   (role default: agent)
# Leaves the caller at the top of the tree with $what, $node, $root set.
#
# --node NAME  the agent's node name, written into its config. Default: the
#              platform's short host name (the caller's derive_node).
# --root DIR   a staged install into DIR (an image, a package, a test): every
#              path is under DIR, the service user goes into DIR/etc, and no
#              service is started. Default /.
# BOLTWATCH_BIN_DIR=DIR  install the binaries found in DIR instead of
#              building them (built on another machine, or by a test).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The example config's placeholder node name: an agent must never go live
# under it (every mini would report as the same node).
readonly EXAMPLE_NODE=mini-a
# The user the agent runs as: not root (docs/deployment.md, "What needs
# root"). The leading underscore is the macOS convention for daemons.
readonly SERVICE_USER=_boltwatch

usage() {
    echo "usage: $0 [--node NAME] [--root DIR] [agent|collector|both]" >&2
    exit 2
}

what=agent node= root=
while (($#)); do
    case $1 in
        --node) (($# >= 2)) || usage; node=$2; shift 2 ;;
        --node=*) node=${1#--node=}; shift ;;
        --root) (($# >= 2)) || usage; root=${2%/}; shift 2 ;;
        --root=*) root=${1#--root=}; root=${root%/}; shift ;;
        agent | collector | both) what=$1; shift ;;
        *) usage ;;
    esac
done
if [[ -n $root && $root != /* ]]; then
    echo "--root must be an absolute path: $root" >&2
    exit 2
fi

[[ $(id -u) -eq 0 ]] || { echo "run with sudo" >&2; exit 1; }

# wants ROLE: whether this install includes ROLE (agent or collector).
wants() { [[ $what == "$1" || $what == both ]]; }

# staged: whether this is a --root install (nothing is started).
staged() { [[ -n $root ]]; }

# valid_node NAME: a node name the metrics and the spool path can carry:
# letters, digits, '.', '_' and '-', starting with a letter or digit.
valid_node() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$ ]]; }

# build: the release binaries this install needs, built as the user who ran
# sudo (cargo and the target/ tree stay theirs), or as root without sudo.
# With BOLTWATCH_BIN_DIR set nothing is built.
build() {
    [[ -n ${BOLTWATCH_BIN_DIR:-} ]] && return 0
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

# install_binary ROLE EXAMPLE CONFIG MODE: boltwatch-ROLE into
# $root/usr/local/bin (created: a fresh Mac has no /usr/local/bin) and,
# unless CONFIG exists, the commented EXAMPLE as CONFIG with MODE. CONFIG
# is a path inside the installed system; it is written under $root.
install_binary() {
    local role=$1 example=$2 config=$root$3 mode=$4
    install -d -m 0755 "$root/usr/local/bin"
    install -m 0755 "${BOLTWATCH_BIN_DIR:-target/release}/boltwatch-$role" "$root/usr/local/bin/"
    [[ -e $config ]] || install -m "$mode" "$example" "$config"
}

# node_line CONFIG: "LINE<TAB>NAME" of CONFIG's top-level `node = "NAME"`
# (before the first [table]); nothing when there is none.
node_line() {
    awk '/^[[:space:]]*\[/ { exit }
         /^[[:space:]]*node[[:space:]]*=/ {
             v = $0; sub(/^[^=]*=[[:space:]]*/, "", v); sub(/[[:space:]]*(#.*)?$/, "", v)
             gsub(/^"|"$/, "", v); print NR "\t" v; exit }' "$1"
}

# set_node CONFIG NAME: CONFIG's top-level `node = ...` line now says NAME
# (or one is added at the top when there is none).
set_node() {
    local config=$1 name=$2 at
    at=$(node_line "$config" | cut -f1)
    if [[ -n $at ]]; then
        sed -i.bak "${at}s/.*/node = \"$name\"/" "$config"
    else
        sed -i.bak "1i\\
node = \"$name\"
" "$config"
    fi
    rm -f "$config.bak"
}

# choose_node CONFIG FRESH: settles the agent's node name before the
# service can start. --node NAME is written into CONFIG; otherwise a FRESH
# copy of the example gets the derived host name (derive_node, from the
# calling script). A config that still says the example's name afterwards
# (kept from an earlier install, or no usable host name) stops the install
# with the file and line to edit: it would report as "mini-a".
choose_node() {
    local config=$1 fresh=$2 name=$node
    if [[ -z $name && $fresh == yes ]]; then
        name=$(derive_node || true)
        if [[ -n $name ]] && ! valid_node "$name"; then
            echo "the host name '$name' is not a usable node name; pass --node NAME" >&2
            name=
        fi
    fi
    if [[ -n $name ]]; then
        valid_node "$name" || { echo "--node '$name': use letters, digits, '.', '_', '-'" >&2; exit 2; }
        set_node "$config" "$name"
        echo "node name: $name (in $config)"
    fi
    local got
    got=$(node_line "$config")
    if [[ ${got#*$'\t'} == "$EXAMPLE_NODE" && $name != "$EXAMPLE_NODE" ]]; then
        echo "$config:${got%%$'\t'*}: node = \"$EXAMPLE_NODE\" is the example's name;" \
            "edit that line (or run again with --node NAME) before the agent starts" >&2
        exit 1
    fi
}

# first_free_id: the first id from 400 to 499 that no line of stdin uses
# (stdin: `dscl . -list /Users UniqueID` and `/Groups PrimaryGroupID`
# output, "name id" per line). Below 500 keeps the account off the login
# window and out of the range macOS gives people; fails when all are taken.
first_free_id() {
    awk '{ used[$NF] = 1 }
         END { for (id = 400; id < 500; id++) if (!(id in used)) { print id; exit 0 }; exit 1 }'
}
