# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lab tiers as one queue that several workers drain: contrib/run-tests.sh
starts one worker beside all its stages and a second once the stages that
keep the machine busy are done, so that the lab hosts (one QEMU TCG process
each, about one core) fill the cores the other stages leave idle.

    python3 tests/lib/vatest/labqueue.py work BUILD QUEUE SUITE...
    python3 tests/lib/vatest/labqueue.py finish BUILD QUEUE

work: the first worker lists the tests of the SUITEs (meson test --list)
into QUEUE/todo, longest first by the minutes each took last time (the
test cache's lab-times.json: only an order, nothing is taken from it
on trust; a tier it does not know goes first); then every worker takes
the next test and runs it alone (meson test NAME, its log
BUILD/meson-logs/testlog-lab-NAME.json) until none is left. Exits 1 when
one of its tests failed.

finish: 1 unless every listed test left its log (a worker that died
leaves the rest unrun: no log, no pass); records the minutes for the next
run's order."""

import fcntl
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from vatest import cache  # noqa: E402

TIMES = "lab-times.json"


def _times_path():
    return os.path.join(cache.cache_dir(), TIMES)


def _last_times():
    try:
        with open(_times_path()) as f:
            t = json.load(f)
        return {k: float(v) for k, v in t.items() if isinstance(k, str) and isinstance(v, (int, float))}
    except (OSError, ValueError, AttributeError):
        return {}


def _list(build, suites):
    args = ["meson", "test", "-C", build, "--no-rebuild", "--list"]
    for s in suites:
        args += ["--suite", s]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    # "project:suite / name"
    return [l.split(" / ")[-1].strip() for l in out.splitlines() if " / " in l]


def _log(build, name):
    return os.path.join(build, "meson-logs", "testlog-lab-%s.json" % name)


class _Locked:
    def __init__(self, queue):
        self.f = open(os.path.join(queue, "lock"), "a")

    def __enter__(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def _take(build, queue, suites):
    """The next test to run, or None; the first caller fills the queue."""
    todo = os.path.join(queue, "todo")
    with _Locked(queue):
        if not os.path.exists(os.path.join(queue, "all")):
            names = _list(build, suites)
            last = _last_times()
            # longest first: the last tier to start is a short one
            names.sort(key=lambda n: -last.get(n, float("inf")))
            for f in ("all", "todo"):
                with open(os.path.join(queue, f), "w") as out:
                    out.write("".join(n + "\n" for n in names))
            for n in names:
                try:
                    os.unlink(_log(build, n))
                except FileNotFoundError:
                    pass
        with open(todo) as f:
            names = [l.strip() for l in f if l.strip()]
        if not names:
            return None
        with open(todo + ".new", "w") as out:
            out.write("".join(n + "\n" for n in names[1:]))
        os.rename(todo + ".new", todo)
        return names[0]


def work(build, queue, suites):
    os.makedirs(queue, exist_ok=True)
    rc = 0
    while True:
        name = _take(build, queue, suites)
        if name is None:
            return rc
        t = time.time()
        sys.stdout.flush()
        r = subprocess.call(["meson", "test", "-C", build, "--no-rebuild", "--print-errorlogs",
                             "--logbase", "testlog-lab-%s" % name, name])
        with _Locked(queue), open(os.path.join(queue, "times"), "a") as out:
            out.write("%s %.0f %d\n" % (name, time.time() - t, r))
        if r != 0:
            rc = 1


def finish(build, queue):
    try:
        with open(os.path.join(queue, "all")) as f:
            names = [l.strip() for l in f if l.strip()]
    except FileNotFoundError:
        print("lab queue: no worker listed the lab tests", file=sys.stderr)
        return 1
    missing = [n for n in names if not os.path.exists(_log(build, n)) or not os.path.getsize(_log(build, n))]
    for n in missing:
        print("lab queue: %s left no test log (not run)" % n, file=sys.stderr)
    times = _last_times()
    try:
        with open(os.path.join(queue, "times")) as f:
            for line in f:
                n, secs, _ = line.split()
                times[n] = float(secs)
        with open(_times_path() + ".new", "w") as out:
            json.dump(times, out, indent=1, sort_keys=True)
        os.rename(_times_path() + ".new", _times_path())
    except (OSError, ValueError) as e:
        print("lab queue: the tiers' minutes not kept: %s" % e, file=sys.stderr)
    return 1 if missing else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "work":
        return work(argv[2], argv[3], argv[4:] or ["lab"])
    if len(argv) == 4 and argv[1] == "finish":
        return finish(argv[2], argv[3])
    print("usage: labqueue.py work BUILD QUEUE SUITE... | finish BUILD QUEUE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
