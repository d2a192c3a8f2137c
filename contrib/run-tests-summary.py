#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The closing summary of contrib/run-tests.sh, in the form CI reads: each
stage's minutes and the cores it kept busy, the run's CPU time and the lab
stream's share, the minutes of each lab tier, why each failed test failed,
and one closing line over every test run.

  run-tests-summary.py STAGES LABTIMES LABCPU HZ NCPU STATUS TESTLOG.json...

STAGES: lines "EPOCH BUSY-TICKS NAME", one per stage start, the last one
"Summary"; LABTIMES: the lab stream's start and end epochs; LABCPU: its
CPU seconds; STATUS: the stages' own exit status (non-zero: one failed
outside the tests). Exits 1 when any test or stage failed."""
import json, os, re, sys

# what lab-host prints of the lab kernel (tests/lib/vatest/labhost.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from vatest.labhost import KERNEL_PREFIX, PANIC_RETRY  # noqa: E402

# the lines that say why a test failed: unittest's FAIL/ERROR headers,
# exceptions (subprocess.TimeoutExpired too), the lab guest's own verdict
WHY = re.compile(r"(^|\] )(FAIL|ERROR): |(^|\] )[\w.]*(Error|Exception|Expired): |lab-init: |LAB-DONE rc=|" + re.escape(KERNEL_PREFIX))

stages, labtimes, labcpu, hz, ncpu, status = sys.argv[1:7]
hz, ncpu = int(hz), int(ncpu)
marks = [l.rstrip("\n").split(" ", 2) for l in open(stages)]
# busy: the cores the whole machine kept busy in a stage, the lab stream's
# processes included (they run beside every stage)
print("Stage times (busy: cores in use over the stage, of %d):" % ncpu)
total = cpu = 0
for (t, b, name), (t2, b2, _) in zip(marks, marks[1:]):
    if name == "Summary":
        continue
    d, c = int(t2) - int(t), (int(b2) - int(b)) / hz
    total += d
    cpu += c
    print("  %6.1f min  busy %.1f  %s" % (d / 60, c / d if d else 0, name))
if labtimes and os.path.exists(labtimes):
    t = [int(x) for x in open(labtimes).read().split()]
    if len(t) == 2:
        print("  %6.1f min  (lab stream, beside the stages above)" % ((t[1] - t[0]) / 60))
print("  %6.1f min  in all" % (total / 60))
lab_cpu = None
if labcpu and os.path.exists(labcpu) and open(labcpu).read().strip():
    lab_cpu = float(open(labcpu).read()) / 60
# what a shorter run must cut: the CPU work, not only the waits
print("CPU: %.1f core-min used of the %.1f the run had (%d cores)" % (cpu / 60, ncpu * total / 60, ncpu)
      + ("; the lab stream's own processes %.1f, the rest %.1f" % (lab_cpu, cpu / 60 - lab_cpu) if lab_cpu else ""))

passed = failed = skipped = 0
lab = []
panicked = []
failures = []
for path in sys.argv[7:]:
    if not os.path.exists(path):
        continue
    for line in open(path):
        t = json.loads(line)
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
        # "project:suite+suite / name"
        suites = t["name"].split(" / ")[0].split(":")[-1].split("+")
        if any(s.startswith("lab") for s in suites):
            lab.append((t["name"].split(" / ")[-1], t.get("duration", 0), r))
            # vatest.labhost.PANIC_RETRY: its lab host booted twice
            if PANIC_RETRY in (t.get("stderr") or "") + (t.get("stdout") or ""):
                panicked.append(t["name"].split(" / ")[-1])
        if r not in ("OK", "EXPECTEDFAIL", "SKIP"):
            # meson's test log keeps the two streams apart (unittest
            # writes to stderr)
            failures.append((t["name"], (t.get("stdout") or "") + (t.get("stderr") or "")))
if lab:
    print("Lab tiers (minutes each took in the lab stream):")
    for name, d, r in sorted(lab, key=lambda x: -x[1]):
        print("  %6.1f min  %s (%s)" % (d / 60, name, r))
if panicked:
    print("Lab kernel panics (the tier's lab host booted again; the kernel's report is in its log): "
          + ", ".join(panicked))
# why each failed, where a reader of only this summary sees it: unittest's
# FAIL/ERROR headers and exception lines, else the output's last lines
for name, out in failures:
    lines = out.splitlines()
    why = [l for l in lines if WHY.search(l)]
    print("Why %s failed:" % name)
    for l in (why or lines[-12:])[:24]:
        print("    " + l[:240])
print(f"{passed} passed, {failed} failed, {skipped} skipped")
if status != "0" and not failed:
    print("a stage failed outside the tests' logs (see above)")
sys.exit(1 if failed or status != "0" else 0)
