# SPDX-License-Identifier: LGPL-2.1-or-later
"""tests/lib/vatest/labqueue.py, the queue contrib/run-tests.sh's lab
workers drain, on a real meson build of a small project: each test runs
once whatever the number of workers, longest first by the last run's
minutes (an unknown one first), a failure is the status of the worker
that ran it, and a test that left no log fails `finish`."""

import json
import os
import subprocess
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = os.path.join(HERE, "..", "lib", "vatest", "labqueue.py")


class LabQueue(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = tempfile.mkdtemp(prefix="va-labqueue-")
        src = os.path.join(cls.d, "src")
        os.makedirs(src)
        # each test appends its name to ran, after a pause that lets both
        # workers hold one at a time
        with open(os.path.join(src, "meson.build"), "w") as f:
            f.write(textwrap.dedent("""\
                project('q', version: '1')
                sh = find_program('sh')
                foreach t : [['a', 0], ['b', 1], ['c', 0], ['d', 0]]
                  test(t[0], sh, args: ['-c', 'sleep 1; echo @0@ >>"$1"; exit @1@'.format(t[0], t[1]), 'sh',
                       join_paths(meson.project_build_root(), 'ran')], suite: 'lab')
                endforeach
                test('other', sh, args: ['-c', 'exit 1'], suite: 'unit')
                """))
        cls.build = os.path.join(cls.d, "build")
        subprocess.run(["meson", "setup", src, cls.build], check=True, capture_output=True, timeout=120)

    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="cache-", dir=self.d)
        self.queue = tempfile.mkdtemp(prefix="queue-", dir=self.d)
        self.env = dict(os.environ, VA_TEST_CACHE=self.cache)
        for n in ("ran",):
            try:
                os.unlink(os.path.join(self.build, n))
            except FileNotFoundError:
                pass

    def worker(self):
        return subprocess.Popen(["/usr/bin/python3", QUEUE, "work", self.build, self.queue, "lab"], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(self):
        return subprocess.run(["/usr/bin/python3", QUEUE, "finish", self.build, self.queue], env=self.env,
                              capture_output=True, text=True, timeout=60)

    def test_two_workers_run_each_once_longest_first(self):
        with open(os.path.join(self.cache, "lab-times.json"), "w") as f:
            json.dump({"a": 5, "b": 50, "d": 500}, f)
        w1 = self.worker()
        w2 = self.worker()
        out1, out2 = w1.communicate(timeout=120)[0], w2.communicate(timeout=120)[0]
        # b fails: the worker that ran it says so, the other does not
        self.assertEqual(sorted([w1.returncode, w2.returncode]), [0, 1], out1 + out2)
        with open(os.path.join(self.build, "ran")) as f:
            ran = f.read().split()
        self.assertEqual(sorted(ran), ["a", "b", "c", "d"])
        with open(os.path.join(self.queue, "all")) as f:
            self.assertEqual(f.read().split(), ["c", "d", "b", "a"])
        self.assertNotIn("other", out1 + out2)
        r = self.finish()
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.cache, "lab-times.json")) as f:
            times = json.load(f)
        self.assertEqual(sorted(times), ["a", "b", "c", "d"])
        self.assertLess(times["d"], 100)

    def test_a_test_without_its_log_fails_finish(self):
        w = self.worker()
        w.communicate(timeout=120)
        self.assertEqual(self.finish().returncode, 0)
        os.unlink(os.path.join(self.build, "meson-logs", "testlog-lab-c.json"))
        r = self.finish()
        self.assertEqual(r.returncode, 1)
        self.assertIn("lab queue: c left no test log (not run)", r.stderr)

    def test_unreadable_times_are_only_an_order(self):
        with open(os.path.join(self.cache, "lab-times.json"), "w") as f:
            f.write('{"a": "x", "b": [1]')
        w = self.worker()
        w.communicate(timeout=120)
        with open(os.path.join(self.queue, "all")) as f:
            self.assertEqual(sorted(f.read().split()), ["a", "b", "c", "d"])
        self.assertEqual(self.finish().returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
