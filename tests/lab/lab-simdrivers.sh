#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-simdrivers.sh: runs INSIDE the lab host (lab_host.py --sim-modules,
# which builds them with build-sim-modules.sh) and prints TAP. What the
# kernel's own simulators do, through iproute2's devlink, vdpa and ip and
# sysfs, the facts the kernel backend is run against (issue 17):
#   netdevsim (drivers/net/netdevsim): a device made through
#     /sys/bus/netdevsim/new_device is devlink handle netdevsim/netdevsimN;
#     sriov_numvfs (no sriov_totalvfs: the limit is debugfs max_vfs); the
#     PF port has a phys_switch_id in legacy mode too; eswitch legacy <->
#     switchdev; in switchdev one pcivf devlink port per VF with pfnum,
#     vfnum and a representor netdev; VF MAC, VLAN, spoofchk, trust set and
#     read back through rtnetlink on the PF netdev; what sriov_numvfs=0 does.
#   vdpa_sim_net (drivers/vdpa/vdpa_sim): mgmtdev vdpasim_net, DEV_NEW with
#     mac and mtu (its config_attr_mask, which netlink does not report:
#     MACADDR|MTU|FEATURES = 0x102400) read back, max_vqp refused with the
#     kernel's message, the device's place in sysfs, vhost_vdpa binding
#     through driver_override, /dev/vhost-vdpa-N, DEV_DEL.
# Names and numbers a check relies on are printed as "# fact:" lines.
set -u

. "$(dirname "$0")/tap.sh"
wait_for() {
    i=0
    while ! [ -e "$1" ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -e "$1" ]
}

echo "# kernel $(uname -r)"
[ -d /sys/kernel/debug/netdevsim ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

# --- the modules ---------------------------------------------------------------
section modules
check "modprobe netdevsim" modprobe netdevsim
check "modprobe vdpa_sim_net" modprobe vdpa_sim_net
for m in netdevsim vdpa_sim vdpa_sim_net vringh; do
    path=$(modinfo -n $m 2>&1)
    case "$path" in
    */updates/va-sim/$m.ko) ok "$m comes from updates/va-sim (${LAB_SIM_MODULES:-?})" ;;
    *) not_ok "$m comes from updates/va-sim: $path" ;;
    esac
done
eq "netdevsim's vermagic is the lab kernel's (vdpa.ko's)" \
    "$(modinfo -F vermagic vdpa)" "$(modinfo -F vermagic netdevsim)"
fact "vermagic: $(modinfo -F vermagic netdevsim)"
fact "netdevsim depends: $(modinfo -F depends netdevsim); vdpa_sim_net depends: $(modinfo -F depends vdpa_sim_net)"
fact "signer: '$(modinfo -F signer netdevsim)' (unsigned); taint: $(cat /proc/sys/kernel/tainted)"
dmesg | grep -E 'netdevsim|vdpa_sim|vringh' | sed 's/^\[[^]]*\] /# fact: dmesg: /'

# --- netdevsim -------------------------------------------------------------------
section netdevsim
id=7
dev=netdevsim$id
sys=/sys/bus/netdevsim/devices/$dev
dl=netdevsim/$dev
dbg=/sys/kernel/debug/netdevsim/$dev
check "echo '$id 1' > /sys/bus/netdevsim/new_device" sh -c "echo '$id 1' >/sys/bus/netdevsim/new_device"
wait_for "$sys/net"
fact "device: $(readlink -f "$sys") on bus $(basename "$(readlink -f "$sys/subsystem")"), driver $(basename "$(readlink -f "$sys/driver")")"
fact "$sys: $(ls "$sys" | tr '\n' ' ')"
pf=$(ls "$sys/net" 2>/dev/null | head -n1)
fact "PF netdev: ${pf:-none} (named by udev's naming scheme only when udevd runs)"
check "devlink dev lists $dl" sh -c "devlink dev | grep -qx '$dl'"
eq "eswitch mode starts legacy (DEVLINK_CMD_ESWITCH_GET)" legacy \
    "$(devlink -j dev eswitch show $dl | json 'd["dev"]["'$dl'"]["mode"]')"
