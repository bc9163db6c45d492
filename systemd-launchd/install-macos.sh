#!/usr/bin/env bash
# Installs the agent as a LaunchDaemon on a Mac. Usage: sudo systemd-launchd/install-macos.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p boltwatch-agent
install -m 0755 target/release/boltwatch-agent /usr/local/bin/
install -d "/Library/Application Support/boltwatch" /Library/Logs/boltwatch
[[ -e "/Library/Application Support/boltwatch/agent.toml" ]] || install -m 0644 agent.example.toml "/Library/Application Support/boltwatch/agent.toml"
install -o root -g wheel -m 0644 systemd-launchd/io.boltwatch.agent.plist /Library/LaunchDaemons/
launchctl bootout system/io.boltwatch.agent 2>/dev/null || true
launchctl bootstrap system /Library/LaunchDaemons/io.boltwatch.agent.plist
launchctl enable system/io.boltwatch.agent
launchctl print system/io.boltwatch.agent | head -20
