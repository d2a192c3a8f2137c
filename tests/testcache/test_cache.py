#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The test cache (tests/lib/vatest/cache.py, tests/lib/test-cache.sh):
where it is, that a second run waits for the first instead of building over
it, and that eviction removes the entries used longest ago and never one in
use."""

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from vatest import cache
from vatest.paths import SRCDIR

LIB = os.path.join(SRCDIR, "tests", "lib")


def entry(root, rel, size, age):
    d = os.path.join(root, rel)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "blob"), "wb") as f:
        f.write(b"x" * size)
    with open(os.path.join(d, "stamp"), "w") as f:
        f.write("key\n")
    t = time.time() - age
    os.utime(os.path.join(d, "stamp"), (t, t))
    return d


class Cache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="va-cache-")
        self.root = self.tmp.name
        self.env = mock.patch.dict(os.environ, {"VA_TEST_CACHE": self.root})
        self.env.start()

    def tearDown(self):
        self.env.stop()
        self.tmp.cleanup()

    def test_the_folder_is_the_variables_else_the_systems_else_the_trees(self):
        self.assertEqual(cache.cache_dir(), self.root)
        del os.environ["VA_TEST_CACHE"]
        with mock.patch.object(cache, "SYSTEM_DIR", os.path.join(self.root, "system")):
            self.assertEqual(cache.cache_dir(), os.path.join(self.root, "system"))
        # a system folder that cannot be made: the tree's
        with mock.patch.object(cache, "SYSTEM_DIR", "/proc/no-such/cache"):
            self.assertEqual(cache.cache_dir(), os.path.join(SRCDIR, "tests", "cache"))

    def test_evict_removes_the_oldest_used_until_it_fits(self):
        old = entry(self.root, "guest", 4096, 300)
        mid = entry(self.root, "lab/kernel", 4096, 200)
        new = entry(self.root, "lab/sim", 4096, 100)
        cache.used(old)  # used now: the newest
        gone = cache.evict(max_bytes=9000)
        self.assertEqual(gone, [mid])
        self.assertTrue(os.path.isdir(old) and os.path.isdir(new))
        self.assertEqual(cache.evict(max_bytes=9000), [])

    def test_evict_passes_over_an_entry_in_use(self):
        busy = entry(self.root, "deb/aaaa", 4096, 300)
        idle = entry(self.root, "deb/bbbb", 4096, 200)
        with cache.lock("deb/aaaa"):
            gone = cache.evict(max_bytes=5000)
        self.assertEqual(gone, [idle])
        self.assertTrue(os.path.isdir(busy))

    def test_prune_keeps_the_newest(self):
        ds = [entry(self.root, "deb/%d" % i, 10, 100 * (5 - i)) for i in range(5)]
        cache.prune(os.path.join(self.root, "deb"), 2)
        self.assertEqual([os.path.isdir(d) for d in ds], [False, False, False, True, True])

    def test_a_second_builder_waits_for_the_first(self):
        # the shell side's lock and the Python side's are the same file
        script = textwrap.dedent("""\
            set -eu
            die() { echo "$*" >&2; exit 1; }
            va_test_lib=%s
            . "$va_test_lib/test-cache.sh"
            va_cache_open lab/kernel
            echo locked
            """) % LIB
        with cache.lock("lab/kernel"):
            p = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)
            self.assertIsNone(p.poll(), "the script took a lock that was held")
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out, "locked\n")
        self.assertIn("waiting for", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
