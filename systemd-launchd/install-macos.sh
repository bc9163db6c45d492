#!/usr/bin/env bash
# Installs or upgrades boltwatch as LaunchDaemons on a Mac.
# Usage: sudo systemd-launchd/install-macos.sh [--node NAME] [agent|collector|both]
# (default: agent; options in install-common.sh; --root is Linux-only).
#
# Builds as the user who ran sudo (install-common.sh), installs as root.
# The agent runs as the hidden user _boltwatch (created here with dscl):
# nothing it does needs root on macOS (docs/deployment.md, "What needs
# root"). Its node name is --node, else `scutil --get LocalHostName`; the
# install stops before launchd is touched while the config still says the
# example's name.
# Safe to run again: an upgrade with an unchanged plist restarts the job in
# place with `kickstart -k`; a changed plist is booted out, waited for, and
# bootstrapped again. Log rotation: newsyslog, with
# systemd-launchd/boltwatch.newsyslog.conf in /etc/newsyslog.d/.
source "$(dirname "$0")/install-common.sh"
if staged; then
    echo "--root: a staged install is Linux-only (dscl and launchctl act on this Mac)" >&2
    exit 2
fi
support="/Library/Application Support/boltwatch"

derive_node() { scutil --get LocalHostName; }

# create_user: the hidden system user and group _boltwatch, once, with the
# same free id below 500, no shell and no home.
create_user() {
    dscl . -read "/Users/$SERVICE_USER" >/dev/null 2>&1 && return 0
    local id
    id=$({ dscl . -list /Users UniqueID; dscl . -list /Groups PrimaryGroupID; } | first_free_id) ||
        { echo "no free user/group id in 400..499 for $SERVICE_USER" >&2; exit 1; }
    if ! dscl . -read "/Groups/$SERVICE_USER" >/dev/null 2>&1; then
        dscl . -create "/Groups/$SERVICE_USER" PrimaryGroupID "$id"
        dscl . -create "/Groups/$SERVICE_USER" RealName "boltwatch agent"
        dscl . -create "/Groups/$SERVICE_USER" Password '*'
    fi
    local gid
    gid=$(dscl . -read "/Groups/$SERVICE_USER" PrimaryGroupID | awk '{ print $2 }')
    dscl . -create "/Users/$SERVICE_USER" UniqueID "$id"
    dscl . -create "/Users/$SERVICE_USER" PrimaryGroupID "$gid"
    dscl . -create "/Users/$SERVICE_USER" UserShell /usr/bin/false
    dscl . -create "/Users/$SERVICE_USER" NFSHomeDirectory /var/empty
    dscl . -create "/Users/$SERVICE_USER" RealName "boltwatch agent"
    dscl . -create "/Users/$SERVICE_USER" Password '*'
    dscl . -create "/Users/$SERVICE_USER" IsHidden 1
}

build

install -d "$support" /etc/newsyslog.d
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
    fresh=yes
    [[ -e $support/agent.toml ]] && fresh=no
    install_binary agent agent.example.toml "$support/agent.toml" 0644
    choose_node "$support/agent.toml" "$fresh"
    create_user
    # What the agent writes, owned by it: its log and pid file (newsyslog
    # creates the next log as _boltwatch too) and the spool's default
    # parent. The config stays root's.
    install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m 0755 /Library/Logs/boltwatch
    install -d -o "$SERVICE_USER" -g "$SERVICE_USER" -m 0750 /var/lib/boltwatch
    # A log left by an earlier install that ran the agent as root.
    [[ -e /Library/Logs/boltwatch/agent.log ]] && chown "$SERVICE_USER:$SERVICE_USER" /Library/Logs/boltwatch/agent.log
    # Fail here, before launchd is touched, if the config does not load.
    /usr/local/bin/boltwatch-agent run --config "$support/agent.toml" --check-config
    install_job io.boltwatch.agent
fi
if wants collector; then
    # The collector still runs as root; its log directory is shared.
    install -d /Library/Logs/boltwatch
    # The commented example: every key with its default (loopback only).
    install_binary collector collector/collector.example.toml "$support/collector.toml" 0600
    install -d -m 0700 "$support/collector"
    /usr/local/bin/boltwatch-collector serve --config "$support/collector.toml" --check-config
    install_job io.boltwatch.collector
fi
