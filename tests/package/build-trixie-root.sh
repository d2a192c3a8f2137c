#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-trixie-root.sh [CACHE_DIR]
#
# Makes (or finds cached) a Debian 13 (trixie) root in which
# contrib/build-deb.sh builds the package for Debian 13 and lintian checks
# it, and in which the package tier reads what 13's components expect
# (libvirt 11's AppArmor profiles, AppArmor 4's parser, systemd 257's unit
# checker, polkitd's rules directory), and which lab_host.py --root trixie
# boots. Into CACHE_DIR/package/trixie-root-LIST (default: the test cache,
# tests/lib/vatest/cache.py), LIST a hash of the package list, so that a
# branch with another list has an entry of its own beside it:
#
#   root/     mmdebstrap --variant=buildd (build-essential) with the
#             Build-Depends of contrib/debian/control (the first of each
#             alternative, as Debian's buildds pick) and PACKAGES and
#             LAB_PACKAGES below,
#             maintainer scripts run (as root, mmdebstrap's root mode); no
#             service started (no init runs in it)
#   packages  package=version of everything installed
#   stamp     the key: this script's hash, the suite, the mirror and the
#             package list asked for; same key, no rebuild. The cache never
#             asks the mirror again: remove the folder for a newer trixie.
#
# The root is read only to its users (tests/package/in-root.sh mounts an
# overlay over it): a build never changes it.
#
# Prints ROOT=path on stdout, its time on stderr. The mirror is the one apt
# uses here for Debian (tests/lib/debian-mirror.sh); LAB_DEBIAN_MIRROR picks
# another. Needs root, mmdebstrap and the trixie key in
# /usr/share/keyrings/debian-archive-keyring.gpg (bookworm's keyring has it).
set -eu

t0=$(date +%s.%N)
here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-trixie-root: $*" >&2
    exit 1
}
took() {
    echo "build-trixie-root: $1 in $(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }') s" >&2
}
va_test_lib=$here/../lib
. "$va_test_lib/test-cache.sh"
. "$va_test_lib/debian-mirror.sh"
suite=trixie
control=$here/../../contrib/debian/control

# what the package tier runs in the root besides the build: lintian, and
# the components whose files ours go beside
PACKAGES="lintian libvirt-daemon-system apparmor polkitd dbus systemd"
# what a lab host booted from this root (lab_host.py --root trixie) runs
# besides them: the hypervisor libvirt-daemon-system only recommends, its
# firmware, udevd, the tools of the lab's scripts and tests (Python, and
# GIO for vatest), busybox (lab-init.sh's power-off). One root for both:
# the lab's packages cost the package tier nothing but their unpacking
LAB_PACKAGES="qemu-system-x86 seabios ipxe-qemu udev kmod iproute2 python3 python3-gi busybox passwd iperf3"

# Build-Depends: one package a line, the first alternative, no version or
# architecture qualifier, comments dropped
build_deps() {
    awk '
        /^#/ { next }
        /^[A-Za-z-]+:/ { inbd = ($1 == "Build-Depends:"); sub(/^[A-Za-z-]+:/, "") }
        /^[^ \t#]/ && !/^[A-Za-z-]+:/ { inbd = 0 }
        inbd { print }
    ' "$control" | sed 's/#.*//' | tr ',' '\n' | sed 's/|.*//; s/[(\[].*//; s/[ \t]//g' |
        grep -v '^$' | sed 's/^debhelper-compat$/debhelper/' | LC_ALL=C sort -u
}
deps=$(build_deps)
[ -n "$deps" ] || die "no Build-Depends in $control"
list=$(printf '%s\n' $deps $PACKAGES $LAB_PACKAGES | LC_ALL=C sort -u | tr '\n' ',' | sed 's/,$//')
entry=package/trixie-root-$(printf '%s' "$list" | sha256sum | cut -c1-8)
va_cache_open "$entry" "${1:-}"
out=$cache/$entry

url=$(va_debian_mirror) || die "no Debian mirror serving bookworm in /etc/apt/sources.list*; set LAB_DEBIAN_MIRROR"
key="script=$(cat "$0" "$va_test_lib/debian-mirror.sh" | sha256sum | cut -d' ' -f1)
suite=$suite
mirror=$url
packages=$list"

if [ -f "$out/stamp" ] && [ -f "$out/packages" ] && [ -x "$out/root/usr/bin/dpkg-buildpackage" ] &&
    [ "$(cat "$out/stamp")" = "$key" ]; then
    va_cache_used "$out"
    echo "ROOT=$out/root"
    took "cached in $out"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap's root mode, chroot)"
command -v mmdebstrap >/dev/null 2>&1 || die "missing mmdebstrap (contrib/install-deps.sh)"
mkdir -p "$cache/package"
work=$(mktemp -d "$out.build.XXXXXX")
# --one-file-system: should mmdebstrap die with its /proc, /sys or /dev/shm
# still mounted in the root, nothing outside it goes
trap 'rm -rf --one-file-system "$work"' EXIT INT TERM

echo "build-trixie-root: mmdebstrap $suite from $url: $list" >&2
mmdebstrap --quiet --mode=root --variant=buildd --include="$list" \
    --aptopt='APT::Install-Recommends "false"' --dpkgopt=force-unsafe-io \
    --customize-hook='chroot "$1" dpkg-query -W -f "\${Package}=\${Version}\n" | LC_ALL=C sort >"$1/.va-packages"' \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
    "$suite" "$work/root" "$url" >&2 || die "mmdebstrap failed"
mv "$work/root/.va-packages" "$work/packages"
grep -q '^dpkg-dev=' "$work/packages" || die "no dpkg-dev in the root"

rm -rf "$out"
mkdir -p "$out"
mv "$work/root" "$work/packages" "$out/"
printf '%s\n' "$key" >"$out/stamp"
echo "build-trixie-root: $(wc -l <"$out/packages") packages, $(du -sm "$out/root" | cut -f1) MiB" >&2
echo "ROOT=$out/root"
took "built in $out"
