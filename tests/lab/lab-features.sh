#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-features.sh VDUSE_NET [TEST_NETLINK]: runs INSIDE the lab host
# (lab_host.py) and prints TAP. It proves that what the build machines'
# kernel lacks is real there:
#   - vdpa, vduse and vhost_vdpa load; the vdpa netlink family answers;
#   - 802.1Q: a VLAN link on a veth;
#   - a VLAN-filtering bridge takes `bridge vlan add ... pvid untagged`;
#   - a VDUSE virtio-net device (VDUSE_NET, tests/lab/vduse-net.c) becomes a
#     vdpa device with `vdpa dev add ... mgmtdev vduse`, binds to vhost_vdpa
#     through driver_override + drivers_probe, and /dev/vhost-vdpa-N appears;
#     `vdpa dev del` removes it and the VDUSE device is destroyed.
#   - systemd-udevd (unpacked by build-lab-kernel.sh) runs with the
#     project's udev rule, which gives the real /dev/vhost-vdpa-N the group
#     and mode the daemon left in /run/vdpa-allocator/nodes/NAME on bind;
#   - QEMU starts with -netdev vhost-vdpa on that node and stays running
#     (paused: the nested guest need not boot), what libvirt will ask of it;
#   - with TEST_NETLINK (tests/kernel/test-netlink), its lab cases run: the
#     project's own netlink code against the real vdpa family.
set -u

vduse_net=$1
test_netlink=${2:-}
. "$(dirname "$0")/tap.sh"

echo "# kernel $(uname -r)"

# --- modules ---------------------------------------------------------------
check "modprobe vdpa vduse vhost_vdpa" modprobe -a vdpa vduse vhost_vdpa
check "/dev/vduse/control exists" test -c /dev/vduse/control
check "vdpa netlink family answers (vdpa mgmtdev show)" vdpa mgmtdev show

# --- 802.1Q ------------------------------------------------------------------
ip link add lab-a type veth peer name lab-b
check "ip link add link lab-a name lab-a.10 type vlan id 10" \
    ip link add link lab-a name lab-a.10 type vlan id 10
check "lab-a.10 is an 802.1Q link with id 10" sh -c 'ip -d link show lab-a.10 | grep -q "vlan protocol 802.1Q id 10"'
ip link del lab-a.10 2>/dev/null

# --- VLAN-filtering bridge ----------------------------------------------------
check "ip link add lab-br type bridge vlan_filtering 1" ip link add lab-br type bridge vlan_filtering 1
check "vlan_filtering is 1" sh -c '[ "$(cat /sys/class/net/lab-br/bridge/vlan_filtering)" = 1 ]'
ip link set lab-b master lab-br
check "bridge vlan add dev lab-b vid 10 pvid untagged" bridge vlan add dev lab-b vid 10 pvid untagged
check "bridge vlan del dev lab-b vid 1" bridge vlan del dev lab-b vid 1
check "lab-b has VLAN 10 as PVID untagged and nothing else" sh -c '
    out=$(bridge -j vlan show dev lab-b)
    echo "$out"
    [ "$out" = "[{\"ifname\":\"lab-b\",\"vlans\":[{\"vlan\":10,\"flags\":[\"PVID\",\"Egress Untagged\"]}]}]" ]'
ip link del lab-br
ip link del lab-a

# --- VDUSE virtio-net device, vdpa bus, vhost_vdpa ------------------------------
if [ ! -x "$vduse_net" ]; then
    not_ok "vduse-net at $vduse_net"
