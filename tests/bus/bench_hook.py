# SPDX-License-Identifier: LGPL-2.1-or-later
"""Wall time of one libvirt hook call, as libvirt spawns it: for a domain
without metadata (next to /bin/true and 'python3 -c pass', the usual hook
interpreter), and 'prepare' of a domain with two accelerated NICs on the
simulated NIC. Prints numbers; never fails on timing."""

import os
import statistics
import subprocess
import sys
import time

from vatest.hookdoc import CONFIG, PLAIN, domain
from vatest.bus import Bus, Daemon
from vatest.paths import HOOK

ROUNDS = int(os.environ.get("VA_BENCH_ROUNDS", "300"))


def timed(cmd, stdin):
    t = time.perf_counter()
    r = subprocess.run(cmd, input=stdin, capture_output=True)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (cmd, r.stderr.decode()))
    return elapsed * 1000


def median_ms(cmd, stdin, rounds=ROUNDS):
    return statistics.median(timed(cmd, stdin) for _ in range(rounds))


def main():
    plain = PLAIN.encode()
    rows = [
        ("/bin/true", median_ms(["/bin/true"], plain), None),
        ("python3 -c pass", median_ms([sys.executable, "-c", "pass"], plain, max(ROUNDS // 5, 20)), None),
        ("hook, domain without metadata", median_ms([HOOK, "plain", "prepare", "begin", "-"], plain), 2.0),
    ]

    bus = Bus()
    daemon = Daemon(bus, config=CONFIG.replace("vfs=2", "vfs=4"))
    try:
        daemon.start()
        two = domain([("52:54:00:00:00:01", "vpc2", "vdpa"), ("52:54:00:00:00:02", "vpc2", "vdpa")],
                     port_root=os.path.join(daemon.run_dir, "ports")).encode()
        times = []
        for _ in range(max(ROUNDS // 3, 30)):
            times.append(timed([HOOK, "vm1", "prepare", "begin", "-"], two))
            timed([HOOK, "vm1", "release", "end", "-"], two)
        rows.append(("hook prepare, 2 accelerated NICs (sim)", statistics.median(times), 10.0))
    finally:
        daemon.stop()
        daemon.remove()
        bus.close()

    print("# median wall time of one call, %d rounds (fewer for python and prepare)" % ROUNDS)
    print("%-42s %10s  %s" % ("call", "ms", "target"))
    for name, ms, target in rows:
        verdict = "" if target is None else ("<= %.0f ms %s" % (target, "ok" if ms <= target else "MISSED"))
        print("%-42s %10.2f  %s" % (name, ms, verdict))


if __name__ == "__main__":
    main()
