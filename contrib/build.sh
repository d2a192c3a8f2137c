#!/bin/sh
# Configures (once) and builds the tree in BUILDDIR (default: build).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-"$top/build"}
shift 2>/dev/null || true
if [ ! -f "$builddir/build.ninja" ]; then
    meson setup "$builddir" "$top" "$@"
fi
ninja -C "$builddir"