port0=$(devlink -j port show | json '[k for k, v in d["port"].items() if k.startswith("'$dl'/")]')
eq "legacy: one devlink port, the physical one" "[\"$dl/0\"]" "$port0"
eq "legacy: port $dl/0 is flavour physical with netdev $pf" "physical $pf" \
    "$(devlink -j port show $dl/0 | json 'd["port"]["'$dl'/0"]["flavour"] + " " + d["port"]["'$dl'/0"]["netdev"]')"
sw_legacy=$(cat /sys/class/net/$pf/phys_switch_id 2>&1)
check "legacy: the PF netdev has a phys_switch_id" test -n "$sw_legacy"
fact "legacy: $pf phys_switch_id=$sw_legacy phys_port_name=$(cat /sys/class/net/$pf/phys_port_name 2>&1)"
check "no sriov_totalvfs in $sys (the VF limit is $dbg/max_vfs)" test ! -e "$sys/sriov_totalvfs"
eq "max_vfs is 4 (NSIM_BUS_DEV_MAX_VFS)" 4 "$(cat $dbg/max_vfs 2>&1)"
eq "sriov_numvfs starts 0" 0 "$(cat $sys/sriov_numvfs)"
check "echo 2 > sriov_numvfs" sh -c "echo 2 >$sys/sriov_numvfs"
eq "sriov_numvfs reads 2" 2 "$(cat $sys/sriov_numvfs)"
check "no virtfnN links: netdevsim VFs are no devices" sh -c "! ls -d $sys/virtfn* 2>/dev/null"
check "no VF netdevs: the PF's only net child is $pf" sh -c "[ \"\$(ls $sys/net)\" = $pf ]"
refused "2 -> 3 VFs refused" "EBUSY" sysw $sys/sriov_numvfs 3
eq "legacy: no devlink port per VF" "[\"$dl/0\"]" \
    "$(devlink -j port show | json '[k for k, v in d["port"].items() if k.startswith("'$dl'/")]')"
eq "the PF netdev lists 2 VFs (IFLA_VFINFO_LIST)" 2 "$(ip -j link show $pf | json 'len(d[0]["vfinfo_list"])')"

# VF settings through rtnetlink on the PF netdev, legacy mode
check "ip link set $pf vf 0 mac 52:54:00:12:34:56" ip link set $pf vf 0 mac 52:54:00:12:34:56
check "ip link set $pf vf 0 vlan 10" ip link set $pf vf 0 vlan 10
check "ip link set $pf vf 0 spoofchk on" ip link set $pf vf 0 spoofchk on
check "ip link set $pf vf 0 trust on" ip link set $pf vf 0 trust on
vf0='d[0]["vfinfo_list"][0]'
vf0_now() {
    ip -j link show $pf | json "' '.join(str(x) for x in (${vf0}['address'], ${vf0}['vlan_list'][0].get('vlan', 0), ${vf0}['spoofchk'], ${vf0}['trust']))"
}
eq "VF 0 reads back mac, vlan, spoofchk, trust" "52:54:00:12:34:56 10 True True" "$(vf0_now)"
diag "$(ip link show $pf)"
refused "a multicast VF MAC is refused" "Invalid argument" ip link set $pf vf 1 mac 01:00:5e:00:00:01
refused "a VF past sriov_numvfs is refused" "Invalid argument" ip link set $pf vf 2 mac 52:54:00:12:34:57

# switchdev and back
check "devlink dev eswitch set $dl mode switchdev (DEVLINK_CMD_ESWITCH_SET)" devlink dev eswitch set $dl mode switchdev
eq "eswitch mode reads switchdev" switchdev "$(devlink -j dev eswitch show $dl | json 'd["dev"]["'$dl'"]["mode"]')"
vfports=$(devlink -j port show | json '" ".join("%s:%s:%s:%s:%s" % (k, v["flavour"], v.get("pfnum"), v.get("vfnum"), v.get("netdev")) for k, v in sorted(d["port"].items()) if k.startswith("'$dl'/") and v["flavour"] == "pcivf")')
fact "switchdev port dump (index:flavour:pfnum:vfnum:netdev): $vfports"
diag "$(devlink port show)"
rep0=$(devlink -j port show $dl/128 | json 'd["port"]["'$dl'/128"]["netdev"]')
rep1=$(devlink -j port show $dl/129 | json 'd["port"]["'$dl'/129"]["netdev"]')
eq "switchdev: pcivf ports $dl/128 and /129 (NSIM_DEV_VF_PORT_INDEX_BASE 128 + vf), pfnum 0, vfnum 0 and 1" \
    "$dl/128:pcivf:0:0:$rep0 $dl/129:pcivf:0:1:$rep1" "$vfports"
