#!/bin/sh
# boltwatch prerm: stop the services before their binaries go.
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl disable --now boltwatch-agent.service boltwatch-collector.service || true
fi
