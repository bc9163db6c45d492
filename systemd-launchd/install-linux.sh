#!/usr/bin/env bash
# Installs boltwatch on a Linux node from a built tree: binaries, units,
# example config. Usage: sudo systemd-launchd/install-linux.sh [agent|collector|both]
#
# Each config is checked (--check-config) before its unit starts: a config
# error stops the install here instead of leaving a unit that exits 78.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-agent}
case $what in
    agent | collector | both) ;;
    *) echo "usage: $0 [agent|collector|both]" >&2; exit 2 ;;
esac
cargo build --release -p boltwatch-agent -p boltwatch-collector
install -d /etc/boltwatch
if [[ $what == agent || $what == both ]]; then
    install -m 0755 target/release/boltwatch-agent /usr/local/bin/
    [[ -e /etc/boltwatch/agent.toml ]] || install -m 0644 agent.example.toml /etc/boltwatch/agent.toml
    /usr/local/bin/boltwatch-agent run --config /etc/boltwatch/agent.toml --check-config
    install -m 0644 systemd-launchd/boltwatch-agent.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-agent
fi
if [[ $what == collector || $what == both ]]; then
    install -m 0755 target/release/boltwatch-collector /usr/local/bin/
    # The commented example: every key with its default (loopback only).
    [[ -e /etc/boltwatch/collector.toml ]] || install -m 0644 collector/collector.example.toml /etc/boltwatch/collector.toml
    # A tokens file handed to the unit as a credential (README, "Services
    # and deployment") is checked from its source.
    tokens=()
    [[ -e /etc/boltwatch/tokens ]] && tokens=(--auth-tokens /etc/boltwatch/tokens)
    /usr/local/bin/boltwatch-collector serve --config /etc/boltwatch/collector.toml "${tokens[@]}" --check-config
    install -m 0644 systemd-launchd/boltwatch-collector.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-collector
fi
