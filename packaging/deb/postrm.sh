#!/bin/sh
# boltwatch postrm: purge removes the configs postinst wrote and the
# agent's spool; the system user stays (files it owned may remain, as
# Debian leaves system users), the collector's store too
# (/var/lib/boltwatch-collector holds the soaks: remove it by hand).
set -e
root=${DPKG_ROOT:-}
if [ "$1" = purge ]; then
    rm -f "$root/etc/boltwatch/agent.toml" "$root/etc/boltwatch/collector.toml"
    rmdir "$root/etc/boltwatch" 2>/dev/null || true
    rm -rf "$root/var/lib/boltwatch"
fi
if [ -z "$root" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
