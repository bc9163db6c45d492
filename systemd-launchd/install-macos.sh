#!/usr/bin/env bash
# Installs or upgrades boltwatch as LaunchDaemons on a Mac.
# Usage: sudo systemd-launchd/install-macos.sh [agent|collector|both]   (default: agent)
#
# Builds as the user who ran sudo (cargo and the target/ tree stay theirs),
# installs as root. Safe to run again: an upgrade with an unchanged plist
# restarts the job in place with `kickstart -k`; a changed plist is booted
# out, waited for, and bootstrapped again. Log rotation: newsyslog, with
# systemd-launchd/boltwatch.newsyslog.conf in /etc/newsyslog.d/.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-agent}
case $what in
    agent | collector | both) ;;
    *) echo "usage: $0 [agent|collector|both]" >&2; exit 2 ;;
esac
support="/Library/Application Support/boltwatch"

[[ $(id -u) -eq 0 ]] || { echo "run with sudo" >&2; exit 1; }
packages=()
[[ $what == collector ]] || packages+=(-p boltwatch-agent)
[[ $what == agent ]] || packages+=(-p boltwatch-collector)
builder=${SUDO_USER:-}
if [[ -n $builder && $builder != root ]]; then
    sudo -u "$builder" -H cargo build --release "${packages[@]}"
else
    cargo build --release "${packages[@]}"
fi

install -d "$support" /Library/Logs/boltwatch /etc/newsyslog.d
install -o root -g wheel -m 0644 systemd-launchd/boltwatch.newsyslog.conf /etc/newsyslog.d/boltwatch.conf

loaded() { launchctl print "system/$1" >/dev/null 2>&1; }

# install_job LABEL: (re)starts the job from systemd-launchd/LABEL.plist.
install_job() {
    local label=$1
    local plist=/Library/LaunchDaemons/$label.plist
    # bootstrap of a disabled label fails with error 5: enable first.
    launchctl enable "system/$label"
    if loaded "$label" && [[ -e $plist ]] && cmp -s "systemd-launchd/$label.plist" "$plist"; then
        # Same job definition: restart the new binary in place.
        launchctl kickstart -k "system/$label"
    else
        if loaded "$label"; then
            launchctl bootout "system/$label" || true
            # bootout returns before the job is gone; bootstrap too early fails.
            for _ in $(seq 1 100); do loaded "$label" || break; sleep 0.1; done
            if loaded "$label"; then echo "$label did not stop within 10 s" >&2; exit 1; fi
        fi
        install -o root -g wheel -m 0644 "systemd-launchd/$label.plist" "$plist"
        launchctl bootstrap system "$plist"
    fi
    launchctl print "system/$label" | head -20
}

if [[ $what == agent || $what == both ]]; then
    install -m 0755 target/release/boltwatch-agent /usr/local/bin/
    [[ -e "$support/agent.toml" ]] || install -m 0644 agent.example.toml "$support/agent.toml"
    # Fail here, before launchd is touched, if the config does not load.
    /usr/local/bin/boltwatch-agent run --config "$support/agent.toml" --check-config
    install_job io.boltwatch.agent
fi
if [[ $what == collector || $what == both ]]; then
    install -m 0755 target/release/boltwatch-collector /usr/local/bin/
    # The commented example: every key with its default (loopback only).
    [[ -e "$support/collector.toml" ]] || install -m 0600 collector/collector.example.toml "$support/collector.toml"
    install -d -m 0700 "$support/collector"
    /usr/local/bin/boltwatch-collector serve --config "$support/collector.toml" --check-config
    install_job io.boltwatch.collector
fi
