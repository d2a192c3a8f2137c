#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The real daemon with the kernel backend (no [simulate] group) on this
host, which has no ConnectX NIC: it starts, serves, and says why its pools
are empty instead of failing."""

import json
import os
import time
import unittest

from vatest.bus import NAME, PATH, Bus, Daemon, call, dbus_error_name, vdpactl
from gi.repository import GLib  # after vatest.bus: it requires Gio 2.0

CONFIG = """[pool accel]
match-vendor=15b3
match-device=101d
vfs=8
eswitch=switchdev
vlan-method=bridge
uplink-bridge=br-up
max-vqp=4

[network vpc2]
mode=vdpa
pool=accel
vlan=2334
"""


class KernelBackendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.path.isdir("/sys/bus/pci/drivers/mlx5_core") and os.listdir("/sys/bus/pci/drivers/mlx5_core"):
            raise unittest.SkipTest("this host has mlx5 devices: the test expects none")
        cls.bus = Bus()
        cls.daemon = Daemon(cls.bus, config=CONFIG)
        cls.daemon.start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.daemon.stop()
        cls.daemon.remove()
        cls.bus.close()
        assert rc == 0, rc

    def test_backend_is_kernel(self):
        ret = self.bus.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Properties", "Get",
                                      GLib.Variant("(ss)", (NAME, "Backend")), None, 0, -1, None)
        self.assertEqual(ret.unpack()[0], "kernel")
        self.assertIn("kernel backend", self.daemon.read_log())

    def test_pool_without_pf(self):
        pool = json.loads(vdpactl("pool", "show", "accel", "-j", check=True).stdout)
        self.assertEqual(pool["total"], 0)
        self.assertEqual(pool["free"], 0)
        self.assertFalse(pool["healthy"])
        self.assertEqual(pool["health_reason"], "no PF matches pool accel (match-vendor=15b3 match-device=101d)")

    def test_metrics_are_written_before_any_lease(self):
        # the kernel backend makes nothing in the run directory: the
        # daemon makes it (run by hand, without the unit's
        # RuntimeDirectory=), or its metrics waited for the first lease
        path = os.path.join(self.daemon.run_dir, "metrics.prom")
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(os.path.exists(path), self.daemon.read_log())
        self.assertNotIn("writing the metrics", self.daemon.read_log())

    def test_allocate_says_exhausted(self):
        with self.assertRaises(GLib.Error) as cm:
            call(self.bus, "Allocate", ("5b2c4a8e-1f3d-4c6b-9a7e-2d8f0e1c3b4a", "vm", "52:54:00:00:00:01", "vpc2", {}),
                 "(ssssa{sv})")
        self.assertEqual(dbus_error_name(cm.exception), "org.vdpa_allocator.Error.PoolExhausted")
        self.assertIn("accel", cm.exception.message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
