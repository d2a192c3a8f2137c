# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs a command and writes the CPU time it and every process it waited
for used (user + system, in seconds) to a file: contrib/run-tests.sh
reads the lab stream's own share of the machine from it.

    python3 tests/lib/vatest/cputime.py OUT COMMAND [ARG]...

Exits with the command's status. A process nobody waits for (a daemon that
double-forked away) is not counted: the lab's QEMU is waited for."""

import resource
import subprocess
import sys


def main(argv):
    if len(argv) < 3:
        print("usage: cputime.py OUT COMMAND [ARG]...", file=sys.stderr)
        return 2
    rc = subprocess.call(argv[2:])
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(argv[1], "w") as f:
        f.write("%.1f\n" % (u.ru_utime + u.ru_stime))
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
