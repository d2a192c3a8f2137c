#!/bin/sh
# The main job: installs what is missing, builds, and shows what the
# allocator does to a VM. First the intent engine: the example domain (two
# NICs: vpc1, virtio on VLAN 2200, and vpc2, vDPA on VLAN 2334 from pool
# cx6-p1) rewritten to its accelerated form, to its portable form, and with
# the vDPA pool full. Then the daemon on the simulated NIC: a lease made,
# seen and released. Then the paired-guest
# benchmark (tests/pair/pairbench.py): two tiny guests booted through libvirt
# and our hook, iperf3 between them, a table, JSON and an SVG.
#
#   contrib/demo.sh [--config DIR] [--time SECONDS] [--repeat N]
#
# --config: the operator's configuration (networks vpc1 and vpc2) for the
# benchmark, on a real ConnectX host; default: the simulated NIC.
# --time: seconds per iperf3 test (default 2; 30 gives steadier figures).
# --repeat: runs of each test (default 3): the report gives each figure's
# median and its lowest and highest, so that noise shows as noise.
set -eu
config=""
pair_time=2
pair_repeat=3
usage() { echo "usage: $0 [--config DIR] [--time SECONDS] [--repeat N]" >&2; exit 2; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case "$1" in
    --config) config=$2 ;;
    --time) pair_time=$2 ;;
    --repeat) pair_repeat=$2 ;;
    *) usage ;;
    esac
    shift 2
done
case "$pair_time.$pair_repeat" in
*[!0-9.]* | .* | *. | *.*.*) echo "$0: --time and --repeat take whole numbers" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

step() { printf '\n==> %s\n' "$*"; }

step "Installing build and test dependencies (Debian packages)"
./contrib/install-deps.sh

step "Building (about 2 minutes the first time, seconds after)"
./contrib/build.sh build >/dev/null
vdpactl=build/vdpa-allocator/ctl/vdpactl
out=build/demo
mkdir -p "$out"

step "Example domain contrib/examples/vm1.xml, networks in contrib/examples/vdpa-allocator.conf"
grep -E '<vdpa:nic ' contrib/examples/vm1.xml

step "vdpactl rewrite --to accelerated (what 'virsh define' should get on a host with room)"
"$vdpactl" rewrite -v --config contrib/examples contrib/examples/vm1.xml >"$out/vm1-accelerated.xml"
# libxml2 writes attributes in double quotes; compare past that
sed "s/'/\"/g" contrib/examples/vm1.xml | diff -u - "$out/vm1-accelerated.xml" | grep -E '^[-+] ' || true

step "vdpactl rewrite --to portable (virtio on the same VLANs, for hosts without vDPA)"
"$vdpactl" rewrite -v --to portable --config contrib/examples "$out/vm1-accelerated.xml" >"$out/vm1-portable.xml"
diff -u "$out/vm1-accelerated.xml" "$out/vm1-portable.xml" | grep -E '^[-+] ' || true

step "The pool full (--capacity cx6-p1=0): the vDPA network falls back to virtio"
"$vdpactl" rewrite -v --capacity cx6-p1=0 --config contrib/examples contrib/examples/vm1.xml >"$out/vm1-full.xml"

step "Round trip: accelerated -> portable -> accelerated gives the same document"
"$vdpactl" rewrite --config contrib/examples "$out/vm1-portable.xml" | cmp - "$out/vm1-accelerated.xml"
echo "identical"

if command -v virt-xml-validate >/dev/null; then
    step "libvirt's schema accepts every form"
    for f in "$out"/vm1-*.xml; do virt-xml-validate "$f" domain; done
fi