eq "switchdev: the pcivf port says controller 0, external false" "0 False" \
    "$(devlink -j port show $dl/128 | json '"%s %s" % (d["port"]["'$dl'/128"]["controller"], d["port"]["'$dl'/128"]["external"])')"
check "switchdev: representors $rep0 and $rep1 are net children of $dev" test -e $sys/net/$rep0 -a -e $sys/net/$rep1
eq "switchdev: representor phys_port_name pf0vf0, pf0vf1" "pf0vf0 pf0vf1" \
    "$(cat /sys/class/net/$rep0/phys_port_name) $(cat /sys/class/net/$rep1/phys_port_name)"
eq "switchdev: representors carry the PF's phys_switch_id" "$sw_legacy $sw_legacy" \
    "$(cat /sys/class/net/$rep0/phys_switch_id) $(cat /sys/class/net/$rep1/phys_switch_id)"
eq "switchdev: the PF's phys_switch_id is the one it had in legacy mode" "$sw_legacy" "$(cat /sys/class/net/$pf/phys_switch_id)"
eq "switchdev: VF 0's settings survive the mode change" "52:54:00:12:34:56 10 True True" "$(vf0_now)"
check "switchdev: ip link set $pf vf 0 mac still works" ip link set $pf vf 0 mac 52:54:00:12:34:57
refused "switchdev: ip link set $pf vf 0 rate refused" "Operation not supported" ip link set $pf vf 0 rate 100
refused "devlink port function hw_addr refused (netdevsim has no port function ops)" \
    "Port doesn't support function attributes" devlink port function set $dl/128 hw_addr 52:54:00:00:00:01
refused "eswitch inline-mode refused" "Operation not supported" devlink dev eswitch set $dl mode switchdev inline-mode transport
check "devlink dev eswitch set $dl mode legacy" devlink dev eswitch set $dl mode legacy
eq "legacy again: the pcivf ports are gone" "[\"$dl/0\"]" \
    "$(devlink -j port show | json '[k for k, v in d["port"].items() if k.startswith("'$dl'/")]')"
check "legacy again: the representors are gone" test ! -e /sys/class/net/$rep0 -a ! -e /sys/class/net/$rep1
eq "legacy again: still 2 VFs" 2 "$(cat $sys/sriov_numvfs)"

# sriov_numvfs=0
check "echo 0 > sriov_numvfs" sh -c "echo 0 >$sys/sriov_numvfs"
eq "0 VFs: the PF netdev lists none" 0 "$(ip -j link show $pf | json 'len(d[0].get("vfinfo_list", []))')"
check "echo 2 > sriov_numvfs again" sh -c "echo 2 >$sys/sriov_numvfs"
eq "netdevsim keeps VF 0's settings across sriov_numvfs 0 and back (a release must reset them itself)" \
    "52:54:00:12:34:57 10 True True" "$(vf0_now)"
check "switchdev with VFs" devlink dev eswitch set $dl mode switchdev
check "echo 0 > sriov_numvfs in switchdev" sh -c "echo 0 >$sys/sriov_numvfs"
eq "netdevsim drops to legacy when its VFs go in switchdev (nsim_drv_configure_vfs)" legacy \
    "$(devlink -j dev eswitch show $dl | json 'd["dev"]["'$dl'"]["mode"]')"
check "switchdev with 0 VFs is accepted" devlink dev eswitch set $dl mode switchdev
check "echo 2 > sriov_numvfs in switchdev" sh -c "echo 2 >$sys/sriov_numvfs"
eq "VFs made in switchdev get their pcivf ports at once" 2 \
    "$(devlink -j port show | json 'len([k for k, v in d["port"].items() if k.startswith("'$dl'/") and v["flavour"] == "pcivf"])')"
