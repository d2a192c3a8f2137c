#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A qemu.d hook for the libvirt tier: records each call, argv and stdin (the
# domain XML), as one file in /var/lib/libvirt/va-hook-calls (private to the
# test's mount namespace), plus the environment libvirt gave it. libvirt
# passes hooks no variables of ours, so a test steers it with a file instead:
# if /var/lib/libvirt/va-hook-fail holds a line "OPERATION SUB-OPERATION",
# that call prints a message on stderr and exits 1.
dir=/var/lib/libvirt/va-hook-calls
mkdir -p "$dir"
f=$(mktemp "$dir/$(date +%s%N).XXXXXX")
{
    printf '%s' "$0"
    for a in "$@"; do
        printf '\t%s' "$a"
    done
    printf '\n'
    cat
} >"$f"
env >"$f.env"
mv "$f" "$f.call"
if [ -f /var/lib/libvirt/va-hook-fail ] && grep -qx "$2 $3" /var/lib/libvirt/va-hook-fail; then
    echo "record-hook: failing $2 $3 of $1 as the test asked" >&2
    exit 1
fi
exit 0
