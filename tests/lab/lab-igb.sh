#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-igb.sh: runs INSIDE the lab host booted by lab_host.py --igb 1 (QEMU
# 10, q35, an emulated Intel IOMMU, one Intel 82576 PF with SR-IOV) and
# prints TAP: what a real SR-IOV PF driver does, the facts issue 15's sriov
# mode is built on:
#   igb: the PF bound to igb with a netdev, sriov_totalvfs, sriov_numvfs
#     making VFs bound to igbvf, VF MAC/VLAN/spoofchk/trust through
#     rtnetlink on the PF read back from IFLA_VFINFO_LIST, the reset; one
#     IOMMU group per VF; a VF moved to vfio-pci by driver_override, its
#     /dev/vfio/N; what devlink says about igb (no devlink, no switchdev).
#   libvirt 9.0 (Debian 12's libvirtd): a hostdev network on the PF
#     (<forward mode='hostdev' managed='yes'><pf dev=.../>), a domain with
#     <interface type='network'> with <mac> and <vlan> started paused: the
#     VF libvirt picks moves to vfio-pci, its MAC and VLAN are set on the PF;
#     a second domain gets the other VF, a third is refused; virsh destroy
#     gives each VF back to igbvf with no VLAN and, as its admin MAC, the MAC
#     its igbvf netdev had before the start (libvirt's saved "mac", not its
#     saved "adminMac"); with sriov_drivers_autoprobe 0 (VFs on no driver)
#     the admin MAC and VLAN come back exactly and the VF stays driverless;
#     a network listing one VF by <address> (the daemon's form) hands out that VF.
# A step the lab host cannot run (QEMU 7.2 assigning a VF under TCG) says
# "# SKIP" with the error seen; the rest still runs. Facts as "# fact:".
set -u

. "$(dirname "$0")/tap.sh"
drv() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null) && basename "$d" || echo none; }
# for until_ok, which must read the driver at every try
drv_is() { [ "$(drv "$1")" = "$2" ]; }
drv_is_not() { [ "$(drv "$1")" != "$2" ]; }
netdev() { ls "/sys/bus/pci/devices/$1/net" 2>/dev/null | head -n1; }
# vf_state N: "mac vlan qos spoofchk trust" of VF N from the PF's IFLA_VFINFO_LIST
vf_state() {
    ip -d -j link show "$pf" | json "(lambda v: ' '.join(str(x) for x in (v['address'], v['vlan_list'][0].get('vlan', 0), v['vlan_list'][0].get('qos', 0), v['spoofchk'], v['trust'])))(d[0]['vfinfo_list'][$1])"
}

echo "# kernel $(uname -r), $(cat /proc/cmdline)"

