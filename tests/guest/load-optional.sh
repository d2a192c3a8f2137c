#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# load-optional.sh [SYSFS [MODDIR]]  (in the guest: /sbin/va-load-optional)
#
# Loads the optional drivers build-guest.sh lists in MODDIR/optional (the VF
# drivers of docs/pairbench.md's SR-IOV path), one line each: their load
# order, dependencies first, comma-separated, then the PCI aliases the
# driver serves (globs, as the kernel's module aliases are). A line loads
# only when a device of SYSFS/bus/pci/devices has a matching modalias;
# modules already in SYSFS/module are skipped. Prints loaded=M or failed=M
# per module tried. guest-init.sh runs it at boot; test_guest.py runs it on
# a fake sysfs, with $INSMOD standing in for insmod.
set -u
sysfs=${1:-/sys}
moddir=${2:-/lib/modules}
insmod=${INSMOD:-insmod}
[ -s "$moddir/optional" ] || exit 0

# builtins only: a process costs about a second in a nested guest
devs=
for f in "$sysfs"/bus/pci/devices/*/modalias; do
    [ -r "$f" ] && read -r d <"$f" && devs="$devs $d"
done
# the aliases are patterns for case, never file names
set -f
while read -r chain aliases; do
    hit=
    for d in $devs; do
        for a in $aliases; do
            case "$d" in $a) hit=1 && break 2 ;; esac
        done
    done
    [ -n "$hit" ] || continue
    for m in $(echo "$chain" | tr ',' ' '); do
        [ -d "$sysfs/module/$(echo "$m" | tr - _)" ] && continue
        if $insmod "$moddir/$m.ko"; then
            echo "loaded=$m"
        else
            echo "failed=$m"
        fi
    done
done <"$moddir/optional"
