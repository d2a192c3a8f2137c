# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the leases held cost the daemon (issue 25, points 13 to 15), each
as a ratio measured in one run against the daemon on the simulated NIC:
Allocate's median latency with 4,096 leases held against none (target
<= 1.2); the daemon's CPU for a durable allocate+release pair against a
pair of read calls (ListLeases and the properties, no lease held; target
<= 2); its RSS after a ListLeases of 4,096 leases against before (target
within 20 %); and `vdpactl status -j` with 4,096 leases against none.
Prints the numbers next to the targets; fails only on errors."""

import json
import os
import re
import statistics
import subprocess
import sys
import time

from vatest.bus import IFACE, NAME, PATH, Bus, Daemon, call
from vatest.paths import VDPACTL
from vatest.simconf import ACCEL, sim_config
from gi.repository import GLib  # after vatest.bus: it requires Gio 2.0

LEASES = 4096
PAIRS = int(os.environ.get("VA_BENCH_ROUNDS", "300"))
CONFIG = sim_config(pfs=5, vfs=830, pools={"accel": dict(ACCEL, max_vqp=4)},
                    networks={"bench": dict(mode="vdpa", pool="accel", vlan=10)})
UUID = "b3000000-0000-4000-8000-000000000000"


def fill(bus, n):
    """@n leases of other domains, 64 calls in flight (group commit)."""
    loop = GLib.MainLoop()
    state = {"sent": 0, "done": 0, "error": None}

    def send():
        i = state["sent"]
        state["sent"] += 1
        args = GLib.Variant("(ssssa{sv})", ("b4%06x-0000-4000-8000-000000000000" % (i // 250), "filler",
                                            "52:54:00:b4:%02x:%02x" % (i // 250, i % 250), "bench", {}))
        bus.conn.call(NAME, PATH, IFACE, "Allocate", args, None, 0, 60000, None, done)

    def done(c, res):
        try:
            c.call_finish(res)
        except GLib.Error as e:
            state["error"] = e.message
        state["done"] += 1
        if state["sent"] < n and not state["error"]:
            send()
        elif state["done"] == state["sent"]:
            loop.quit()

    for _ in range(min(64, n)):
        send()
    loop.run()
    if state["error"]:
        raise RuntimeError("filling: %s" % state["error"])


def allocate_p50(bus):
    """Allocate's median latency over PAIRS allocate+release pairs, ms."""
    times = []
    for i in range(PAIRS):
        mac = "52:54:00:b3:00:%02x" % (i % 4)
        t = time.perf_counter()
        call(bus, "Allocate", (UUID, "bench", mac, "bench", {}), "(ssssa{sv})")
        times.append((time.perf_counter() - t) * 1000)
        call(bus, "Release", (UUID, mac), "(ss)")
    return statistics.median(times)


