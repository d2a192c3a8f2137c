#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Whether QEMU lets a guest with a vhost-vdpa NIC migrate as it is (issues
28 and 29), asked of QEMU itself, run INSIDE a lab host (lab_host.py
--qemu10): Debian 12's QEMU 7.2 (the lab host's root) and Debian 13's QEMU
10 (LAB_QEMU10, build-qemu10.sh), each with `-netdev vhost-vdpa` on a
VDUSE device bound to vhost_vdpa (tests/lab/vduse-net.c, VA_VDUSE_NET) and
guest RAM shared and file-backed, paused before the guest runs (-S).

- QEMU 7.2 registers "Migration disabled: vhost lacks VHOST_F_LOG_ALL
  feature." (query-migrate's blocked-reasons) and refuses `migrate`: what
  `vdpactl domain migrate` reads and why it swaps the NIC on Debian 12.
- QEMU 10 registers no blocker, and the paused guest migrates as it is into
  a second QEMU 10 whose NIC is on a second VDUSE device.

What this does not show: a guest whose driver runs the device. QEMU 8 and
later switch such a device to shadow virtqueues when a migration starts;
that path needs a booted guest and is not run here."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from vatest.lab import wait_until

QEMU72 = "/usr/bin/qemu-system-x86_64"
QEMU10 = os.environ.get("LAB_QEMU10", "")
VDUSE_NET = os.environ.get("VA_VDUSE_NET", "")
BLOCKER_72 = "Migration disabled: vhost lacks VHOST_F_LOG_ALL feature."


class Qmp:
    """One QEMU on its QMP socket."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        wait_until(lambda: self.sock.connect_ex(path) == 0, 30, "QMP socket %s" % path)
        self.sock.settimeout(60)
        self.f = self.sock.makefile("rw")
        json.loads(self.f.readline())  # the greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name, **args):
        """The reply of one command: its "return", or its "error" dict
        under the key "error"."""
        self.f.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.f.flush()
        while True:
            r = json.loads(self.f.readline())
            if "return" in r:
                return r["return"]
            if "error" in r:
                return {"error": r["error"]}

    def close(self):
        self.sock.close()


def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


class VhostVdpaMigration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not QEMU10 or not VDUSE_NET:
            raise unittest.SkipTest("needs LAB_QEMU10 (lab_host.py --qemu10) and VA_VDUSE_NET")
        sh("modprobe", "-a", "vdpa", "vduse", "vhost_vdpa")
        cls.tmp = tempfile.mkdtemp(prefix="va-mig-")
        cls.servers = []
        cls.nodes = {}
        for name in ("mig0", "mig1"):
            ready = os.path.join(cls.tmp, name + ".ready")
            with open(os.path.join(cls.tmp, name + ".log"), "w") as err:
                cls.servers.append(subprocess.Popen([VDUSE_NET, "-n", name, "-r", ready], stderr=err))
            wait_until(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 30, "vduse-net %s" % name)
            sh("vdpa", "dev", "add", "name", name, "mgmtdev", "vduse")
            with open("/sys/bus/vdpa/devices/%s/driver_override" % name, "w") as f:
                f.write("vhost_vdpa")
            with open("/sys/bus/vdpa/drivers_probe", "w") as f:
                f.write(name)
            node = [e for e in os.listdir("/sys/bus/vdpa/devices/" + name) if e.startswith("vhost-vdpa-")]
            cls.nodes[name] = "/dev/" + node[0]
            wait_until(lambda: os.path.exists(cls.nodes[name]), 30, cls.nodes[name])
        cls.qemus = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.qemus:
            p.kill()
            p.wait()
        for name in cls.nodes:
            subprocess.run(["vdpa", "dev", "del", name], timeout=30)
        for p in cls.servers:
            p.terminate()
            p.wait(timeout=30)

    def qemu(self, binary, node, tag, *extra):
        sock = os.path.join(self.tmp, tag + ".qmp")
        with open(os.path.join(self.tmp, tag + ".log"), "w") as err:
            p = subprocess.Popen([binary, "-machine", "q35,accel=tcg,memory-backend=m", "-m", "128",
                                  "-object", "memory-backend-memfd,id=m,size=128M,share=on",
                                  "-netdev", "vhost-vdpa,id=n0,vhostdev=" + node,
                                  "-device", "virtio-net-pci,netdev=n0,id=nic0,mac=52:54:00:29:00:01",
                                  "-display", "none", "-nodefaults", "-S",
                                  "-qmp", "unix:%s,server=on,wait=off" % sock] + list(extra),
                                 stdout=subprocess.DEVNULL, stderr=err)
        self.qemus.append(p)
        return p, Qmp(sock)

    def stop(self, p, q):
        q.cmd("quit")
        q.close()
        p.wait(timeout=60)

    def test_qemu_7_2_blocks_vhost_vdpa(self):
        p, q = self.qemu(QEMU72, self.nodes["mig0"], "q72")
        version = q.cmd("query-version")["qemu"]
        self.assertEqual((version["major"], version["minor"]), (7, 2))
        self.assertEqual(q.cmd("query-migrate").get("blocked-reasons"), [BLOCKER_72])
        r = q.cmd("migrate", uri="exec:cat >/dev/null")
        self.assertEqual(r.get("error", {}).get("desc"), BLOCKER_72)
        self.stop(p, q)

    def test_qemu_10_migrates_vhost_vdpa_as_it_is(self):
        p, q = self.qemu(QEMU10, self.nodes["mig0"], "q10")
        self.assertEqual(q.cmd("query-version")["qemu"]["major"], 10)
        self.assertNotIn("blocked-reasons", q.cmd("query-migrate"))
        state = os.path.join(self.tmp, "state")
        self.assertEqual(q.cmd("migrate", uri="exec:cat >%s" % state), {})
        t0 = time.monotonic()
        wait_until(lambda: q.cmd("query-migrate").get("status") in ("completed", "failed"), 120, "migration")
        m = q.cmd("query-migrate")
        print("lab: QEMU 10 migrated the paused guest (%d bytes) in %.1f s" % (os.path.getsize(state),
                                                                               time.monotonic() - t0), file=sys.stderr)
        self.assertEqual(m["status"], "completed", m)
        self.stop(p, q)
        # the destination: its NIC on the second VDUSE device
        p2, q2 = self.qemu(QEMU10, self.nodes["mig1"], "q10in", "-incoming", "exec:cat %s" % state)
        wait_until(lambda: q2.cmd("query-migrate").get("status") in ("completed", "failed"), 120, "incoming")
        self.assertEqual(q2.cmd("query-migrate")["status"], "completed")
        self.assertIn(q2.cmd("query-status")["status"], ("paused", "prelaunch"))
        nics = [d for d in q2.cmd("qom-list", path="/machine/peripheral") if d["name"] == "nic0"]
        self.assertEqual(len(nics), 1)
        self.stop(p2, q2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
