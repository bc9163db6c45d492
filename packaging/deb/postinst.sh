#!/bin/sh
# boltwatch postinst: the agent's system user and, on a first install, the
# configs from the examples (the agent's named after this host). The
# configs are the operator's, not conffiles: an upgrade never touches them.
# DPKG_ROOT (dpkg --root with --force-script-chrootless) stages all of it.
set -e
root=${DPKG_ROOT:-}
user=_boltwatch
examples=$root/usr/share/doc/boltwatch/examples

if [ "$1" = configure ]; then
    if ! grep -q "^$user:" "$root/etc/passwd"; then
        prefix=
        [ -n "$root" ] && prefix="--prefix $root"
        # shellcheck disable=SC2086 # no prefix: no word
        useradd $prefix --system --user-group --no-create-home \
            --home-dir /nonexistent --shell /usr/sbin/nologin \
            --comment "boltwatch agent" "$user"
    fi
    install -d -m 0755 "$root/etc/boltwatch"
    if [ ! -e "$root/etc/boltwatch/agent.toml" ]; then
        node=$(hostname -s 2>/dev/null || true)
        sed "s/^node = .*/node = \"${node:-mini-a}\"/" "$examples/agent.toml" \
            >"$root/etc/boltwatch/agent.toml"
        chmod 0644 "$root/etc/boltwatch/agent.toml"
    fi
    if [ ! -e "$root/etc/boltwatch/collector.toml" ]; then
        install -m 0644 "$examples/collector.toml" "$root/etc/boltwatch/collector.toml"
    fi
    if [ -z "$root" ] && [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
    fi
    echo "boltwatch: edit /etc/boltwatch/agent.toml (collector, peers, token_file), then" \
        "systemctl enable --now boltwatch-agent (or boltwatch-collector on the collector host)"
fi
