# SPDX-License-Identifier: LGPL-2.1-or-later
# TAP for the lab scripts (lab-features.sh, lab-simdrivers.sh, lab-mlx5-dkms.sh, lab-igb.sh,
# lab-igb-daemon.sh),
# sourced: counters, one line per check, facts and diagnostics as comments.

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
# a fact may span lines (a command's output): each line stays a comment
fact() { printf '%s\n' "$*" | sed 's/^/# fact: /'; }
# the guest clock at each section: where the test's time goes under TCG
section() { echo "# --- $* (uptime $(cut -d' ' -f1 /proc/uptime) s)"; }
# check DESCRIPTION COMMAND...: one TAP line; the output as diagnostics when
# it fails
check() {
    d=$1
    shift
    if out=$("$@" 2>&1); then
        ok "$d"
    else
        not_ok "$d"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}
# refused DESCRIPTION TEXT COMMAND...: the command fails and says TEXT; what
# it said goes out as a fact either way
refused() {
    d=$1 text=$2
    shift 2
    if out=$("$@" 2>&1); then
        not_ok "$d (it succeeded)"
    else
        case "$out" in
        *"$text"*) ok "$d" ;;
        *) not_ok "$d (expected \"$text\")" ;;
        esac
    fi
    printf '%s\n' "$out" | while IFS= read -r l; do
        echo "# fact: $* -> $l"
    done
}
# eq DESCRIPTION EXPECTED ACTUAL
eq() {
    if [ "$2" = "$3" ]; then
        ok "$1"
    else
        not_ok "$1"
        diag "expected: $2" "got:      $3"
    fi
}
# json EXPR: reads JSON on stdin, prints the Python expression EXPR of it (d)
json() {
    /usr/bin/python3 -S -c 'import json, sys
d = json.load(sys.stdin)
try:
    v = eval(sys.argv[1])
except (KeyError, IndexError, TypeError) as e:
    v = "<%s: %s>" % (type(e).__name__, e)
print(json.dumps(v) if isinstance(v, (bool, list, dict)) else v)' "$1"
}
# sysw FILE VALUE: a sysfs write that reports the errno by name
sysw() {
    /usr/bin/python3 -S -c 'import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    try:
        os.write(fd, sys.argv[2].encode())
    finally:
        os.close(fd)
except OSError as e:
    print("write %s to %s: %s (%s)" % (sys.argv[2], sys.argv[1], e.strerror, errno.errorcode.get(e.errno)))
    sys.exit(1)' "$1" "$2"
}
# v ARG...: virsh on the lab's libvirtd, bounded: a libvirtd or QEMU stuck
# on a VF fails its check with exit 124 instead of holding the lab host
# until lab_host.py's timeout kills it with every result unprinted
v() { timeout -k 10 240 virsh -q -c qemu:///system "$@"; }
# until SECONDS COMMAND...: polls COMMAND every 0.2 s (probes under TCG are slow)
until_ok() {
    t=$(($1 * 5))
    shift
    while ! "$@" >/dev/null 2>&1; do
        t=$((t - 1))
        [ $t -gt 0 ] || return 1
        sleep 0.2
    done
}