# --- the PF ---------------------------------------------------------------------
section igb
check "modprobe igb igbvf vfio-pci" modprobe -a igb igbvf vfio-pci
pfpci=
for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x8086:0x10c9 ] && pfpci=${d##*/} && break
done
[ -n "$pfpci" ] || { not_ok "an 82576 PF (8086:10c9) on the PCI bus"; echo "1..$n"; exit 1; }
sys=/sys/bus/pci/devices/$pfpci
until_ok 60 test -d "$sys/net"
pf=$(netdev "$pfpci")
eq "the 82576 PF $pfpci is bound to igb with a netdev" "igb yes" "$(drv "$pfpci") $([ -n "$pf" ] && echo yes)"
fact "PF $pfpci netdev $pf, operstate $(cat /sys/class/net/$pf/operstate), carrier $(cat /sys/class/net/$pf/carrier 2>&1)"
eq "sriov_totalvfs is 7" 7 "$(cat "$sys/sriov_totalvfs")"
eq "sriov_numvfs starts at 0" 0 "$(cat "$sys/sriov_numvfs")"
fact "sriov_vf_device $(cat "$sys/sriov_vf_device"), sriov_offset $(cat "$sys/sriov_offset"), sriov_stride $(cat "$sys/sriov_stride"), sriov_drivers_autoprobe $(cat "$sys/sriov_drivers_autoprobe")"

check "sriov_numvfs 2" sysw "$sys/sriov_numvfs" 2
vf0pci=$(basename "$(readlink "$sys/virtfn0")")
vf1pci=$(basename "$(readlink "$sys/virtfn1")")
fact "VFs: virtfn0 $vf0pci, virtfn1 $vf1pci"
until_ok 60 test -d "/sys/bus/pci/devices/$vf1pci/net" && until_ok 60 test -d "/sys/bus/pci/devices/$vf0pci/net"
eq "two VFs, both bound to igbvf with a netdev" "2 igbvf igbvf yes yes" \
    "$(ls -d "$sys"/virtfn* | wc -l) $(drv "$vf0pci") $(drv "$vf1pci") $([ -n "$(netdev "$vf0pci")" ] && echo yes) $([ -n "$(netdev "$vf1pci")" ] && echo yes)"
fact "VF netdevs $(netdev "$vf0pci") $(netdev "$vf1pci"), VF device id $(cat "/sys/bus/pci/devices/$vf0pci/device"), physfn of $vf0pci: $(basename "$(readlink "/sys/bus/pci/devices/$vf0pci/physfn")")"
eq "the PF netdev lists 2 VFs (IFLA_VFINFO_LIST)" 2 "$(ip -j link show "$pf" | json 'len(d[0]["vfinfo_list"])')"
vf0_before=$(vf_state 0)
fact "VF 0 as made (mac vlan qos spoofchk trust): $vf0_before"
fact "VF 1 as made: $(vf_state 1)"
refused_out=$(sysw "$sys/sriov_numvfs" 3 2>&1) && not_ok "2 -> 3 VFs without 0 first is refused" ||
    ok "2 -> 3 VFs without 0 first is refused"
fact "echo 3 > sriov_numvfs with 2 made: $refused_out"

# --- VF settings through the PF ----------------------------------------------------
section vf-settings
check "ip link set $pf vf 0 mac 52:54:00:15:01:00 vlan 2334 spoofchk on trust off" \
    ip link set "$pf" vf 0 mac 52:54:00:15:01:00 vlan 2334 spoofchk on trust off
eq "VF 0 reads back mac, vlan 2334, qos 0, spoofchk on, trust off from ip -d -j link show $pf" \
    "52:54:00:15:01:00 2334 0 True False" "$(vf_state 0)"
diag "$(ip -d link show "$pf" | grep 'vf 0')"
check "trust on reads back" sh -c "ip link set $pf vf 0 trust on && ip -j link show $pf | grep -q '\"trust\":true'"
out=$(ip link set "$pf" vf 0 rate 100 2>&1) && r=accepted || r="refused: $out"
fact "ip link set $pf vf 0 rate 100 (max_tx_rate): $r"
out=$(ip link set "$pf" vf 0 vlan 4095 2>&1) && r=accepted || r="refused: $out"
fact "vlan 4095: $r"
check "reset: ip link set $pf vf 0 vlan 0 trust off, mac 00:00:00:00:00:00" \
    ip link set "$pf" vf 0 vlan 0 trust off mac 00:00:00:00:00:00
eq "VF 0 after the reset: no VLAN, trust off" "0 0 True False" "$(vf_state 0 | cut -d' ' -f2-)"
fact "VF 0 after the reset (mac vlan qos spoofchk trust): $(vf_state 0); rate: $(ip -j link show "$pf" | json 'd[0]["vfinfo_list"][0].get("rate")')"
diag "$(dmesg | grep -E 'igb .*VF|igbvf' | tail -n 12)"

# --- IOMMU groups and vfio-pci ---------------------------------------------------
section iommu
g_pf=$(basename "$(readlink "$sys/iommu_group")")
g0=$(basename "$(readlink "/sys/bus/pci/devices/$vf0pci/iommu_group")")
g1=$(basename "$(readlink "/sys/bus/pci/devices/$vf1pci/iommu_group")")
fact "iommu groups: PF $g_pf, VF0 $g0, VF1 $g1; $(ls /sys/kernel/iommu_groups | wc -l) groups in /sys/kernel/iommu_groups"
if [ -n "$g0" ] && [ -n "$g1" ] && [ "$g0" != "$g1" ] && [ "$g0" != "$g_pf" ] &&
    [ "$(ls "/sys/kernel/iommu_groups/$g0/devices")" = "$vf0pci" ] &&
    [ "$(ls "/sys/kernel/iommu_groups/$g1/devices")" = "$vf1pci" ]; then
    ok "each VF has an IOMMU group of its own (/sys/kernel/iommu_groups/$g0, $g1)"
else
    not_ok "each VF has an IOMMU group of its own"
    diag "$(ls -l /sys/kernel/iommu_groups/*/devices/)"
fi
fact "iommu domain type of VF 0's group: $(cat "/sys/kernel/iommu_groups/$g0/type" 2>&1)"
check "VF 1: unbind from igbvf" sysw "/sys/bus/pci/devices/$vf1pci/driver/unbind" "$vf1pci"
check "VF 1: driver_override vfio-pci, drivers_probe" sh -c "echo vfio-pci >/sys/bus/pci/devices/$vf1pci/driver_override &&
    echo $vf1pci >/sys/bus/pci/drivers_probe"
eq "VF 1 is bound to vfio-pci" vfio-pci "$(drv "$vf1pci")"
check "/dev/vfio/$g1 exists for VF 1's group" test -c "/dev/vfio/$g1"
fact "/dev/vfio: $(ls /dev/vfio | tr '\n' ' ')"
# open the group and container as QEMU would: VFIO_GET_API_VERSION, the group viable, type1 set
out=$(/usr/bin/python3 -S - "$g1" "$vf1pci" 2>&1 <<'EOF'
import fcntl, os, struct, sys
VFIO_TYPE, VFIO_BASE = ord(';'), 100
def IO(nr): return (VFIO_TYPE << 8) | (VFIO_BASE + nr)
c = os.open("/dev/vfio/vfio", os.O_RDWR)
print("api", fcntl.ioctl(c, IO(0)))
print("type1v2 extension", fcntl.ioctl(c, IO(1), 3))
g = os.open("/dev/vfio/" + sys.argv[1], os.O_RDWR)
st = bytearray(struct.pack("II", 8, 0))
fcntl.ioctl(g, IO(3), st)  # VFIO_GROUP_GET_STATUS
flags = struct.unpack("II", st)[1]
print("group viable", bool(flags & 1))
fcntl.ioctl(g, IO(4), struct.pack("i", c))  # VFIO_GROUP_SET_CONTAINER
fcntl.ioctl(c, IO(2), 3)  # VFIO_SET_IOMMU type1v2
fd = fcntl.ioctl(g, IO(6), bytearray(sys.argv[2].encode() + b"\0"))  # VFIO_GROUP_GET_DEVICE_FD
print("device fd", fd >= 0)
EOF
)
case "$out" in
*"group viable True"*"device fd True"*) ok "VFIO: VF 1's group is viable, type1v2 container set, a device fd opens" ;;
*) not_ok "VFIO: VF 1's group opens"; diag "$out" ;;
esac
fact "vfio ioctls: $(echo "$out" | tr '\n' ';')"
check "VF 1 back to igbvf (unbind, driver_override cleared, drivers_probe)" sh -c "
    echo $vf1pci >/sys/bus/pci/drivers/vfio-pci/unbind && echo >/sys/bus/pci/devices/$vf1pci/driver_override &&
    echo $vf1pci >/sys/bus/pci/drivers_probe && [ \"\$(basename \$(readlink /sys/bus/pci/devices/$vf1pci/driver))\" = igbvf ]"

# --- devlink ------------------------------------------------------------------------
section devlink
out=$(devlink dev show 2>&1)
fact "devlink dev show: ${out:-(nothing)}"
out=$(devlink dev eswitch show "pci/$pfpci" 2>&1) && r=0 || r=$?
fact "devlink dev eswitch show pci/$pfpci: rc $r: $out"
eq "igb registers no devlink instance: eswitch show pci/$pfpci fails" "fails" "$([ $r -ne 0 ] && echo fails)"
fact "phys_switch_id of $pf: $(cat "/sys/class/net/$pf/phys_switch_id" 2>&1); phys_port_name: $(cat "/sys/class/net/$pf/phys_port_name" 2>&1)"

# --- libvirt: a hostdev network on the PF --------------------------------------------
section libvirt
lvready=/run/lab-igb-libvirt.ready
# vatest.libvirt's fixture, as test_lab_daemon.py uses it: the lab host is
# this test's own machine. It runs until SIGTERM, then tears down.
VA_LIBVIRT_NAMESPACED=1 /usr/bin/python3 -m vatest.libvirt serve "$lvready" --no-hooks >/run/lab-igb-libvirt.log 2>&1 &
lvpid=$!
until_ok 240 test -e "$lvready"
if ! [ -e "$lvready" ]; then
    not_ok "libvirtd started"
    diag "$(cat /run/lab-igb-libvirt.log)"
    echo "1..$n"
    exit 1
fi
ok "libvirtd $(libvirtd --version | awk '{ print $NF }') started"
lvroot=$(cat "$lvready")
work=$(mktemp -d)
cat >"$work/net.xml" <<EOF
<network>
  <name>igb-pool</name>
  <forward mode='hostdev' managed='yes'>
    <pf dev='$pf'/>
  </forward>
</network>
EOF
net_up() { v net-define "$work/net.xml" && v net-start igb-pool; }
check "net-define + net-start of a hostdev network on <pf dev='$pf'/>" net_up
netxml=$(v net-dumpxml igb-pool 2>&1)
addrs=$(printf '%s\n' "$netxml" | grep -c "<address type='pci'")
eq "the running network lists the PF's 2 VFs as <address type='pci'>" 2 "$addrs"
diag "$netxml"

# domxml NAME MAC VLAN: a TCG domain with one NIC on the hostdev network
domxml() {
    cat >"$work/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='network'>
      <source network='igb-pool'/>
      <mac address='$2'/>
      <vlan><tag id='$3'/></vlan>
    </interface>
  </devices>
</domain>
EOF
    v define "$work/$1.xml"
}
# vf_of NAME: the VF index (0, 1) of the domain's hostdev source address
vf_of() {
    a=$(v dumpxml "$1" | sed -n '/<source>/,/<\/source>/p' | sed -n "s/.*slot='0x\([0-9a-f]*\)' function='0x\([0-9a-f]*\)'.*/\1.\2/p")
    for i in 0 1; do
        eval "p=\$vf${i}pci"
        [ "${p#*:*:}" = "$(printf '%02x.%x' "0x${a%.*}" "0x${a#*.}")" ] && echo $i && return
    done
    echo "?"
}
vfpci() { eval "echo \$vf${1}pci"; }

# VF 1 gets an administrative MAC first: libvirt must put back a set one too
check "ip link set $pf vf 1 mac 52:54:00:15:01:01 (an admin MAC libvirt must restore)" \
    ip link set "$pf" vf 1 mac 52:54:00:15:01:01
vf_before_0=$(vf_state 0)
vf_before_1=$(vf_state 1)
# the MAC of each VF's igbvf netdev: what libvirt saves as "mac" and restores
vfnetmac() { cat "/sys/bus/pci/devices/$(vfpci "$1")/net/"*/address 2>&1; }
netmac_0=$(vfnetmac 0)
netmac_1=$(vfnetmac 1)
fact "before the domains (admin mac vlan qos spoofchk trust): VF 0 $vf_before_0, VF 1 $vf_before_1; igbvf netdev MACs: VF 0 $netmac_0, VF 1 $netmac_1"
if domxml guest-a 52:54:00:15:23:34 2334 >"$work/def.out" 2>&1 && domxml guest-b 52:54:00:15:23:35 2335 >>"$work/def.out" 2>&1 &&
    domxml guest-c 52:54:00:15:23:36 2336 >>"$work/def.out" 2>&1; then
    ok "virsh define of guest-a, guest-b, guest-c: <interface type='network'> on igb-pool with <mac> and <vlan>"
else
    not_ok "virsh define of guest-a, guest-b, guest-c"
    diag "$(cat "$work/def.out")"
fi
# libvirt configures a VF through its PF only while the PF is up
out=$(v start --paused guest-a 2>&1) && r=started || r=refused
case "$r $out" in
"refused "*"because the PF is not online"*) ok "with $pf down libvirt refuses the start (the PF is not online)" ;;
*) not_ok "with $pf down libvirt refuses the start"; diag "$out" ;;
esac
fact "virsh start --paused with $pf down: $r: $out"
eq "that refusal leaves both VFs on igbvf as they were" "igbvf $vf_before_0 igbvf $vf_before_1" \
    "$(drv "$vf0pci") $(vf_state 0) $(drv "$vf1pci") $(vf_state 1)"
v destroy guest-a >/dev/null 2>&1
check "ip link set $pf up" ip link set "$pf" up
t0=$(cut -d' ' -f1 /proc/uptime)
start_out=$(v start --paused guest-a 2>&1) && started=yes || started=no
fact "virsh start --paused guest-a: $started in $(echo "$(cut -d' ' -f1 /proc/uptime) $t0" | awk '{ print $1 - $2 }') s: $start_out"
if [ $started = yes ]; then
    ok "virsh start --paused guest-a (QEMU 7.2 under TCG in the lab host takes the VF through vfio-pci)"
    diag "$(v dumpxml guest-a | sed -n '/<interface/,/<\/interface>/p')"
    a=$(vf_of guest-a)
    eq "guest-a's VF $a is bound to vfio-pci, its live <interface> is type='hostdev'" "vfio-pci yes" \
        "$(drv "$(vfpci "$a")") $(v dumpxml guest-a | grep -q "<interface type='hostdev' managed='yes'>" && echo yes)"
    eq "VF $a reads back guest-a's MAC and VLAN 2334 on $pf, spoofchk on, trust off" "52:54:00:15:23:34 2334 0 True False" \
        "$(vf_state "$a")"
    fact "libvirt's saved VF state: $(for f in /run/libvirt/hostdevmgr/*; do printf '%s: %s; ' "${f##*/}" "$(tr -s '\n ' '  ' <"$f")"; done 2>&1)"
    fact "network ports of igb-pool: $(v net-port-list igb-pool 2>&1 | tr '\n' ' ')"
    eq "guest-a is paused" paused "$(v domstate guest-a 2>&1)"
    if v start --paused guest-b >"$work/b.out" 2>&1; then
        b=$(vf_of guest-b)
        eq "guest-b gets the other VF, MAC and VLAN 2335 on it" "$((1 - a)) vfio-pci 52:54:00:15:23:35 2335" \
            "$b $(drv "$(vfpci "$b")") $(vf_state "$b" | cut -d' ' -f1-2)"
        out=$(v start --paused guest-c 2>&1) && r=started || r=refused
        case "$r" in
        refused) ok "guest-c with both VFs taken: libvirt refuses the start" ;;
        *) not_ok "guest-c with both VFs taken: libvirt refuses the start (it started)" ;;
        esac
        fact "virsh start --paused guest-c with the pool empty: $r: $out"
        check "virsh destroy guest-b" v destroy guest-b
        until_ok 60 drv_is "$(vfpci "$b")" igbvf
        # libvirt restores as the admin MAC the MAC the VF's netdev had
        # (its saved "mac"), not the saved "adminMac": igbvf comes back with it
        eq "after destroy VF $b is on igbvf, its admin MAC is its netdev's MAC from before the start, no VLAN" \
            "igbvf $(eval echo "\$netmac_$b") $(eval echo "\$vf_before_$b" | cut -d' ' -f2-)" \
            "$(drv "$(vfpci "$b")") $(vf_state "$b")"
        fact "VF $b's admin MAC: before $(eval echo "\$vf_before_$b" | cut -d' ' -f1), after destroy $(vf_state "$b" | cut -d' ' -f1); igbvf netdev: $(vfnetmac "$b")"
    else
        not_ok "guest-b starts on the other VF"
        diag "$(cat "$work/b.out")"
    fi
    check "virsh destroy guest-a" v destroy guest-a
    until_ok 60 drv_is "$(vfpci "$a")" igbvf
    eq "after destroy VF $a is on igbvf again" igbvf "$(drv "$(vfpci "$a")")"
    eq "after destroy VF $a's admin MAC is its netdev's MAC from before the start, no VLAN, spoofchk on, trust off" \
        "$(eval echo "\$netmac_$a") $(eval echo "\$vf_before_$a" | cut -d' ' -f2-)" "$(vf_state "$a")"
    fact "VF $a's admin MAC: before $(eval echo "\$vf_before_$a" | cut -d' ' -f1), after destroy $(vf_state "$a" | cut -d' ' -f1); igbvf netdev: $(vfnetmac "$a")"
    eq "after destroy libvirt's saved VF state is gone" "" "$(ls /run/libvirt/hostdevmgr/ 2>/dev/null)"
    diag "$(dmesg | grep -E 'igb(vf)? ' | tail -n 25)"
