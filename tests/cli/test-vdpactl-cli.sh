#!/bin/sh
# vdpactl's command line as an operator meets it: --help says what exists,
# every bad input gives its exit status (2 usage, 1 failed; vdpactl(8) EXIT
# STATUS), one line on stderr and nothing on stdout. TAP output.
set -u
vdpactl=${VDPACTL:?}
# VDPACTL_WRAPPER, e.g. "valgrind --error-exitcode=1 -q", wraps every call
vdpactl_run() { ${VDPACTL_WRAPPER:-} "$vdpactl" "$@"; }
src=${VA_SRCDIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

# expect_error STATUS DESC CMD...: exit STATUS, empty stdout, one stderr line "vdpactl: ..."
expect_error() {
    want=$1; desc=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq "$want" ] && [ ! -s "$tmp/out" ] && [ "$lines" -eq 1 ] && grep -q '^vdpactl' "$tmp/err"; then
        ok "$desc: $(cat "$tmp/err")"
    else
        not_ok "$desc (rc=$rc, want $want, stdout $(wc -c <"$tmp/out") bytes, stderr $lines lines)"
        sed 's/^/# /' "$tmp/err"
    fi
}

cfg="$src/contrib/examples"
dom="$src/contrib/examples/vm1.xml"

vdpactl_run --help >"$tmp/out" 2>&1 && grep -q '^  rewrite' "$tmp/out" && ok "--help lists rewrite" || not_ok "--help lists rewrite"
vdpactl_run rewrite --help >"$tmp/out" 2>&1
for opt in --to --config --capacity --verbose; do
    grep -q -- "$opt" "$tmp/out" && ok "rewrite --help names $opt" || not_ok "rewrite --help names $opt"
done
vdpactl_run --version | grep -q '^vdpactl [0-9]' && ok "--version" || not_ok "--version"

# every command --help lists exists, and its own --help works
for cmd in $(vdpactl_run --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
    vdpactl_run "$cmd" --help >"$tmp/out" 2>&1 && grep -qi 'usage' "$tmp/out" && ok "$cmd --help" || not_ok "$cmd --help"
done
bash -n "$src/contrib/vdpactl.bash-completion" && ok "bash completion parses" || not_ok "bash completion parses"

expect_error 2 "no command" vdpactl_run
expect_error 2 "unknown dev command" vdpactl_run dev frobnicate
expect_error 2 "dev list takes pf or vf" vdpactl_run dev list extra
expect_error 2 "dev list: -o names one table's columns" vdpactl_run dev list -o PF
expect_error 2 "dev list: --no-headers for one table" vdpactl_run dev list --no-headers
expect_error 2 "dev list: pf with -j" vdpactl_run dev list pf -j
expect_error 2 "dev list vf: an unknown column" vdpactl_run dev list vf -o VF,MODEL
expect_error 2 "unknown command" vdpactl_run frobnicate
expect_error 2 "unknown option" vdpactl_run rewrite --bogus "$dom"
expect_error 2 "bad --to" vdpactl_run rewrite --config "$cfg" --to fast "$dom"
expect_error 2 "two files" vdpactl_run rewrite --config "$cfg" "$dom" "$dom"
expect_error 1 "missing file" vdpactl_run rewrite --config "$cfg" "$tmp/none.xml"
expect_error 1 "missing --config dir" vdpactl_run rewrite --config "$tmp/nodir" "$dom"
expect_error 2 "bad --capacity" vdpactl_run rewrite --config "$cfg" --capacity cx6-p1 "$dom"
expect_error 2 "negative --capacity" vdpactl_run rewrite --config "$cfg" --capacity cx6-p1=-1 "$dom"
expect_error 1 "unknown pool in --capacity" vdpactl_run rewrite --config "$cfg" --capacity ghost=1 "$dom"
expect_error 1 "empty stdin" vdpactl_run rewrite --config "$cfg" -
printf '<domain>' >"$tmp/cut.xml"
expect_error 1 "truncated document" vdpactl_run rewrite --config "$cfg" "$tmp/cut.xml"
mkdir -p "$tmp/badcfg" && printf '[network x]\nmode=warp\n' >"$tmp/badcfg/vdpa-allocator.conf"
expect_error 1 "bad config" vdpactl_run rewrite --config "$tmp/badcfg" "$dom"
grep -q "vdpa-allocator.conf: \[network x\] mode: 'warp'" "$tmp/err" && ok "config error names file, group and key" ||
    not_ok "config error names file, group and key"

# stdout closed: the write error is reported, not swallowed
vdpactl_run rewrite --config "$cfg" "$dom" >&- 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q 'writing the output' "$tmp/err" && ok "closed stdout is an error" || not_ok "closed stdout is an error (rc=$rc)"

# reads stdin and writes the same as from a file
vdpactl_run rewrite --config "$cfg" "$dom" >"$tmp/a.xml" && vdpactl_run rewrite --config "$cfg" - <"$dom" | cmp -s - "$tmp/a.xml" &&
    ok "stdin and FILE give the same output" || not_ok "stdin and FILE give the same output"

# the default config dir comes from the environment
VDPA_ALLOCATOR_CONFIG_DIR="$cfg" vdpactl_run rewrite "$dom" | cmp -s - "$tmp/a.xml" &&
    ok "VDPA_ALLOCATOR_CONFIG_DIR is the default --config" || not_ok "VDPA_ALLOCATOR_CONFIG_DIR is the default --config"

# the port root follows the run directory
VDPA_ALLOCATOR_RUN_DIR=/tmp/va-run vdpactl_run rewrite --config "$cfg" "$dom" | grep -q "source dev=\"/tmp/va-run/ports/" &&
    ok "port paths follow VDPA_ALLOCATOR_RUN_DIR" || not_ok "port paths follow VDPA_ALLOCATOR_RUN_DIR"

# --verbose says which NIC got a vDPA device and which a VF passed through
mixed="$src/tests/golden/cases/102-mixed-vdpa-and-sriov/input.xml"
vdpactl_run rewrite --verbose --config "$src/tests/golden/config/sriov" "$mixed" >/dev/null 2>"$tmp/err"
grep -qx '52:54:00:6b:3c:58: accelerated on pool cx6, VLAN 2334, 4 queue(s)' "$tmp/err" &&
    grep -qx '52:54:00:6b:3c:59: accelerated on pool cx5, VLAN 2334, a VF passed through' "$tmp/err" &&
    ok "--verbose tells a vDPA NIC from a VF" || not_ok "--verbose tells a vDPA NIC from a VF: $(cat "$tmp/err")"

echo "1..$n"
[ "$fails" -eq 0 ]
