#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-igb-daemon.sh: runs INSIDE the lab host booted by lab_host.py --igb 1
# (one Intel 82576 PF with SR-IOV, see lab-igb.sh) and prints TAP: the
# daemon's side of issue 15 on a real SR-IOV PF. vdpa-allocatord on the
# kernel backend with a kind=sriov pool selecting the PF by vendor and
# device, libvirtd with our hook (and a recording one):
#   the PF, down at first, is set up; sriov_drivers_autoprobe 0 before its
#   2 VFs are made, so they have no driver; the PF in the pool, healthy,
#   2 slots free (vdpactl pool show -j); the libvirt network
#   vdpa-allocator-igb defined, running, autostarted, listing exactly the
#   VFs' PCI addresses (virsh net-dumpxml); a daemon restart with the same
#   VFs changes nothing;
#   domains: vdpactl domain accelerate puts a mode=sriov NIC on that
#   network; virsh start --paused: the VF libvirt chose on vfio-pci with
#   the NIC's MAC and VLAN 2334 read back from the PF, and a lease of kind
#   sriov on it (the hook at start begin: its XML at prepare begin shows no
#   VF yet); a second domain on the other VF; an auto NIC falls back to
#   virtio on VLAN 2334 with the pool full; a daemon SIGKILL and restart
#   keeps both leases and resets nothing; virsh destroy puts back each
#   VF's MAC and VLAN and the lease goes; a VF left with a VLAN and MAC and
#   no lease is reset by vdpactl reconcile, one libvirt holds is not;
#   a reload asking 3 VFs brings the network to them;
#   with libvirt out of reach the pool's warning says so in one line.
set -u

. "$(dirname "$0")/tap.sh"
drv() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null) && basename "$d" || echo none; }
drv_is_not() { [ "$(drv "$1")" != "$2" ]; }
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
VA_LIBVIRT_NAMESPACED=1 /usr/bin/python3 -m vatest.libvirt serve "$lvready" >/run/lab-igb-daemon-libvirt.log 2>&1 &
lvpid=$!
until_ok 240 test -e "$lvready" || bail "libvirtd started" "$(cat /run/lab-igb-daemon-libvirt.log)"
ok "libvirtd $(libvirtd --version | awk '{ print $NF }') started"

section daemon
work=$(mktemp -d)
# the run directory systemd would make (RuntimeDirectory=)
mkdir -p "$work/run"
# the hook reads the compiled-in configuration directory (libvirt gives
# hooks no environment): the daemon is given the same one, in the overlay
etc=${VA_SYSCONFDIR:-/usr/local/etc}/vdpa-allocator
mkdir -p "$etc"
cat >"$etc/vdpa-allocator.conf" <<EOF
[pool igb]
kind=sriov
match-vendor=8086
match-device=10c9
vfs=2
eswitch=legacy

[network igb2334]
mode=sriov
pool=igb
vlan=2334

[network igbauto]
mode=auto
pool=igb
vlan=2334
fallback-bridge=br-igb
fallback-bridge-type=ovs
EOF
# start_daemon [LIBVIRT_URI]
start_daemon() {
    env VDPA_ALLOCATOR_LIBVIRT_URI="${1:-qemu:///system}" "$daemon" --config "$etc" --state-dir "$work/state" --run-dir "$work/run" >>"$work/daemon.log" 2>&1 &
    dpid=$!
    until_ok 120 "$vdpactl" status
}
t0=$(cut -d' ' -f1 /proc/uptime)
start_daemon || bail "vdpa-allocatord answers on the bus" "$(cat "$work/daemon.log")"
ok "vdpa-allocatord (kernel backend, a kind=sriov pool) answers on the bus"
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