else
    reason=$(printf '%s' "$start_out" | tr '\n' ' ' | cut -c1-300)
    for t in "guest-a's VF on vfio-pci" "its MAC and VLAN 2334 on the PF" "guest-b on the other VF" \
        "guest-c refused" "destroy restores the VFs"; do
        skip "$t" "virsh start failed: $reason"
    done
    diag "$(tail -n 30 /var/log/libvirt/qemu/guest-a.log 2>/dev/null)"
fi
# VFs without a host driver (sriov_drivers_autoprobe 0), as a pool might keep
# them: libvirt then saves only the admin MAC and VLAN, and puts back exactly those
section libvirt-unbound-vfs
if [ $started = yes ]; then
    v net-destroy igb-pool >/dev/null 2>&1
    check "sriov_numvfs 0, sriov_drivers_autoprobe 0, sriov_numvfs 2" sh -c "
        echo 0 >$sys/sriov_numvfs && echo 0 >$sys/sriov_drivers_autoprobe && echo 2 >$sys/sriov_numvfs"
    eq "with sriov_drivers_autoprobe 0 the new VFs have no driver and no netdev" "none none " \
        "$(drv "$vf0pci") $(drv "$vf1pci") $(netdev "$vf0pci")$(netdev "$vf1pci")"
    u_before_0=$(vf_state 0)
    u_before_1=$(vf_state 1)
    fact "unbound VF 0 (admin mac vlan qos spoofchk trust): $u_before_0"
    check "net-start igb-pool" v net-start igb-pool
    if out=$(v start --paused guest-a 2>&1); then
        ok "virsh start --paused guest-a on an unbound VF"
        a=$(vf_of guest-a)
        eq "guest-a's VF $a on vfio-pci with its MAC and VLAN 2334" "vfio-pci 52:54:00:15:23:34 2334" \
            "$(drv "$(vfpci "$a")") $(vf_state "$a" | cut -d' ' -f1-2)"
        fact "libvirt's saved VF state: $(for f in /run/libvirt/hostdevmgr/*; do printf '%s: %s; ' "${f##*/}" "$(tr -s '\n ' '  ' <"$f")"; done 2>&1)"
        check "virsh destroy guest-a" v destroy guest-a
        until_ok 60 drv_is_not "$(vfpci "$a")" vfio-pci
        fact "after destroy VF $a's driver: $(drv "$(vfpci "$a")")"
        eq "after destroy VF $a is off vfio-pci and, autoprobe off, on no driver" none "$(drv "$(vfpci "$a")")"
        eq "after destroy VF $a has exactly its admin MAC, VLAN, spoofchk and trust from before" \
            "$(eval echo "\$u_before_$a")" "$(vf_state "$a")"
        # the form the daemon will define: the pool's VFs as an <address> list
        b1=${vf1pci#*:}
        cat >"$work/net-list.xml" <<EOF
<network>
  <name>igb-list</name>
  <forward mode='hostdev' managed='yes'>
    <address type='pci' domain='0x0000' bus='0x${b1%%:*}' slot='0x$(echo "$b1" | cut -d: -f2 | cut -d. -f1)' function='0x${b1##*.}'/>
  </forward>
</network>
EOF
        sed "s/igb-pool/igb-list/; s/<name>guest-c</<name>guest-d</; s/52:54:00:15:23:36/52:54:00:15:23:37/; s/2336/2337/" \
            "$work/guest-c.xml" >"$work/guest-d.xml"
        if v net-define "$work/net-list.xml" >/dev/null && v net-start igb-list >/dev/null &&
            v define "$work/guest-d.xml" >/dev/null && out=$(v start --paused guest-d 2>&1); then
            eq "a network of one <address> (VF 1): guest-d gets VF 1 on vfio-pci, its MAC and VLAN 2337" \
                "1 vfio-pci 52:54:00:15:23:37 2337" "$(vf_of guest-d) $(drv "$vf1pci") $(vf_state 1 | cut -d' ' -f1-2)"
            v destroy guest-d >/dev/null 2>&1
            until_ok 60 drv_is_not "$vf1pci" vfio-pci
            eq "after destroy VF 1 has no driver, its admin MAC and VLAN as before" "none $(echo "$u_before_1" | cut -d' ' -f1-2)" \
                "$(drv "$vf1pci") $(vf_state 1 | cut -d' ' -f1-2)"
        else
            not_ok "a network of one <address> (VF 1): guest-d starts"
            diag "$out" "$(cat "$work/net-list.xml")"
        fi
        v undefine guest-d >/dev/null 2>&1
        v net-destroy igb-list >/dev/null 2>&1
        v net-undefine igb-list >/dev/null 2>&1
    else
        not_ok "virsh start --paused guest-a on an unbound VF"
        diag "$out"
    fi
    v net-destroy igb-pool >/dev/null 2>&1
    sysw "$sys/sriov_numvfs" 0 >/dev/null
    sysw "$sys/sriov_drivers_autoprobe" 1 >/dev/null
fi
for d in guest-a guest-b guest-c; do
    v destroy $d >/dev/null 2>&1
    v undefine $d >/dev/null 2>&1
done
v net-destroy igb-pool >/dev/null 2>&1
v net-undefine igb-pool >/dev/null 2>&1
kill -TERM $lvpid 2>/dev/null
wait $lvpid 2>/dev/null

section end
check "sriov_numvfs 0 removes the VFs" sh -c "echo 0 >$sys/sriov_numvfs && ! ls -d $sys/virtfn* 2>/dev/null"
check "the kernel logged no WARNING, BUG or Oops" sh -c '! dmesg | grep -E "WARNING:|BUG:|Oops"'
echo "1..$n"
[ $failed -eq 0 ]
