#!/bin/sh
# Builds the Debian package from this tree and checks it with lintian:
#   contrib/build-deb.sh [OUTDIR]      (default: build-deb/, ignored)
# The tree's files (tracked and untracked, not ignored) are copied to a
# temporary directory, contrib/debian/ becomes debian/ there (as fwupd's CI
# does), and dpkg-buildpackage builds the binary package. Fails on a lintian
# error or warning. Needs the packages of contrib/install-deps.sh.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$top/build-deb"}
mkdir -p "$out"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/vdpa-allocator-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
src="$work/vdpa-allocator"
mkdir "$src"

if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$top" && xargs -0 tar -cf - --no-recursion --ignore-failed-read) |
        tar -xf - -C "$src"
else
    tar -C "$top" -cf - --exclude='./build*' --exclude=./tests/cache --exclude=./debian . | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -a "$src/contrib/debian" "$src/debian"

# the package's version is the project's
meson_version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
deb_version=$(cd "$src" && dpkg-parsechangelog -S Version)
case "$deb_version" in
    "$meson_version"|"$meson_version"[-+~]*) ;;
    *) echo "build-deb: debian/changelog says $deb_version, meson.build $meson_version" >&2; exit 1 ;;
esac

echo "build-deb: building $deb_version in $src"
# where meson finds ccache (the test runs keep one): the copy's random path
# is in every compile line (-ffile-prefix-map), so ccache rewrites it as
# relative, and a later build of a file unchanged hits
CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=true
export CCACHE_BASEDIR CCACHE_NOHASHDIR
(cd "$src" && dpkg-buildpackage -us -uc -b)

changes="$work/vdpa-allocator_${deb_version}_$(dpkg-architecture -qDEB_HOST_ARCH).changes"
rm -f "$out"/vdpa-allocator_* "$out"/vdpa-allocator-dbgsym_* "$out"/vdpa-allocator-mlx5-dkms_*
# the .changes and what it lists: the package, its debug symbols, .buildinfo
cp "$changes" "$work"/vdpa-allocator*_"$deb_version"_*.deb "$work"/vdpa-allocator_"$deb_version"_*.buildinfo "$out/"

echo "build-deb: lintian"
lintian --fail-on error,warning --display-info "$out/$(basename "$changes")"
echo "build-deb: $(ls "$out"/vdpa-allocator_*.deb)"
