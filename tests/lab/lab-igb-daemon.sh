#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-igb-daemon.sh: runs INSIDE the lab host booted by lab_host.py --igb 1
# (one Intel 82576 PF with SR-IOV, see lab-igb.sh) and prints TAP: the
# daemon's side of issue 15 on a real SR-IOV PF. vdpa-allocatord on the
# kernel backend with a kind=sriov pool selecting the PF by vendor and
# device (VA_TEST_SERVE_SRIOV=1: the daemon does not track sriov leases
# yet and otherwise refuses such a pool):
#   the PF, down at first, is set up; sriov_drivers_autoprobe 0 before its
#   2 VFs are made, so they have no driver; the PF in the pool, healthy,
#   2 slots free (vdpactl pool show -j); the libvirt network
#   vdpa-allocator-igb defined, running, autostarted, listing exactly the
#   VFs' PCI addresses (virsh net-dumpxml); a daemon restart with the same
#   VFs changes nothing; a reload asking 3 VFs brings the network to them;
#   with libvirt out of reach the pool's warning says so in one line.
set -u

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
fact() { echo "# fact: $*"; }
section() { echo "# --- $* (uptime $(cut -d' ' -f1 /proc/uptime) s)"; }
check() {
    d=$1
    shift
    if out=$("$@" 2>&1); then
        ok "$d"
    else
        not_ok "$d"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}
eq() {
    if [ "$2" = "$3" ]; then
        ok "$1"
    else
        not_ok "$1"
        diag "expected: $2" "got:      $3"
    fi
}
json() {
    /usr/bin/python3 -S -c 'import json, sys
d = json.load(sys.stdin)
try:
    v = eval(sys.argv[1])
except (KeyError, IndexError, TypeError) as e:
    v = "missing %s" % e
print(json.dumps(v) if isinstance(v, (bool, list, dict)) else v)' "$1"
}
until_ok() {
    t=$(($1 * 5))
    shift
    while ! "$@" >/dev/null 2>&1; do
        t=$((t - 1))
        [ $t -gt 0 ] || return 1
        sleep 0.2
    done
}
drv() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null) && basename "$d" || echo none; }
bail() {
    not_ok "$1"
    [ -n "${2:-}" ] && diag "$2"
    echo "1..$n"
    exit 1
}

daemon=${VA_DAEMON:-$VA_BUILDDIR/vdpa-allocator/daemon/vdpa-allocatord}
vdpactl=$VA_BUILDDIR/vdpa-allocator/ctl/vdpactl
echo "# kernel $(uname -r)"

