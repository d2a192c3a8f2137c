#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""vlan-method=bridge and vlan-method=ovs through the daemon, on a real
VLAN-filtering Linux bridge and on Open vSwitch with the kernel datapath,
run INSIDE the lab host (lab_host.py; issue 7).

A vduse-test pool of three VDUSE devices (tests/lab/vduse-net), each slot's
representor played by a veth named like the slot whose peer sits in a
network namespace of its own, left down as a new representor is. The daemon
(kernel backend, private system bus) leases the slots on VLANs 10, 20 and
10: each port must carry its VLAN (Linux: as PVID untagged and nothing
else; OVS: as the port's tag) and be up, the two namespaces on VLAN 10 must
reach each other and neither reaches the one on VLAN 20, and release must
take the port out of the bridge. Then the vhost_vdpa module is unloaded and
an allocation must fail with its one line and leave no vdpa device behind.

The vdpa netlink family exists only in the initial network namespace, so
the daemon runs there; only the representors' peers move out."""

import functools
import json
import os
import subprocess
import time
import unittest

from vatest import ctl
from vatest.bus import Bus, Daemon
from vatest.lab import link, run, start_ovs, vdpa_devices
from vatest.paths import VDUSE_NET

BRIDGE = "br-lab"
SLOTS = ("vduse0", "vduse1", "vduse2")
UUID = "7ab1e5e0-0000-4000-8000-%012d"

CONFIG = """[pool lab]
type=vduse-test
vlan-method=%s
uplink-bridge=%s
device-group=disk
device-mode=0660
"""

# vdpactl with its output merged, no time bound of its own
vdpactl = functools.partial(ctl.vdpactl, merge=True, timeout=None)

def in_lab_host():
    return os.path.exists("/sys/module/vduse") or run("modprobe", "-n", "vduse", check=False).returncode == 0


def is_up(port):
    return "UP" in link(port).get("flags", [])


def ping(ns, addr, tries=1):
    """One ping of 2 s, up to @tries times: the first packets of a new
    port wait for ARP and, on OVS, for ovs-vswitchd to install the flow,
    which under TCG with the machine busy took more than 2 s (CI, once)."""
    # busybox's: the build machine need not have iputils
    for _ in range(tries):
        if run("ip", "netns", "exec", ns, "busybox", "ping", "-c", "1", "-W", "2", addr, check=False).returncode == 0:
            return True
    return False


class VlanMethod:
    """The cases; a subclass makes the uplink and reads a port's VLANs."""
    METHOD = None

    @classmethod
    def setUpClass(cls):
        if not os.access(VDUSE_NET, os.X_OK):
            raise unittest.SkipTest("no vduse-net at %s" % VDUSE_NET)
        if not in_lab_host():
            raise unittest.SkipTest("not in the lab host: this kernel has no vduse")
        run("modprobe", "-a", "vdpa", "vduse", "vhost_vdpa", "bridge")
        cls.servers = []
        cls.procs = []
        cls.bus = cls.daemon = None
        try:
            cls._set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _set_up(cls):
        cls.make_uplink()
        for i, slot in enumerate(SLOTS):
            ns = "lab-%s" % slot
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", slot, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "-n", ns, "addr", "add", "10.77.0.%d/24" % (i + 1), "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            ready = "/run/%s.ready" % slot
            p = subprocess.Popen([VDUSE_NET, "-n", "va-" + slot, "-r", ready],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cls.servers.append(p)
            deadline = time.monotonic() + 10
            while not os.path.exists(ready):
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("vduse-net va-%s did not come up" % slot)
                time.sleep(0.05)
        cls.bus = Bus()
        cls.daemon = Daemon(cls.bus, config=CONFIG % (cls.METHOD, BRIDGE))
        cls.daemon.start()

    @classmethod
    def tearDownClass(cls):
        # a clean exit on SIGTERM; under VA_DAEMON_WRAPPER=valgrind
        # --error-exitcode=1, also no memory error on the real kernel's paths
        rc = cls.daemon.stop() if cls.daemon else 0
        log = cls.daemon.read_log() if rc else ""
        if cls.bus:
            cls.bus.close()
        for p in cls.servers:
            p.terminate()
            p.wait(10)
        for slot in SLOTS:
            run("ip", "netns", "del", "lab-%s" % slot, check=False)
            run("ip", "link", "del", slot, check=False)
        cls.remove_uplink()
        for p in cls.procs:
            p.terminate()
            p.wait(10)
        if rc:
            raise AssertionError("vdpa-allocatord exited %d:\n%s" % (rc, log[-6000:]))

    def allocate(self, n, vlan):
        out = vdpactl("allocate", "-j", "-u", UUID % n, "-m", "52:54:00:77:00:%02x" % n,
                           "-p", "lab", "--vlan", str(vlan)).stdout
        return json.loads(out)

    def release(self, n):
        vdpactl("release", "-u", UUID % n, "-m", "52:54:00:77:00:%02x" % n)

    def test_1_pool_has_the_vduse_slots(self):
        pools = json.loads(vdpactl("pool", "list", "-j").stdout)["pools"]
        self.assertEqual([(p["name"], p["total"], p["free"], p["healthy"]) for p in pools], [("lab", 3, 3, True)])
        if self.METHOD == "bridge":
            self.assertIsNone(pools[0]["warning"])  # VDUSE: no uplink to miss

    def test_2_vlans_isolate_and_release_removes_ports(self):
        # before any lease no port is in the bridge, and none is up
        for slot in SLOTS:
            self.assertFalse(self.in_uplink(slot))
            self.assertFalse(is_up(slot))
        leases = {n: self.allocate(n, vlan) for n, vlan in ((1, 10), (2, 20), (3, 10))}
        ns = {n: "lab-" + lease["mgmtdev"] for n, lease in leases.items()}
        addr = {n: "10.77.0.%d" % (SLOTS.index(lease["mgmtdev"]) + 1) for n, lease in leases.items()}
        self.assertEqual(sorted(lease["mgmtdev"] for lease in leases.values()), list(SLOTS))
        try:
            for n, vlan in ((1, 10), (2, 20), (3, 10)):
                slot = leases[n]["mgmtdev"]
                self.assertTrue(self.in_uplink(slot))
                self.assertTrue(is_up(slot), slot)
                self.assertEqual(self.port_vlans(slot), [vlan])
                node = leases[n]["chardev"]
                st = os.stat(node)
                self.assertEqual((st.st_mode & 0o7777, st.st_gid), (0o660, 6), node)  # disk is gid 6 on Debian
                self.assertIn("va-" + slot, vdpa_devices())
            for a, b, what in ((1, 3, "VLAN 10 to VLAN 10"), (3, 1, "VLAN 10 to VLAN 10, back")):
                if not ping(ns[a], addr[b], tries=10):
                    self.fail("%s\n%s" % (what, self.state(ns.values())))
            self.assertFalse(ping(ns[1], addr[2]), "VLAN 10 reached VLAN 20")
            self.assertFalse(ping(ns[2], addr[3]), "VLAN 20 reached VLAN 10")
        finally:
            for n in leases:
                self.release(n)
        for n, lease in leases.items():
            self.assertFalse(self.in_uplink(lease["mgmtdev"]), "release left %s in the bridge" % lease["mgmtdev"])
            self.assertNotIn(lease["device"], vdpa_devices())
        self.assertEqual(vdpactl("lease", "list", "-j").stdout.count('"mgmtdev"'), 0)

    def test_3_vhost_vdpa_not_loaded(self):
        run("modprobe", "-r", "vhost_vdpa")
        try:
            r = vdpactl("allocate", "-u", UUID % 9, "-m", "52:54:00:77:00:09", "-p", "lab", "--vlan", "10", check=False)
            self.assertNotEqual(r.returncode, 0)
            lines = r.stdout.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stdout)
            self.assertRegex(lines[0], r"^vdpactl: pool 'lab': vdpa device va-vduse\d: binding to vhost_vdpa: "
                             r"the vhost_vdpa module is not loaded \(modprobe vhost_vdpa\)$")
            # not half made: no device, no lease, the slot free again
            self.assertEqual([d for d in vdpa_devices() if d.startswith("va-")], [])
            self.assertEqual(vdpactl("lease", "list", "-j").stdout.count('"mgmtdev"'), 0)
        finally:
            run("modprobe", "vhost_vdpa")
        # loaded again: the same request succeeds
        lease = self.allocate(9, 10)
        self.assertTrue(os.path.exists(lease["chardev"]))
        self.release(9)

    def state(self, namespaces):
        """What the uplink and the namespaces hold, for a failed ping."""
        cmds = [["ip", "-d", "link", "show", "master", BRIDGE] if self.METHOD == "bridge" else ["ip", "-d", "link"]]
        cmds += self.uplink_state()
        for ns in namespaces:
            cmds += [["ip", "-n", ns, "-s", "link", "show", "eth0"], ["ip", "-n", ns, "neigh"]]
        out = []
        for argv in cmds:
            r = run(*argv, check=False)
            out.append("$ %s\n%s" % (" ".join(argv), r.stdout))
        return "".join(out)


class LinuxBridge(VlanMethod, unittest.TestCase):
    METHOD = "bridge"

    @classmethod
    def make_uplink(cls):
        # a default_pvid other than 1: a joining port becomes an untagged
        # member of VLAN 99, which the daemon must take away again
        run("ip", "link", "add", BRIDGE, "type", "bridge", "vlan_filtering", "1", "vlan_default_pvid", "99")
        run("ip", "link", "set", BRIDGE, "up")

    @classmethod
    def remove_uplink(cls):
        run("ip", "link", "del", BRIDGE, check=False)

    def in_uplink(self, port):
        return link(port).get("master") == BRIDGE

    def uplink_state(self):
        return [["bridge", "vlan", "show"], ["bridge", "fdb", "show", "br", BRIDGE]]

    def port_vlans(self, port):
        # PVID untagged, and nothing else: not the bridge's default_pvid 99
        out = json.loads(run("bridge", "-j", "vlan", "show", "dev", port).stdout or "[]")
        vlans = [v for entry in out for v in entry.get("vlans", [])]
        self.assertTrue(all(v.get("flags") == ["PVID", "Egress Untagged"] for v in vlans), vlans)
        return [v["vlan"] for v in vlans]


class OpenVSwitch(VlanMethod, unittest.TestCase):
    """Open vSwitch with the kernel datapath (the openvswitch module), its
    database and run files on the lab host's tmpfs /run."""
    METHOD = "ovs"

    @classmethod
    def make_uplink(cls):
        start_ovs(cls.procs, BRIDGE)

    @classmethod
    def remove_uplink(cls):
        run("ovs-vsctl", "--timeout=10", "--if-exists", "del-br", BRIDGE, check=False)

    def in_uplink(self, port):
        return run("ovs-vsctl", "port-to-br", port, check=False).stdout.strip() == BRIDGE

    def uplink_state(self):
        return [["ovs-vsctl", "show"], ["ovs-dpctl", "show"], ["ovs-dpctl", "dump-flows"],
                ["ovs-ofctl", "dump-flows", BRIDGE], ["ovs-appctl", "fdb/show", BRIDGE],
                ["ovs-appctl", "upcall/show"], ["sh", "-c", "dmesg | tail -n 30"],
                ["tail", "-n", "40", "/run/openvswitch/ovs-vswitchd.log"]]

    def warning(self):
        return json.loads(vdpactl("pool", "show", "lab", "-j").stdout)["warning"]

    def test_4_hw_offload_off_is_a_warning_until_set(self):
        # the pool serves without hardware offload, and says it is not
        # accelerated then; systemctl reload (SIGHUP) reads OVS again
        self.assertEqual(self.warning(),
                         "vlan-method=ovs: Open vSwitch's other_config:hw-offload is not set, so the representors' traffic goes "
                         "through the host's kernel datapath, not the NIC: ovs-vsctl set Open_vSwitch . "
                         "other_config:hw-offload=true, then restart openvswitch-switch")
        run("ovs-vsctl", "set", "Open_vSwitch", ".", "other_config:hw-offload=true")
        try:
            self.assertTrue(self.daemon.reload(lambda: self.warning() is None),
                            "the warning stayed after hw-offload=true and a reload")
        finally:
            run("ovs-vsctl", "remove", "Open_vSwitch", ".", "other_config", "hw-offload")

    def port_vlans(self, port):
        tag = run("ovs-vsctl", "get", "Port", port, "tag").stdout.strip()
        trunks = run("ovs-vsctl", "get", "Port", port, "trunks").stdout.strip()
        self.assertEqual(trunks, "[]")  # an access port: its tag and nothing else
        return [int(tag)] if tag != "[]" else []


if __name__ == "__main__":
    unittest.main(verbosity=2)
