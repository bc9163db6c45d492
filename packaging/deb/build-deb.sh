#!/usr/bin/env bash
# Builds boltwatch_VERSION_ARCH.deb with dpkg-deb alone (no cargo-deb, so
# CI needs no network install): both binaries in /usr/bin, the systemd
# units from systemd-launchd/ (ExecStart pointed at /usr/bin), the example
# configs in /usr/share/doc/boltwatch/examples, the README the units'
# Documentation= names, and maintainer scripts (postinst.sh, prerm.sh,
# postrm.sh beside this file) that create the agent's system user
# _boltwatch and a config named after the host.
#
# Usage: packaging/deb/build-deb.sh [--bin-dir DIR] [--out DIR]
#   --bin-dir  where boltwatch-agent and boltwatch-collector are
#              (default target/release, built first when missing)
#   --out      where the .deb goes (default target/deb)
# Prints the absolute path of the .deb (build progress goes to stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."

bin_dir=target/release out=target/deb
while (($#)); do
    case $1 in
        --bin-dir) bin_dir=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: $0 [--bin-dir DIR] [--out DIR]" >&2; exit 2 ;;
    esac
done
# Without --bin-dir, the release binaries are built when missing (one
# cargo run, reused by later builds of the same packages).
if [[ $bin_dir == target/release && ! -x target/release/boltwatch-collector ]]; then
    cargo build --release -p boltwatch-agent -p boltwatch-collector >&2
fi
for b in boltwatch-agent boltwatch-collector; do
    [[ -x $bin_dir/$b ]] || {
        echo "$bin_dir/$b missing: cargo build --release -p boltwatch-agent -p boltwatch-collector" >&2
        exit 1
    }
done

# The workspace's version; the commit rides in the binaries' --version.
version=$(awk -F'"' '/^\[workspace.package\]/ { w = 1 } w && /^version *=/ { print $2; exit }' Cargo.toml)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg=$stage/boltwatch

install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/lib/systemd/system" \
    "$pkg/usr/share/doc/boltwatch/examples"
# Stripped, as Debian ships binaries (dh_strip).
install -m 0755 --strip "$bin_dir/boltwatch-agent" "$bin_dir/boltwatch-collector" "$pkg/usr/bin/"
# Debian installs binaries in /usr/bin; the units (one source, shared with
# install-linux.sh) name /usr/local/bin.
for unit in boltwatch-agent.service boltwatch-collector.service; do
    sed 's|/usr/local/bin/|/usr/bin/|g' "systemd-launchd/$unit" >"$pkg/lib/systemd/system/$unit"
    chmod 0644 "$pkg/lib/systemd/system/$unit"
done
install -m 0644 agent.example.toml "$pkg/usr/share/doc/boltwatch/examples/agent.toml"
install -m 0644 collector/collector.example.toml "$pkg/usr/share/doc/boltwatch/examples/collector.toml"
install -m 0644 README.md "$pkg/usr/share/doc/boltwatch/README.md"
printf 'boltwatch\nLicense: Apache-2.0\n' >"$pkg/usr/share/doc/boltwatch/copyright"
for s in postinst prerm postrm; do
    install -m 0755 "$here/$s.sh" "$pkg/DEBIAN/$s"
done

# Shared-library dependencies as dpkg-shlibdeps reads them from the
# binaries (libc6 only, in practice); a fixed floor without dpkg-dev.
depends="libc6 (>= 2.34)"
if command -v dpkg-shlibdeps >/dev/null; then
    mkdir -p "$stage/debian" && : >"$stage/debian/control"
    depends=$(cd "$stage" && dpkg-shlibdeps -O boltwatch/usr/bin/* 2>/dev/null |
        sed -n 's/^shlibs:Depends=//p')
fi
cat >"$pkg/DEBIAN/control" <<CONTROL
Package: boltwatch
Version: $version
Architecture: $arch
Maintainer: boltwatch <boltwatch@example.invalid>
Installed-Size: $(du -sk "$pkg" | cut -f1)
Depends: $depends, passwd
Section: net
Priority: optional
Homepage: https://example.invalid/boltwatch
Description: link telemetry for Thunderbolt clusters
 boltwatch-agent measures RTT and loss with STAMP, link drops, bandwidth
 and temperatures on each node; boltwatch-collector stores every record,
 serves Prometheus /metrics and writes the verdict of a soak.
CONTROL

mkdir -p "$out"
# Absolute, so `sudo apt install "$(packaging/deb/build-deb.sh)"` reads it
# as a file, not a package name.
deb=$(cd "$out" && pwd)/boltwatch_${version}_$arch.deb
dpkg-deb --root-owner-group --build "$pkg" "$deb" >/dev/null
echo "$deb"