section pf
check "modprobe igb vfio-pci" modprobe -a igb vfio-pci
pfpci=
for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x8086:0x10c9 ] && pfpci=${d##*/} && break
done
[ -n "$pfpci" ] || bail "an 82576 PF (8086:10c9) on the PCI bus"
sys=/sys/bus/pci/devices/$pfpci
until_ok 60 test -d "$sys/net" || bail "the PF's netdev appears"
pf=$(ls "$sys/net" | head -n1)
ip link set "$pf" down
eq "before the daemon: $pf down, 0 VFs, VF driver autoprobe 1" "down 0 1" \
    "$(cat /sys/class/net/$pf/operstate) $(cat "$sys/sriov_numvfs") $(cat "$sys/sriov_drivers_autoprobe")"

section libvirt
lvready=/run/lab-igb-daemon-libvirt.ready
# vatest.libvirt's fixture, as lab-igb.sh runs it: libvirtd and the private
# system bus the daemon owns its name on; until SIGTERM
VA_LIBVIRT_NAMESPACED=1 /usr/bin/python3 - "$lvready" >/run/lab-igb-daemon-libvirt.log 2>&1 <<'EOF' &
import sys, time
from vatest.libvirt import Libvirt
lv = Libvirt()
lv.start(timeout=180)
open(sys.argv[1], "w").write(lv.root + "\n")
try:
    while True:
        time.sleep(3600)
except KeyboardInterrupt:
    pass
finally:
    lv.stop()
EOF
lvpid=$!
until_ok 240 test -e "$lvready" || bail "libvirtd started" "$(cat /run/lab-igb-daemon-libvirt.log)"
ok "libvirtd $(libvirtd --version | awk '{ print $NF }') started"
v() { virsh -q -c qemu:///system "$@"; }

section daemon
work=$(mktemp -d)
# the run directory systemd would make (RuntimeDirectory=)
mkdir -p "$work/etc" "$work/run"
cat >"$work/etc/vdpa-allocator.conf" <<EOF
[pool igb]
kind=sriov
match-vendor=8086
match-device=10c9
vfs=2
eswitch=legacy
EOF
# start_daemon [LIBVIRT_URI]
start_daemon() {
    env VA_TEST_SERVE_SRIOV=1 VDPA_ALLOCATOR_LIBVIRT_URI="${1:-qemu:///system}" "$daemon" --config "$work/etc" --state-dir "$work/state" --run-dir "$work/run" >>"$work/daemon.log" 2>&1 &
    dpid=$!
    until_ok 120 "$vdpactl" status
}
out=$("$daemon" --config "$work/etc" --state-dir "$work/state" --run-dir "$work/run" 2>&1) && r=0 || r=$?
case "$r $out" in
"1 "*"kind=sriov"*) ok "without VA_TEST_SERVE_SRIOV the daemon refuses the kind=sriov pool" ;;
*) not_ok "without VA_TEST_SERVE_SRIOV the daemon refuses the kind=sriov pool"; diag "rc $r: $out" ;;
esac
t0=$(cut -d' ' -f1 /proc/uptime)
start_daemon || bail "vdpa-allocatord answers on the bus" "$(cat "$work/daemon.log")"
ok "vdpa-allocatord (kernel backend, VA_TEST_SERVE_SRIOV=1) answers on the bus"
until_ok 120 v net-info vdpa-allocator-igb
fact "network vdpa-allocator-igb there $(echo "$(cut -d' ' -f1 /proc/uptime) $t0" | awk '{ print $1 - $2 }') s after the daemon's start"

vf0=$(basename "$(readlink "$sys/virtfn0")")
vf1=$(basename "$(readlink "$sys/virtfn1")")
eq "the daemon made 2 VFs with sriov_drivers_autoprobe 0: no driver on either" "2 0 none none" \
    "$(cat "$sys/sriov_numvfs") $(cat "$sys/sriov_drivers_autoprobe") $(drv "$vf0") $(drv "$vf1")"
fact "VFs $vf0 $vf1"
flags=$(cat /sys/class/net/$pf/flags)
eq "the daemon set $pf up (IFF_UP in flags $flags)" up "$([ $((flags & 1)) -eq 1 ] && echo up)"
# until_ok takes a command: a $(...) in its arguments would be read once
pfup() { test "$(cat /sys/class/net/$pf/operstate)" = up; }
until_ok 60 pfup
fact "$pf operstate $(cat /sys/class/net/$pf/operstate), carrier $(cat /sys/class/net/$pf/carrier 2>&1)"

# the pool's status: both slots, the PF healthy once its link is up
poolok() { "$vdpactl" pool show igb -j | json '"%s %s %s" % (d["total"], d["free"], d["healthy"])' | grep -qx "2 2 True"; }
until_ok 60 poolok
pool=$("$vdpactl" pool show igb -j 2>&1)
eq "vdpactl pool show igb: 2 slots, 2 free, healthy" "2 2 True" \
    "$(printf '%s' "$pool" | json '"%s %s %s" % (d["total"], d["free"], d["healthy"])')"
diag "$pool"

