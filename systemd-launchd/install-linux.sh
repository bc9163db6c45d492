#!/usr/bin/env bash
# Installs boltwatch on a Linux node from a built tree: binaries, units,
# example config, the agent's service user.
# Usage: sudo systemd-launchd/install-linux.sh [--node NAME] [--root DIR] [agent|collector|both]
# (default: agent; options in install-common.sh). Builds as the user who
# ran sudo (install-common.sh).
#
# The agent runs as the system user _boltwatch (created here) with one
# ambient capability, CAP_NET_BIND_SERVICE for STAMP's port 862 (see the
# unit). Its node name is --node, else `hostname -s`; the install stops
# before the unit starts while the config still says the example's name.
#
# Each config is checked (--check-config) before its unit starts: a config
# error stops the install here instead of leaving a unit that exits 78.
source "$(dirname "$0")/install-common.sh"

derive_node() { hostname -s; }

# create_user: the agent's system user and group, once. --root puts them
# in DIR/etc (useradd --prefix), not in this host's files.
create_user() {
    if grep -q "^$SERVICE_USER:" "$root/etc/passwd" 2>/dev/null; then
        return 0
    fi
    local prefix=()
    staged && prefix=(--prefix "$root")
    useradd "${prefix[@]}" --system --user-group --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin \
        --comment "boltwatch agent" "$SERVICE_USER"
}

# start_unit NAME: enables and starts NAME, unless the install is staged.
start_unit() {
    if staged; then
        echo "staged in $root: $1 not started"
        return 0
    fi
    systemctl daemon-reload
    systemctl enable --now "$1"
}

build
install -d "$root/etc/boltwatch" "$root/etc/systemd/system"
if wants agent; then
    config=/etc/boltwatch/agent.toml
    fresh=yes
    [[ -e $root$config ]] && fresh=no
    install_binary agent agent.example.toml "$config" 0644
    choose_node "$root$config" "$fresh"
    create_user
    "$root/usr/local/bin/boltwatch-agent" run --config "$root$config" --check-config
    install -m 0644 systemd-launchd/boltwatch-agent.service "$root/etc/systemd/system/"
    start_unit boltwatch-agent
fi
if wants collector; then
    # The commented example: every key with its default (loopback only).
    config=/etc/boltwatch/collector.toml
    install_binary collector collector/collector.example.toml "$config" 0644
    # A tokens file handed to the unit as a credential (docs/deployment.md, "Services
    # and deployment") is checked from its source.
    tokens=()
    [[ -e $root/etc/boltwatch/tokens ]] && tokens=(--auth-tokens "$root/etc/boltwatch/tokens")
    "$root/usr/local/bin/boltwatch-collector" serve --config "$root$config" "${tokens[@]}" --check-config
    install -m 0644 systemd-launchd/boltwatch-collector.service "$root/etc/systemd/system/"
    start_unit boltwatch-collector
fi
