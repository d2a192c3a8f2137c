# SPDX-License-Identifier: LGPL-2.1-or-later
"""Whether the paired-guest benchmark's software vDPA path (network4, kind
vdpa-software in vatest/pairreport.py) can run here, and why not
(docs/pairbench.md). Two steps, each returning (available, reason, check):

- host(): before the daemon starts, what the host lets us do: root,
  /dev/vduse/control (after `modprobe vduse`), vhost_vdpa (after `modprobe
  vhost_vdpa`), the only way QEMU reaches a VDUSE device, a handle on the
  initial network namespace (the kernel's vdpa netlink family answers
  there only, netnsok=false: the daemon runs there), and no software
  device of another daemon (ours, in that namespace, would reconcile it);
- daemon(): once the daemon runs on the kernel backend, its own verdict on
  the software pool (the pool's warning, va_software_unavailable() in
  vdpa-allocator/daemon/va-software.c, is the one home of its words).

The checks take their facts as arguments, so that tests/pair/test_software.py
can feed each failure without the kernel."""

import os
import subprocess

NETWORK = "vpc4"
POOL = "soft"
NEEDED = 2  # one software device per guest
CONTROL = "/dev/vduse/control"
DEVICE_PREFIX = "vasw-"  # va-software.c's
VHOST_VDPA = "/sys/bus/vdpa/drivers/vhost_vdpa"


def modprobe(module):
    """None when the module loaded (or was), else the last line modprobe
    said (or how it could not be run)."""
    try:
        r = subprocess.run(["modprobe", module], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "modprobe %s: %s" % (module, e)
    if r.returncode == 0:
        return None
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else "modprobe %s: exit %d" % (module, r.returncode)


def theirs(vduse_dir="/dev/vduse"):
    """VDUSE devices named as the daemon names its software devices."""
    try:
        return sorted(n for n in os.listdir(vduse_dir) if n.startswith(DEVICE_PREFIX))
    except OSError:
        return []


def host(euid=None, exists=os.path.exists, load=modprobe, outer_netns="", others=None, config=None):
    """The host's part: the benchmark's own configuration (config: the
    --config directory given, or None), root, VDUSE's control node,
    vhost_vdpa, the initial network namespace (outer_netns: a path, None
    when there is none; "" leaves the check out), no other daemon's
    software devices (others: their names; None reads /dev/vduse)."""
    check = {"network": NETWORK, "pool": POOL, "vduse_control": False, "modprobe": {}, "free": None}
    if config:
        return False, ("unavailable: --config %s given; the software path runs on the benchmark's own configuration "
                       "only" % config), check
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return False, "unavailable: not root (only root may create a VDUSE device)", check
    if not exists(CONTROL):
        err = load("vduse")
        check["modprobe"]["vduse"] = err
        if err:
            return False, "unavailable: no %s, and modprobe vduse failed (%s)" % (CONTROL, err), check
        if not exists(CONTROL):
            return False, "unavailable: modprobe vduse succeeded, but there is no %s" % CONTROL, check
    check["vduse_control"] = True
    if not exists(VHOST_VDPA):
        err = load("vhost_vdpa")
        check["modprobe"]["vhost_vdpa"] = err
        if err:
            return False, "unavailable: modprobe vhost_vdpa failed (%s): QEMU reaches a vDPA device only through it" % err, check
    if outer_netns is None:
        return False, ("unavailable: no handle on the initial network namespace, where alone the kernel's vdpa netlink "
                       "answers"), check
    others = theirs() if others is None else others
    if others:
        return False, ("unavailable: software vDPA devices of another vdpa-allocatord exist (%s): the benchmark's daemon "
                       "would reconcile them away" % ", ".join(others)), check
    return True, None, check


def daemon(status, check, daemon_error=None):
    """The daemon's part: `vdpactl status -j` (a dict) of a daemon on the
    kernel backend, or daemon_error when it did not start on it."""
    check = dict(check)
    if daemon_error:
        return False, "unavailable: vdpa-allocatord did not start on the kernel backend (%s)" % daemon_error, check
    if (status or {}).get("backend") != "kernel":
        return False, "unavailable: vdpa-allocatord runs the %s backend, not the kernel's" % (status or {}).get("backend", "?"), check
    pools = {p.get("name"): p for p in (status or {}).get("pools", [])}
    if POOL not in pools:
        return False, "unavailable: vdpactl status lists no pool %s" % POOL, check
    p = pools[POOL]
    if p.get("warning"):
        return False, "unavailable: the daemon's pool %s: %s" % (POOL, p["warning"]), check
    free = (p.get("software_slots") or 0) - (p.get("software_leased") or 0)
    check["free"] = free
    if free < NEEDED:
        return False, "unavailable: pool %s has %d free software slot(s); the two guests need %d" % (POOL, free, NEEDED), check
    return True, None, check
