#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-qemu10.sh [CACHE_DIR]
#
# Builds (or finds cached) Debian 13's QEMU (qemu-system-x86, QEMU 10) for
# the lab host's SR-IOV tier (issue 15): QEMU 8.0 and later emulate Intel's
# 82576 (-device igb) with SR-IOV, Debian 12's 7.2 does not. Into
# CACHE_DIR/lab/qemu10 (default: the test cache, tests/lib/vatest/cache.py):
#
#   root/     the packages of qemu-system-x86 from trixie and their hard
#             dependencies, extracted by mmdebstrap --variant=extract (no
#             maintainer script runs, no chroot is entered: nothing needs
#             privileges or a mount namespace)
#   qemu      a wrapper that runs root's qemu-system-x86_64 through root's own
#             ld.so with --library-path, its data (-L) and module
#             (QEMU_MODULE_DIR) directories in root. The process stays in the
#             build machine's filesystem, so the lab host's 9p root (/), its
#             kernel and initrd and the run folder keep their paths; a chroot
#             would need every one of them bind-mounted inside
#   packages  package=version of everything extracted
#   (the wrapper and the links are relative: a copied cache still works)
#   stamp     what it was built from: this script, the suite, the mirror and
#             the packages' versions; same stamp, no rebuild. The cache never
#             asks the mirror again: remove the folder for a newer trixie.
#
# Prints QEMU=path/to/qemu and VERSION= on stdout, its time on stderr.
# The mirror is the one apt uses here for Debian (the first deb.debian.org-
# like URI serving bookworm in /etc/apt/sources.list*); LAB_DEBIAN_MIRROR
# picks another. Needs: mmdebstrap, the trixie key in
# /usr/share/keyrings/debian-archive-keyring.gpg (bookworm's keyring has it).
set -eu

t0=$(date +%s.%N)
here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-qemu10: $*" >&2
    exit 1
}
va_test_lib=$here/../lib
. "$va_test_lib/test-cache.sh"
va_cache_open lab/qemu10 "${1:-}"
out=$cache/lab/qemu10
suite=trixie
took() {
    echo "build-qemu10: $1 in $(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }') s" >&2
}

# the Debian archive apt uses (LAB_DEBIAN_MIRROR overrides)
. "$va_test_lib/debian-mirror.sh"
url=$(va_debian_mirror) || url=
[ -n "$url" ] || die "no Debian mirror serving bookworm in /etc/apt/sources.list*; set LAB_DEBIAN_MIRROR"

key="script=$(cat "$0" "$va_test_lib/debian-mirror.sh" | sha256sum | cut -d' ' -f1)
suite=$suite
mirror=$url"

if [ -f "$out/stamp" ] && [ -x "$out/qemu" ] && [ -f "$out/packages" ] &&
    [ "$(cat "$out/stamp")" = "$(printf '%s\n' "$key" && cat "$out/packages")" ]; then
    ver=$("$out/qemu" --version 2>/dev/null | head -n1) || die "cached $out/qemu does not run; remove $out"
    printf 'QEMU=%s\nVERSION=%s\n' "$out/qemu" "$(echo "$ver" | awk '{ print $4 }')"
    va_cache_used "$out"
    took "cached in $out"
    exit 0
fi

command -v mmdebstrap >/dev/null 2>&1 || die "missing mmdebstrap (contrib/install-deps.sh)"
mkdir -p "$cache/lab"
work=$(mktemp -d "$cache/lab/qemu10.build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# the extract-hook sees the downloaded .debs: their names and versions
# are the cache key's packages (extract leaves no dpkg database)
echo "build-qemu10: mmdebstrap $suite from $url" >&2
mmdebstrap --quiet --variant=extract --include=qemu-system-x86 \
    --aptopt='APT::Install-Recommends "false"' \
    --extract-hook='for d in "$1"/var/cache/apt/archives/*.deb; do dpkg-deb -W --showformat="\${Package}=\${Version}\n" "$d"; done | LC_ALL=C sort >"$1/.lab-packages"' \
    "$suite" "$work/root" "$url" >&2 || die "mmdebstrap failed"
mv "$work/root/.lab-packages" "$work/packages"
grep -q '^qemu-system-x86=' "$work/packages" || die "no qemu-system-x86 among the extracted packages"

# Debian's QEMU looks for firmware in /usr/share/seabios (its configured
# firmware path) too, absolute: the wrapper's -L puts root's first.
# the firmware links in share/qemu, if any, are absolute (/usr/share/seabios/...):
# make them relative, into root, else they would take the build machine's
# Debian 12 files; relative, the cache still works when copied elsewhere
find "$work/root/usr/share/qemu" -type l | while read -r l; do
    t=$(readlink "$l")
    case "$t" in
    /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$work/root$t")" "$l" ;;
    esac
done

ldso=$(ls "$work"/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 2>/dev/null | head -n1)
[ -n "$ldso" ] || die "no ld.so in the root"
cat >"$work/qemu" <<EOF
#!/bin/sh
# Debian 13's qemu-system-x86_64 from root/ beside this file (build-qemu10.sh)
r=\$(cd "\$(dirname "\$0")" && pwd)/root
QEMU_MODULE_DIR=\$r/usr/lib/x86_64-linux-gnu/qemu exec "\$r/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \\
    --library-path "\$r/usr/lib/x86_64-linux-gnu:\$r/lib/x86_64-linux-gnu" \\
    "\$r/usr/bin/qemu-system-x86_64" -L "\$r/usr/share/qemu" -L "\$r/usr/share/seabios" "\$@"
EOF
chmod 0755 "$work/qemu"

rm -rf "$out"
mkdir -p "$out"
mv "$work/root" "$work/qemu" "$work/packages" "$out/"
ver=$("$out/qemu" --version | head -n1) || die "$out/qemu does not run"
printf '%s\n' "$key" | cat - "$out/packages" >"$out/stamp"
echo "build-qemu10: $ver, $(wc -l <"$out/packages") packages, $(du -sm "$out/root" | cut -f1) MiB" >&2
printf 'QEMU=%s\nVERSION=%s\n' "$out/qemu" "$(echo "$ver" | awk '{ print $4 }')"
took "built in $out"
