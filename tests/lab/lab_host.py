#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lab host (issue 7, docs/test-tiers.md): Debian's 6.12 kernel booted
under QEMU TCG with the build machine's own root filesystem, running one
command and powering off.

    lab_host.py [--timeout S] [--env NAME]... [--keep] [--sim-modules] [--mlx5-dkms] [--qemu10] [--systemd] [--root trixie] [--deb] [--guest] [--kvm] [--igb N] -- COMMAND [ARG]...

The command of tests/lib/vatest/labhost.py, which says what each option
does (lab_host.py --help lists them)."""

import os
import sys

# the shared test fixtures, vatest, without meson's PYTHONPATH (by hand)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from vatest.labhost import main  # noqa: E402

if __name__ == "__main__":
    main()
