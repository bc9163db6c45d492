#!/usr/bin/env bash
# Installs boltwatch on a Linux node from a built tree: binaries, units,
# example config. Usage: sudo systemd-launchd/install-linux.sh [agent|collector|both]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-agent}
cargo build --release -p boltwatch-agent -p boltwatch-collector
install -d /etc/boltwatch
if [[ $what == agent || $what == both ]]; then
    install -m 0755 target/release/boltwatch-agent /usr/local/bin/
    [[ -e /etc/boltwatch/agent.toml ]] || install -m 0644 agent.example.toml /etc/boltwatch/agent.toml
    install -m 0644 systemd-launchd/boltwatch-agent.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-agent
fi
if [[ $what == collector || $what == both ]]; then
    install -m 0755 target/release/boltwatch-collector /usr/local/bin/
    [[ -e /etc/boltwatch/collector.toml ]] || : > /etc/boltwatch/collector.toml
    install -m 0644 systemd-launchd/boltwatch-collector.service /etc/systemd/system/
    systemctl daemon-reload
    systemctl enable --now boltwatch-collector
fi
