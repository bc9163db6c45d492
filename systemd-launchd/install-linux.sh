#!/usr/bin/env bash
# Installs boltwatch on a Linux node from a built tree: binaries, units,
# example config. Usage: sudo systemd-launchd/install-linux.sh [agent|collector|both]
# (default: agent). Builds as the user who ran sudo (install-common.sh).
#
# Each config is checked (--check-config) before its unit starts: a config
# error stops the install here instead of leaving a unit that exits 78.
source "$(dirname "$0")/install-common.sh"
build
install -d /etc/boltwatch
if wants agent; then
    install_binary agent agent.example.toml /etc/boltwatch/agent.toml 0644
    /usr/local/bin/boltwatch-agent run --config /etc/boltwatch/agent.toml --check-config
    install -m 0644 systemd-launchd/boltwatch-agent.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-agent
fi
if wants collector; then
    # The commented example: every key with its default (loopback only).
    install_binary collector collector/collector.example.toml /etc/boltwatch/collector.toml 0644
    # A tokens file handed to the unit as a credential (docs/deployment.md, "Services
    # and deployment") is checked from its source.
    tokens=()
    [[ -e /etc/boltwatch/tokens ]] && tokens=(--auth-tokens /etc/boltwatch/tokens)
    /usr/local/bin/boltwatch-collector serve --config /etc/boltwatch/collector.toml "${tokens[@]}" --check-config
    install -m 0644 systemd-launchd/boltwatch-collector.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-collector
fi
