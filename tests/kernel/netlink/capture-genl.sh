#!/bin/sh
# Captures the generic netlink requests iproute2 sends for the vdpa and
# devlink commands below, and one reply of `vdpa mgmtdev show`, and writes
# each as hex to NAME.hex. This machine's kernel has neither family (the
# tools stop after CTRL_CMD_GETFAMILY fails), so the capture runs in the lab
# host (tests/lab/lab_host.py: Debian's 6.12 kernel under QEMU, with this
# machine's root and so its iproute2 6.1 and strace), after
# `modprobe -a vdpa vduse vhost_vdpa`.
#
# Run from this folder: ./capture-genl.sh
# (it starts the lab host with `./capture-genl.sh --in-lab`, which prints
# "NAME HEX" lines, and writes the files here; the lab host's root is
# writable only in memory).
#
# The request is the tool's LAST sendto(2) (libmnl sends with sendto; the
# first is CTRL_CMD_GETFAMILY), as `strace -e trace=sendto -e write=3` dumps
# it. The kernel refuses the requests (no device 0000:3b:00.x there); that
# does not matter, the bytes are what iproute2 sends.
set -eu

if [ "${1:-}" != --in-lab ]; then
    here=$(cd "$(dirname "$0")" && pwd)
    out=$(cd "$here" && python3 ../../lab/lab_host.py --timeout 300 -- sh ./capture-genl.sh --in-lab)
    printf '%s\n' "$out" | while read -r tag name hex; do
        [ "$tag" = CAPTURE ] || { [ "$tag" = "#" ] && echo "# $name $hex"; continue; }
        printf '%s\n' "$hex" >"$here/$name.hex"
        echo "$name.hex"
    done
    exit 0
fi

modprobe -a vdpa vduse vhost_vdpa
echo "# kernel $(uname -r), $(ip -V)"

# dump lines: " | 00000  78 00 00 00 ... 00  x......." (bytes in columns 11-59)
capture() {
    name=$1; shift
    strace -qq -e trace=sendto -e write=3 -o /tmp/capture.strace "$@" >/dev/null 2>&1 || true
    hex=$(awk '/^sendto/ { hex = "" } /^ \| [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]  / { b = substr($0, 11, 49); gsub(/ /, "", b); hex = hex b } END { print hex }' \
        /tmp/capture.strace)
    echo "CAPTURE $name $hex"
    echo "# $name: $*"
}

# the first message of the first recvmsg(2) after the request (the
# GETFAMILY exchange comes before it)
capture_reply() {
    name=$1; shift
    strace -qq -e trace=sendto,recvmsg -e read=3 -o /tmp/capture.strace "$@" >/dev/null 2>&1 || true
    hex=$(awk '/^sendto/ { sends++ } /^recvmsg/ { if (sends == 2) recvs++ }
        sends == 2 && recvs == 1 && /^ \| [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]  / { b = substr($0, 11, 49); gsub(/ /, "", b); hex = hex b }
        END { print hex }' /tmp/capture.strace)
    # nlmsg_len, little endian, in the first four bytes
    len=$(printf '%s' "$hex" | cut -c1-8 | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
    len=$((0x$len))
    echo "CAPTURE $name $(printf '%s' "$hex" | cut -c1-$((2 * len)))"
    echo "# $name: reply to $*"
}

capture vdpa-dev-new vdpa dev add name va-0000:3b:00.2 mgmtdev pci/0000:3b:00.2 mac 52:54:00:12:34:56 mtu 1500 max_vqp 4
capture vdpa-dev-del vdpa dev del va-0000:3b:00.2
capture vdpa-mgmtdev-dump vdpa mgmtdev show
capture devlink-eswitch-switchdev devlink dev eswitch set pci/0000:3b:00.0 mode switchdev
capture_reply vdpa-mgmtdev-reply-vduse vdpa mgmtdev show
