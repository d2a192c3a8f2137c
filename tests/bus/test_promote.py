# SPDX-License-Identifier: LGPL-2.1-or-later
"""Automatic promotion (issue 28, item 4): a network with promote=true asks
the daemon to move a NIC on a software vDPA device onto hardware when a
hardware slot of its pool frees. The real daemon on the simulated NIC over
a private bus, vdpa-allocator-libvirt-swap --promote against libvirt's
test driver holding the running domain. The test driver's hot-plug is not
QEMU's: what is proven here is the daemon's side (when it promotes, which
NIC, one at a time, no loop, the journal); the swap itself on a real
guest is the lab's (tests/lab/test_lab_software.py)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from vatest.bus import Bus, Daemon, vdpactl
from vatest.paths import DAEMON
from vatest.simconf import sim_config

UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
OTHER = "4dea22b3-1d52-d8f3-2516-782e98ab3fb1"
HW_MAC = "52:54:00:6b:3c:01"
SW_MAC = "52:54:00:6b:3c:02"

CONFIG = sim_config(
    pfs=1, vfs=1, pools={"accel": {"match-vendor": "15b3", "software-slots": 1}},
    networks={"vpc2": {"mode": "vdpa", "pool": "accel", "vlan": 2334, "fallback-bridge": "br0", "promote": "true"}})

# the running domain whose NIC is on the software device, as libvirt's live
# XML shows it (its port path filled in by the test)
DOMAIN = """<domain type='test'>
  <name>soft</name><uuid>%s</uuid><memory>65536</memory><os><type>hvm</type></os>
  <metadata><vdpa:nics xmlns:vdpa="http://vdpa-allocator.org/xmlns/domain/1.0">
    <vdpa:nic mac="%s" network="vpc2"/>
  </vdpa:nics></metadata>
  <devices><interface type='vdpa'><mac address='%s'/><source dev='%%s'/><model type='virtio'/></interface></devices>
</domain>""" % (UUID, SW_MAC, SW_MAC)


def wait_for(pred, timeout=60):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class PromoteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.close()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="va-promote-")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir)
        self.node = os.path.join(self.dir, "node.xml")
        with open(self.node, "w") as f:
            f.write("<node></node>\n")

    def start(self, config=CONFIG):
        self.daemon = Daemon(self.bus, config=config)
        self.daemon.start(libvirt_uri="test://" + self.node)
        self.addCleanup(self.daemon.remove)
        self.addCleanup(self.daemon.stop)
        # the start's reconciliation first: it holds the slots it looks at
        self.assertTrue(wait_for(lambda: "no running domain has a NIC still marked for a swap back" in self.daemon.read_log()),
                        self.daemon.read_log())

    def lease(self, mac):
        for l in json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"]:
            if l["mac"] == mac:
                return l
        return None

    def lines(self, text):
        return [l for l in self.daemon.read_log().splitlines() if text in l]

    def fill(self):
        """The pool's one VF to another domain, the NIC on software."""
        hw = json.loads(vdpactl("allocate", "-u", OTHER, "-m", HW_MAC, "-n", "vpc2", "-j", check=True).stdout)
        self.assertEqual(hw["form"], "hardware", self.daemon.read_log())
        sw = json.loads(vdpactl("allocate", "-u", UUID, "-m", SW_MAC, "-n", "vpc2", "-j", "-d", "soft",
                                check=True).stdout)
        self.assertEqual(sw["form"], "software", self.daemon.read_log())
        with open(self.node, "w") as f:
            f.write("<node>%s</node>\n" % (DOMAIN % sw["port"]))
        return sw

    def test_a_freed_slot_promotes_once_and_a_failure_waits_for_the_next(self):
        self.start()
        sw = self.fill()
        started = "NIC %s of domain soft (%s): a hardware slot of pool accel is free: promoting it from software device %s" % (
            SW_MAC, UUID, sw["device"])
        # no free slot: nothing happens, whatever changes
        vdpactl("pool", "drain", "accel", check=True)
        vdpactl("pool", "undrain", "accel", check=True)
        self.assertEqual(self.lines("promoting it"), [])
        # the VF frees: the daemon runs the helper for the NIC, once
        vdpactl("release", "-u", OTHER, "-m", HW_MAC, check=True)
        self.assertTrue(wait_for(lambda: self.lines(started)), self.daemon.read_log())
        self.assertTrue(wait_for(lambda: self.lines("promoted from") or self.lines("not promoted from")),
                        self.daemon.read_log())
        ended = self.lines("promoted from")
        self.assertEqual(len(ended), 1, ended)
        print("# " + ended[0], file=sys.stderr)
        if "not promoted from" in ended[0]:
            # the test driver refused the hot-plug: the NIC stays on its
            # software device, its lease as it was
            self.assertIn("(not tried again until a hardware lease is released)", ended[0])
            self.assertEqual(self.lease(SW_MAC)["form"], "software")
            # more changes of the pool do not try again: no loop
            for _ in range(3):
                vdpactl("pool", "drain", "accel", check=True)
                vdpactl("pool", "undrain", "accel", check=True)
            vdpactl("reconcile")
            time.sleep(1)
            self.assertEqual(len(self.lines(started)), 1, self.daemon.read_log())
            # the next hardware lease released: tried again, once
            vdpactl("allocate", "-u", OTHER, "-m", HW_MAC, "-n", "vpc2", check=True)
            vdpactl("release", "-u", OTHER, "-m", HW_MAC, check=True)
            self.assertTrue(wait_for(lambda: len(self.lines(started)) == 2), self.daemon.read_log())
            self.assertTrue(wait_for(lambda: len(self.lines("promoted from")) == 2), self.daemon.read_log())
        else:
            self.assertEqual(self.lease(SW_MAC)["form"], "hardware")

    def test_off_by_default(self):
        self.start(CONFIG.replace("promote=true\n", ""))
        self.fill()
        vdpactl("release", "-u", OTHER, "-m", HW_MAC, check=True)
        time.sleep(2)
        self.assertEqual(self.lines("promot"), [])
        self.assertEqual(self.lease(SW_MAC)["form"], "software")


class CheckConfigTest(unittest.TestCase):
    def check(self, config):
        d = Daemon(None, config=config)
        try:
            return subprocess.run([DAEMON, "--check-config", "--config", d.conf_dir], capture_output=True, text=True)
        finally:
            d.remove()

    def test_said_where_set_and_refused_where_nothing_to_promote_to(self):
        r = self.check(CONFIG)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("  network vpc2: mode=vdpa pool=accel vlan=2334 fallback=br0 linux promote=on (software NICs move onto "
                      "hardware by themselves)\n", r.stdout)
        r = self.check(CONFIG.replace("promote=true\n", ""))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("promote", r.stdout)
        r = self.check(CONFIG.replace("software-slots=1\n", ""))
        self.assertEqual(r.returncode, 1)
        self.assertIn("[network vpc2] promote: moves NICs from software vDPA devices onto hardware ones of the same pool, and pool "
                      "'accel' makes no software devices (software-slots=)", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
