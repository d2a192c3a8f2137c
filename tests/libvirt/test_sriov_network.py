# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpa-allocator-libvirt-network against a real libvirtd (issue 15): the
hostdev network vdpa-allocator-POOL of a kind=sriov pool, defined, kept
and restarted with exactly the VFs given, removed with none. libvirt 9.0
refuses at define time an <address> that is no SR-IOV VF ("is not an
SR-IOV Virtual Function": it looks for /sys/bus/pci/devices/ADDR/physfn),
so this machine, which has none, gets a tmpfs of VF directories over
/sys/bus/pci/devices in the test's private mount namespace; a domain
taking a real VF from the network runs in the lab tier
(tests/lab/lab-igb.sh). Private mount and network namespaces
(tests/lib/vatest/libvirt.py)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from vatest.libvirt import Libvirt, SkipTier, enter_namespaces, run, skip_reason
from vatest.paths import DAEMON, NETWORK_HELPER
from vatest.simconf import sim_config

enter_namespaces()

NET = "vdpa-allocator-igb"
PCI_DEVICES = "/sys/bus/pci/devices"


# the simulated backend's PF 0000:3b:00.0 has its VFs at 0000:3c:00.N
# (vdpa-allocator/daemon/va-backend-sim.c)
SIM_CONFIG = sim_config(vfs=2, pools={"pt": dict(kind="sriov", match_pci="0000:3b:00.0")})


def fake_vfs():
    """VFs 0000:01:10.{0,2,4} of PF 0000:01:00.0 and the simulated PF's
    0000:3c:00.{0,1}, as far as libvirt looks."""
    run(["mount", "-t", "tmpfs", "-o", "mode=0755", "va-fake-pci", PCI_DEVICES])
    for pf, vfs in (("0000:01:00.0", ["0000:01:10.%d" % fn for fn in (0, 2, 4)]),
                    ("0000:3b:00.0", ["0000:3c:00.0", "0000:3c:00.1"])):
        os.makedirs(os.path.join(PCI_DEVICES, pf))
        for addr in vfs:
            os.makedirs(os.path.join(PCI_DEVICES, addr))
            os.symlink("../" + pf, os.path.join(PCI_DEVICES, addr, "physfn"))


def addresses(xml):
    return re.findall(r"<address type='pci' domain='(0x[0-9a-f]+)' bus='(0x[0-9a-f]+)' slot='(0x[0-9a-f]+)' "
                      r"function='(0x[0-9a-f]+)'/>", xml)


class SriovNetwork(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        fake_vfs()
        cls.lv = Libvirt()
        try:
            cls.lv.start()
        except SkipTier as e:
            raise unittest.SkipTest(str(e))

    @classmethod
    def tearDownClass(cls):
        cls.lv.stop()

    def tearDown(self):
        self.lv.virsh("net-destroy", NET, check=False)
        self.lv.virsh("net-undefine", NET, check=False)

    def helper(self, *args):
        return subprocess.run([NETWORK_HELPER] + list(args), capture_output=True, text=True, timeout=60)

    def ok(self, *args):
        r = self.helper(*args)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), r.stderr)

    def live(self):
        return self.lv.virsh("net-dumpxml", NET).stdout

    def test_defines_starts_and_autostarts(self):
        self.ok("igb", "0000:01:10.0", "0000:01:10.2")
        xml = self.live()
        self.assertIn("<forward mode='hostdev' managed='yes'>", xml)
        self.assertEqual(addresses(xml), [("0x0000", "0x01", "0x10", "0x0"), ("0x0000", "0x01", "0x10", "0x2")])
        info = self.lv.virsh("net-info", NET).stdout
        self.assertRegex(info, r"Active:\s+yes")
        self.assertRegex(info, r"Persistent:\s+yes")
        self.assertRegex(info, r"Autostart:\s+yes")

    def test_same_list_keeps_the_network(self):
        self.ok("igb", "0000:01:10.0")
        uuid = self.lv.virsh("net-uuid", NET).stdout.strip()
        self.ok("igb", "0000:01:10.0")
        self.assertEqual(self.lv.virsh("net-uuid", NET).stdout.strip(), uuid)
        self.assertEqual(len(addresses(self.live())), 1)

    def test_new_list_restarts_a_network_without_ports(self):
        self.ok("igb", "0000:01:10.0", "0000:01:10.2")
        self.ok("igb", "0000:01:10.0", "0000:01:10.2", "0000:01:10.4")
        self.assertEqual([a[3] for a in addresses(self.live())], ["0x0", "0x2", "0x4"])
        # the persistent definition too: what it starts with after a reboot
        inactive = self.lv.virsh("net-dumpxml", "--inactive", NET).stdout
        self.assertEqual(len(addresses(inactive)), 3)
        self.assertRegex(self.lv.virsh("net-info", NET).stdout, r"Active:\s+yes")

    def test_no_vf_removes_it(self):
        self.ok("igb", "0000:01:10.0")
        self.ok("igb")
        self.assertNotIn(NET, self.lv.virsh("net-list", "--all", "--name").stdout.split())
        # nothing to remove is no error
        self.ok("igb")

    def test_usage_errors(self):
        r = self.helper("igb", "01:10.0")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "network vdpa-allocator-igb: '01:10.0' is no PCI address like 0000:01:10.0\n")
        r = self.helper("no/such pool")
        self.assertEqual(r.returncode, 2)
        self.assertNotIn(NET, self.lv.virsh("net-list", "--all", "--name").stdout.split())

    def test_unreachable_libvirt_is_one_line(self):
        r = self.helper("--uri", "qemu:///system?socket=/nonexistent/libvirt-sock", "igb", "0000:01:10.0")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("network vdpa-allocator-igb: "), r.stderr)


    def daemon(self, tmp, env):
        conf = os.path.join(tmp, "etc")
        os.makedirs(conf, exist_ok=True)
        with open(os.path.join(conf, "vdpa-allocator.conf"), "w") as f:
            f.write(SIM_CONFIG)
        env = dict({k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}, **env)
        return subprocess.Popen([DAEMON, "--config", conf, "--state-dir", os.path.join(tmp, "state"), "--run-dir",
                                 os.path.join(tmp, "run")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    def test_daemon_defines_the_pools_network(self):
        """vdpa-allocatord on a kind=sriov pool defines the network with the
        pool's VFs as soon as it has them."""
        tmp = tempfile.mkdtemp(prefix="va-sriovnet-")
        self.addCleanup(shutil.rmtree, tmp, True)
        proc = self.daemon(tmp, {})
        try:
            deadline = time.monotonic() + 30
            while self.lv.virsh("net-info", "vdpa-allocator-pt", check=False).returncode != 0:
                self.assertIsNone(proc.poll(), "the daemon exited")
                self.assertLess(time.monotonic(), deadline, "no network vdpa-allocator-pt after 30 s")
                time.sleep(0.1)
            xml = self.lv.virsh("net-dumpxml", "vdpa-allocator-pt").stdout
            self.assertEqual(addresses(xml), [("0x0000", "0x3c", "0x00", "0x0"), ("0x0000", "0x3c", "0x00", "0x1")])
            self.assertRegex(self.lv.virsh("net-info", "vdpa-allocator-pt").stdout, r"Active:\s+yes")
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
            self.lv.virsh("net-destroy", "vdpa-allocator-pt", check=False)
            self.lv.virsh("net-undefine", "vdpa-allocator-pt", check=False)
        self.assertNotIn("network vdpa-allocator-pt:", out)


if __name__ == "__main__":
    unittest.main(testRunner=unittest.TextTestRunner(stream=sys.stdout, verbosity=2))
