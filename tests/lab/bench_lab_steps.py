#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""How long an allocation takes on the kernel's real paths, step by step
(issue 17, point 8), run INSIDE the lab host with netdevsim and
vdpa_sim_net loaded (lab_host.py --sim-modules):

- the daemon's start, which prepares three netdevsim PFs (VFs made; two
  switched to switchdev through devlink);
- per VLAN method (vst on a legacy PF, bridge and ovs on switchdev PFs), ROUNDS
  rounds of allocating every slot of the pool and releasing them, through
  the daemon's Allocate and Release on its bus, as the hook calls them;
- each device's steps (create: vdpa DEV_NEW; bind: vhost_vdpa; node:
  /dev/vhost-vdpa-N with its mode; vlan: the method), from the daemon's
  debug log, and the whole Allocate call as its caller waits for it.

It prints the numbers and the hook's budget against the worst call. It
fails when an allocation fails, or when the worst call does not fit the
hook's default budget four times over (a domain with four accelerated NICs
waits for four calls, which the daemon serializes).

The lab host is QEMU under TCG: every step costs here many times what it
costs on a host's own CPU; the firmware's own time on a ConnectX, which no
simulator has, comes on top (docs/connectx-hosts.md)."""

import os
import re
import statistics
import sys
import time

import vatest.bus as busfixture
from gi.repository import GLib
from vatest import ctl, lab  # lab: netdevsim helpers, Open vSwitch start-up
from vatest.paths import SRCDIR

ROUNDS = int(os.environ.get("VA_BENCH_ROUNDS", "3"))
VFS = 4
NICS = 4
UUID = "5e1f0000-0000-4000-8000-%012d"
MAC = "52:54:00:5f:%02x:%02x"
POOLS = (("vst", 11, "legacy"), ("bridge", 12, "switchdev"), ("ovs", 13, "switchdev"))
PEER = 14  # the link partner of netdevsim13
BRIDGES = {"bridge": "br-steps", "ovs": "ovs-steps"}
STEP_LINE = re.compile(r"device (\S+) on (\S+): create ([\d.]+) ms, bind ([\d.]+) ms, node ([\d.]+) ms, vlan ([\d.]+) ms")
STEPS = ("create", "bind", "node", "vlan")


def hook_budget_ms():
    # its one home: va-config.h ([hook] timeout-ms overrides it on a host)
    path = os.path.join(SRCDIR, "vdpa-allocator", "common", "va-config.h")
    with open(path) as f:
        return int(re.search(r"^#define VA_HOOK_TIMEOUT_MS_DEFAULT (\d+)$", f.read(), re.M).group(1))


def config():
    out = []
    for method, n, mode in POOLS:
        out.append("[pool %s]\ntype=netdevsim-test\nmatch-pf=nsim%d\neswitch=%s\nvfs=%d\nvlan-method=%s\n" % (method, n, mode, VFS, method))
        if method in BRIDGES:
            out.append("uplink-bridge=%s\n" % BRIDGES[method])
        out.append("device-group=disk\ndevice-mode=0660\n\n")
    return "".join(out)


def make_pfs():
    ifindex = {}
    for n in [n for _, n, _ in POOLS] + [PEER]:
        lab.write("/sys/bus/netdevsim/new_device", "%d 1" % n)
        net = "/sys/bus/netdevsim/devices/netdevsim%d/net" % n
        lab.wait_for(net)
        lab.run("ip", "link", "set", os.listdir(net)[0], "name", "nsim%d" % n)
        lab.run("ip", "link", "set", "nsim%d" % n, "up")
        ifindex[n] = lab.link("nsim%d" % n)["ifindex"]
    lab.link_peers([(ifindex[11], ifindex[12]), (ifindex[13], ifindex[PEER])])
    lab.run("ip", "link", "add", BRIDGES["bridge"], "type", "bridge", "vlan_filtering", "1")
    lab.run("ip", "link", "set", BRIDGES["bridge"], "up")


def ms(values):
    return "median %7.1f  max %7.1f" % (statistics.median(values), max(values)) if values else "-"


def main():
    if not os.path.exists("/sys/bus/netdevsim") and lab.run("modprobe", "netdevsim", check=False).returncode:
        print("SKIP: no netdevsim: run under lab_host.py --sim-modules")
        return 77
    # netdevsim's VF limit is debugfs' max_vfs (no sriov_totalvfs)
    if not os.path.isdir("/sys/kernel/debug/netdevsim"):
        lab.run("mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug", check=False)
    lab.run("modprobe", "-a", "netdevsim", "vdpa_sim_net", "vhost_vdpa", "bridge")
    procs = []
    bus = daemon = None
    failed = False
    try:
        make_pfs()
        lab.start_ovs(procs, BRIDGES["ovs"])
        os.environ["G_MESSAGES_DEBUG"] = "va-allocator-lease"
        bus = busfixture.Bus()
        daemon = busfixture.Daemon(bus, config=config())
        t0 = time.monotonic()
        daemon.start()
        start_s = time.monotonic() - t0
        for method, _, _ in POOLS:
            pool = ctl.vdpactl_json("pool", "show", method, merge=True, timeout=None)
            if (pool["total"], pool["healthy"]) != (VFS, True):
                raise AssertionError("pool %s not ready: %s" % (method, pool))
        calls = {m: [] for m, _, _ in POOLS}
        releases = {m: [] for m, _, _ in POOLS}
        for method, _, _ in POOLS:
            for r in range(ROUNDS):
                for k in range(VFS):
                    opts = {"pool": GLib.Variant("s", method), "vlan": GLib.Variant("q", 100 + k)}
                    t = time.monotonic()
                    busfixture.call(bus, "Allocate", (UUID % (r * 10 + k), "bench", MAC % (r, k), "", opts), "(ssssa{sv})")
                    calls[method].append((time.monotonic() - t) * 1e3)
                for k in range(VFS):
                    t = time.monotonic()
                    busfixture.call(bus, "Release", (UUID % (r * 10 + k), MAC % (r, k)), "(ss)")
                    releases[method].append((time.monotonic() - t) * 1e3)
        steps = {m: {s: [] for s in STEPS} for m, _, _ in POOLS}
        for line in daemon.read_log().splitlines():
            m = STEP_LINE.search(line)
            if not m:
                continue
            nsim = int(re.match(r"netdevsim(\d+)v", m.group(2)).group(1))
            method = [p for p, n, _ in POOLS if n == nsim][0]
            for i, s in enumerate(STEPS):
                steps[method][s].append(float(m.group(3 + i)))

        print("daemon start, preparing 3 PFs (%d VFs each, 2 switched to switchdev): %.0f ms" % (VFS, start_s * 1e3))
        print("%d allocations per method (ms, inside the TCG lab host):" % (ROUNDS * VFS))
        for method, _, _ in POOLS:
            print("  %-6s" % method)
            for s in STEPS:
                print("    %-8s %s" % (s, ms(steps[method][s])))
            print("    %-8s %s" % ("Allocate", ms(calls[method])))
            print("    %-8s %s" % ("Release", ms(releases[method])))
            if len(steps[method]["create"]) != ROUNDS * VFS:
                print("FAIL: %s: %d step lines for %d allocations" % (method, len(steps[method]["create"]), ROUNDS * VFS))
                failed = True
        worst = max(max(v) for v in calls.values())
        budget = hook_budget_ms()
        print("hook budget %d ms; worst Allocate %.0f ms: %d NICs take at most %.0f ms (%.1fx margin)"
              % (budget, worst, NICS, NICS * worst, budget / (NICS * worst)))
        if NICS * worst > budget:
            print("FAIL: %d allocations at the worst measured time do not fit the hook's budget" % NICS)
            failed = True
    finally:
        rc = daemon.stop() if daemon else 0
        if bus:
            bus.close()
        for p in procs:
            p.terminate()
        for n in [n for _, n, _ in POOLS] + [PEER]:
            if os.path.exists("/sys/bus/netdevsim/devices/netdevsim%d" % n):
                lab.write("/sys/bus/netdevsim/del_device", "%d" % n)
        if rc:
            print("FAIL: vdpa-allocatord exited %d:\n%s" % (rc, daemon.read_log()[-4000:]))
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