check "echo 0 > sriov_numvfs" sh -c "echo 0 >$sys/sriov_numvfs"
refused "5 VFs refused past max_vfs 4" "ENOMEM" sysw $sys/sriov_numvfs 5
check "echo $id > /sys/bus/netdevsim/del_device" sh -c "echo $id >/sys/bus/netdevsim/del_device"
check "devlink dev no longer lists $dl" sh -c "! devlink dev | grep -qx '$dl'"

# --- vdpa_sim_net -----------------------------------------------------------------
section vdpa_sim_net
mg=vdpasim_net
check "vdpa mgmtdev show $mg" vdpa mgmtdev show $mg
mj=$(vdpa -j mgmtdev show $mg 2>&1)
fact "vdpa -j mgmtdev show: $mj"
eq "$mg: supported_classes [net], max_supported_vqs 3" '["net"] 3' \
    "$(echo "$mj" | json '"%s %s" % (json.dumps(d["mgmtdev"]["'$mg'"]["supported_classes"]), d["mgmtdev"]["'$mg'"]["max_supported_vqs"])')"
eq "$mg: dev_features" '["MTU", "MAC", "STATUS", "CTRL_VQ", "CTRL_MAC_ADDR", "ANY_LAYOUT", "VERSION_1", "ACCESS_PLATFORM"]' \
    "$(echo "$mj" | json 'd["mgmtdev"]["'$mg'"]["dev_features"]')"
check "the management device is /sys/devices/$mg, on no bus (no bus name in netlink)" \
    sh -c "test -d /sys/devices/$mg && test ! -e /sys/devices/$mg/subsystem"
# no automatic binding: the test binds through driver_override as the
# kernel backend does
echo 0 >/sys/bus/vdpa/drivers_autoprobe
v=va-sim0
check "vdpa dev add name $v mgmtdev $mg mac 52:54:00:aa:bb:01 mtu 1400 (DEV_NEW)" \
    vdpa dev add name $v mgmtdev $mg mac 52:54:00:aa:bb:01 mtu 1400
fact "vdpa -j dev show $v: $(vdpa -j dev show $v 2>&1)"
eq "DEV_GET: type network, mgmtdev $mg, max_vqs 3, max_vq_size 256" "network $mg 3 256" \
    "$(vdpa -j dev show $v | json '" ".join(str(d["dev"]["'$v'"][k]) for k in ("type", "mgmtdev", "max_vqs", "max_vq_size"))')"
fact "vdpa -j dev config show $v: $(vdpa -j dev config show $v 2>&1)"
eq "DEV_CONFIG_GET: mac 52:54:00:aa:bb:01, mtu 1400" "52:54:00:aa:bb:01 1400" \
    "$(vdpa -j dev config show $v | json '"%s %s" % (d["config"]["'$v'"]["mac"], d["config"]["'$v'"]["mtu"])')"
refused "max_vqp 2 refused: not in config_attr_mask" \
    "Error: vdpa: Some provided attributes are not supported: 0x1000." \
    vdpa dev add name va-sim1 mgmtdev $mg max_vqp 2
refused "max_vqp 1 refused the same way" "Some provided attributes are not supported: 0x1000" \
    vdpa dev add name va-sim1 mgmtdev $mg max_vqp 1
check "the refused device does not exist" test ! -e /sys/bus/vdpa/devices/va-sim1
refused "a second device of the same name refused" "File exists" vdpa dev add name $v mgmtdev $mg
refused "an unknown mgmtdev refused" "Fail to find the specified management device" \
    vdpa dev add name va-sim1 mgmtdev pci/0000:00:01.0
check "mtu 100 is accepted: neither vdpa nor vdpa_sim_net checks it" vdpa dev add name va-sim2 mgmtdev $mg mtu 100
eq "without mac: mac 00:00:00:00:00:00" "00:00:00:00:00:00 100" \
    "$(vdpa -j dev config show va-sim2 | json '"%s %s" % (d["config"]["va-sim2"]["mac"], d["config"]["va-sim2"]["mtu"])')"
