#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# in-root.sh ROOT DIR COMMAND [ARG...]
#
# Runs COMMAND in the Debian root ROOT (build-trixie-root.sh's), as root, in
# a mount namespace of its own: ROOT is the lower layer of an overlay whose
# upper layer is a tmpfs, so whatever COMMAND changes in it (an installed
# package, a log) is gone when it exits and ROOT stays as the cache keeps
# it; DIR is bind-mounted read-write at /build; /proc, /sys (read-only),
# /dev (the build machine's, bound) and a fresh /tmp and /run are there. No
# init runs: deb-systemd-invoke and invoke-rc.d start nothing.
set -eu
[ $# -ge 3 ] || { echo "usage: in-root.sh ROOT DIR COMMAND [ARG...]" >&2; exit 2; }
root=$(cd "$1" && pwd)
dir=$(cd "$2" && pwd)
shift 2
exec unshare --mount --propagation private --fork --pid --mount-proc=/proc sh -eu -c '
root=$1 dir=$2
shift 2
top=$(mktemp -d)
mount -t tmpfs -o mode=0755,size=4g va-root "$top"
mkdir "$top/upper" "$top/work" "$top/merged"
mount -t overlay -o "lowerdir=$root,upperdir=$top/upper,workdir=$top/work" va-root "$top/merged"
m=$top/merged
mount -t proc proc "$m/proc"
mount --rbind /sys "$m/sys" && mount -o remount,bind,ro "$m/sys" 2>/dev/null || true
mount --rbind /dev "$m/dev"
mount -t tmpfs -o mode=1777 tmp "$m/tmp"
mount -t tmpfs -o mode=0755 run "$m/run"
mkdir -p "$m/build"
mount --bind "$dir" "$m/build"
exec chroot "$m" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 "$@"
' in-root "$root" "$dir" "$@"
