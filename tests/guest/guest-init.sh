#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# /init of the tiny test guest (busybox sh). Everything it does is read from
# the kernel command line, so one initramfs serves every guest:
#
#   va.name=NAME        label printed in every marker line (default: guest)
#   va.ip=A/P[,A/P...]  addresses of eth0, eth1, ... (in PCI order)
#   va.role=ROLE        server: iperf3 -s until destroyed
#                       client: run va.tests against va.peer, then power off
#                       idle (default): nothing, stay up
#   va.peer=ADDR        the server's address (client)
#   va.tests=T[,T...]   client tests, default tcp: ping, tcp, tcp4 (-P 4),
#                       tcp5r (-P 5 -R), udp16 (-u -l 16 -b 100M),
#                       udp1460 (-u -l 1460 -b 1G), custom (va.args)
#                       T@ADDR runs T against ADDR instead of va.peer (a
#                       guest with several NICs: one test per path);
#                       T~N is T again, its N-th repeat (one name each)
#   va.time=SECONDS     length of each iperf3 test (default 3)
#   va.bound=SECONDS    an iperf3 run still going this long is killed
#                       (default va.time + 60)
#   va.args=A,B,...     iperf3 arguments of the custom test, comma-separated
#   va.then=WHAT        what the client does after VA-GUEST-DONE: poweroff
#                       (default), or hold: stay up, idle (its NICs can
#                       still be unplugged and plugged: the host's next
#                       steps on a guest that booted once)
#
# Serial console (ttyS0) protocol, one marker per line:
#   VA-GUEST-MODULE name=... module=M   an optional driver (a VF's) loaded
#       because a PCI device it serves is present
#   VA-GUEST-READY name=... ips=...
#   VA-GUEST-NETDEV action=add|remove iface=ethN ...   a NIC hot-plugged
#       (it gets the N-th va.ip address) or unplugged after READY
#   VA-IPERF3-START name=... test=...   iperf3 starts now (the host may
#       sample its CPU counters here and at VA-IPERF3-END)
#   VA-IPERF3-BEGIN name=... test=...   / VA-IPERF3-END name=... test=... rc=N
#       with iperf3 -J's JSON between them
#   VA-IPERF3-STDERR name=... test=... TEXT   iperf3's warnings, if any
#   VA-IPERF3-RETRY name=... test=... WHY   the first run failed (WHY);
#       the second one's document follows
#   VA-PING-BEGIN / VA-PING-END         the same for ping
#   VA-GUEST-DONE name=... failed=N     then the client powers off (or
#       holds, va.then=hold)
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

# Every process costs: nested in the lab host (QEMU TCG inside QEMU TCG),
# from /init's start to its second module's init took 50 s when the script
# still started ~40 processes on the way (a $(param) was four). So the
# boot path reads the command line and counts with shell builtins (read,
# for, case, globs) and starts a process only for what needs one (mount,
# insmod, ip).

# param NAME: sets REPLY to the last va.NAME= value ("" if none); reads
# /proc/cmdline once
param() {
    [ -n "${cmdline+set}" ] || read -r cmdline </proc/cmdline
    REPLY=
    for w in $cmdline; do
        case "$w" in
        "va.$1="*) REPLY=${w#va.$1=} ;;
        esac
    done
}

# /init --uevent: busybox uevent runs this for each kernel uevent once the
# guest is up. A hot-plugged ethN gets the N-th address of va.ip, as a
# distribution's per-name network configuration would give it; both
# directions are reported on the console.
if [ "${1:-}" = "--uevent" ]; then
    [ "${SUBSYSTEM:-}" = net ] || exit 0
    case "${INTERFACE:-}" in
    eth*) ;;
    *) exit 0 ;;
    esac
    case "${ACTION:-}" in
    add)
        param ip
        a=$(echo "$REPLY" | tr ',' '\n' | sed -n "$((${INTERFACE#eth} + 1))p")
        [ -n "$a" ] && ip addr add "$a" dev "$INTERFACE" && ip link set "$INTERFACE" up
        param name
        echo "VA-GUEST-NETDEV action=add iface=$INTERFACE mac=$(cat "/sys/class/net/$INTERFACE/address") ip=${a:-none} name=$REPLY"
        ;;
    remove)
        param name
        echo "VA-GUEST-NETDEV action=remove iface=$INTERFACE name=$REPLY"
        ;;
    esac
    exit 0
fi

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
# keep kernel messages from interleaving with the JSON on the console
echo 1 >/proc/sys/kernel/printk

param name
name=${REPLY:-guest}
param role
role=${REPLY:-idle}
param peer
peer=$REPLY
param tests
tests=${REPLY:-tcp}
param time
t=${REPLY:-3}
param ip
ips=$REPLY
param then
then=${REPLY:-poweroff}
# the longest one iperf3 run may take: its test, its setup on a slow TCG
# guest, and the results' exchange
param bound
bound=${REPLY:-$((t + 60))}

say() {
    echo "$* name=$name"
}

# the top-level "error" of an iperf3 -J document, empty when none
iperf3_error() {
    sed -n 's/^\t"error":\t"\(.*\)"$/\1/p' | head -n 1
}

# the bytes of iperf3 -J's "sum_received" (the receiver's count)
received_bytes() {
    awk '/"sum_received"/ { s = 1 } s && /"bytes":/ { gsub(/[^0-9]/, ""); print; exit }'
}