def stat(path):
    """(name, user + system CPU s) from a /proc stat file."""
    with open(path) as f:
        head, tail = f.read().rsplit(")", 1)
    fields = tail.split()
    return head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    return stat("/proc/%d/stat" % pid)[1]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def threads(pid):
    """{thread id: (name, CPU s, context switches)} of the daemon."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            name, cpu = stat("/proc/%d/task/%s/stat" % (pid, tid))
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                switches = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            continue  # a pool thread that just ended
        out[tid] = ("main" if name == "vdpa-allocatord" else name, cpu, switches)
    return out


def per_pair_us(pid, pair):
    """The daemon's CPU per call of @pair, µs: PAIRS calls at a time until
    they took a second of its CPU at least (/proc counts it in ticks of
    10 ms: 300 read pairs were 5 ticks, a ratio that moved by 30 %). Also
    a line of where it went: the CPU of each kind of thread (GLib's pool
    threads share a name) and the context switches of them all, per pair."""
    t = cpu_s(pid)
    before = threads(pid)
    n = 0
    while n == 0 or cpu_s(pid) - t < 1.0:
        for i in range(PAIRS):
            pair(n + i)
        n += PAIRS
    us = (cpu_s(pid) - t) / n * 1e6
    after = threads(pid)
    cpu, switches = {}, 0
    for tid, (name, s, sw) in after.items():
        _, s0, sw0 = before.get(tid, (name, 0.0, 0))
        cpu[name] = cpu.get(name, 0.0) + (s - s0) / n * 1e6
        switches += (sw - sw0) / n
    # a pool thread that ended in between took its share out of sight
    cpu["threads that ended"] = us - sum(cpu.values())
    where = ", ".join("%s %.0f" % (k, v) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]) if v >= 1)
    return us, "%s us; %.1f context switches" % (where, switches)


def status_ms():
    """`vdpactl status -j`: median time of 5, ms, and its lease_count."""
    times, out = [], ""
    for _ in range(5):
        t = time.perf_counter()
        r = subprocess.run([VDPACTL, "status", "-j"], capture_output=True, text=True, timeout=60)
        times.append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            raise RuntimeError("vdpactl status -j: %s" % r.stderr)
        out = r.stdout
    return statistics.median(times), json.loads(out)["lease_count"]


def fs_type(path):
    """The type of the filesystem path is on (/proc/self/mounts, longest
    mount point first): a durable commit costs what its fdatasync costs."""
    best = ("", "?")
    with open("/proc/self/mounts") as f:
        for line in f:
            _, mnt, fstype = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                best = (mnt, fstype)
    return best[1]


def main():
    bus = Bus()
    d = Daemon(bus, CONFIG, run_on_tmpfs=True)
    try:
        # the environment the unit gives it (G_SLICE: GLib before 2.76)
        src = os.environ.get("VA_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(os.path.join(src, "contrib", "vdpa-allocatord.service.in")) as f:
            env = re.findall(r"^Environment=(.*)$", f.read(), re.M)
        d.start(wrapper=["env"] + env if env else None)
        pid = d.proc.pid
        state_dir, tmpfs_run = d.state_dir, d.tmpfs_run
        call(bus, "ListLeases")
        empty_p50 = allocate_p50(bus)

        def durable(i):
            mac = "52:54:00:b3:01:%02x" % (i % 4)
            call(bus, "Allocate", (UUID, "bench", mac, "bench", {}), "(ssssa{sv})")
            call(bus, "Release", (UUID, mac), "(ss)")

        def reads(i):
            call(bus, "ListLeases")
            bus.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Properties", "GetAll", GLib.Variant("(s)", (IFACE,)), None, 0,
                               30000, None)

        durable_us, durable_where = per_pair_us(pid, durable)
        read_us, read_where = per_pair_us(pid, reads)
        status_empty = status_ms()

        fill(bus, LEASES)
        time.sleep(2)  # the metrics file written, the heap settled
        full_p50 = allocate_p50(bus)
        status_full = status_ms()
        time.sleep(2)
        rss_before = rss_kib(pid)
        t = time.perf_counter()
        n = len(call(bus, "ListLeases")[0])
        list_ms = (time.perf_counter() - t) * 1000
        time.sleep(4)  # its copy of the leases dropped (2 to 3 s)
        rss_after = rss_kib(pid)
        if n != LEASES:
            raise RuntimeError("ListLeases listed %d of %d leases" % (n, LEASES))
        if d.stop() != 0:
            raise RuntimeError(d.read_log()[-4000:])
    finally:
        d.stop()
        d.remove()
        bus.close()

    def verdict(ok):
        return "ok" if ok else "MISSED"

    print("# the daemon on the simulated NIC (4,150 slots), its state in %s (%s), its run directory on %s; "
          "%d pairs per measurement" % (state_dir, fs_type(state_dir), "tmpfs" if tmpfs_run else "disk", PAIRS))
    r = full_p50 / empty_p50
    print("Allocate p50: %.2f ms with none held, %.2f ms with %d held: %.2fx  [target <= 1.2] %s"
          % (empty_p50, full_p50, LEASES, r, verdict(r <= 1.2)))
    r = durable_us / read_us
    print("daemon CPU per pair: durable allocate+release %.0f us, reads (ListLeases + GetAll) %.0f us: %.2fx  [target <= 2] %s"
          % (durable_us, read_us, r, verdict(r <= 2)))
    # by thread: main (the requests, the settling, the signals), gdbus (the
    # bus's reads and writes), pool-* (the commit; the open reads' worker)
    print("  durable pair by thread: %s" % durable_where)
    print("  read pair by thread: %s" % read_where)
    r = rss_after / rss_before
    print("RSS: %.1f MiB before a ListLeases of %d leases (%.0f ms), %.1f MiB after: %.2fx  [target <= 1.2] %s"
          % (rss_before / 1024, LEASES, list_ms, rss_after / 1024, r, verdict(r <= 1.2)))
    r = status_full[0] / status_empty[0]
    print("vdpactl status -j: %.1f ms with none held, %.1f ms with %d (lease_count %d): %.2fx  [target: independent, <= 1.2] %s"
          % (status_empty[0], status_full[0], LEASES, status_full[1], r, verdict(r <= 1.2)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
