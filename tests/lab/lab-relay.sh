#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-relay.sh VDUSE_NET RELAY: runs INSIDE the lab host (lab_host.py) and
# prints TAP. Packets through the software vDPA relay (issue 28) on a real
# VDUSE device:
#   - VDUSE_NET -c creates a VDUSE virtio-net device (one queue pair, split
#     rings; VERSION_1, ACCESS_PLATFORM, MAC, STATUS, MTU) and leaves it;
#   - RELAY (vdpa-allocator-relay) opens it and a tap as root, drops to
#     nobody under its seccomp filter;
#   - `vdpa dev add`, bound to virtio_vdpa: the lab kernel's own virtio-net
#     driver drives the rings through VDUSE (bounce buffers, IOTLB);
#   - the virtio netdev in namespace relay-a, the tap on a VLAN-filtering
#     bridge as VLAN 10's port, a veth into namespace relay-b on VLAN 10 and
#     one into relay-c on VLAN 20;
#   - ping and iperf3 TCP both ways between relay-a and relay-b, figures as
#     facts (nested TCG: the lab host is QEMU TCG); relay-c sees nothing;
#   - the relay's CPU per Gbit; vdpa dev del, the relay stopped (exit 0),
#     the VDUSE device destroyed.
set -u

vduse_net=$1
relay=$2
. "$(dirname "$0")/tap.sh"

name=relay0
mac=52:54:00:28:00:01
log=/tmp/relay.log

cleanup() {
    [ -n "${rpid:-}" ] && kill "$rpid" 2>/dev/null
    vdpa dev del $name 2>/dev/null
    for ns in relay-a relay-b relay-c; do ip netns del $ns 2>/dev/null; done
    ip link del br-relay 2>/dev/null
    ip link del rtap0 2>/dev/null
}
trap cleanup EXIT

section "modules"
echo "# kernel $(uname -r)"
check "modprobe vdpa vduse virtio_vdpa virtio_net 8021q bridge" modprobe -a vdpa vduse virtio_vdpa virtio_net bridge
echo 0 >/sys/bus/vdpa/drivers_autoprobe

section "device and relay"
check "vduse-net -c creates VDUSE device $name" "$vduse_net" -c -n $name -m $mac
check "ip tuntap add rtap0 mode tap" ip tuntap add dev rtap0 mode tap
"$relay" --device=/dev/vduse/$name --tap=rtap0 --user=nobody --verbose 2>"$log" &
rpid=$!
i=0
while ! grep -q "serving the device" "$log" && [ $i -lt 50 ] && kill -0 $rpid 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
check "the relay serves the device" grep -q "serving the device" "$log"
check "the relay runs as nobody" sh -c "grep -q \"^Uid:[[:space:]]*$(id -u nobody)[[:space:]]\" /proc/$rpid/status"
check "the relay is under seccomp (mode 2) with NoNewPrivs" \
    sh -c "grep -q '^Seccomp:[[:space:]]*2' /proc/$rpid/status && grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$rpid/status"

check "vdpa dev add name $name mgmtdev vduse" vdpa dev add name $name mgmtdev vduse
check "echo virtio_vdpa > driver_override" sh -c "echo virtio_vdpa >/sys/bus/vdpa/devices/$name/driver_override"
check "echo $name > drivers_probe" sh -c "echo $name >/sys/bus/vdpa/drivers_probe"
i=0
dev=
while [ -z "$dev" ] && [ $i -lt 100 ]; do
    dev=$(ls /sys/bus/vdpa/devices/$name/virtio*/net/ 2>/dev/null | head -n 1)
    [ -n "$dev" ] || sleep 0.1
    i=$((i + 1))
done
check "virtio_vdpa gives a virtio-net netdev ($dev)" test -n "$dev"
check "its MAC is the device's" sh -c "[ \"\$(cat /sys/class/net/$dev/address)\" = $mac ]"
check "its MTU is 1500" sh -c "[ \"\$(cat /sys/class/net/$dev/mtu)\" = 1500 ]"
fact "features negotiated: $(cat /sys/bus/vdpa/devices/$name/virtio*/features 2>/dev/null)"