netxml=$(v net-dumpxml vdpa-allocator-igb 2>&1)
addr() { b=${1#*:}; echo "<address type='pci' domain='0x0000' bus='0x${b%%:*}' slot='0x$(echo "$b" | cut -d: -f2 | cut -d. -f1)' function='0x${b##*.}'/>"; }
eq "net-dumpxml vdpa-allocator-igb: <forward mode='hostdev' managed='yes'> listing exactly the 2 VFs" \
    "yes 2 yes yes" \
    "$(printf '%s' "$netxml" | grep -q "<forward mode='hostdev' managed='yes'>" && echo yes) $(printf '%s\n' "$netxml" | grep -c "<address type='pci'") $(printf '%s' "$netxml" | grep -qF "$(addr "$vf0")" && echo yes) $(printf '%s' "$netxml" | grep -qF "$(addr "$vf1")" && echo yes)"
diag "$netxml"
info=$(v net-info vdpa-allocator-igb 2>&1)
eq "the network is active, persistent, autostarted" "yes yes yes" \
    "$(printf '%s\n' "$info" | awk '/^(Active|Persistent|Autostart):/ { printf "%s%s", s, $2; s = " " }')"

section restart
uuid=$(v net-uuid vdpa-allocator-igb)
kill "$dpid"
wait "$dpid"
start_daemon || bail "vdpa-allocatord answers again after a restart" "$(cat "$work/daemon.log")"
until_ok 60 poolok
eq "after a restart: the same 2 VFs, the same network" "2 $vf0 $vf1 $uuid yes" \
    "$(cat "$sys/sriov_numvfs") $(basename "$(readlink "$sys/virtfn0")") $(basename "$(readlink "$sys/virtfn1")") $(v net-uuid vdpa-allocator-igb) $(v net-info vdpa-allocator-igb | awk '/^Active:/ { print $2 }')"
if grep -q "network vdpa-allocator-igb:" "$work/daemon.log"; then
    not_ok "no network warning in the daemon's log"
    diag "$(grep "network vdpa-allocator-igb:" "$work/daemon.log")"
else
    ok "no network warning in the daemon's log"
fi

# the pool's VFs change: a reload asking 3 brings the network to them
section reload
sed -i 's/^vfs=2$/vfs=3/' "$work/etc/vdpa-allocator.conf"
kill -HUP "$dpid"
naddr() { v net-dumpxml vdpa-allocator-igb 2>/dev/null | grep -c "<address type='pci'"; }
three() { test "$(naddr)" = 3; }
until_ok 120 three
vf2=$(basename "$(readlink "$sys/virtfn2")")
netxml=$(v net-dumpxml vdpa-allocator-igb 2>&1)
eq "after a reload with vfs=3: 3 VFs on no driver, autoprobe 0, the network listing exactly them" "3 0 none none none 3 yes yes yes" \
    "$(cat "$sys/sriov_numvfs") $(cat "$sys/sriov_drivers_autoprobe") $(drv "$vf0") $(drv "$vf1") $(drv "$vf2") $(naddr) $(for a in "$vf0" "$vf1" "$vf2"; do printf '%s' "$netxml" | grep -qF "$(addr "$a")" && printf 'yes '; done | sed 's/ $//')"
poolt() { "$vdpactl" pool show igb -j | json '"%s %s" % (d["total"], d["free"])'; }
pool3() { test "$(poolt)" = "3 3"; }
until_ok 60 pool3
eq "vdpactl pool show igb: 3 slots, 3 free" "3 3" "$(poolt)"
kill "$dpid"
wait "$dpid"

# libvirt out of reach: the pool says why its network is not there
section unreachable
start_daemon 'qemu:///system?socket=/nonexistent/libvirt-sock' ||
    bail "vdpa-allocatord answers with libvirt out of reach" "$(cat "$work/daemon.log")"
warn() { "$vdpactl" pool show igb -j | json 'd["warning"]'; }
warned() { test -n "$(warn)"; }
until_ok 60 warned
w=$(warn)
case "$w" in
"network vdpa-allocator-igb: "*) ok "with libvirt out of reach the pool's warning is the network's one line" ;;
*) not_ok "with libvirt out of reach the pool's warning is the network's one line" ;;
esac
fact "pool warning: $w"
kill "$dpid"
wait "$dpid"
diag "$(tail -n 20 "$work/daemon.log")"

v net-destroy vdpa-allocator-igb >/dev/null 2>&1
v net-undefine vdpa-allocator-igb >/dev/null 2>&1
kill "$lvpid" 2>/dev/null
wait "$lvpid" 2>/dev/null
echo "1..$n"
[ "$failed" -eq 0 ]
