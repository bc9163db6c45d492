#!/usr/bin/env bash
# Installs or upgrades the agent as a LaunchDaemon on a Mac.
# Usage: sudo systemd-launchd/install-macos.sh
#
# Builds as the user who ran sudo (cargo and the target/ tree stay theirs),
# installs as root. Safe to run again: an upgrade with an unchanged plist
# restarts the job in place with `kickstart -k`; a changed plist is booted
# out, waited for, and bootstrapped again.
set -euo pipefail
cd "$(dirname "$0")/.."

label=io.boltwatch.agent
plist=/Library/LaunchDaemons/$label.plist
support="/Library/Application Support/boltwatch"

[[ $(id -u) -eq 0 ]] || { echo "run with sudo" >&2; exit 1; }
builder=${SUDO_USER:-}
if [[ -n $builder && $builder != root ]]; then
    sudo -u "$builder" -H cargo build --release -p boltwatch-agent
else
    cargo build --release -p boltwatch-agent
fi

install -m 0755 target/release/boltwatch-agent /usr/local/bin/
install -d "$support" /Library/Logs/boltwatch
[[ -e "$support/agent.toml" ]] || install -m 0644 agent.example.toml "$support/agent.toml"
# Fail here, before launchd is touched, if the config does not load.
/usr/local/bin/boltwatch-agent run --config "$support/agent.toml" --check-config

loaded() { launchctl print "system/$label" >/dev/null 2>&1; }

# bootstrap of a disabled label fails with error 5: enable first.
launchctl enable "system/$label"

if loaded && [[ -e $plist ]] && cmp -s systemd-launchd/$label.plist "$plist"; then
    # Same job definition: restart the new binary in place.
    launchctl kickstart -k "system/$label"
else
    if loaded; then
        launchctl bootout "system/$label" || true
        # bootout returns before the job is gone; bootstrap too early fails.
        for _ in $(seq 1 100); do loaded || break; sleep 0.1; done
        if loaded; then echo "$label did not stop within 10 s" >&2; exit 1; fi
    fi
    install -o root -g wheel -m 0644 systemd-launchd/$label.plist "$plist"
    launchctl bootstrap system "$plist"
fi
launchctl print "system/$label" | head -20
