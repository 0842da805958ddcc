#!/usr/bin/env bash
# A Redis built with TLS, for the tests that prove Podherd's Redis TLS (the embedded Valkey wheel has none):
# Debian's redis-server unpacked under DEST, nothing installed system-wide and no service started.
# Best effort: where Debian's packages cannot be had, those tests say so and skip.
set -uo pipefail
dest=$(realpath -m "${1:?usage: install_tls_redis.sh DEST}")
[ -x "$dest/bin/redis-server" ] && exit 0
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || exit 0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
packages=(redis-server redis-tools liblzf1 libjemalloc2)
download() { (cd "$work" && apt-get download -q "${packages[@]}" >/dev/null 2>&1); }
if ! download; then
    # apt's package lists are empty on a new machine: only root may fetch them
    [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && download || {
        echo "install_tls_redis: Debian's redis-server could not be fetched; the Redis TLS tests will skip" >&2
        exit 0
    }
fi
mkdir -p "$dest/root" "$dest/bin"
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$dest/root"; done
libs="$dest/root/usr/lib/x86_64-linux-gnu:$dest/root/usr/lib/$(uname -m)-linux-gnu"
cat >"$dest/bin/redis-server" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dest/root/usr/bin/redis-server" "\$@"
WRAP
chmod +x "$dest/bin/redis-server"
"$dest/bin/redis-server" --version >/dev/null || { rm -rf "$dest"; echo "install_tls_redis: unpacked redis-server does not run" >&2; }
exit 0
