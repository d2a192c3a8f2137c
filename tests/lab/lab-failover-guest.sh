#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# lab-failover-guest.sh: runs INSIDE the lab host booted by
# lab_host.py --igb 1 --guest (one Intel 82576 PF with SR-IOV, see
# lab-igb.sh; the test guest of tests/guest) and prints TAP: issue 27's
# virtio failover with a RUNNING nested guest.
#
# vdpa-allocatord (kernel backend) with a kind=sriov pool on the igb PF and
# a network with failover=true, VLAN 2334, fallback Linux bridge br-fo;
# libvirtd with our hook. A domain marked for that network is accelerated
# by vdpactl (the standby form: a virtio NIC with <teaming type='persistent'/>)
# and started running; the hook's started begin asks the daemon, whose
# helper leases a VF and plugs the member (<teaming type='transient'/>, same
# MAC, VLAN 2334 set on the VF through the PF).
#
# The peer (10.27.0.1, namespace va-fo-peer) sits on a bridge with two
# ports: the PF's VLAN 2334 interface (QEMU's igb switches VF<->PF frames
# internally, VMDq loopback, and tags/strips the VF's VLAN: VST), and a
# veth to br-fo's port in VLAN 2334 (the standby's path). The bridge floods
# (its ports learn nothing), so the peer's pings reach the guest on
# whichever path it uses; AF_PACKET sockets on both ports tell which path
# each echo reply took.
#
# The guest's initrd is the cached test guest's plus a small overlay
# (rdinit=/va-fo-init; the cache stays as it is): a watcher that prints
# the guest's netdevs (driver, master, lower devices, counters) on the
# console when they change, with busybox's `ip link` (it has no -d:
# "master eth0" on each slave), the addresses and the kernel's failover
# lines; it also loads the VF driver (load-optional.sh) when a PCI device
# comes later, since QEMU plugs the failover primary only once the guest's
# virtio-net has acked VIRTIO_NET_F_STANDBY, which can be after the
# initrd's boot-time scan (in the runs so far it came before).
#
# First, without the daemon, whether QEMU's igb applies the VLAN set on a
# VF through the PF (VST): a VF on igbvf in the lab host, on VLAN 2334,
# 2335, none, against peers on the PF's VLAN 2334 and on the PF untagged.
#
# Asserts: (1) the guest has one interface for the NIC, a net_failover
# master whose lower devices are the virtio standby and the igbvf VF, the
# VF the primary (the guest kernel's "failover primary slave" line), the
# peer's replies coming through the VF's path; (2) `virsh detach-device
# --live` of the member, then `vdpactl domain accelerate --live`: the ping
# goes on, on the standby's path, then again on the VF's; (3) prints the
# times: virsh start / started begin to the VF's first reply, the gaps.
#
# Then (4), issue 27 item 6, the swap back of a PLAIN kind=sriov NIC: the
# failover guest destroyed (its lease goes), a second guest whose one NIC
# is on network pt (mode=sriov on the same pool, VLAN 2334, fallback
# br-fo, no failover), accelerated by vdpactl to the hostdev-network form
# and started: its eth0 is the VF libvirt chose, leased by the hook (kind
# sriov, VLAN 2334 read back through the PF), the ping answered through
# the VF's path. `vdpactl domain portable --live`: the guest ejects the VF,
# a virtio NIC with the same MAC on br-fo's VLAN 2334 takes its slot, the
# lease is released, the ping answered through br-fo. `vdpactl domain
# accelerate --live`: the virtio NIC goes, the hostdev-network form is
# plugged, vdpactl reads the VF libvirt chose from the live XML and
# leases it (Allocate with vf and vf_vlan, va_swap_to_accelerated()):
# the lease is kind sriov on that VF, the VF carries the NIC's MAC and
# VLAN 2334 with spoofchk on, the guest's eth0 is igbvf again and the
# ping answered through the VF's path. Each swap's time and the longest
# gap in the replies are TAP facts.
set -u

. "$(dirname "$0")/tap.sh"
drv() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null) && basename "$d" || echo none; }
bail() {
    not_ok "$1"
    [ -n "${2:-}" ] && diag "$2"
    echo "1..$n"
    exit 1
}
now() { date +%s.%N; }
# wait_for SECONDS COMMAND...: polls COMMAND until it succeeds or SECONDS of
# wall time pass (tap.sh's until_ok counts polls, each of which costs
# seconds here while the nested guest runs)
wait_for() {
    end=$(($(date +%s) + $1))
    shift
    while ! "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.5
    done
}

daemon=${VA_DAEMON:-$VA_BUILDDIR/vdpa-allocator/daemon/vdpa-allocatord}
vdpactl=${VDPACTL:-$VA_BUILDDIR/vdpa-allocator/ctl/vdpactl}
echo "# kernel $(uname -r)"
[ -r "${LAB_GUEST_KERNEL:-}" ] && [ -r "${LAB_GUEST_INITRD:-}" ] ||
    bail "the test guest (lab_host.py --guest: LAB_GUEST_KERNEL/INITRD)"
work=/var/tmp/va-fo
mkdir -p "$work/run"
name=guest-fo
mac=52:54:00:27:00:02
gip=10.27.0.2
pip=10.27.0.1
ns=va-fo-peer

