#!/bin/sh
# Captures the devlink and vdpa requests iproute2 6.1 sends, and the
# kernel's replies, against the kernel's own simulators (netdevsim and
# vdpa_sim_net, built by tests/lab/build-sim-modules.sh), and writes each
# as hex to NAME.hex. Replies here are the drivers' own: netdevsim's
# eswitch mode and pcivf port, vdpa_sim_net's device.
#
# Run from this folder: ./capture-devlink.sh (it starts the lab host with
# --sim-modules and `./capture-devlink.sh --in-lab`).
#
# The request is the tool's LAST sendto(2) (the first is
# CTRL_CMD_GETFAMILY); the reply is the first message of the first
# recvmsg(2) after it.
set -eu

if [ "${1:-}" != --in-lab ]; then
    here=$(cd "$(dirname "$0")" && pwd)
    out=$(cd "$here" && python3 ../../lab/lab_host.py --sim-modules --timeout 400 -- sh ./capture-devlink.sh --in-lab)
    printf '%s\n' "$out" | while read -r tag name hex; do
        [ "$tag" = CAPTURE ] || { [ "$tag" = "#" ] && echo "# $name $hex"; continue; }
        printf '%s\n' "$hex" >"$here/$name.hex"
        echo "$name.hex"
    done
    exit 0
fi

modprobe -a netdevsim vdpa_sim_net
echo "# kernel $(uname -r), $(ip -V)"
echo "7 1" >/sys/bus/netdevsim/new_device
i=0
while ! [ -d /sys/bus/netdevsim/devices/netdevsim7/net ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
echo 2 >/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs

# strace dump lines: " | 00000  78 00 00 00 ... 00  x......." (bytes in
# columns 11-59); $1 = sendto: the last request; $1 = reply: the first
# message of the first recvmsg after it
extract() {
    awk -v want="$1" 'NR == FNR { if (/^sendto/) total++; next }
        /^sendto/ { sends++; if (want == "sendto" && sends == total) on = 1; else on = 0 }
        /^recvmsg/ { if (want == "reply") { if (sends == total) recvs++; on = (sends == total && recvs == 1) } else on = 0 }
        on && /^ \| [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]  / { b = substr($0, 11, 49); gsub(/ /, "", b); hex = hex b }
        END { print hex }' /tmp/capture.strace /tmp/capture.strace
}
capture() {
    name=$1; shift
    strace -qq -e trace=sendto,recvmsg -e write=3 -e read=3 -o /tmp/capture.strace "$@" >/dev/null 2>&1 || true
    echo "CAPTURE $name $(extract sendto)"
    echo "# $name: $*"
    hex=$(extract reply)
    len=$(printf '%s' "$hex" | cut -c1-8 | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
    len=$((0x$len))
    echo "CAPTURE $name-reply $(printf '%s' "$hex" | cut -c1-$((2 * len)))"
    echo "# $name-reply: the reply to $*"
}

capture devlink-eswitch-get-legacy devlink dev eswitch show netdevsim/netdevsim7
capture devlink-eswitch-set-netdevsim devlink dev eswitch set netdevsim/netdevsim7 mode switchdev
capture devlink-eswitch-get-switchdev devlink dev eswitch show netdevsim/netdevsim7
capture devlink-port-dump devlink port show
capture devlink-port-get-pcivf devlink port show netdevsim/netdevsim7/129
vdpa dev add name va-sim0 mgmtdev vdpasim_net mac 52:54:00:aa:bb:01
capture vdpa-dev-dump vdpa dev show
vdpa dev del va-sim0
