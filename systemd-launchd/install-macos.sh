#!/usr/bin/env bash
# Installs or upgrades boltwatch as LaunchDaemons on a Mac.
# Usage: sudo systemd-launchd/install-macos.sh [agent|collector|both]   (default: agent)
#
# Builds as the user who ran sudo (install-common.sh), installs as root.
# Safe to run again: an upgrade with an unchanged plist restarts the job in
# place with `kickstart -k`; a changed plist is booted out, waited for, and
# bootstrapped again. Log rotation: newsyslog, with
# systemd-launchd/boltwatch.newsyslog.conf in /etc/newsyslog.d/.
source "$(dirname "$0")/install-common.sh"
support="/Library/Application Support/boltwatch"
build

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

if wants agent; then
    install_binary agent agent.example.toml "$support/agent.toml" 0644
    # Fail here, before launchd is touched, if the config does not load.
    /usr/local/bin/boltwatch-agent run --config "$support/agent.toml" --check-config
    install_job io.boltwatch.agent
fi
if wants collector; then
    # The commented example: every key with its default (loopback only).
    install_binary collector collector/collector.example.toml "$support/collector.toml" 0600
    install -d -m 0700 "$support/collector"
    /usr/local/bin/boltwatch-collector serve --config "$support/collector.toml" --check-config
    install_job io.boltwatch.collector
fi
