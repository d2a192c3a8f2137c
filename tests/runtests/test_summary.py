# SPDX-License-Identifier: LGPL-2.1-or-later
"""contrib/run-tests-summary.py, the closing summary CI reads, on test
logs in meson's own form: the counts, the lab tiers' minutes, and why each
failed test failed, from its stderr (where unittest writes) as from its
stdout."""

import json
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = os.path.join(HERE, "..", "..", "contrib", "run-tests-summary.py")

PAIR_STDERR = """setUpClass (__main__.PairBench) ... ERROR

======================================================================
ERROR: setUpClass (__main__.PairBench)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "test_pair.py", line 33, in setUpClass
subprocess.TimeoutExpired: Command '['pairbench.py']' timed out after 420 seconds

Ran 0 tests in 420.021s
FAILED (errors=1)
"""


def entry(name, result, stdout="", stderr="", duration=1.0):
    # the keys meson writes in meson-logs/testlog.json, one object a line
    return {"name": name, "stdout": stdout, "stderr": stderr, "result": result, "returncode": 0 if result == "OK" else 1,
            "duration": duration, "starttime": 0.0, "command": [], "env": {}}


class Summary(unittest.TestCase):
    def run_summary(self, entries, status="0"):
        d = tempfile.mkdtemp(prefix="va-summary-")
        stages = os.path.join(d, "stages")
        with open(stages, "w") as f:
            # 120 s, of which 144 CPU seconds (ticks at 100 Hz): 1.2 cores busy
            f.write("1000 0 Tests (plain)\n1120 14400 Summary\n1121 14500 end\n")
        log = os.path.join(d, "testlog.json")
        with open(log, "w") as f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        return subprocess.run(["/usr/bin/python3", SUMMARY, stages, "", "", "100", "2", status, log,
                               os.path.join(d, "absent.json")], capture_output=True, text=True, timeout=30)

    def test_all_passed(self):
        r = self.run_summary([entry("vdpa-allocator:unit / a", "OK"), entry("vdpa-allocator:lab / lab-sim", "OK", duration=90),
                              entry("vdpa-allocator:unit / b", "SKIP")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2.0 min  busy 1.2  Tests (plain)", r.stdout)
        self.assertIn("1.5 min  lab-sim (OK)", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith("2 passed, 0 failed, 1 skipped"), r.stdout)
        self.assertNotIn("Why", r.stdout)

    def test_why_from_stderr(self):
        """unittest writes to stderr, which meson keeps under "stderr": the
        error header and the exception line (TimeoutExpired too) are shown."""
        r = self.run_summary([entry("vdpa-allocator:pair / pair", "FAIL", stdout="progress\n", stderr=PAIR_STDERR)])
        self.assertEqual(r.returncode, 1)
        why = r.stdout.split("Why vdpa-allocator:pair / pair failed:\n")[1].splitlines()
        self.assertEqual(why[0].strip(), "ERROR: setUpClass (__main__.PairBench)")
        self.assertTrue(why[1].strip().startswith("subprocess.TimeoutExpired: Command"), why)
        self.assertTrue(r.stdout.rstrip().endswith("0 passed, 1 failed, 0 skipped"), r.stdout)

    def test_why_else_last_lines(self):
        out = "".join("line %d\n" % i for i in range(30))
        r = self.run_summary([entry("vdpa-allocator:lab / lab-igb", "TIMEOUT", stdout=out)])
        self.assertEqual(r.returncode, 1)
        why = r.stdout.split("Why vdpa-allocator:lab / lab-igb failed:\n")[1].splitlines()
        self.assertEqual([w.strip() for w in why[:12]], ["line %d" % i for i in range(18, 30)])

    def test_stage_failed_outside_tests(self):
        r = self.run_summary([entry("vdpa-allocator:unit / a", "OK")], status="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("a stage failed outside the tests' logs", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
