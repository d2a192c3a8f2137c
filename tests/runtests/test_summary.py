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

    def test_why_kernel_report(self):
        """A lab host whose kernel panicked leaves no status; lab-host prints
        the console's tail and the kernel's report (vatest.labhost), and the
        summary shows where it faulted and the call trace, not the register
        dump the console ends with (stop 39's CI showed only the latter)."""
        import sys
        sys.path.insert(0, os.path.join(HERE, "..", "lib"))
        from vatest.labhost import kernel_report
        console = ["[    1.0] Linux version 6.1.0\n"]
        console += ["[   33.6] %s\n" % l for l in (
            "BUG: kernel NULL pointer dereference, address: 0000000000000008",
            "#PF: supervisor read access in kernel mode",
            "CPU: 1 PID: 0 Comm: swapper/1 Not tainted 6.1.0 #1",
            "RIP: 0010:vduse_vq_kick+0x12/0x40 [vduse]",
            "Code: 00 11 22 33",
            "RSP: 0018:ffffc9000009bd80 EFLAGS: 00000046",
            "RAX: ffff8880042d0f40 RBX: ffff88807dc36040 RCX: ffff8880042d0000",
            "R10: 0000000000000001 R11: ffffffff82c5a380 R12: ffffffff82c10940",
            "FS:  0000000000000000(0000) GS:ffff88807dc00000(0000) knlGS:0000000000000000",
            "CR2: 0000000000000008 CR3: 0000000002c22000 CR4: 00000000000006f0",
            "Call Trace:", " <IRQ>", " __handle_irq_event_percpu+0x4a/0x180")]
        console += ["[   33.6]  frame_%d+0x1/0x2\n" % i for i in range(14)]
        console += ["[   33.6] Kernel panic - not syncing: Fatal exception in interrupt\n"]
        report = kernel_report("".join(console))
        self.assertEqual(report[0], "lab-host: kernel: [   33.6] BUG: kernel NULL pointer dereference, "
                         "address: 0000000000000008")
        self.assertNotIn("Linux version", "\n".join(report))
        self.assertFalse([l for l in report if "RAX:" in l or "CR2:" in l or "Code:" in l], report)
        self.assertEqual(kernel_report("[ 1.0] all well\n"), [])
        out = "".join(console[-5:]) + "lab-host: the command left no status\n" + "\n".join(report) + "\n"
        r = self.run_summary([entry("vdpa-allocator:lab / lab-daemon", "FAIL", stderr=out)])
        why = [w.strip() for w in r.stdout.split("Why vdpa-allocator:lab / lab-daemon failed:\n")[1].splitlines()]
        self.assertIn("lab-host: kernel: [   33.6] RIP: 0010:vduse_vq_kick+0x12/0x40 [vduse]", why)
        self.assertIn("lab-host: kernel: [   33.6]  __handle_irq_event_percpu+0x4a/0x180", why)

    def test_lab_kernel_panic_named(self):
        import sys
        sys.path.insert(0, os.path.join(HERE, "..", "lib"))
        from vatest.labhost import PANIC_RETRY
        r = self.run_summary([entry("vdpa-allocator:lab / lab-daemon", "OK", stderr=PANIC_RETRY + " booting again\n"),
                              entry("vdpa-allocator:lab / lab-sim", "OK")])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Lab kernel panics (the tier's lab host booted again; the kernel's report is in its log): "
                      "lab-daemon\n", r.stdout)

    def test_stage_failed_outside_tests(self):
        r = self.run_summary([entry("vdpa-allocator:unit / a", "OK")], status="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("a stage failed outside the tests' logs", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