hold() {
    # init must never exit: the kernel would panic
    while :; do sleep 3600; done
}

while read -r m; do
    insmod "/lib/modules/$m.ko" || say "VA-GUEST-WARN insmod $m failed"
done </lib/modules/load-order

# optional drivers (build-guest.sh): a VF's, for a PCI device they serve
/sbin/va-load-optional | while read -r r; do
    case "$r" in
    loaded=*) say "VA-GUEST-MODULE module=${r#loaded=}" ;;
    *) say "VA-GUEST-WARN insmod ${r#failed=} failed" ;;
    esac
done

ip link set lo up
# NICs appear as the modules probe; wait for as many as addresses given
set -f
IFS=,
set -- $ips
unset IFS
set +f
want=0
for a in "$@"; do
    [ -n "$a" ] && want=$((want + 1))
done
neth() {
    set -- /sys/class/net/eth*
    [ -e "$1" ] && REPLY=$# || REPLY=0
}
i=0
while neth && [ "$REPLY" -lt "$want" ] && [ $i -lt 100 ]; do
    usleep 50000
    i=$((i + 1))
done
n=0
for a in "$@"; do
    [ -n "$a" ] || continue
    if ! ip addr add "$a" dev "eth$n" || ! ip link set "eth$n" up; then
        say "VA-GUEST-FAIL cannot configure eth$n with $a"
        hold
    fi
    n=$((n + 1))
done

# NICs plugged from now on configure themselves (/init --uevent)
uevent /init --uevent &

say "VA-GUEST-READY role=$role ips=$ips"

case "$role" in
server)
    while :; do
        iperf3 -s
        say "VA-GUEST-WARN iperf3 -s exited $?"
        sleep 1
    done
    ;;
client) ;;
*) hold ;;
esac

# client: wait for the peer to answer and its server to listen
i=0
until ping -c 1 -W 1 "$peer" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -ge 60 ] && break
done

failed=0
for test in $(echo "$tests" | tr ',' ' '); do
    to=$peer
    case "$test" in
    *@*) to=${test#*@} ;;
    esac
    kind=${test%%@*}
    case "${kind%%~*}" in
    ping)
        say "VA-PING-BEGIN test=$test"
        ping -c 3 "$to"
        rc=$?
        say "VA-PING-END test=$test rc=$rc"
        [ $rc -eq 0 ] || failed=$((failed + 1))
        continue
        ;;
    tcp) args="-t $t" ;;
    tcp4) args="-t $t -P 4" ;;
    tcp5r) args="-t $t -P 5 -R" ;;
    udp16) args="-t $t -u -l 16 -b 100M" ;;
    udp1460) args="-t $t -u -l 1460 -b 1G" ;;
    custom)
        param args
        args=$(echo "$REPLY" | tr ',' ' ')
        ;;
    *)
        say "VA-GUEST-WARN unknown test $test"
        failed=$((failed + 1))
        continue
        ;;
    esac
    # the peer may not answer on this path yet (ARP, a second NIC)
    i=0
    until ping -c 1 -W 1 "$to" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -ge 30 ] && break
    done
    say "VA-IPERF3-START test=$test"
    i=0
    retried=
    udp=
    case "${kind%%~*}" in
    udp*) udp=1 ;;
    esac
    while :; do
        # stderr apart: iperf3 warns there (udp1460: "UDP block size 1460
        # exceeds TCP MSS"), and the console must carry JSON only. A run
        # is bounded: a client whose control connection stalls waits for
        # the server's results forever.
        out=$(timeout -s KILL "$bound" iperf3 -c "$to" -J --connect-timeout 10000 $args 2>/tmp/iperf3.err)
        rc=$?
        # iperf3 3.12 -J exits 0 on its errors too: the document says them
        why=$(echo "$out" | iperf3_error)
        [ $rc -eq 137 ] && why="iperf3 did not finish in $bound s"
        if [ $rc -eq 0 ] && [ -z "$why" ]; then
            # a UDP run whose receiver counted nothing: a flood can keep
            # the receiving TCG guest's iperf3 off the CPU until the test
            # ends (the first run after boot, on a loaded host)
            [ -n "$udp" ] && [ "$(echo "$out" | received_bytes)" = 0 ] || break
            why="the receiver counted no byte"
        fi
        i=$((i + 1))
        # the server may still be starting
        if { cat /tmp/iperf3.err; echo "$why"; } | grep -qE 'Connection refused|server is busy'; then
            [ $i -lt 30 ] || break
            sleep 1
            continue
        fi
        # any other failure (nested TCG drops a control connection now and
        # then): once more, said so
        [ -z "$retried" ] || break
        retried=1
        say "VA-IPERF3-RETRY test=$test $why"
        sleep 1
    done
    [ -s /tmp/iperf3.err ] && say "VA-IPERF3-STDERR test=$test $(tr '\n' ' ' </tmp/iperf3.err)"
    say "VA-IPERF3-BEGIN test=$test args=$(echo "$args" | tr ' ' ',')"
    echo "$out"
    say "VA-IPERF3-END test=$test rc=$rc"
    [ $rc -eq 0 ] || failed=$((failed + 1))
done

say "VA-GUEST-DONE failed=$failed"
[ "$then" = hold ] && hold
sync
poweroff -f
hold
