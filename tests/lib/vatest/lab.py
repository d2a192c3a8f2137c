# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the lab tier's cases share (tests/lab, run INSIDE a lab host by
lab_host.py), so that no test file imports another:

- logging and waiting: log(), wait_until(), holds_for(), Timer;
- commands with their output merged, and the netdevsim helpers of the
  simulator cases (run(), read(), write(), wait_for(), link(),
  link_peers(), eswitch(), pcivf_ports());
- Open vSwitch on the kernel datapath (start_ovs());
- the VDUSE lab of test_lab_daemon.py and test_lab_installed.py: its pool's
  configuration (CONFIG and the names in it), start_vduse()/stop_vduse(),
  the sysfs and bridge views (vdpa_devices(), vdpa_driver(), master(),
  bridge_vlans(), read_text()), and its domain that cannot boot
  (domain_xml());
- the software devices' relays as /proc shows them (relay_processes()),
  for test_lab_software.py and test_lab_installed.py."""

import collections
import json
import os
import signal
import subprocess
import sys
import time

from vatest import guest
from vatest.paths import VDUSE_NET

# --- logging and waiting ---------------------------------------------------

# "lab-daemon" for test_lab_daemon.py, "lab-installed" for test_lab_installed.py
LOG_PREFIX = os.path.basename(sys.argv[0] or "lab").removesuffix(".py").removeprefix("test_").replace("_", "-")


def log(fmt, *args):
    sys.stderr.write(LOG_PREFIX + ": " + (fmt % args if args else fmt) + "\n")
    sys.stderr.flush()


def in_lab_host():
    # lab-init.sh runs the command with /lab shared and LAB_CWD set
    return os.path.exists("/lab/cmd") and "LAB_CWD" in os.environ


def wait_until(pred, timeout, what, interval=0.1):
    """Calls pred until it returns something true, and returns that; raises
    TimeoutError naming what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError("%s: not within %d s" % (what, timeout))
        time.sleep(interval)


def holds_for(pred, seconds, what, interval=0.2):
    """Checks pred for seconds; raises AssertionError naming what the first
    time it is false."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pred():
            raise AssertionError("%s: no longer true" % what)
        time.sleep(interval)


class Timer:
    """with Timer("what"): logs how long the block took."""

    def __init__(self, what):
        self.what = what

    def __enter__(self):
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.s = time.monotonic() - self.t0
        log("%-40s %6.1f s%s", self.what, self.s, "" if exc[0] is None else " (failed)")


# --- commands and the simulators --------------------------------------------


def run(*argv, check=True):
    """argv (as arguments) with stderr merged into stdout; a failure raises
    AssertionError with its output."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stdout))
    return r


def read(path):
    with open(path) as f:
        return f.read().strip()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def wait_for(path, seconds=10):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not appear" % path)
        time.sleep(0.05)


def link(port):
    return json.loads(run("ip", "-j", "link", "show", "dev", port).stdout)[0]


def eswitch(dev):
    return json.loads(run("devlink", "-j", "dev", "eswitch", "show", "netdevsim/" + dev).stdout)["dev"]["netdevsim/" + dev]["mode"]


def pcivf_ports(dev):
    ports = json.loads(run("devlink", "-j", "port", "show").stdout)["port"]
    return {v["vfnum"]: v.get("netdev") for k, v in ports.items()
            if k.startswith("netdevsim/%s/" % dev) and v["flavour"] == "pcivf"}


def link_peers(pairs):
    """Links netdevsim ports by ifindex, (a, b) each: netdevsim has
    carrier only when linked to a peer (drivers/net/netdevsim/bus.c,
    link_device); without it a PF is down and unhealthy."""
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        for a, b in pairs:
            write("/sys/bus/netdevsim/link_device", "%d:%d %d:%d" % (fd, a, fd, b))
    finally:
        os.close(fd)


OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