vdpa dev del va-sim2
check "$v is on the vdpa bus" sh -c "[ \"\$(readlink -f /sys/bus/vdpa/devices/$v/subsystem)\" = /sys/bus/vdpa ]"
where=$(readlink -f /sys/bus/vdpa/devices/$v)
fact "the vdpa device sits at $where, parent $(dirname "$where")"
eq "vdpa_sim parents its device on nothing: /sys/devices/$v (mlx5_vdpa: the VF's PCI device)" /sys/devices/$v "$where"
check "modprobe vhost_vdpa" modprobe vhost_vdpa
check "echo vhost_vdpa > driver_override" sh -c "echo vhost_vdpa >/sys/bus/vdpa/devices/$v/driver_override"
check "echo $v > drivers_probe" sh -c "echo $v >/sys/bus/vdpa/drivers_probe"
eq "$v is bound to vhost_vdpa" vhost_vdpa "$(basename "$(readlink /sys/bus/vdpa/devices/$v/driver)")"
node=$(ls -d /sys/bus/vdpa/devices/$v/vhost-vdpa-* 2>/dev/null | head -n1)
node=/dev/${node##*/}
fact "char node: $node $(ls -l "$node" 2>&1 | cut -d' ' -f1,3,4)"
check "/dev/vhost-vdpa-N appears" test -c "$node"
check "/dev/vhost-vdpa-N opens" sh -c "exec 3<>$node"
check "vdpa dev del $v (DEV_DEL)" vdpa dev del $v
check "the vdpa device is gone" test ! -e /sys/bus/vdpa/devices/$v
check "its char node is gone" test ! -e "$node"
echo 1 >/sys/bus/vdpa/drivers_autoprobe

# --- udev naming ------------------------------------------------------------------
section udev naming
# the names the daemon's tests will see when udevd runs (lab-daemon does)
if [ -x /lib/systemd/systemd-udevd ]; then
    # no trigger: only the device made below matters
    /lib/systemd/systemd-udevd --daemon >/dev/null 2>&1
    echo "$id 1" >/sys/bus/netdevsim/new_device
    wait_for "$sys/net"
    echo 1 >$sys/sriov_numvfs
    devlink dev eswitch set $dl mode switchdev
    udevadm settle -t 30
    names=$(ls $sys/net | sort | tr '\n' ' ')
    eq "with udevd: the PF and its representor are named eni${id}np1 and eni${id}npf0vf0" \
        "eni${id}np1 eni${id}npf0vf0 " "$names"
    echo $id >/sys/bus/netdevsim/del_device
    # the project's rule on a vdpa_sim device's bind to vhost_vdpa
    srcdir=${VA_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
    mkdir -p /etc/udev/rules.d /run/vdpa-allocator/nodes
    cp "$srcdir/udev-rules/90-vdpa-allocator.rules" /etc/udev/rules.d/
    udevadm control --reload
    echo "disk 0660" >/run/vdpa-allocator/nodes/va-sim3
    echo 0 >/sys/bus/vdpa/drivers_autoprobe
    vdpa dev add name va-sim3 mgmtdev $mg mac 52:54:00:aa:bb:03
    echo vhost_vdpa >/sys/bus/vdpa/devices/va-sim3/driver_override
    echo va-sim3 >/sys/bus/vdpa/drivers_probe
    udevadm settle -t 30
    node=$(ls -d /sys/bus/vdpa/devices/va-sim3/vhost-vdpa-* 2>/dev/null | head -n1)
    node=/dev/${node##*/}
    eq "with udevd: the project's rule makes $node root:disk 660 on the bind" "root:disk 660" \
        "$(stat -c '%U:%G %a' "$node" 2>&1)"
    vdpa dev del va-sim3
    echo 1 >/sys/bus/vdpa/drivers_autoprobe
    rm -f /run/vdpa-allocator/nodes/va-sim3
    udevadm control --exit 2>/dev/null
fi

check "modprobe -r netdevsim vdpa_sim_net vdpa_sim" modprobe -r netdevsim vdpa_sim_net vdpa_sim
check "the kernel logged no WARNING, BUG or Oops" sh -c '! dmesg | grep -E "WARNING:|BUG:|Oops"'
section end
echo "1..$n"
[ $failed -eq 0 ]