section "namespaces and the VLAN bridge"
for ns in relay-a relay-b relay-c; do ip netns add $ns; done
ip link add br-relay type bridge vlan_filtering 1
ip link set br-relay up
port() { # port IFACE VID
    ip link set "$1" master br-relay
    bridge vlan add dev "$1" vid "$2" pvid untagged
    bridge vlan del dev "$1" vid 1
    ip link set "$1" up
}
port rtap0 10
ip link add vb type veth peer name vb-in
ip link add vc type veth peer name vc-in
port vb 10
port vc 20
ip link set "$dev" netns relay-a
ip link set vb-in netns relay-b
ip link set vc-in netns relay-c
ip -n relay-a addr add 10.28.0.1/24 dev "$dev"
ip -n relay-b addr add 10.28.0.2/24 dev vb-in
ip -n relay-c addr add 10.28.0.3/24 dev vc-in
for ns in relay-a relay-b relay-c; do ip -n $ns link set lo up; done
ip -n relay-a link set "$dev" up
ip -n relay-b link set vb-in up
ip -n relay-c link set vc-in up

section "ping"
if out=$(ip netns exec relay-a busybox ping -c 10 -i 0.2 -W 5 10.28.0.2 2>&1); then
    ok "ping from the virtio-net netdev through the relay to VLAN 10's namespace"
else
    not_ok "ping from the virtio-net netdev through the relay to VLAN 10's namespace"
fi
diag "$out"
fact "ping (nested TCG): $(printf '%s\n' "$out" | grep -E 'packets transmitted|round-trip' | tr '\n' ' ')"
check "relay-c on VLAN 20 does not reach the virtio-net netdev" \
    sh -c '! ip netns exec relay-c busybox ping -c 3 -W 1 10.28.0.1'

section "iperf3"
cpu() { awk '{print $14 + $15}' /proc/$rpid/stat; }
hz=$(getconf CLK_TCK)
ip netns exec relay-b iperf3 -s -D -p 5201 -I /tmp/relay-iperf.pid --logfile /tmp/relay-iperf-server.log
sleep 1
for dir in send receive; do
    flag=
    [ $dir = receive ] && flag=-R
    c0=$(cpu)
    if out=$(ip netns exec relay-a timeout 60 iperf3 -c 10.28.0.2 -p 5201 -t 5 $flag -J 2>&1); then
        c1=$(cpu)
        bps=$(printf '%s\n' "$out" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]))')
        ok "iperf3 TCP, the virtio-net netdev ${dir}s through the relay"
        ticks=$((c1 - c0))
        fact "iperf3 TCP $dir (nested TCG): $(python3 -c "print(f'{$bps / 1e6:.1f} Mbit/s')")," \
            "relay CPU $(python3 -c "print(f'{$ticks / $hz:.2f} s in 5 s, {($ticks / $hz) / max($bps * 5 / 1e9, 1e-9):.2f} CPU s per Gbit')")"
    else
        not_ok "iperf3 TCP, the virtio-net netdev ${dir}s through the relay"
        diag "$out"
    fi
done
kill "$(cat /tmp/relay-iperf.pid)" 2>/dev/null || true

section "teardown"
check "vdpa dev del $name" vdpa dev del $name
kill -TERM $rpid
wait $rpid
status=$?
rpid=
check "the relay exits 0 on SIGTERM" test $status -eq 0
check "no queue of the relay broke" sh -c "! grep -q 'stopped:' $log"
diag "$(tail -n 5 $log)"
check "vduse-net -D destroys $name" "$vduse_net" -D -n $name
check "/dev/vduse/$name is gone" test ! -e /dev/vduse/$name

echo "1..$n"
[ "$failed" -eq 0 ]
