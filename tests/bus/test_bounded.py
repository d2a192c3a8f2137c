# SPDX-License-Identifier: LGPL-2.1-or-later
"""What reloads and refused callers may cost the daemon (issue 25): memory
that stays flat over reloads, and journal lines and metrics that do not grow
with the calls an unprivileged user makes."""

import os
import re
import time
import unittest

from vatest.bus import Bus, Daemon, call

UUID = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
UNDER_WRAPPER = bool(os.environ.get("VA_DAEMON_WRAPPER"))


def big_config(networks):
    """The bus tier's pool and one network to lease on, and @networks more
    (about 90 bytes each)."""
    text = "[simulate]\npfs=1\nvfs=4\n\n[pool accel]\nmatch-vendor=15b3\nmax-vqp=4\n\n[network vpc2]\nmode=vdpa\npool=accel\nvlan=2334\n"
    for i in range(networks):
        text += "\n[network n%04d]\nmode=virtio\nvlan=%d\nfallback-bridge=br-ovs\nfallback-bridge-type=ovs\n" % (i, 2 + i % 4000)
    return text


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))


class ReloadMemory(unittest.TestCase):
    def setUp(self):
        self.bus = Bus()
        self.addCleanup(self.bus.close)
        self.config = big_config(2400)
        self.daemon = Daemon(self.bus, config=self.config)
        self.daemon.start()
        self.addCleanup(self.daemon.remove)
        self.addCleanup(self.daemon.stop)

    def reloads(self):
        return self.daemon.read_log().count("configuration reloaded")

    def reload(self):
        n = self.reloads()
        self.assertTrue(self.daemon.reload(lambda: self.reloads() > n, timeout=300 if UNDER_WRAPPER else 30))

    def lease_and_release(self, mac):
        call(self.bus, "Allocate", (UUID, "vm1", mac, "vpc2", {}), "(ssssa{sv})")
        self.assertEqual(len(call(self.bus, "ListLeases")[0]), 1)
        call(self.bus, "Release", (UUID, mac), "(ss)")

    def test_rss_flat_over_100_reloads(self):
        # issue 25 (11): every reload kept the configuration it replaced
        self.assertGreater(len(self.config), 200 * 1024)
        count = 10 if UNDER_WRAPPER else 100  # valgrind: what it reads after reloads, not RSS
        warm = min(10, count)
        for i in range(warm):
            self.reload()
        before = rss_kib(self.daemon.proc.pid)
        for i in range(warm, count):
            self.reload()
            if i % 10 == 0:
                # the allocator reads the configuration of the last reload
                self.lease_and_release("52:54:00:00:01:%02x" % (i // 10))
        after = rss_kib(self.daemon.proc.pid)
        self.lease_and_release("52:54:00:00:02:01")
        print("# RSS after %d reloads of a %d-byte configuration: %d KiB; after %d: %d KiB" % (
            warm, len(self.config), before, count, after))
        if not UNDER_WRAPPER:
            # a kept copy is about 0.5 MiB here: 90 of them would be 45 MiB
            self.assertLess(after - before, 4096, "RSS grew by %d KiB over %d reloads" % (after - before, count - warm))
        # under valgrind (VA_DAEMON_WRAPPER), its verdict
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log()[-4000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
