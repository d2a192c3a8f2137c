# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpactl as the Python tiers run it: one vdpactl(), its -j form and the
lease list (virsh() is vatest.libvirt's; vatest.bus.vdpactl calls this
one as the bus tier wants it)."""

import json
import subprocess

from vatest.paths import VDPACTL


class CommandFailed(AssertionError, RuntimeError):
    """A command that had to succeed did not: a failure for a case that
    asserts with it, an error for one that expects RuntimeError."""


def vdpactl(*args, check=True, timeout=60, binary=VDPACTL, merge=False, env=None, wrapper=()):
    """vdpactl ARGS (binary: another vdpactl, e.g. the installed one) on the
    bus the environment (env) names; a CompletedProcess. wrapper: the argv
    it runs under (nsenter into another host, valgrind). merge: stderr into
    stdout. check: a non-zero status raises CommandFailed with the output;
    timeout: seconds, None for none."""
    r = subprocess.run(list(wrapper) + [binary] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if merge else subprocess.PIPE, text=True, timeout=timeout, env=env)
    if check and r.returncode != 0:
        raise CommandFailed("vdpactl %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr or ""))
    return r


def vdpactl_json(*args, **kw):
    """vdpactl ARGS -j, its document parsed (kw: vdpactl()'s)."""
    return json.loads(vdpactl(*(list(args) + ["-j"]), **kw).stdout)


def leases(**kw):
    """vdpactl lease list's leases (kw: vdpactl()'s); [] when it printed
    nothing."""
    out = vdpactl("lease", "list", "-j", **kw).stdout
    return json.loads(out)["leases"] if out else []