section pf
check "modprobe igb igbvf vfio-pci 8021q bridge veth" modprobe -a igb igbvf vfio-pci 8021q bridge veth
pfpci=
for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x8086:0x10c9 ] && pfpci=${d##*/} && break
done
[ -n "$pfpci" ] || bail "an 82576 PF (8086:10c9) on the PCI bus"
sys=/sys/bus/pci/devices/$pfpci
until_ok 60 test -d "$sys/net" || bail "the PF's netdev appears"
pf=$(ls "$sys/net" | head -n1)

# Does QEMU's igb apply the VLAN set on a VF through the PF (VST)? Before
# the daemon makes its VFs: one VF on igbvf in a namespace, its MAC and
# VLAN set through the PF (igbvf rebound to take them), pinging a peer on
# the PF's VLAN 2334 device (another namespace) and one on the PF itself,
# untagged. Then the VF goes again.
section vst
ip link set "$pf" up
echo 1 >"$sys/sriov_numvfs"
vst_vf=$(basename "$(readlink "$sys/virtfn0")")
ip netns add va-fo-vf
ip netns add va-fo-v2334
ip link add link "$pf" name vst2334 type vlan id 2334
ip link set vst2334 netns va-fo-v2334
ip -n va-fo-v2334 addr add 10.27.9.1/24 dev vst2334
ip -n va-fo-v2334 link set vst2334 up
ip addr add 10.27.9.9/24 dev "$pf"
# vst_try VLAN: "A B": whether the VF on VLAN reaches the VLAN 2334 peer, the untagged one
vst_try() {
    ip link set "$pf" vf 0 mac 52:54:00:27:09:02 vlan "$1"
    [ "$(drv "$vst_vf")" = igbvf ] && echo "$vst_vf" >/sys/bus/pci/drivers/igbvf/unbind
    echo "$vst_vf" >/sys/bus/pci/drivers/igbvf/bind
    until_ok 30 test -d "$sys/virtfn0/net" || { echo "no-netdev no-netdev"; return; }
    l=$(ls "$sys/virtfn0/net")
    ip link set "$l" netns va-fo-vf
    ip -n va-fo-vf addr add 10.27.9.2/24 dev "$l"
    ip -n va-fo-vf link set "$l" up
    for a in 10.27.9.1 10.27.9.9; do
        ip netns exec va-fo-vf busybox ping -c 3 -W 2 "$a" >/dev/null 2>&1 && printf 'yes ' || printf 'no '
    done
}
eq "VF on VLAN 2334 (VST): reaches the PF's VLAN 2334, not the untagged PF" "yes no" "$(vst_try 2334 | sed 's/ $//')"
eq "VF on VLAN 2335: reaches neither" "no no" "$(vst_try 2335 | sed 's/ $//')"
eq "VF without a VLAN: reaches the untagged PF, not its VLAN 2334" "no yes" "$(vst_try 0 | sed 's/ $//')"
ip link set "$pf" vf 0 mac 00:00:00:00:00:00 vlan 0
echo 0 >"$sys/sriov_numvfs"
ip addr del 10.27.9.9/24 dev "$pf"
ip netns del va-fo-vf
ip netns del va-fo-v2334

section libvirt
lvready=/run/lab-fo-libvirt.ready
VA_LIBVIRT_NAMESPACED=1 /usr/bin/python3 -m vatest.libvirt serve "$lvready" >/run/lab-fo-libvirt.log 2>&1 &
lvpid=$!
until_ok 240 test -e "$lvready" || bail "libvirtd started" "$(cat /run/lab-fo-libvirt.log)"
ok "libvirtd $(libvirtd --version | awk '{ print $NF }') started"

# the fallback bridge: VLAN-filtering, the hook puts the standby's tap in
# VLAN 2334 (untagged PVID) at start begin
ip link add br-fo type bridge vlan_filtering 1
ip link set br-fo up
# the peer: a flooding bridge over the PF's VLAN 2334 and a veth to br-fo's
# VLAN 2334
ip netns add "$ns"
ip -n "$ns" link set lo up
ip link add vfo type veth peer name vfo-p netns "$ns"
ip link set vfo master br-fo
bridge vlan add dev vfo vid 2334 pvid untagged
bridge vlan del dev vfo vid 1
ip link set vfo up
# a VLAN device comes up only on a lower device that is up
ip link set "$pf" up
ip link add link "$pf" name pf2334 type vlan id 2334
ip link set pf2334 netns "$ns"
ip -n "$ns" link add brp type bridge stp_state 0 forward_delay 0
ip -n "$ns" link set brp address "$(cat /sys/class/net/$pf/address)"
ip -n "$ns" link set pf2334 master brp
ip -n "$ns" link set vfo-p master brp
ip -n "$ns" addr add "$pip/24" dev brp
# no learning: each frame for the guest goes out both ports
for l in pf2334 vfo-p; do ip netns exec "$ns" bridge link set dev "$l" learning off; done
for l in pf2334 vfo-p brp; do ip -n "$ns" link set "$l" up; done
fact "peer $pip in $ns on brp (ports pf2334: VLAN 2334 of $pf, vfo-p: veth to br-fo VLAN 2334)"

section daemon
etc=${VA_SYSCONFDIR:-/usr/local/etc}/vdpa-allocator
mkdir -p "$etc"
cat >"$etc/vdpa-allocator.conf" <<EOF
[pool igb]
kind=sriov
match-vendor=8086
match-device=10c9
vfs=2
eswitch=legacy

[network fo]
mode=sriov
pool=igb
vlan=2334
fallback-bridge=br-fo
failover=true

[network pt]
mode=sriov
pool=igb
vlan=2334
fallback-bridge=br-fo
EOF
env VDPA_ALLOCATOR_LIBVIRT_URI=qemu:///system "$daemon" --config "$etc" --state-dir "$work/state" --run-dir "$work/run" >>"$work/daemon.log" 2>&1 &
dpid=$!
until_ok 120 "$vdpactl" status || bail "vdpa-allocatord answers on the bus" "$(cat "$work/daemon.log")"
ok "vdpa-allocatord (kernel backend, a kind=sriov pool, a failover network and a plain one) answers on the bus"
poolok() { "$vdpactl" pool show igb -j | json '"%s %s %s" % (d["total"], d["free"], d["healthy"])' | grep -qx "2 2 True"; }
until_ok 120 poolok || bail "the pool: 2 VFs free, healthy" "$("$vdpactl" pool show igb 2>&1)"
ok "the pool igb: 2 VFs free, healthy"

section guest
# the test guest's initrd plus the overlay: /va-fo-init (the watcher) then
# the guest's own /init
ov=$work/overlay
mkdir -p "$ov"
cat >"$ov/va-fo-init" <<'EOF'
#!/bin/sh
# the failover watcher (lab-failover-guest.sh), then the test guest's /init
# ash gives a background job /dev/null as stdin: /init mounts devtmpfs
# later (again, harmlessly)
[ -e /dev/null ] || mount -t devtmpfs devtmpfs /dev
(
    # builtins only where it loops: a process costs ~1 s nested
    # a fifo nobody writes: read -t is the loop's sleep
    exec 3<>/va-fo-tick
    until [ -e /sys/class/net/eth0 ]; do read -t 1 x <&3; done
    last= npci= i=0
    while :; do
        set -- /sys/bus/pci/devices/*
        if [ "$#" != "$npci" ]; then
            [ -n "$npci" ] && /sbin/va-load-optional | while read -r r; do echo "VA-FO-MODULE $r"; done
            npci=$#
        fi
        state= cnt=
        for d in /sys/class/net/eth*; do
            [ -e "$d" ] || continue
            n=${d##*/} drv=- m=- low= op=?
            cd -P "$d/device/driver" 2>/dev/null && drv=${PWD##*/}
            cd -P "$d/master" 2>/dev/null && m=${PWD##*/}
            cd /
            for l in "$d"/lower_*; do [ -e "$l" ] && low="$low+${l##*/lower_}"; done
            read -r op <"$d/operstate"
            read -r tx <"$d/statistics/tx_packets"
            read -r rx <"$d/statistics/rx_packets"
            state="$state $n:$drv:master=$m:lower=${low#+}:$op"
            cnt="$cnt $n:tx=$tx:rx=$rx"
        done
        read -r up x </proc/uptime
        if [ "$state" != "$last" ]; then
            last=$state
            echo "VA-FO-STATE up=$up$state"
            echo "VA-FO-COUNT up=$up$cnt"
            echo "VA-FO-IPLINK-BEGIN"
            ip link
            ip -4 -o addr
            dmesg | grep -i failover
            echo "VA-FO-IPLINK-END"
        elif [ $((i % 10)) = 0 ]; then
            echo "VA-FO-COUNT up=$up$cnt"
        fi
        i=$((i + 1))
        read -t 1 x <&3
    done
) &
exec /init
EOF
chmod 755 "$ov/va-fo-init"
mkfifo "$ov/va-fo-tick"
(cd "$ov" && printf 'va-fo-init\nva-fo-tick\n' | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/overlay.cpio.gz"
cat "$LAB_GUEST_INITRD" "$work/overlay.cpio.gz" >"$work/initrd.gz"
cp "$LAB_GUEST_KERNEL" "$work/vmlinuz"
# domxml NAME UUID MAC NETWORK: the test guest (the initrd with the overlay)
# with one NIC marked for the daemon's NETWORK, in $work/NAME.xml
domxml() {
    cat >"$work/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <uuid>$2</uuid>
  <metadata>
    <vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'><vdpa:nic mac='$3' network='$4'/></vdpa:nics>
  </metadata>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>$work/vmlinuz</kernel>
    <initrd>$work/initrd.gz</initrd>
    <cmdline>console=ttyS0 quiet no_timer_check cryptomgr.notests=1 rdinit=/va-fo-init va.name=$1 va.ip=$gip/24</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='network'>
      <source network='default'/>
      <mac address='$3'/>
      <model type='virtio'/>
    </interface>
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='pci' model='pcie-root-port'/>
    <controller type='pci' model='pcie-root-port'/>
    <controller type='pci' model='pcie-root-port'/>
    <serial type='file'>
      <source path='/var/log/libvirt/qemu/$1-serial.log'/>
      <target port='0'/>
    </serial>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
}
serial=/var/log/libvirt/qemu/$name-serial.log
domxml "$name" 27272727-0000-0000-0000-000000000002 "$mac" fo
if out=$(v define "$work/$name.xml" 2>&1 && "$vdpactl" domain accelerate "$name" 2>&1); then
    ok "$name defined and accelerated (vdpactl domain accelerate)"
else
    bail "$name defined and accelerated (vdpactl domain accelerate)" "$out"
fi
defxml=$(v dumpxml --inactive "$name" 2>&1)
eq "its NIC: the virtio standby on br-fo with <teaming type='persistent'/>" "yes yes" \
    "$(printf '%s' "$defxml" | grep -q "<source bridge='br-fo'/>" && echo yes) $(printf '%s' "$defxml" | grep -q "<teaming type='persistent'/>" && echo yes)"
diag "$(printf '%s\n' "$defxml" | sed -n '/<interface/,/<\/interface>/p')"

# the peer's pinger: an echo request every 0.2 s; each reply timed, and
# the port it came in by (AF_PACKET on pf2334 and vfo-p)
cat >"$work/pinger.py" <<'EOF'
import os, select, socket, struct, sys, time
dst, log, stop = sys.argv[1:4]
ETH_P_ALL = 3
PACKET_OUTGOING = 4
icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ports = {}
for dev in ("pf2334", "vfo-p"):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((dev, 0))
    ports[s] = dev
ident = os.getpid() & 0xffff
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff
out = open(log, "w", buffering=1)
seq = 0
nxt = time.time()
while not os.path.exists(stop):
    t = time.time()
    if t >= nxt:
        seq = (seq + 1) & 0xffff
        h = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"va-fo" * 8
        h = h[:2] + struct.pack("!H", csum(h)) + h[4:]
        try:
            icmp.sendto(h, (dst, 0))
            out.write("S %.6f %d\n" % (t, seq))
        except OSError as e:
            out.write("E %.6f %d %s\n" % (t, seq, e.strerror))
        nxt += 0.2
        if nxt < t:
            nxt = t + 0.2
    r, _, _ = select.select(list(ports) + [icmp], [], [], max(0, nxt - time.time()))
    for s in r:
        if s is icmp:
            d = s.recv(2048)
            ihl = (d[0] & 15) * 4
            typ, _, _, i, q = struct.unpack("!BBHHH", d[ihl:ihl + 8])
            if typ == 0 and i == ident:
                out.write("R %.6f %d\n" % (time.time(), q))
            continue
        d, addr = s.recvfrom(2048)
        if addr[2] == PACKET_OUTGOING or len(d) < 42 or d[12:14] != b"\x08\x00" or d[23] != 1:
            continue
        ihl = (d[14] & 15) * 4
        typ, _, _, i, q = struct.unpack("!BBHHH", d[14 + ihl:22 + ihl])
        if typ == 0 and i == ident:
            out.write("P %.6f %d %s\n" % (time.time(), q, ports[s]))
EOF
plog=$work/ping.log
rm -f "$work/pinger.stop"
ip netns exec "$ns" /usr/bin/python3 -S "$work/pinger.py" "$gip" "$plog" "$work/pinger.stop" 2>"$work/pinger.err" &
ppid_=$!
# path_since T: the ports of the replies after wall time T, "pf2334 vfo-p" counts
replies_via() {
    awk -v t="$2" -v p="$1" '$1 == "P" && $2 >= t && $4 == p { n++ } END { print n + 0 }' "$plog"
}
first_via() {
    awk -v t="$2" -v p="$1" '$1 == "P" && $2 >= t && $4 == p { print $2; exit }' "$plog"
}
vf_answers_since() { [ "$(replies_via pf2334 "$1")" -ge 3 ]; }
standby_answers_since() { [ "$(replies_via vfo-p "$1")" -ge 3 ]; }
# answered SECONDS PREDICATE SINCE DESCRIPTION: waits up to SECONDS for
# PREDICATE (one of the two above) from SINCE, then one TAP line, the ping
# log's tail with it when it fails (and status 1)
answered() {
    wait_for "$1" "$2" "$3"
    if "$2" "$3"; then
        ok "$4"
    else
        not_ok "$4"
        diag "$(tail -n 20 "$plog")"
        return 1
    fi
}
rec=/var/lib/libvirt/va-hook-calls
hook_time() {
    f=$(grep -l "	$name	$1	begin" "$rec"/*.call 2>/dev/null | tail -n1)
    [ -n "$f" ] && b=${f##*/} && b=${b%%.*} && echo "${b%?????????}.${b#??????????}"
}
since() { echo "$2 $1" | awk '{ printf "%.1f", $1 - $2 }'; }
member() { v dumpxml "$name" | sed -n "/<interface type='hostdev'/,/<\/interface>/p"; }
has_member() { member | grep -q "<teaming type='transient'"; }
# the serial console's lines end in CR LF
console() { tr -d '\r' 2>/dev/null <"$serial"; }
ready() { console | grep -q VA-GUEST-READY; }
# the watcher's last state: the VF (igbvf) up under a master that is up,
# and its dump (ip link, addresses, failover lines) printed after it
state_with_vf() {
    console | awk '/^VA-FO-STATE/ { st = $0; done = 0 } /^VA-FO-IPLINK-END/ { done = 1 }
        END { if (!done) exit 1; n = split(st, f, " "); for (i = 3; i <= n; i++) { split(f[i], p, ":")
            if (p[2] == "igbvf" && p[5] == "up") m = substr(p[3], 8); if (p[3] == "master=-" && p[5] == "up") up[p[1]] = 1 }
            exit !(m != "" && (m in up)) }'
}

t_start=$(now)
if out=$(v start "$name" 2>&1); then
    ok "virsh start $name (running, nested TCG)"
else
    bail "virsh start $name" "$out$(tail -n 20 /var/log/libvirt/qemu/$name.log 2>/dev/null)"
fi
t_started=$(hook_time started)
fact "virsh start returned after $(since "$t_start" "$(now)") s; the hook's started begin at +$(since "$t_start" "${t_started:-$t_start}") s"
wait_for 180 has_member && t_member=$(now)
if has_member; then
    ok "the daemon plugged the member (a hostdev with <teaming type='transient'/>) $(since "$t_start" "$t_member") s after virsh start"
    diag "$(member)"
else
    not_ok "the daemon plugged the member"
    diag "$(grep -i "swap\|failover\|standby" "$work/daemon.log" | tail -n 10)" "$(v dumpxml "$name" | sed -n '/<interface/,/<\/interface>/p')"
fi
fact "the daemon's plug: $(grep 'swap back after its move\|allocated slot' "$work/daemon.log" | tr '\n' '|')"
fact "lease list: $("$vdpactl" lease list 2>&1 | tail -n +2)"
fact "the PF's VFs: $(ip -d link show "$pf" | grep ' vf ' | tr -s ' ')"
fact "vdpactl domain show: $("$vdpactl" domain show "$name" 2>&1 | tr '\n' '|')"

wait_for 900 ready && t_ready=$(now)
if ready; then
    ok "the guest booted: VA-GUEST-READY $(since "$t_start" "$t_ready") s after virsh start"
else
    bail "the guest booted (VA-GUEST-READY)" "$(console | tail -c 3000)"
fi
wait_for 300 vf_answers_since "$t_start"
t_vf=$(first_via pf2334 "$t_start")
# the watcher polls once a second, slower while the guest boots
wait_for 300 state_with_vf
# some traffic on the VF before it goes
sleep 10
fact "the console's failover watcher:"
fact "$(console | grep '^VA-FO-\(STATE\|MODULE\)\|^VA-GUEST-\(MODULE\|NETDEV\|WARN\)')"

# (1) one interface: a net_failover master, the VF its primary
st=$(console | grep "^VA-FO-STATE" | tail -n1)
dump=$(console | awk '/^VA-FO-IPLINK-BEGIN/ { b = ""; on = 1; next } /^VA-FO-IPLINK-END/ { last = b; on = 0 } on { b = b $0 "\n" } END { printf "%s", last }')
fact "the guest's last netdev state: $st"
fact "the guest's ip link, addresses and failover lines then:"
fact "$dump"
vfdev=$(printf '%s\n' "$st" | tr ' ' '\n' | awk -F: '$2 == "igbvf" { print $1 }')
sbdev=$(printf '%s\n' "$st" | tr ' ' '\n' | awk -F: '$2 == "virtio_net" && $3 != "master=-" { print $1 }')
masters=$(printf '%s\n' "$st" | tr ' ' '\n' | awk -F: '/^eth/ && $3 == "master=-" { print $1 }')
eq "the guest: one interface without a master (the failover master), the standby and the VF its lower devices" \
    "1 master=$masters master=$masters" \
    "$(echo $masters | wc -w) $(printf '%s\n' "$st" | tr ' ' '\n' | awk -F: -v d="$sbdev" '$1 == d { print $3 }') $(printf '%s\n' "$st" | tr ' ' '\n' | awk -F: -v d="$vfdev" '$1 == d { print $3 }')"
eq "only the master $masters has the guest's address $gip" "$masters" \
    "$(printf '%s\n' "$dump" | awk -v a="$gip/" 'index($0, " inet " a) { print $2 }' | tr -d ':' | tr '\n' ' ' | sed 's/ $//')"
eq "the guest kernel registered the VF $vfdev as the failover primary, the virtio $sbdev as the standby" "yes yes" \
    "$(printf '%s\n' "$dump" | grep -q "failover primary slave:$vfdev registered" && echo yes) $(printf '%s\n' "$dump" | grep -q "failover standby slave:$sbdev registered" && echo yes)"
answered 0 vf_answers_since "$t_start" "the peer's pings are answered through the VF (the PF's VLAN 2334 port)"
fact "(3) virsh start to the VF's first reply: $(since "$t_start" "${t_vf:-$t_start}") s; started begin to it: $(since "${t_started:-$t_start}" "${t_vf:-$t_start}") s; VA-GUEST-READY to it: $(since "${t_ready:-$t_start}" "${t_vf:-$t_start}") s"

# (2) unplug: the replies go on through the standby
section unplug
member >"$work/member.xml"
t_un=$(now)
if out=$(v detach-device "$name" "$work/member.xml" --live 2>&1); then
    ok "virsh detach-device --live of the member ($(since "$t_un" "$(now)") s)"
else
    not_ok "virsh detach-device --live of the member"
    diag "$out"
fi
no_member() { ! has_member; }
wait_for 240 no_member && fact "the member left the live XML $(since "$t_un" "$(now)") s after the detach began"
answered 240 standby_answers_since "$t_un" "the pings go on through the standby (br-fo's VLAN 2334) after the unplug"
sleep 5
fact "lease list after the detach: $("$vdpactl" lease list 2>&1 | tail -n +2)"
fact "vdpactl domain show: $("$vdpactl" domain show "$name" 2>&1 | tr '\n' '|')"

section plug
t_pl=$(now)
out=$("$vdpactl" domain accelerate --live "$name" 2>&1) && plugged=yes || plugged=no
fact "vdpactl domain accelerate --live $name: $plugged in $(since "$t_pl" "$(now)") s: $out"
wait_for 180 has_member
if has_member; then
    ok "the member is back in the live XML ($(since "$t_pl" "$(now)") s after the plug began)"
else
    not_ok "the member is back (vdpactl domain accelerate --live)"
    diag "$(tail -n 20 "$work/daemon.log")"
    # by hand, as libvirt takes it
    t_pl=$(now)
    out=$(v attach-device "$name" "$work/member.xml" --live 2>&1) && fact "virsh attach-device --live of the same member: ok" ||
        fact "virsh attach-device --live of the same member: $out"
fi
answered 300 vf_answers_since "$t_pl" "the pings come through the VF again after the plug"
wait_for 300 state_with_vf || diag "the guest's watcher shows no VF up under its master again"
sleep 5
: >"$work/pinger.stop"
wait "$ppid_"
fact "$(console | grep '^VA-FO-STATE\|^VA-FO-MODULE\|^VA-GUEST-NETDEV' | tail -n 8)"
fact "the guest's counters (tx/rx packets of each netdev):"
fact "$(console | grep '^VA-FO-COUNT' | tail -n 40)"

section measure
res=$(awk -v t0="$t_start" -v tu="$t_un" -v tp="$t_pl" '
$1 == "S" { sent++ }
$1 == "R" { t = $2
    if (prev != "" && t >= tu) { g = t - prev; if (g > max) { max = g; at = prev } }
    if (prev != "" && t >= tu && t < tp) { g = t - prev; if (g > gu) gu = g }
    if (prev != "" && t >= tp) { g = t - prev; if (g > gp) gp = g }
    prev = t; got++ }
END { printf "%.2f %.2f %.2f %d %d", max, gu, gp, sent, got }' "$plog")
set -- $res
fact "(2)(3) echo requests every 0.2 s: $4 sent, $5 answered; longest gap between replies from the unplug on: $1 s (in the unplug window $2 s, from the plug on $3 s)"
fact "(3) the last reply through the VF: $(since "$t_un" "$(awk -v tu="$t_un" '$1 == "P" && $4 == "pf2334" && $2 >= tu - 5 && !done { if (s != "" && $2 > s) done = 1; else t = $2 } $1 == "P" && $4 == "vfo-p" && $2 >= tu && s == "" { s = $2 } END { print t }' "$plog")") s after the unplug began"
fact "(3) unplug began to the first reply through the standby: $(since "$t_un" "$(first_via vfo-p "$t_un")") s; plug began to the first reply through the VF: $(since "$t_pl" "$(first_via pf2334 "$t_pl")") s"
lost_un=$(awk -v tu="$t_un" -v tp="$t_pl" '$1 == "S" && $2 >= tu && $2 < tp { s[$3] = 1 } $1 == "R" { delete s[$3] } END { n = 0; for (k in s) n++; print n }' "$plog")
fact "requests sent between unplug and plug left unanswered: $lost_un"
ok "measured (see the facts)"

# (4) issue 27, item 6: a plain kind=sriov NIC (network pt: the
# hostdev-network form, no failover) swapped to portable and back in a
# running guest. The failover guest goes first, and its VF lease with it
section plain
v destroy "$name" >/dev/null 2>&1
v undefine "$name" >/dev/null 2>&1
nleases() { "$vdpactl" lease list -j | json 'len(d["leases"])'; }
no_lease() { [ "$(nleases)" = 0 ]; }
wait_for 120 no_lease
until_ok 120 poolok
eq "$name destroyed: no lease left, the pool igb has its 2 VFs free" "0 2 2 True" \
    "$(nleases) $("$vdpactl" pool show igb -j | json '"%s %s %s" % (d["total"], d["free"], d["healthy"])')"
# leases: each lease as domain/kind/mgmtdev/vlan
leases() { "$vdpactl" lease list -j | json '" ".join("%s/%s/%s/%s" % (l["domain_name"], l["kind"], l["mgmtdev"], l["vlan"]) for l in d["leases"])'; }
# nic_xml: the live <interface> of the domain (it has one)
nic_xml() { v dumpxml "$name" | sed -n '/<interface /,/<\/interface>/p'; }
# vf_now: the PCI address of the VF in the live <interface type='hostdev'>
vf_now() {
    nic_xml | sed -n "/<interface type='hostdev'/,/<\/interface>/p" | sed -n '/<source>/,/<\/source>/p' |
        sed -n "s/.*domain='0x\([0-9a-f]*\)' bus='0x\([0-9a-f]*\)' slot='0x\([0-9a-f]*\)' function='0x\([0-9a-f]*\)'.*/\1:\2:\3.\4/p" | head -n1
}
# vf_state PCI: "mac vlan spoofchk" of that VF, read through the PF
vf_state() {
    i=0
    while [ -e "$sys/virtfn$i" ] && [ "$(basename "$(readlink "$sys/virtfn$i")")" != "$1" ]; do i=$((i + 1)); done
    ip -d -j link show "$pf" | json "(lambda v: '%s %s %s' % (v['address'], v['vlan_list'][0].get('vlan', 0), v['spoofchk']))(d[0]['vfinfo_list'][$i])"
}
# guest_nics: the guest's netdevs as its watcher last printed them, "ethN:driver:operstate"
guest_nics() { console | grep '^VA-FO-STATE' | tail -n1 | tr ' ' '\n' | awk -F: '/^eth/ { printf "%s%s:%s:%s", s, $1, $2, $5; s = " " }'; }
guest_on() { [ "$(guest_nics)" = "$1" ]; }
# swap_json EXPR: EXPR of the last swap's -j report (n: its one NIC)
swap_json() { json "(lambda n: $1)(d['nics'][0] if d.get('nics') else {})" <"$work/swap.json"; }
# swap_outcome: "status done path form_before form_after" of the last swap
swap_outcome() {
    echo "$swap_rc $(json 'd["done"]' <"$work/swap.json") $(swap_json '"%s %s %s" % (n.get("path"), n.get("form_before"), n.get("form_after"))')"
}
# vdpactl domain accelerate|portable --live -j, timed; its status in $swap_rc
swap() {
    t_sw=$(now)
    VDPA_ALLOCATOR_UNPLUG_TIMEOUT=300 "$vdpactl" domain "$1" --live -j "$name" >"$work/swap.json" 2>"$work/swap.err"
    swap_rc=$?
    fact "vdpactl domain $1 --live $name: exit $swap_rc in $(since "$t_sw" "$(now)") s; $(swap_json '"unplug %s ms, plug %s ms, offline %s ms; form %s -> %s; note: %s" % (n.get("unplug_ms"), n.get("plug_ms"), n.get("offline_ms"), n.get("form_before"), n.get("form_after"), n.get("note"))')"
    [ -s "$work/swap.err" ] && diag "$(cat "$work/swap.err")"
}

# the second guest costs 2 min on a quiet machine, 4 to 6.5 beside another
# lab host; LAB_FO_PLAIN_SRIOV=0 leaves it out (a developer's shorter loop)
if [ "${LAB_FO_PLAIN_SRIOV:-1}" != 0 ]; then
name=guest-pt
mac=52:54:00:27:00:03
serial=/var/log/libvirt/qemu/$name-serial.log
domxml "$name" 27272727-0000-0000-0000-000000000003 "$mac" pt
if out=$(v define "$work/$name.xml" 2>&1 && "$vdpactl" domain accelerate "$name" 2>&1); then
    ok "$name (one NIC of the plain sriov network pt) defined and accelerated (vdpactl domain accelerate)"
else
    bail "$name defined and accelerated (vdpactl domain accelerate)" "$out"
fi
defxml=$(v dumpxml --inactive "$name" 2>&1)
eq "its NIC: the hostdev network vdpa-allocator-igb with VLAN 2334, no teaming" "yes yes no" \
    "$(printf '%s' "$defxml" | grep -q "<source network='vdpa-allocator-igb'/>" && echo yes) $(printf '%s' "$defxml" | grep -q "<tag id='2334'/>" && echo yes) $(printf '%s' "$defxml" | grep -q "<teaming" && echo yes || echo no)"
# the peer knew the first guest's MAC at this address
ip -n "$ns" neigh flush dev brp
plog=$work/ping-pt.log
rm -f "$work/pinger.stop"
ip netns exec "$ns" /usr/bin/python3 -S "$work/pinger.py" "$gip" "$plog" "$work/pinger.stop" 2>"$work/pinger.err" &
ppid_=$!
t_start=$(now)
if out=$(v start "$name" 2>&1); then
    ok "virsh start $name (running, nested TCG)"
else
    bail "virsh start $name" "$out$(tail -n 20 /var/log/libvirt/qemu/$name.log 2>/dev/null)"
fi
wait_for 900 ready && t_ready=$(now)
if ready; then
    ok "the guest booted: VA-GUEST-READY $(since "$t_start" "$t_ready") s after virsh start"
else
    bail "the guest booted (VA-GUEST-READY)" "$(console | tail -c 3000)"
fi
wait_for 300 vf_answers_since "$t_start"
wait_for 120 guest_on "eth0:igbvf:up"
vf=$(vf_now)
diag "$(nic_xml)"
# (1) on the VF libvirt chose at start, leased by the hook with its VLAN
eq "(1) the guest's one NIC eth0 is the VF (igbvf), up" "eth0:igbvf:up" "$(guest_nics)"
eq "(1) the hook's lease: kind sriov on the VF libvirt chose ($vf), VLAN 2334" "$name/sriov/pci/$vf/2334" "$(leases)"
eq "(1) VF $vf through $pf: the NIC's MAC, VLAN 2334, spoofchk on" "$mac 2334 True" "$(vf_state "$vf")"
answered 0 vf_answers_since "$t_start" "(1) the peer's pings are answered through the VF (the PF's VLAN 2334 port)"
fact "virsh start to the VF's first reply: $(since "$t_start" "$(first_via pf2334 "$t_start")") s; VA-GUEST-READY to it: $(since "${t_ready:-$t_start}" "$(first_via pf2334 "$t_start")") s"
sleep 5

# (2) to portable: the guest ejects the VF, a virtio NIC on br-fo's VLAN
# 2334 with the same MAC in its slot, the lease released
section to-portable
swap portable
t_po=$t_sw
eq "(2) vdpactl domain portable --live: exit 0, done; the NIC swapped, accelerated -> portable" "0 true swap accelerated portable" \
    "$(swap_outcome)"
x=$(nic_xml)
diag "$x"
tap=$(printf '%s\n' "$x" | sed -n "s/.*<target dev='\([^']*\)'.*/\1/p" | head -n1)
eq "(2) its live NIC: virtio on br-fo with MAC $mac, no hostdev" "bridge yes yes yes" \
    "$(printf '%s\n' "$x" | sed -n "1s/.*<interface type='\([a-z]*\)'.*/\1/p") $(printf '%s' "$x" | grep -q "<source bridge='br-fo'/>" && echo yes) $(printf '%s' "$x" | grep -q "<mac address='$mac'/>" && echo yes) $(printf '%s' "$x" | grep -q "<model type='virtio'/>" && echo yes)"
eq "(2) its tap $tap on br-fo in VLAN 2334 only (PVID, untagged)" "2334:PVID,Egress Untagged" \
    "$(bridge -j vlan show dev "${tap:-none}" 2>&1 | json '" ".join("%s:%s" % (v["vlan"], ",".join(v.get("flags", []))) for v in d[0]["vlans"])')"
eq "(2) the lease is released" "" "$(leases)"
fact "(2) VF $vf after the unplug (mac vlan spoofchk): $(vf_state "$vf"), driver $(drv "$vf")"
answered 240 standby_answers_since "$t_po" "(2) the pings are answered through the virtio NIC (br-fo's VLAN 2334 port)"
wait_for 120 guest_on "eth0:virtio_net:up"
eq "(2) in the guest: eth0 is virtio_net now, up" "eth0:virtio_net:up" "$(guest_nics)"
sleep 5

# (3) back to the VF: the virtio NIC goes, the hostdev-network form is
# plugged, and the VF libvirt chose is leased with its VLAN
section to-accelerated
swap accelerate
t_ac=$t_sw
eq "(3) vdpactl domain accelerate --live: exit 0, done; the NIC swapped, portable -> accelerated" "0 true swap portable accelerated" \
    "$(swap_outcome)"
x=$(nic_xml)
diag "$x"
vf2=$(vf_now)
eq "(3) its live NIC: the hostdev-network form again (type hostdev, a VF), MAC $mac, VLAN 2334" "hostdev yes yes yes" \
    "$(printf '%s\n' "$x" | sed -n "1s/.*<interface type='\([a-z]*\)'.*/\1/p") $([ -n "$vf2" ] && echo yes) $(printf '%s' "$x" | grep -q "<mac address='$mac'/>" && echo yes) $(printf '%s' "$x" | grep -q "<tag id='2334'/>" && echo yes)"
eq "(3) the lease: kind sriov on the VF libvirt chose (${vf2:-none}), VLAN 2334" "$name/sriov/pci/$vf2/2334" "$(leases)"
eq "(3) VF ${vf2:-none} through $pf: the NIC's MAC, VLAN 2334, spoofchk on" "$mac 2334 True" "$(vf_state "$vf2")"
answered 300 vf_answers_since "$t_ac" "(3) the pings are answered through the VF again (the PF's VLAN 2334 port)" ||
    diag "$(tail -n 20 "$work/daemon.log")"
wait_for 120 guest_on "eth0:igbvf:up"
eq "(3) in the guest: eth0 is the VF (igbvf) again, up" "eth0:igbvf:up" "$(guest_nics)"
sleep 5
: >"$work/pinger.stop"
wait "$ppid_"
fact "$(console | grep '^VA-FO-STATE\|^VA-FO-MODULE\|^VA-GUEST-NETDEV' | tail -n 8)"

section measure-plain
# gaps FROM TO: the longest gap between replies (either path) ending in
# [FROM, TO), and the requests sent then left unanswered
gaps() {
    awk -v f="$1" -v t="$2" '$1 == "S" && $2 >= f && $2 < t { s[$3] = 1 } $1 == "R" { delete s[$3]
        if (prev != "" && $2 >= f && $2 < t && $2 - prev > g) g = $2 - prev; prev = $2 }
        END { n = 0; for (k in s) n++; printf "%.2f s, %d unanswered", g, n }' "$plog"
}
t_end=$(now)
fact "(4) to portable: swap began to the first reply through the virtio NIC $(since "$t_po" "$(first_via vfo-p "$t_po")") s; longest gap until the swap back $(gaps "$t_po" "$t_ac")"
fact "(4) back to the VF: swap began to the first reply through the VF $(since "$t_ac" "$(first_via pf2334 "$t_ac")") s; longest gap since $(gaps "$t_ac" "$t_end")"
ok "measured (see the facts)"
else
    diag "(4) the plain kind=sriov swap in a second guest: left out (LAB_FO_PLAIN_SRIOV=0)"
fi

v destroy "$name" >/dev/null 2>&1
wait_for 60 no_lease || diag "a lease is left after $name's destroy: $(leases)"
v undefine "$name" >/dev/null 2>&1
kill "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
diag "$(tail -n 15 "$work/daemon.log")"
kill "$lvpid" 2>/dev/null
wait "$lvpid" 2>/dev/null
echo "1..$n"
[ "$failed" -eq 0 ]