step "Starting vdpa-allocatord on the simulated NIC (contrib/examples/sim), on a private system bus"
# A private bus keeps the demo off the host's own: the daemon, vdpactl and
# every other client follow DBUS_SYSTEM_BUS_ADDRESS.
run="$top/$out/run"
rm -rf "$run" && mkdir -p "$run/state" "$run/run"
cat >"$run/bus.conf" <<BUS
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$run/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow user="*"/><allow own="*"/>
    <allow send_type="method_call"/><allow send_type="signal"/><allow send_type="method_return"/><allow send_type="error"/>
    <allow receive_type="method_call"/><allow receive_type="signal"/><allow receive_type="method_return"/><allow receive_type="error"/>
  </policy>
</busconfig>
BUS
dbus-daemon --config-file="$run/bus.conf" --fork --print-pid >"$run/bus.pid"
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$run/system_bus_socket"
# libvirt's test driver stands in for libvirtd: the start's reconciliation
# asks it which domains exist (none of ours), rather than the host's
# libvirtd, which may not run here
VDPA_ALLOCATOR_LIBVIRT_URI=test:///default \
    build/vdpa-allocator/daemon/vdpa-allocatord --config contrib/examples/sim --state-dir "$run/state" --run-dir "$run/run" \
    >"$run/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; kill "$(cat "$run/bus.pid")" 2>/dev/null' EXIT
for _ in $(seq 100); do "$vdpactl" status >/dev/null 2>&1 && break; sleep 0.05; done
sed 's/^/    daemon: /' "$run/daemon.log"

step "vdpactl status"
"$vdpactl" status

step "vm1 starts: its vDPA NIC gets a lease (what the hook does at 'prepare')"
uuid=4dea22b3-1d52-d8f3-2516-782e98ab3fa0
"$vdpactl" allocate --uuid $uuid --domain vm1 --mac 52:54:00:6b:3c:58 --network vpc2
"$vdpactl" lease list

step "vdpactl dev list: the PFs and VFs the daemon sees (the simulated ConnectX-6 Dx), vm1's VF leased"
"$vdpactl" dev list

step "The port path of the accelerated form now resolves to the device"
ls -l "$run/run/ports/$uuid/"

step "vm1 stops: its leases come back"
"$vdpactl" release --uuid $uuid --all
"$vdpactl" status

step "vm1 done; stopping this daemon and its bus"
kill $daemon 2>/dev/null || true
wait $daemon 2>/dev/null || true
kill "$(cat "$run/bus.pid")" 2>/dev/null || true
trap - EXIT
unset DBUS_SYSTEM_BUS_ADDRESS

if [ -n "$config" ]; then
    nic="the configuration in $config"
elif grep -qx 0x15b3 /sys/bus/pci/devices/*/vendor 2>/dev/null; then
    nic="the SIMULATED NIC (a Mellanox/NVIDIA device is present: pass --config with your pools to use it)"
else
    nic="the SIMULATED NIC (no ConnectX on this host)"
fi
step "The paired-guest benchmark on $nic: two guests, $pair_time s per test, $pair_repeat runs each"
echo "    libvirtd, QEMU (TCG: software emulation, no KVM), Open vSwitch and the allocator (pool cx6-p1)"
echo "    run in private namespaces and stop with it. The test guest is built first (a kernel download,"
echo "    about a minute; cached after)."
echo "    Without a vhost-vdpa device the vDPA NICs get their network's virtio fallback; the report says so,"
echo "    and then network1 and network2 measure the same virtio path twice: their differences are noise."
echo "    Software vDPA (VDUSE devices served by the daemon's relay) runs where the host has VDUSE; its line"
echo "    'network4 vpc4, vDPA (software):' says so, or why not."
set -- --time "$pair_time" --repeat "$pair_repeat" --show --out "$top/$out/pair"
[ -n "$config" ] && set -- "$@" --config "$config"
# the shared test fixtures (vatest); the programs under build/, as built above
PYTHONPATH="$top/tests/lib" VA_BUILDDIR="$top/build" /usr/bin/python3 tests/pair/pairbench.py "$@"

step "Done: the rewritten documents are in $out/, the benchmark's report in $out/pair/"
