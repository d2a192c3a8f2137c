#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The test cache (tests/lib/vatest/cache.py, tests/lib/test-cache.sh):
where it is, that a second run waits for the first instead of building over
it, and that eviction removes the entries used longest ago and never one in
use, and the lock files with them, without two runs ever holding the lock of
one entry."""

import fcntl
import os
import signal
import subprocess
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


def shell_locker(name, then=""):
    """sh's argv: test-cache.sh takes NAME's lock, prints "locked", runs THEN."""
    return ["sh", "-c", textwrap.dedent("""\
        set -eu
        die() { echo "$*" >&2; exit 1; }
        va_test_lib=%s
        . "$va_test_lib/test-cache.sh"
        va_cache_open %s
        echo locked
        %s
        """) % (LIB, name, then)]


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
        with cache.lock("lab/kernel"):
            p = subprocess.Popen(shell_locker("lab/kernel"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.5)
            self.assertIsNone(p.poll(), "the script took a lock that was held")
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out, "locked\n")
        self.assertIn("waiting for", err)

    def test_evict_removes_lock_files_with_their_entries(self):
        old = entry(self.root, "deb/aaaa", 4096, 300)
        entry(self.root, "deb/bbbb", 4096, 200)
        for name in ("deb/aaaa", "deb/bbbb", "deb/gone"):
            with cache.lock(name):
                pass
        locks = lambda: sorted(n for n in os.listdir(self.root) if n.startswith(".lock-"))
        self.assertEqual(locks(), [".lock-deb_aaaa", ".lock-deb_bbbb", ".lock-deb_gone"])
        # a build under way: its lock is held, its folder not made yet
        with cache.lock("deb/new"):
            self.assertEqual(cache.evict(max_bytes=5000), [old])
            self.assertEqual(locks(), [".lock-deb_bbbb", ".lock-deb_new"])
        cache.prune(os.path.join(self.root, "deb"), 0)
        cache.evict(max_bytes=5000)
        self.assertEqual(locks(), [])

    def _unlink_when_released(self, name, argv):
        """Holds NAME's lock while ARGV starts waiting for it, then does what
        eviction does (the lock file unlinked while held) and lets go: ARGV
        must end up holding the file at the path, which the test then finds
        taken."""
        path = cache._lock_path(self.root, name)
        with cache.lock(name):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 start_new_session=True)
            time.sleep(1.5)
            os.unlink(path)
        self.assertEqual(p.stdout.readline(), "locked\n")
        with open(path, "a") as f:
            with self.assertRaises(BlockingIOError, msg="the lock at the path is free while the locker runs"):
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)

    def test_a_lock_file_removed_while_waited_for_is_taken_anew(self):
        self._unlink_when_released("lab/kernel", shell_locker("lab/kernel", "sleep 30"))
        python = textwrap.dedent("""\
            import sys, time
            sys.path.insert(0, %r)
            from vatest import cache
            with cache.lock("lab/sim"):
                print("locked", flush=True)
                time.sleep(30)
            """) % LIB
        self._unlink_when_released("lab/sim", ["/usr/bin/python3", "-c", python])


if __name__ == "__main__":
    unittest.main(verbosity=2)
