#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The paired-guest benchmark (docs/pairbench.md): two tiny
guests, each with a NIC on the reference's "VPC network1" (virtio, VLAN
2200) and one on "VPC network2" (vDPA, VLAN 2334, virtio fallback), booted
with `virsh start` through our hook in a real libvirtd, iperf3 between them,
and a report (vatest/pairreport.py) as a table, JSON and a plot (SVG, PNG).

    pairbench.py [--time SECONDS] [--repeat N] [--out DIR] [--show] [--config DIR]

Runs inside private mount, network and PID namespaces (tests/lib/vatest/libvirt.py):
libvirtd, virtlogd, a private system bus, vdpa-allocatord, and Open vSwitch
(ovsdb-server + ovs-vswitchd with the userspace datapath, which needs no
kernel module) all start here and end with the run; no traffic leaves.

A third network, vpc3 (mode=sriov, a VF of a kind=sriov pool passed
through, the guest running the VF's own driver), joins only where the
configuration has it and the host can run it (vatest/pairsriov.py decides
and says why not); the default simulated configuration has none, so its
rows read "unavailable: no kind=sriov pool on this host".

A fourth network, vpc4 (mode=vdpa on a software-only pool: each NIC a
software vDPA device, VDUSE served by the daemon's relay, on a
VLAN-filtering Linux bridge, issue 28), joins only where the host can make
such devices (vatest/pairsoftware.py decides and says why not: root,
/dev/vduse/control after modprobe vduse, vhost_vdpa, then the daemon's own
verdict on the pool). The daemon then runs on the kernel backend, its
network2 pool taking no PF, so network2 runs its virtio fallback as on the
simulated NIC; elsewhere (this machine) every vdpa-software row is
"unavailable" with the reason, said in one line of the output.

network2 gets its accelerated (vDPA) form only when the host has a
vhost-vdpa device and the daemon a real backend; otherwise (this machine:
the simulated NIC would hand out a lease, but QEMU could not run it) the
runner rewrites it to the virtio fallback, and the report says so: its vDPA
rows read "unavailable: no vhost-vdpa device on this host" and the measured
network2 rows are labelled fallback.

Exit status 0 when every vNIC test delivered packets, the domains are gone,
every lease came back and (on OVS) the VLANs did not cross."""

import argparse
import contextlib
import functools
import glob
import json
import os
import platform
import re
import subprocess
import sys
import time

from vatest.libvirt import Libvirt, build_guest, enter_namespaces, outer_netns, run, skip_reason

# (enter_namespaces builds the guest first, while the host's network is
# still reachable)
enter_namespaces()

from vatest import ctl  # noqa: E402
from vatest import pairreport as rep  # noqa: E402
from vatest import pairsoftware as software  # noqa: E402
from vatest import pairsriov as sriov  # noqa: E402
from vatest.lab import relay_processes  # noqa: E402
from vatest.guest import domain_xml, guest_cmdline, serial_path, with_intent  # noqa: E402
from vatest.paths import BUILDDIR, DAEMON, HOOK, SYSCONFDIR, VDPACTL  # noqa: E402
from vatest.simconf import ACCEL, sim_config  # noqa: E402

BRIDGE = "br-pair"
# the software NICs' taps go on a Linux bridge (the relay's tap takes no
# Open vSwitch port yet), VLAN-filtering so that the daemon tags them; in
# the initial network namespace, with the daemon (vatest/pairsoftware.py)
SOFT_BRIDGE = "va-pair-soft"
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"

# the reference's networks and addresses (docs/reference.md)
NET1 = {"name": "vpc1", "mode": "virtio", "vlan": 2200, "subnet": "192.167.0.0/24"}
NET2 = {"name": "vpc2", "mode": "vdpa", "vlan": 2334, "subnet": "192.169.0.0/24"}
# the SR-IOV path's network (its VLAN is the configuration's, e.g. 2400)
NET3 = {"name": sriov.NETWORK, "mode": "sriov", "subnet": "192.171.0.0/24"}
# the software vDPA path's network
NET4 = {"name": software.NETWORK, "mode": "vdpa", "vlan": 2336, "subnet": "192.172.0.0/24"}
SIM_POOL = "cx6-p1"
GUESTS = {
    "vm1": {"domain": "va-pair-vm1", "uuid": "77770000-0000-4000-8000-000000000001", "role": "server",
            "vnic": ("52:54:00:70:01:01", "192.167.0.166"), "vdpa": ("52:54:00:70:01:02", "192.169.0.214"),
            "sriov": ("52:54:00:70:01:03", "192.171.0.166"), "software": ("52:54:00:70:01:04", "192.172.0.166")},
    "vm2": {"domain": "va-pair-vm2", "uuid": "77770000-0000-4000-8000-000000000002", "role": "client",
            "vnic": ("52:54:00:70:02:01", "192.167.0.193"), "vdpa": ("52:54:00:70:02:02", "192.169.0.253"),
            "sriov": ("52:54:00:70:02:03", "192.171.0.193"), "software": ("52:54:00:70:02:04", "192.172.0.193")},
}


def sim_text(ovs):
    """The reference's two networks on the simulated ConnectX-6 Dx, on
    BRIDGE; untagged without OVS: a Linux bridge here could not carry the
    tags."""
    kind = "ovs" if ovs else "linux"
    # the pool of contrib/examples/vdpa-allocator.conf, so that the demo
    # names one pool throughout
    return sim_config(
        pfs=1, vfs=4, pools={SIM_POOL: ACCEL},
        networks={NET2["name"]: dict(mode="vdpa", pool=SIM_POOL, vlan=NET2["vlan"] if ovs else None,
                                     fallback_bridge=BRIDGE, fallback_bridge_type=kind),
                  NET1["name"]: dict(mode="virtio", vlan=NET1["vlan"] if ovs else None,
                                     fallback_bridge=BRIDGE, fallback_bridge_type=kind)},
        comment="written by tests/pair/pairbench.py: the reference's two networks on the\nsimulated ConnectX-6 Dx"
                + ("" if ovs else "\nuntagged: this host carries no VLANs"))


def kernel_text(ovs):
    """The software vDPA path's configuration, for the kernel backend:
    network2's pool takes no PF (match-pf names none), so that no NIC of
    the host is touched and network2 falls back as on the simulated NIC;
    network4 on a software-only pool of one device per guest."""
    kind = "ovs" if ovs else "linux"
    return "".join([
        "# written by tests/pair/pairbench.py: the kernel backend, for the software vDPA\n"
        "# path (network %s); pool %s takes no PF of this host\n" % (NET4["name"], SIM_POOL),
        "\n[pool %s]\nmatch-pf=va-no-pf\nmax-vqp=1\n" % SIM_POOL,
        "\n[pool %s]\ntype=software\nsoftware-slots=%d\n" % (software.POOL, software.NEEDED),
        "\n[network %s]\nmode=vdpa\npool=%s\n%sfallback-bridge=%s\nfallback-bridge-type=%s\n" % (
            NET2["name"], SIM_POOL, "vlan=%d\n" % NET2["vlan"] if ovs else "", BRIDGE, kind),
        "\n[network %s]\nmode=virtio\n%sfallback-bridge=%s\nfallback-bridge-type=%s\n" % (
            NET1["name"], "vlan=%d\n" % NET1["vlan"] if ovs else "", BRIDGE, kind),
        "\n[network %s]\nmode=vdpa\npool=%s\nvlan=%d\nfallback-bridge=%s\nfallback-bridge-type=linux\n" % (
            NET4["name"], software.POOL, NET4["vlan"], SOFT_BRIDGE),
        # a software device is made within the hook's call: seconds under
        # emulation, more than the default 10 s nested
        "\n[hook]\ntimeout-ms=120000\n",
    ])


def log(msg):
    sys.stderr.write("pairbench: %s\n" % msg)
    sys.stderr.flush()


# vdpactl on the private bus, 30 s at most a call
vdpactl = functools.partial(ctl.vdpactl, timeout=30)
leases = functools.partial(ctl.leases, timeout=30)



def parse_iperf3(console):
    """{test: (rc, iperf3 -J document)} from the client's console, like
    vatest.guest.iperf3_results, but a test whose output is not JSON (iperf3
    failed before it could write any) becomes {"error": its text}."""
    out = {}
    for m in re.finditer(r"VA-IPERF3-BEGIN test=(\S+).*?\n(.*?)\nVA-IPERF3-END test=\S+ rc=(\d+)", console, re.S):
        body = m.group(2)
        try:
            doc = json.loads(body[body.index("{"):]) if "{" in body else {"error": body.strip()}
        except ValueError:
            doc = {"error": body.strip()[-500:]}
        out[m.group(1)] = (int(m.group(3)), doc)
    return out


def run_name(name, n, repeat):
    """The guest's name of the n-th run of a test (guest-init.sh: T~N)."""
    return name if repeat == 1 else "%s~%d" % (name, n)


def proc_cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def qemu_pid(domain):
    try:
        with open("/run/libvirt/qemu/%s.pid" % domain) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Bench:
    def __init__(self, args):
        self.args = args
        self.lv = None
        self.meta = {}
        self.ovs = False
        self.innet = []

    # --- set-up ------------------------------------------------------------

    def bind_private(self, target, name):
        src = os.path.join(self.lv.root, name)
        os.makedirs(src, exist_ok=True)
        os.makedirs(target, exist_ok=True)
        run(["mount", "--bind", src, target])
        self.lv.mounts.append(target)

    def start_ovs(self):
        """ovsdb-server and ovs-vswitchd by hand, in our namespaces, over
        private run, etc and log directories; userspace TSO on before
        ovs-vswitchd starts (else TCP fails on checksums); a netdev bridge."""
        for tool in ("ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool"):
            if not (run(["sh", "-c", "command -v " + tool], check=False).stdout.strip()):
                raise RuntimeError("%s is not installed (contrib/install-deps.sh installs openvswitch-switch)" % tool)
        self.bind_private("/run/openvswitch", "ovs-run")
        self.bind_private("/etc/openvswitch", "ovs-etc")
        self.bind_private("/var/log/openvswitch", "ovs-log")
        run(["ovsdb-tool", "create", "/etc/openvswitch/conf.db", OVS_SCHEMA])
        env = dict(os.environ)
        self.lv._spawn("ovsdb-server", ["ovsdb-server", "/etc/openvswitch/conf.db",
                                        "--remote=punix:/run/openvswitch/db.sock",
                                        "--pidfile=/run/openvswitch/ovsdb-server.pid",
                                        "--log-file=/var/log/openvswitch/ovsdb-server.log"], env)
        self.lv._wait(lambda: os.path.exists("/run/openvswitch/db.sock"), 15, "ovsdb-server", "db.sock")
        run(["ovs-vsctl", "--no-wait", "init"])
        run(["ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"])
        self.lv._spawn("ovs-vswitchd", ["ovs-vswitchd", "unix:/run/openvswitch/db.sock",
                                        "--pidfile=/run/openvswitch/ovs-vswitchd.pid",
                                        "--log-file=/var/log/openvswitch/ovs-vswitchd.log"], env)
        run(["ovs-vsctl", "--timeout=20", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev"])
        run(["ip", "link", "set", BRIDGE, "up"])
        self.ovs = True

    def start_linux_bridge(self):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        run(["ip", "link", "set", BRIDGE, "up"])

    def write_config(self):
        conf = os.path.join(self.lv.root, "va-etc")
        os.makedirs(os.path.join(conf, "vdpa-allocator"))
        path = os.path.join(conf, "vdpa-allocator", "vdpa-allocator.conf")
        self.kernel_config = False
        if self.args.config:
            with open(os.path.join(self.args.config, "vdpa-allocator.conf")) as f:
                text = f.read()
        elif self.software_host[0]:
            text = kernel_text(self.ovs)
            self.kernel_config = True
        else:
            text = sim_text(self.ovs)
        self.config_text = text
        with open(path, "w") as f:
            f.write(text)
        self.config_path = path
        # the hook reads the compiled-in configuration directory
        run(["mount", "--bind", conf, SYSCONFDIR])
        self.lv.mounts.append(SYSCONFDIR)
        self.confdir = os.path.join(conf, "vdpa-allocator")
        self.run_dir = os.path.join(self.lv.root, "va-run")

    def start_daemon(self):
        """The daemon on the configuration; where it does not start on the
        software path's kernel configuration, on the simulated NIC instead,
        the software rows quoting why."""
        self.software_error = None
        try:
            self._start_daemon_sriov()
        except RuntimeError:
            if not self.kernel_config or self.lv.procs["vdpa-allocatord"].poll() is None:
                raise
            lines = [ln for ln in self.lv.read_log("vdpa-allocatord").splitlines() if ln.strip()]
            self.software_error = (lines[-1].strip() if lines else "it exited %d" % self.lv.procs["vdpa-allocatord"].returncode)[-300:]
            log("vdpa-allocatord did not start on the kernel backend (%s); on the simulated NIC instead" % self.software_error)
            self.lv.logs.pop("vdpa-allocatord").close()
            self.kernel_config = False
            self.config_text = sim_text(self.ovs)
            with open(self.config_path, "w") as f:
                f.write(self.config_text)
            self._start_daemon_sriov()

    def _start_daemon_sriov(self):
        """The daemon on the configuration. Where it refuses the
        configuration's kind=sriov pools (a daemon older than they are, or
        a pool it finds wrong), the benchmark runs without those pools and
        their networks, and the SR-IOV rows quote the refusal."""
        self.daemon_error = None
        try:
            self._start_daemon()
        except RuntimeError:
            if not sriov.sriov_pools(self.config_text) or self.lv.procs["vdpa-allocatord"].poll() is None:
                raise
            lines = [ln for ln in self.lv.read_log("vdpa-allocatord").splitlines() if "sriov" in ln]
            self.daemon_error = (lines[-1].strip() if lines else "it exited %d" % self.lv.procs["vdpa-allocatord"].returncode)[-300:]
            log("vdpa-allocatord refused the kind=sriov pools (%s); again without them" % self.daemon_error)
            self.lv.logs.pop("vdpa-allocatord").close()
            with open(self.config_path, "w") as f:
                f.write(sriov.without_sriov(self.config_text))
            self._start_daemon()

    def _start_daemon(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}
        # on the software path, in the initial network namespace: the
        # kernel's vdpa netlink answers there only
        self.lv._spawn("vdpa-allocatord", (self.innet if self.kernel_config else []) + [DAEMON, "--config", self.confdir, "--state-dir",
                                           os.path.join(self.lv.root, "va-state"), "--run-dir", self.run_dir], env)
        self.lv._wait(lambda: vdpactl("status", check=False).returncode == 0, 30, "vdpa-allocatord", "vdpactl status")

    def sriov_facts(self, status):
        """sriov.decide on this host: the configuration as written, the
        daemon's status, the VFs of the pool's libvirt hostdev network (the
        daemon defines it from a worker thread: wait for it a little), and
        the real sysfs."""
        conf = sriov.parse_config(self.config_text)
        net = conf["network"].get(sriov.NETWORK) or {}
        pool = net.get("pool")
        vfs = None
        ok, why, _ = sriov.decide(self.config_text, status, [], daemon_error=self.daemon_error)
        if ok or why.startswith("unavailable: libvirt network"):
            # the checks before the VFs passed: read the network
            name = "vdpa-allocator-%s" % pool
            deadline = time.monotonic() + 30
            while True:
                r = self.lv.virsh("net-dumpxml", name, check=False, timeout=30)
                vfs = sriov.hostdev_vfs(r.stdout) if r.returncode == 0 else None
                if (vfs and len(vfs) >= sriov.NEEDED) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            # the pool's warning says why a network is missing
            status = json.loads(vdpactl("status", "-j").stdout)
        ok, why, check = sriov.decide(self.config_text, status, vfs, daemon_error=self.daemon_error)
        self.meta["sriov_available"] = ok
        self.meta["sriov_reason"] = why
        self.meta["sriov_check"] = check
        self.sriov_pool = pool
        self.sriov_vlan = int(net["vlan"]) if net.get("vlan") else None
        # network2's own pool: forced to fall back when vDPA cannot run here
        self.vdpa_pool = (conf["network"].get(NET2["name"]) or {}).get("pool")

    def host_facts(self):
        status = json.loads(vdpactl("status", "-j").stdout)
        backend = status.get("backend", "?")
        nodes = sorted(glob.glob("/dev/vhost-vdpa-*"))
        if backend == "sim" or not nodes or self.kernel_config:
            why = rep.UNAVAILABLE
            if backend == "sim":
                why += " (the daemon runs the simulated NIC)"
            elif self.kernel_config:
                # a software device's node is no hardware vDPA
                why += " (pool %s takes no PF: the kernel backend runs for the software vDPA path)" % SIM_POOL
            avail = False
        else:
            why, avail = None, True
        self.meta["host"] = {"backend": backend, "vhost_vdpa_devices": nodes, "kernel": platform.release(),
                             "qemu_accel": "tcg" if not os.path.exists("/dev/kvm") else "kvm-capable host, guests use TCG"}
        self.meta["vdpa_available"] = avail
        self.meta["vdpa_reason"] = why
        self.sriov_facts(status)
        ok, why, check = self.software_host
        if ok:
            ok, why, check = software.daemon(status, check, daemon_error=self.software_error)
        self.meta["software_available"] = ok
        self.meta["software_reason"] = why
        self.meta["software_check"] = check

    # --- the run -------------------------------------------------------------

    def rewrite_args(self):
        """vdpactl rewrite's arguments for this host: network2 keeps its own
        decision (accelerated only with vDPA), network3 and network4 are
        accelerated whenever they are in the guests. With SR-IOV or software
        vDPA but no vDPA, network2's pool is taken to be full, so that it
        falls back as it would alone."""
        if self.meta.get("sriov_available") or self.meta.get("software_available"):
            if self.meta["vdpa_available"] or not self.vdpa_pool:
                return ["--to", "accelerated"]
            return ["--to", "accelerated", "--capacity", "%s=0" % self.vdpa_pool]
        return ["--to", "accelerated" if self.meta["vdpa_available"] else "portable"]

    def nics(self, g):
        """(mac, ip, network) of a guest's NICs, in PCI order: network3's
        only where the SR-IOV path runs."""
        out = [(g["vnic"][0], g["vnic"][1], NET1["name"]), (g["vdpa"][0], g["vdpa"][1], NET2["name"])]
        if self.meta.get("sriov_available"):
            out.append((g["sriov"][0], g["sriov"][1], NET3["name"]))
        if self.meta.get("software_available"):
            out.append((g["software"][0], g["software"][1], NET4["name"]))
        return out

    def run_bound(self):
        """The seconds after which the client kills one iperf3 run: the
        test, and a minute for its setup and results (--slow times)."""
        return (self.args.time + 60) * self.args.slow

    def domain(self, g, kernel, initrd, tests=None):
        nics = self.nics(g)
        va = {"role": g["role"], "ip": ",".join("%s/24" % n[1] for n in nics)}
        if tests:
            va.update(peer=GUESTS["vm1"]["vnic"][1], tests=",".join(tests), time=self.args.time, bound=self.run_bound())
        xml = domain_xml(g["domain"], kernel, initrd, guest_cmdline(g["domain"], **va), [n[0] for n in nics], bridge=BRIDGE)
        xml = with_intent(xml, g["uuid"], [(n[0], n[2]) for n in nics])
        env = dict(os.environ, VDPA_ALLOCATOR_RUN_DIR=self.run_dir)
        argv = [VDPACTL, "rewrite"] + self.rewrite_args() + ["--config", self.confdir, "-"]
        r = subprocess.run(argv, input=xml, capture_output=True, text=True, env=env, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(argv[1:]), r.stderr))
        return r.stdout

    def start_domain(self, name, xml):
        self.lv.define(xml)
        if os.path.exists(serial_path(name)):
            os.unlink(serial_path(name))
        self.lv.virsh("start", name, timeout=120 * self.args.slow)

    def wait_marker(self, name, marker, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(serial_path(name), errors="replace") as f:
                    text = f.read()
            except FileNotFoundError:
                text = ""
            if re.search(re.escape(marker) + ".*\n", text):
                return text
            time.sleep(0.1)
        raise TimeoutError("%s: no %s in %d s:\n%s" % (name, marker, timeout, text[-3000:]))

    def software_line(self):
        """The software vDPA path in one line: where it runs, or why not."""
        return "network4 %s, vDPA (software): %s" % (
            NET4["name"], "VLAN %d, VDUSE devices of pool %s on %s" % (NET4["vlan"], software.POOL, SOFT_BRIDGE)
            if self.meta["software_available"] else self.meta["software_reason"])

    def show(self, title, argv):
        print("\n--- %s (while the guests run) ---" % title)
        print(run(argv, check=False).stdout.rstrip())
        sys.stdout.flush()

    def run_matrix(self, kernel, initrd, form):
        t = self.args.time
        vm1, vm2 = GUESTS["vm1"], GUESTS["vm2"]
        # (kind, vm1's address) per path
        n2kind = "vdpa" if form == "accelerated" else "vdpa-fallback"
        paths = [("vnic", vm1["vnic"][1]), (n2kind, vm1["vdpa"][1])]
        if self.meta.get("sriov_available"):
            paths.append(("sriov", vm1["sriov"][1]))
        if self.meta.get("software_available"):
            paths.append(("vdpa-software", vm1["software"][1]))
        tests = ["ping@%s" % a for _, a in paths]
        # repeats go round the whole matrix, so that a slow moment of the
        # host falls on every path alike rather than on one path's runs
        for n in range(1, self.args.repeat + 1):
            for name in rep.TEST_NAMES:
                tests += ["%s@%s" % (run_name(name, n, self.args.repeat), a) for _, a in paths]
        t0 = time.monotonic()
        self.start_domain(vm1["domain"], self.domain(vm1, kernel, initrd))
        self.wait_marker(vm1["domain"], "VA-GUEST-READY", 120 * self.args.slow)
        self.start_domain(vm2["domain"], self.domain(vm2, kernel, initrd, tests))
        self.wait_marker(vm2["domain"], "VA-GUEST-READY", 120 * self.args.slow)
        self.meta["boot_seconds"] = round(time.monotonic() - t0, 1)
        self.meta["ovs_ports"] = self.ovs_ports()
        self.meta["leases"]["during"] = leases()
        if self.args.show:
            self.show("vdpactl status", [VDPACTL, "status"])
            self.show("vdpactl lease list", [VDPACTL, "lease", "list"])
            self.show("virsh list", ["virsh", "-c", "qemu:///system", "list"])
            if self.ovs:
                self.show("ovs-vsctl show", ["ovs-vsctl", "show"])
        # follow the client's console: sample both QEMUs' CPU time, and the
        # software devices' relays', at each test's start and end markers
        pids = [qemu_pid(vm1["domain"]), qemu_pid(vm2["domain"])] + sorted(relay_processes())
        self.meta["relays"] = len(pids) - 2
        cpu = {}
        started = {}
        seen = 0
        deadline = time.monotonic() + (120 + len(tests) * (t + 15)) * self.args.slow
        # one test's most: the client's wait for its path to answer (30
        # pings), two bounded runs, 30 s of a busy server
        stall_limit = 2 * (self.run_bound() + 1) + 90 * self.args.slow
        progress, size = time.monotonic(), 0
        while True:
            with open(serial_path(vm2["domain"]), errors="replace") as f:
                text = f.read()
            # the console's growth, not its unread part: a last line
            # without its newline stays unread however long it waits
            if len(text) != size:
                progress, size = time.monotonic(), len(text)
            for m in re.finditer(r"VA-IPERF3-(START|BEGIN) test=(\S+)[^\n]*\n", text[seen:]):
                now = [proc_cpu_seconds(p) for p in pids if p]
                total = sum(now) if now and None not in now else None
                if m.group(1) == "START":
                    started[m.group(2)] = total
                    log("running %s" % m.group(2))
                elif started.get(m.group(2)) is not None and total is not None:
                    cpu[m.group(2)] = total - started[m.group(2)]
            cut = text.rfind("\n") + 1
            seen = max(seen, cut)
            if "VA-GUEST-DONE" in text[:cut]:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the client did not finish in %d s:\n%s" % (deadline - t0, text[-3000:]))
            if time.monotonic() - progress > stall_limit:
                raise TimeoutError("the client printed nothing for %d s:\n%s" % (stall_limit, text[-3000:]))
            time.sleep(0.05)
        self.meta["matrix_seconds"] = round(time.monotonic() - t0, 1)
        self.meta["pings"] = {m.group(1): int(m.group(2)) for m in re.finditer(r"VA-PING-END test=(\S+) rc=(\d+)", text)}
        # runs the client ran twice, and what failed the first time
        self.meta["retried"] = [{"test": m.group(1), "reason": m.group(2)}
                                for m in re.finditer(r"VA-IPERF3-RETRY test=(\S+) (.*?) name=\S+$", text, re.M)]
        with open(os.path.join(self.args.out, "vm2-console.log"), "w") as f:
            f.write(text)
        # the server's, for a path that stopped answering mid-run
        with contextlib.suppress(OSError), open(serial_path(vm1["domain"]), "rb") as src, \
                open(os.path.join(self.args.out, "vm1-console.log"), "wb") as f:
            f.write(src.read())
        docs = parse_iperf3(text)
        results = {}
        for name in rep.TEST_NAMES:
            for kind, addr in paths:
                runs = []
                for n in range(1, self.args.repeat + 1):
                    key = "%s@%s" % (run_name(name, n, self.args.repeat), addr)
                    if key in docs:
                        rc, doc = docs[key]
                        runs.append({"rc": rc, "doc": doc, "cpu_seconds": cpu.get(key)})
                if runs:
                    results.setdefault(name, {})[kind] = runs
        return results

    def ovs_ports(self):
        if not self.ovs:
            return []
        r = run(["ovs-vsctl", "--format=json", "--", "--columns=name,tag", "list", "Port"], check=False)
        if r.returncode != 0:
            return []
        ports = []
        for name, tag in json.loads(r.stdout)["data"]:
            ports.append({"name": name, "tag": tag if isinstance(tag, int) else None})
        return sorted(ports, key=lambda p: p["name"])

    def probe_ping(self, ns, dst):
        """A probe's ping: 2 of 2 s, times --slow (a guest nested under
        TCG may answer its first ARP later than that; one answer reaches)."""
        n = 2 * self.args.slow
        return run(["ip", "netns", "exec", ns, "busybox", "ping", "-c", str(n), "-W", "2", dst], check=False,
                   timeout=15 * n)

    def isolation(self):
        """Veth ports on the OVS bridge, one per probe, each in a network
        namespace of its own: a port on one VLAN pings a guest address on the
        other VLAN (same subnet, so only the tag can stop it) and must not get
        through; the same probe on the guest's own VLAN must."""
        vm1 = GUESTS["vm1"]
        probes = [
            (NET1["vlan"], "192.167.0.250/24", vm1["vnic"][1], True),
            (NET2["vlan"], "192.169.0.250/24", vm1["vdpa"][1], True),
            (NET1["vlan"], "192.169.0.251/24", vm1["vdpa"][1], False),
            (NET2["vlan"], "192.167.0.251/24", vm1["vnic"][1], False),
        ]
        self.bind_private("/run/netns", "netns")
        out = []
        for i, (vlan, src, dst, expect) in enumerate(probes):
            ns, outer, inner = "va-iso%d" % i, "va-iso%do" % i, "va-iso%di" % i
            run(["ip", "netns", "add", ns])
            run(["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
            run(["ip", "link", "set", inner, "netns", ns])
            run(["ovs-vsctl", "--timeout=10", "add-port", BRIDGE, outer, "tag=%d" % vlan])
            run(["ip", "link", "set", outer, "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", ns, "addr", "add", src, "dev", inner])
            run(["ip", "-n", ns, "link", "set", inner, "up"])
            r = self.probe_ping(ns, dst)
            reached = r.returncode == 0
            out.append({"port_vlan": vlan, "src": src, "dst": dst, "dst_vlan": NET1["vlan"] if dst == vm1["vnic"][1] else NET2["vlan"],
                        "expect_reach": expect, "reached": reached})
            log("isolation: VLAN %d port %s -> %s: %s (expected %s)" % (vlan, src, dst, "reached" if reached else "no answer",
                                                                         "reach" if expect else "no answer"))
        return {"probes": out, "ok": all(p["reached"] == p["expect_reach"] for p in out)}

    def software_isolation(self):
        """The same probes on the software NICs' bridge, in the initial
        network namespace: a port in their VLAN pings vm1's software NIC,
        one in network1's VLAN (same subnet) must not reach it."""
        vm1 = GUESTS["vm1"]
        probes = [(NET4["vlan"], "192.172.0.250/24", vm1["software"][1], True),
                  (NET1["vlan"], "192.172.0.251/24", vm1["software"][1], False)]
        if not self.ovs:
            self.bind_private("/run/netns", "netns")
        out = []
        for i, (vlan, src, dst, expect) in enumerate(probes):
            ns, outer, inner = "va-swiso%d" % i, "va-swiso%do" % i, "va-swiso%di" % i
            run(["ip", "netns", "add", ns])
            try:
                run(self.innet + ["ip", "link", "add", outer, "type", "veth", "peer", "name", inner])
                run(self.innet + ["ip", "link", "set", inner, "netns", ns])
                run(self.innet + ["ip", "link", "set", outer, "master", SOFT_BRIDGE])
                run(self.innet + ["bridge", "vlan", "add", "dev", outer, "vid", str(vlan), "pvid", "untagged"])
                run(self.innet + ["bridge", "vlan", "del", "dev", outer, "vid", "1"])
                run(self.innet + ["ip", "link", "set", outer, "up"])
                run(["ip", "-n", ns, "link", "set", "lo", "up"])
                run(["ip", "-n", ns, "addr", "add", src, "dev", inner])
                run(["ip", "-n", ns, "link", "set", inner, "up"])
                r = self.probe_ping(ns, dst)
            finally:
                run(self.innet + ["ip", "link", "del", outer], check=False)
                run(["ip", "netns", "del", ns], check=False)
            reached = r.returncode == 0
            out.append({"port_vlan": vlan, "src": src, "dst": dst, "dst_vlan": NET4["vlan"], "expect_reach": expect,
                        "reached": reached})
            log("isolation: %s VLAN %d port %s -> %s: %s (expected %s)" % (
                SOFT_BRIDGE, vlan, src, dst, "reached" if reached else "no answer", "reach" if expect else "no answer"))
        return {"probes": out, "ok": all(p["reached"] == p["expect_reach"] for p in out)}

    def main(self):
        args = self.args
        t_start = time.monotonic()
        os.makedirs(args.out, exist_ok=True)
        # every client here uses the private bus at the standard path, as
        # the hook must: an inherited address (the demo's bus) would win
        for k in [k for k in os.environ if k.startswith("DBUS_") or k.startswith("LIBVIRT_")]:
            del os.environ[k]
        reason = skip_reason()
        if reason:
            log("skipped: " + reason)
            return 77
        kernel, initrd = build_guest()
        self.lv = Libvirt(hooks={"50-vdpa-allocator": HOOK})
        self.lv.start()
        ok = False
        try:
            try:
                self.start_ovs()
                bridge_note = "Open vSwitch, userspace (netdev) datapath, VLAN tags set by libvirt's <vlan>"
            except Exception as e:
                log("Open vSwitch did not start (%s); a Linux bridge without VLANs instead" % e)
                self.meta["ovs_error"] = str(e)
                self.start_linux_bridge()
                bridge_note = "untagged: this host carries no VLANs (Linux bridge, Open vSwitch failed)"
            self.software_host = software.host(outer_netns=outer_netns(), config=args.config)
            self.innet = []
            if self.software_host[0]:
                self.innet = ["nsenter", "--net=" + outer_netns()]
                run(self.innet + ["ip", "link", "add", SOFT_BRIDGE, "type", "bridge", "vlan_filtering", "1"])
                run(self.innet + ["ip", "link", "set", SOFT_BRIDGE, "up"])
            self.write_config()
            self.start_daemon()
            self.host_facts()
            form = "accelerated" if self.meta["vdpa_available"] else "portable"
            self.meta["networks"] = {
                "network1": dict(NET1, bridge=BRIDGE, bridge_type="ovs" if self.ovs else "linux", tagged=self.ovs, form="virtio"),
                "network2": dict(NET2, bridge=BRIDGE, bridge_type="ovs" if self.ovs else "linux", tagged=self.ovs,
                                 form="accelerated" if form == "accelerated" else "fallback"),
                "note": bridge_note,
            }
            if not self.ovs:
                for n in ("network1", "network2"):
                    self.meta["networks"][n]["vlan"] = None
            if self.meta["sriov_available"]:
                # the VF's VLAN is set on the PF (VST), whatever the bridge
                self.meta["networks"]["network3"] = dict(NET3, vlan=self.sriov_vlan, bridge="vdpa-allocator-%s" % self.sriov_pool,
                                                         bridge_type="hostdev", tagged=self.sriov_vlan is not None,
                                                         form="accelerated")
            if self.meta["software_available"]:
                self.meta["networks"]["network4"] = dict(NET4, bridge=SOFT_BRIDGE, bridge_type="linux", tagged=True,
                                                         form="accelerated")
            self.meta["guests"] = {k: {"domain": g["domain"], "role": g["role"], "vnic": {"mac": g["vnic"][0], "ip": g["vnic"][1]},
                                       "network2_nic": {"mac": g["vdpa"][0], "ip": g["vdpa"][1]}} for k, g in GUESTS.items()}
            if self.meta["sriov_available"]:
                for k, g in GUESTS.items():
                    self.meta["guests"][k]["network3_nic"] = {"mac": g["sriov"][0], "ip": g["sriov"][1]}
            if self.meta["software_available"]:
                for k, g in GUESTS.items():
                    self.meta["guests"][k]["network4_nic"] = {"mac": g["software"][0], "ip": g["software"][1]}
            self.meta["params"] = {"time_s": args.time, "repeats": args.repeat, "direction": "vm2 (client) -> vm1 (server); tcp5r: vm1 -> vm2",
                                   "tests": rep.TEST_NAMES}
            self.meta["leases"] = {"before": leases()}
            log("backend %s; network2 in its %s form%s; bridge: %s" % (
                self.meta["host"]["backend"], form, "" if form == "accelerated" else " (" + self.meta["vdpa_reason"] + ")",
                bridge_note))
            log("network3 (SR-IOV VF): %s" % ("on pool %s, VFs %s" % (self.sriov_pool, " ".join(self.meta["sriov_check"]["vfs"]))
                                             if self.meta["sriov_available"] else self.meta["sriov_reason"]))
            if self.meta["software_available"]:
                # where not, the reason is said once, with the results
                log(self.software_line())
            results = self.run_matrix(kernel, initrd, form)
            self.meta["isolation"] = self.isolation() if self.ovs else {"probes": [], "ok": None,
                                                                        "note": "untagged: this host carries no VLANs"}
            if self.meta["software_available"]:
                self.meta["isolation"]["software"] = self.software_isolation()
            for g in GUESTS.values():
                self.lv.virsh("destroy", g["domain"], check=False)
            # libvirt runs the hook's release after destroy returns; give it
            # a moment before reading the leases back
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(leases()) > len(self.meta["leases"]["before"]):
                time.sleep(0.2)
            for g in GUESTS.values():
                self.lv.virsh("undefine", g["domain"], check=False)
            self.meta["leases"]["after"] = leases()
            self.meta["leases"]["returned"] = self.meta["leases"]["after"] == self.meta["leases"]["before"]
            self.meta["domains_left"] = self.lv.virsh("list", "--all", "--name").stdout.split()
            self.meta["wall_time_s"] = round(time.monotonic() - t_start, 1)
            report = rep.build_report(results, self.meta)
            jpath = os.path.abspath(os.path.join(args.out, "pairbench.json"))
            spath = os.path.abspath(os.path.join(args.out, "pairbench.svg"))
            report["outputs"] = {"json": jpath, "svg": spath}
            rep.write_all(report, jpath, spath)
            text = rep.table(report)
            with open(os.path.join(args.out, "pairbench.md"), "w") as f:
                f.write(text)
            print("\nPaired-guest benchmark (%s s per test, %s; guests under TCG; host backend %s)" % (
                args.time, "one run each" if args.repeat == 1 else "%d runs each: the median, and (min-max)" % args.repeat,
                self.meta["host"]["backend"]))
            print("network1 %s VLAN %s, network2 %s VLAN %s: %s" % (
                NET1["name"], self.meta["networks"]["network1"]["vlan"], NET2["name"], self.meta["networks"]["network2"]["vlan"], bridge_note))
            n3 = self.meta["networks"].get("network3")
            print("network3 %s: %s" % (NET3["name"], "VLAN %s, VFs of pool %s passed through" % (n3["vlan"], self.sriov_pool)
                                       if n3 else self.meta["sriov_reason"]))
            print(self.software_line())
            print(text)
            if self.meta.get("retried"):
                print("run again: %s" % "; ".join("%s (%s)" % (r["test"], r["reason"]) for r in self.meta["retried"]))
            vnic_ok = all(r["status"] == "measured" and (r["bytes"] or 0) > 0 for r in report["rows"] if r["kind"] == "vnic")
            iso = self.meta["isolation"]["ok"]
            sw_iso = self.meta["isolation"].get("software", {}).get("ok")
            if sw_iso is False:
                iso = False
            print("leases before/during/after: %d/%d/%d%s, all returned: %s; domains left: %s; VLAN isolation: %s" % (
                len(self.meta["leases"]["before"]), len(self.meta["leases"]["during"]), len(self.meta["leases"]["after"]),
                " (none to make: every NIC ran virtio, network2 its fallback, so the hook leased nothing)"
                if not (self.meta["vdpa_available"] or self.meta.get("sriov_available") or self.meta.get("software_available"))
                else "",
                self.meta["leases"]["returned"], self.meta["domains_left"] or "none",
                {True: "holds", False: "BROKEN", None: "not tested (untagged)"}[self.meta["isolation"]["ok"]]
                + ("" if sw_iso is None else ", on %s %s" % (SOFT_BRIDGE, "holds" if sw_iso else "BROKEN"))))
            print("JSON: %s\nSVG:  %s\nwall time %.1f s" % (jpath, spath, self.meta["wall_time_s"]))
            ok = vnic_ok and self.meta["leases"]["returned"] and not self.meta["domains_left"] and iso is not False
            return 0 if ok else 1
        finally:
            self.lv.stop()
            if self.innet:
                run(self.innet + ["ip", "link", "del", SOFT_BRIDGE], check=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--time", type=int, default=int(os.environ.get("VA_PAIR_TIME", "30")),
                   help="seconds per iperf3 test (the reference: 30; CI: 2)")
    p.add_argument("--repeat", type=int, default=int(os.environ.get("VA_PAIR_REPEAT", "1")), metavar="N",
                   help="run every test N times (1 to 20): the report gives the median and the spread, so that noise "
                        "is not read as a difference")
    p.add_argument("--slow", type=int, default=1, metavar="N",
                   help="multiply the waits for the guests by N (guests nested under TCG in the lab host: 15)")
    p.add_argument("--out", default=os.path.join(BUILDDIR, "pair"), help="where the JSON, SVG and table go")
    p.add_argument("--show", action="store_true", help="print vdpactl status and the leases while the guests run")
    p.add_argument("--config", help="a configuration directory with networks vpc1 and vpc2, and vpc3 (mode=sriov) for the "
                                    "SR-IOV path (default: the simulated NIC, without vpc3)")
    args = p.parse_args()
    if not 1 <= args.repeat <= 20:
        p.error("--repeat must be 1 to 20, not %d" % args.repeat)
    if args.slow < 1:
        p.error("--slow must be at least 1, not %d" % args.slow)
    if args.time < 1:
        p.error("--time must be at least 1, not %d" % args.time)
    args.out = os.path.abspath(args.out)
    sys.exit(Bench(args).main())


if __name__ == "__main__":
    main()