else
    # no automatic binding: the test binds through driver_override as the
    # kernel backend does
    echo 0 >/sys/bus/vdpa/drivers_autoprobe
    ready=/tmp/vduse-net.ready
    "$vduse_net" -n lab-vduse0 -r "$ready" -v 2>/tmp/vduse-net.log &
    vpid=$!
    i=0
    while [ ! -s "$ready" ] && [ $i -lt 50 ] && kill -0 $vpid 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    check "vduse-net creates VDUSE device lab-vduse0" test -s "$ready"
    check "vdpa mgmtdev show lists vduse" sh -c 'vdpa mgmtdev show | grep -q "^vduse:"'
    check "vdpa dev add name vduse0 mgmtdev vduse refuses mac" \
        sh -c '! vdpa dev add name vduse0 mgmtdev vduse mac 52:54:00:00:00:09'
    check "vdpa dev add name lab-vduse0 mgmtdev vduse" vdpa dev add name lab-vduse0 mgmtdev vduse
    check "vdpa device lab-vduse0 on the vdpa bus" test -e /sys/bus/vdpa/devices/lab-vduse0
    check "echo vhost_vdpa > driver_override" sh -c 'echo vhost_vdpa >/sys/bus/vdpa/devices/lab-vduse0/driver_override'
    check "echo lab-vduse0 > drivers_probe" sh -c 'echo lab-vduse0 >/sys/bus/vdpa/drivers_probe'
    check "lab-vduse0 is bound to vhost_vdpa" \
        sh -c '[ "$(basename "$(readlink /sys/bus/vdpa/devices/lab-vduse0/driver)")" = vhost_vdpa ]'
    node=$(ls -d /sys/bus/vdpa/devices/lab-vduse0/vhost-vdpa-* 2>/dev/null | head -n1)
    node=/dev/${node##*/}
    diag "char node: $node"
    check "/dev/vhost-vdpa-N appears" test -c "$node"
    check "/dev/vhost-vdpa-N opens" sh -c "exec 3<>$node"
    check "vdpa dev show lab-vduse0" vdpa dev show lab-vduse0
    check "vdpa dev del lab-vduse0" vdpa dev del lab-vduse0
    check "the vdpa device is gone" test ! -e /sys/bus/vdpa/devices/lab-vduse0
    kill -TERM $vpid
    wait $vpid
    vrc=$?
    check "vduse-net destroys its device and exits 0 (got $vrc)" test $vrc -eq 0
    check "/dev/vduse/lab-vduse0 is gone" test ! -e /dev/vduse/lab-vduse0
    diag "$(cat /tmp/vduse-net.log)"
    echo 1 >/sys/bus/vdpa/drivers_autoprobe
fi

# --- udev: the project's rule on the real char node --------------------------------
srcdir=${VA_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ ! -x /lib/systemd/systemd-udevd ] || [ ! -x "$vduse_net" ]; then
    not_ok "systemd-udevd and vduse-net present"
else
    check "systemd-udevd --daemon" /lib/systemd/systemd-udevd --daemon
    udevadm trigger --action=add >/dev/null 2>&1
    check "udevadm settle" udevadm settle -t 30
    mkdir -p /etc/udev/rules.d /run/vdpa-allocator/nodes
    cp "$srcdir/udev-rules/90-vdpa-allocator.rules" /etc/udev/rules.d/
    udevadm control --reload
    # the rule matches vdpa devices named va-*; on VDUSE the vdpa device
    # carries the VDUSE device's name
    echo "disk 0660" >/run/vdpa-allocator/nodes/va-lab1
    rm -f /tmp/vduse-net.ready
    "$vduse_net" -n va-lab1 -r /tmp/vduse-net.ready 2>/tmp/vduse-net.log &
    vpid=$!
    i=0
    while [ ! -s /tmp/vduse-net.ready ] && [ $i -lt 50 ] && kill -0 $vpid 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    check "vdpa dev add name va-lab1 mgmtdev vduse (autoprobe binds vhost_vdpa)" vdpa dev add name va-lab1 mgmtdev vduse
    udevadm settle -t 30
    node=$(ls -d /sys/bus/vdpa/devices/va-lab1/vhost-vdpa-* 2>/dev/null | head -n1)
    node=/dev/${node##*/}
    check "udev rule: $node is root:disk 0660" sh -c "[ \"\$(stat -c '%U:%G %a' $node)\" = 'root:disk 660' ]"
    diag "$(ls -l "$node" 2>&1)"
    qemu=/usr/bin/qemu-system-x86_64
    if [ -x $qemu ]; then
        $qemu -accel tcg -m 128 -nodefaults -display none -S \
            -netdev vhost-vdpa,vhostdev="$node",id=v0 -device virtio-net-pci,netdev=v0 >/tmp/qemu.log 2>&1 &
        qpid=$!
        sleep 5
        check "QEMU -netdev vhost-vdpa,vhostdev=$node starts and stays up" kill -0 $qpid
        kill $qpid 2>/dev/null
        wait $qpid 2>/dev/null
        diag "$(cat /tmp/qemu.log)"
    fi
    check "vdpa dev del va-lab1" vdpa dev del va-lab1
    kill -TERM $vpid
    wait $vpid
    rm -f /run/vdpa-allocator/nodes/va-lab1
    udevadm control --exit 2>/dev/null
fi

# --- the project's netlink code -------------------------------------------------
# test-netlink twice: /netlink/lab/vduse-dev-new-del creates and deletes a
# vdpa device on VDUSE; then the whole binary, whose kernel cases take their
# real branches here (the vdpa family exists, the bridge filters VLANs). Two
# processes: the bridge case unshares its network namespace, and the vdpa
# family is not netns-aware: outside the initial namespace it is not there.
netlink_run() {
    d=$1
    shift
    if out=$(VA_SRCDIR=${VA_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)} VA_VDUSE_NET=$vduse_net \
        "$test_netlink" --tap --verbose "$@" 2>&1); then
        ok "$d"
    else
        not_ok "$d"
    fi
    printf '%s\n' "$out" | grep -v '^# built: ' | sed 's/^/# /'
}
if [ -n "$test_netlink" ]; then
    netlink_run "test-netlink /netlink/lab: vdpa DEV_NEW/DEV_DEL on VDUSE" -p /netlink/lab/vduse-dev-new-del
    netlink_run "test-netlink, every other case, on the lab kernel" -s /netlink/lab/vduse-dev-new-del
    # vdpa.ko declares no genl family alias, so nothing loads it on demand:
    # unloaded, the family is really absent and the error is the real one
    check "modprobe -r vhost_vdpa vduse vdpa" modprobe -r vhost_vdpa vduse vdpa
    check "test-netlink /netlink/kernel/no-vdpa-family runs (not skipped) and passes" sh -c '
        out=$(VA_SRCDIR=$1 "$2" --tap -p /netlink/kernel/no-vdpa-family 2>&1) || { echo "$out"; exit 1; }
        echo "$out"
        echo "$out" | grep -q "^ok 1 /netlink/kernel/no-vdpa-family$"' sh "$srcdir" "$test_netlink"
fi

echo "1..$n"
[ $failed -eq 0 ]