# --- domains on the pool's network (the hook records libvirt's VF) ----------
section domains
rec=/var/lib/libvirt/va-hook-calls
# vf_state N: "mac vlan qos spoofchk trust" of VF N, read through the PF
vf_state() {
    ip -d -j link show "$pf" | json "(lambda v: ' '.join(str(x) for x in (v['address'], v['vlan_list'][0].get('vlan', 0), v['vlan_list'][0].get('qos', 0), v['spoofchk'], v['trust'])))(d[0]['vfinfo_list'][$1])"
}
# vf_idx PCI: the VF's index on the PF
vf_idx() {
    for i in 0 1 2 3; do
        [ "$(basename "$(readlink "$sys/virtfn$i")")" = "$1" ] && echo "$i" && return
    done
    echo "?"
}
# vf_of NAME: the PCI address of the VF in the domain's live <interface>
vf_of() {
    v dumpxml "$1" | sed -n '/<source>/,/<\/source>/p' |
        sed -n "s/.*domain='0x\([0-9a-f]*\)' bus='0x\([0-9a-f]*\)' slot='0x\([0-9a-f]*\)' function='0x\([0-9a-f]*\)'.*/\1:\2:\3.\4/p" | head -n1
}
leases() { "$vdpactl" lease list -j | json '" ".join("%s/%s/%s/%s/%s" % (l["domain_name"], l["kind"], l["mgmtdev"], l["vlan"], l["device"]) for l in d["leases"])'; }
nleases() { "$vdpactl" lease list -j | json 'len(d["leases"])'; }
# hook_iface OP: the <interface> element the recording hook got at OP begin for guest-a, on one line
hook_iface() {
    f=$(grep -l "	guest-a	$1	begin" "$rec"/*.call 2>/dev/null | tail -n1)
    [ -n "$f" ] && sed -n '/<interface/,/<\/interface>/p' "$f" | tr -s '\n ' '  '
}
# domxml NAME MAC NETWORK: a TCG domain whose one NIC has our metadata
domxml() {
    cat >"$work/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <metadata>
    <vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'><vdpa:nic mac='$2' network='$3'/></vdpa:nics>
  </metadata>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='network'>
      <source network='default'/>
      <mac address='$2'/>
    </interface>
  </devices>
</domain>
EOF
    v define "$work/$1.xml"
}
vf0=$(basename "$(readlink "$sys/virtfn0")")
vf1=$(basename "$(readlink "$sys/virtfn1")")
before_0=$(vf_state 0)
before_1=$(vf_state 1)
fact "before the domains (mac vlan qos spoofchk trust): VF 0 $before_0, VF 1 $before_1"
if domxml guest-a 52:54:00:15:23:34 igb2334 >"$work/def.out" 2>&1 && domxml guest-b 52:54:00:15:23:35 igb2334 >>"$work/def.out" 2>&1 &&
    domxml guest-c 52:54:00:15:23:36 igbauto >>"$work/def.out" 2>&1 &&
    "$vdpactl" domain accelerate guest-a >>"$work/def.out" 2>&1 && "$vdpactl" domain accelerate guest-b >>"$work/def.out" 2>&1; then
    ok "guest-a, guest-b defined and accelerated with vdpactl domain accelerate"
else
    not_ok "guest-a, guest-b defined and accelerated with vdpactl domain accelerate"
    diag "$(cat "$work/def.out")"
fi
defxml=$(v dumpxml --inactive guest-a 2>&1)
eq "guest-a's NIC is on network vdpa-allocator-igb with VLAN 2334" "yes yes" \
    "$(printf '%s' "$defxml" | grep -q "<source network='vdpa-allocator-igb'/>" && echo yes) $(printf '%s' "$defxml" | grep -q "<tag id='2334'/>" && echo yes)"
t0=$(cut -d' ' -f1 /proc/uptime)
start_out=$(v start --paused guest-a 2>&1) && started=yes || started=no
fact "virsh start --paused guest-a: $started in $(echo "$(cut -d' ' -f1 /proc/uptime) $t0" | awk '{ print $1 - $2 }') s: $start_out"
fact "the hook's XML at prepare begin: $(hook_iface prepare)"
fact "the hook's XML at start begin: $(hook_iface start)"
eq "at prepare begin the hook sees no VF yet: type='network' on vdpa-allocator-igb" yes \
    "$(hook_iface prepare | grep -q "<interface type='network'>.*<source network='vdpa-allocator-igb'/>" && echo yes)"
eq "at start begin it sees type='hostdev' with the VF's PCI address" yes \
    "$(hook_iface start | grep -q "<interface type='hostdev' managed='yes'>.*<source> *<address type='pci'" && echo yes)"
if [ $started = yes ]; then
    ok "virsh start --paused guest-a on the pool's network"
    a=$(vf_of guest-a)
    ai=$(vf_idx "$a")
    eq "guest-a's VF $a (vf $ai) on vfio-pci, guest-a's MAC and VLAN 2334 on $pf, spoofchk on" \
        "vfio-pci 52:54:00:15:23:34 2334 0 True False" "$(drv "$a") $(vf_state "$ai")"
    diag "$(ip -d link show "$pf" | grep "vf $ai ")"
    # what the daemon's VF repair takes for "libvirt holds it"
    fact "libvirt's saved VF state while guest-a runs: $(ls /run/libvirt/hostdevmgr/ 2>&1 | tr '\n' ' ')"
    eq "libvirt saved the VF's state as /run/libvirt/hostdevmgr/${pf}_vf$ai" yes \
        "$(test -e "/run/libvirt/hostdevmgr/${pf}_vf$ai" && echo yes)"
    eq "vdpactl lease list -j: guest-a's lease, kind sriov, on the VF libvirt chose, VLAN 2334, no device" \
        "guest-a/sriov/pci/$a/2334/None" "$(leases)"
    diag "$("$vdpactl" lease list 2>&1)"
    if v start --paused guest-b >"$work/b.out" 2>&1; then
        b=$(vf_of guest-b)
        bi=$(vf_idx "$b")
        eq "guest-b gets the other VF, on vfio-pci with its MAC and VLAN 2334" "$((1 - ai)) vfio-pci 52:54:00:15:23:35 2334" \
            "$bi $(drv "$b") $(vf_state "$bi" | cut -d' ' -f1-2)"
        eq "2 leases, both kind sriov; the pool has 0 free, 2 leased" "2 sriov sriov 0 2" \
            "$(nleases) $("$vdpactl" lease list -j | json '" ".join(l["kind"] for l in d["leases"])') $("$vdpactl" pool show igb -j | json '"%s %s" % (d["free"], d["leased"])')"
    else
        not_ok "guest-b starts on the other VF"
        diag "$(cat "$work/b.out")"
        b=
    fi
    # the pool full: an auto NIC goes virtio on its VLAN, on the fallback bridge
    out=$("$vdpactl" domain accelerate guest-c 2>&1) || diag "$out"
    cxml=$(v dumpxml --inactive guest-c 2>&1)
    eq "with the pool full, guest-c's auto NIC: virtio on Open vSwitch bridge br-igb, VLAN 2334, not the pool's network" \
        "yes yes no" "$(printf '%s' "$cxml" | grep -q "<source bridge='br-igb'/>" && echo yes) $(printf '%s' "$cxml" | grep -q "<tag id='2334'/>" && echo yes) $(printf '%s' "$cxml" | grep -q 'vdpa-allocator-igb' && echo yes || echo no)"

    # SIGKILL and restart: the leases stay, nothing right is reset
    section sigkill
    st_a=$(vf_state "$ai")
    l_before=$(leases)
    kill -KILL "$dpid"
    wait "$dpid" 2>/dev/null
    start_daemon || bail "vdpa-allocatord answers after a SIGKILL" "$(tail -n 20 "$work/daemon.log")"
    eq "after a SIGKILL and restart: the same leases" "$l_before" "$(leases)"
    rj=$("$vdpactl" reconcile -j 2>/dev/null)
    eq "vdpactl reconcile: nothing released, nothing reset" "0 []" "$(printf '%s' "$rj" | json '"%s %s" % (d["released"], json.dumps(d["repaired"]))')"
    eq "guest-a's VF keeps its MAC and VLAN 2334" "$st_a" "$(vf_state "$ai")"
    if grep -q "no lease, left with" "$work/daemon.log"; then
        not_ok "the start-up reconciliation reset no VF"
        diag "$(grep 'VF' "$work/daemon.log" | tail -n 5)"
    else
        ok "the start-up reconciliation reset no VF"
    fi

    section destroy
    if [ -n "$b" ]; then
        check "virsh destroy guest-b" v destroy guest-b
        until_ok 60 drv_is_not "$b" vfio-pci
        eq "after destroy VF $bi: off vfio-pci, its MAC and VLAN as before the start; guest-b's lease gone" \
            "none $(eval echo "\$before_$bi") guest-a/sriov/pci/$a/2334/None" "$(drv "$b") $(vf_state "$bi") $(leases)"
    fi
    check "virsh destroy guest-a" v destroy guest-a
    until_ok 60 drv_is_not "$a" vfio-pci
    eq "after destroy VF $ai: its MAC and VLAN as before; no lease; the pool 2 free" \
        "$(eval echo "\$before_$ai") 0 2" "$(vf_state "$ai") $(nleases) $("$vdpactl" pool show igb -j | json 'd["free"]')"
else
    not_ok "virsh start --paused guest-a on the pool's network"
    diag "$(tail -n 30 /var/log/libvirt/qemu/guest-a.log 2>/dev/null)" "$(tail -n 20 "$work/daemon.log")"
fi
for d in guest-a guest-b guest-c; do
    v destroy $d >/dev/null 2>&1
    v undefine $d >/dev/null 2>&1
done

# a crash left a VF with a VLAN and MAC and no lease: reconciliation resets
# it; one libvirt holds (its saved state file) it leaves alone
section repair
check "ip link set $pf vf 0 vlan 2399 mac 52:54:00:15:99:99 (no lease)" ip link set "$pf" vf 0 vlan 2399 mac 52:54:00:15:99:99
mkdir -p /run/libvirt/hostdevmgr
held=/run/libvirt/hostdevmgr/${pf}_vf1
: >"$held"
check "ip link set $pf vf 1 vlan 2398 (libvirt's saved state $held there)" ip link set "$pf" vf 1 vlan 2398
rj=$("$vdpactl" reconcile -j 2>&1)
fact "vdpactl reconcile -j: $(printf '%s' "$rj" | tr -s '\n ' '  ')"
eq "vdpactl reconcile resets VF 0 only" "1 $vf0" "$(printf '%s' "$rj" | json '"%s %s" % (len(d["repaired"]), d["repaired"][0].split()[1] if d["repaired"] else "")')"
eq "VF 0: no VLAN, no MAC; VF 1 keeps VLAN 2398" "00:00:00:00:00:00 0 0 True False 2398" "$(vf_state 0) $(vf_state 1 | cut -d' ' -f2)"
rm -f "$held"
ip link set "$pf" vf 1 vlan 0
rj=$("$vdpactl" reconcile -j 2>&1)
eq "a second vdpactl reconcile resets nothing" "[]" "$(printf '%s' "$rj" | json 'json.dumps(d["repaired"])')"

# the pool's VFs change: a reload asking 3 brings the network to them
section reload
sed -i 's/^vfs=2$/vfs=3/' "$etc/vdpa-allocator.conf"
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