def start_ovs(procs, bridge):
    """ovsdb-server and ovs-vswitchd on the lab host's tmpfs /run, the
    kernel datapath, and @bridge; the daemons are added to @procs."""
    d = "/run/openvswitch"
    os.makedirs(d, exist_ok=True)
    run("modprobe", "openvswitch")
    run("ovsdb-tool", "create", d + "/conf.db", OVS_SCHEMA)
    procs.append(subprocess.Popen(["ovsdb-server", d + "/conf.db", "--remote=punix:" + d + "/db.sock",
                                   "--pidfile=" + d + "/ovsdb-server.pid", "--log-file=" + d + "/ovsdb.log"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 20
    while not os.path.exists(d + "/db.sock"):
        if time.monotonic() > deadline:
            raise RuntimeError("ovsdb-server did not come up")
        time.sleep(0.05)
    run("ovs-vsctl", "--no-wait", "init")
    # Debian 12's OVS 3.1.0 counts the CPUs only once CLOCK_MONOTONIC is
    # past 10 s (lib/ovs-thread.c, count_cpu_cores(); fixed upstream by
    # b354cee2e in 3.1.1). Started earlier, as in a lab host just booted,
    # ovs-vswitchd runs the kernel datapath with no upcall handler, and
    # after its switch to 2 handlers at 10 s it lost every upcall in 2 of 4
    # runs (ovs-dpctl show: "lost:48"): no port's first packet went through
    wait = 10.5 - time.clock_gettime(time.CLOCK_MONOTONIC)
    if wait > 0:
        time.sleep(wait)
    procs.append(subprocess.Popen(["ovs-vswitchd", "unix:" + d + "/db.sock", "--pidfile=" + d + "/ovs-vswitchd.pid",
                                   "--log-file=" + d + "/ovs-vswitchd.log"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    run("ovs-vsctl", "--timeout=30", "add-br", bridge)
    run("ip", "link", "set", bridge, "up")
    with open(d + "/ovs-vswitchd.log") as f:
        if "Overriding n-handler-threads to 0," in f.read():
            raise RuntimeError("ovs-vswitchd started with no upcall handler (see %s/ovs-vswitchd.log)" % d)


# --- the VDUSE lab: its pool's configuration and devices ---------------------

WORK = "/var/tmp/va-lab"  # a fresh tmpfs in the lab host
NS = "http://vdpa-allocator.org/xmlns/domain/1.0"

POOL = "lab"
BRIDGE = "br-lab"
NETWORK = "accel"
VLAN = 10
PLAIN = "plain"  # virtio only, on the Linux bridge: the hook tags the tap
PLAIN_VLAN = 20
AUTO = "auto"  # vdpa while the pool has room, else virtio on the same VLAN
DEVICE_GROUP = "disk"
DEVICE_MODE = 0o660
SLOTS = ["vduse0", "vduse1"]

CONFIG = """# written by tests/lab/test_lab_daemon.py
[pool %(pool)s]
type=vduse-test
vlan-method=bridge
uplink-bridge=%(bridge)s
device-group=%(group)s
device-mode=%(mode)04o

[network %(network)s]
mode=vdpa
pool=%(pool)s
vlan=%(vlan)d
fallback-bridge=%(bridge)s

[network %(plain)s]
mode=virtio
vlan=%(plain_vlan)d
fallback-bridge=%(bridge)s

[network %(auto)s]
mode=auto
pool=%(pool)s
vlan=%(vlan)d
fallback-bridge=%(bridge)s
""" % dict(pool=POOL, bridge=BRIDGE, group=DEVICE_GROUP, mode=DEVICE_MODE, network=NETWORK, vlan=VLAN, plain=PLAIN,
           plain_vlan=PLAIN_VLAN, auto=AUTO)

# slot -> Popen of its vduse-net, for stop_vduse()
VDUSE = {}


def _run(cmd, check=True, timeout=60):
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True)


def start_vduse(slot, timeout=30):
    """A slot of the vduse-test pool: the VDUSE device va-SLOT (vduse-net),
    and the netdev SLOT that stands in for its VF representor (one end of a
    veth pair; the other end is SLOT-peer)."""
    ready = os.path.join(WORK, "vduse-%s.ready" % slot)
    logf = open(os.path.join(WORK, "vduse-%s.log" % slot), "w")
    p = subprocess.Popen([VDUSE_NET, "-n", "va-" + slot, "-r", ready, "-v"], stdin=subprocess.DEVNULL, stdout=logf,
                         stderr=subprocess.STDOUT)
    logf.close()
    VDUSE[slot] = p

    def made():
        if p.poll() is not None:
            raise RuntimeError("vduse-net for %s exited %d" % (slot, p.returncode))
        return os.path.exists(ready) and os.path.getsize(ready) > 0
    wait_until(made, timeout, "VDUSE device va-" + slot)
    _run(["ip", "link", "add", slot, "type", "veth", "peer", "name", slot + "-peer"])
    _run(["ip", "link", "set", slot, "up"])
    _run(["ip", "link", "set", slot + "-peer", "up"])


def stop_vduse(slot, timeout=30):
    """Destroys the VDUSE device of slot (vduse-net retries while a vdpa
    device still sits on it) and its representor stand-in."""
    p = VDUSE.pop(slot, None)
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
    _run(["ip", "link", "del", slot], check=False)


def vdpa_devices():
    try:
        return sorted(os.listdir("/sys/bus/vdpa/devices"))
    except FileNotFoundError:
        return []


def vdpa_driver(device):
    link = "/sys/bus/vdpa/devices/%s/driver" % device
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def bridge_vlans(port):
    """[(vid, flags)] of a bridge port, from bridge -j vlan show."""
    out = json.loads(_run(["bridge", "-j", "vlan", "show", "dev", port]).stdout or "[]")
    return [(v["vlan"], sorted(v.get("flags", []))) for entry in out for v in entry["vlans"]]


Relay = collections.namedtuple("Relay", "uid seccomp")


def relay_processes():
    """pid: Relay(real uid, seccomp mode) of each running
    vdpa-allocator-relay, from a scan of /proc (seccomp 2: a filter)."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if not f.read().split(b"\0")[0].endswith(b"vdpa-allocator-relay"):
                    continue
            with open("/proc/%s/status" % pid) as f:
                st = dict(l.split(":", 1) for l in f if ":" in l)
            out[int(pid)] = Relay(int(st["Uid"].split()[0]), int(st["Seccomp"].strip()))
        except (OSError, KeyError, ValueError):
            continue
    return out


def master(ifname):
    link = "/sys/class/net/%s/master" % ifname
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def domain_xml(name, uuid, mac, network=NETWORK, bridge=BRIDGE, acpi=False):
    """A domain that cannot boot anything (no disk, no kernel, 64 MiB) with
    one NIC on bridge marked for network, as an operator has it before
    vdpactl rewrites it (vatest.guest.domain_xml)."""
    iface = """
    <interface type='bridge'>
      <mac address='%s'/>
      <source bridge='%s'/>
      <model type='virtio'/>
    </interface>""" % (mac, bridge)
    return guest.domain_xml(name, None, None, None, [], uuid=uuid, interfaces=iface, intent=[(mac, network)], memory=64,
                            acpi=acpi, serial=False)
