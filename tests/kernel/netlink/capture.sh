#!/bin/sh
# Captures the netlink message iproute2 sends for each command below, in a
# private network namespace with a bridge br0 and a veth pair v0/v1 (v0 a
# port of br0), and writes it as hex to NAME.hex. The message is the last
# sendmsg(2) of the tool; strace's write dump gives its bytes.
# Run as root from this folder: unshare -n ./capture.sh
set -eu
ip link add br0 type bridge
ip link add v0 type veth peer name v1
ip link set v0 master br0

capture() {
    name=$1; shift
    strace -qq -e trace=sendmsg -e write=3 -o "$name.strace" "$@" >/dev/null 2>&1 || true
    # dump lines: " | 00000  78 00 00 00 ... 00  x......." (bytes in columns 11-59)
    awk '/^sendmsg/ { hex = "" } /^ \| [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]  / { b = substr($0, 11, 49); gsub(/ /, "", b); hex = hex b } END { print hex }' \
        "$name.strace" > "$name.hex"
    rm -f "$name.strace"
    echo "$name: $*"
}

capture bridge-vlan-add-pvid-untagged bridge vlan add dev v0 vid 2334 pvid untagged
capture bridge-vlan-del-1 bridge vlan del dev v0 vid 1
capture bridge-vlan-del-2334 bridge vlan del dev v0 vid 2334
capture vf-set-vst ip link set dev v0 vf 3 mac 52:54:00:12:34:56 vlan 2334 spoofchk on trust off
capture vf-reset ip link set dev v0 vf 3 mac 00:00:00:00:00:00 vlan 0 spoofchk off trust off
capture link-master-up ip link set dev v0 master br0 up
capture link-nomaster ip link set dev v0 nomaster
capture link-up ip link set dev v0 up
