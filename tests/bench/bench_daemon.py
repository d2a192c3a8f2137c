# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpa-allocatord on a private bus: durable allocate+release pairs per second
with 1 and 8 clients (bench-load, in C, and the same from python for
comparison), and start-up time and memory with 4,096 slots. Prints the
numbers next to the targets; fails only on errors, never on timing.
VA_BENCH_SECONDS sets the length of each load measurement (default 2)."""

import os
import subprocess
import sys
import threading
import time

from vatest.bus import IFACE, NAME, PATH, Bus, Daemon, call
from vatest.paths import BENCH_LOAD as LOAD
from vatest.simconf import ACCEL, sim_config
from gi.repository import Gio, GLib  # after vatest.bus: it requires Gio 2.0

SECONDS = float(os.environ.get("VA_BENCH_SECONDS", "2"))


def sim_nic(pfs, vfs):
    """The simulated NIC with pfs x vfs slots, one pool, one network."""
    return sim_config(pfs=pfs, vfs=vfs, pools={"accel": dict(ACCEL, max_vqp=4)},
                      networks={"bench": dict(mode="vdpa", pool="accel", vlan=10)})


LOAD_CONFIG = sim_nic(2, 64)
BIG_CONFIG = sim_nic(4, 1024)


def c_load(clients):
    r = subprocess.run([LOAD, str(clients), str(SECONDS)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("bench-load %d: %s" % (clients, r.stderr))
    return float(r.stdout)


def py_load(clients):
    """The same loop from python threads, each on its own connection."""
    pairs = [0] * clients
    deadline = time.monotonic() + SECONDS
    errors = []

    def run(i):
        conn = Gio.DBusConnection.new_for_address_sync(
            os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        uuid = "b1000000-0000-4000-8000-%012x" % i
        try:
            while time.monotonic() < deadline:
                mac = "52:54:00:b1:%02x:%02x" % (i, pairs[i] % 4)
                conn.call_sync(NAME, PATH, IFACE, "Allocate", GLib.Variant("(ssssa{sv})", (uuid, "bench", mac, "bench", {})),
                               None, 0, 30000, None)
                conn.call_sync(NAME, PATH, IFACE, "Release", GLib.Variant("(ss)", (uuid, mac)), None, 0, 30000, None)
                pairs[i] += 1
        except GLib.Error as e:
            errors.append(e.message)

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("python client: %s" % errors[0])
    return sum(pairs) / (time.monotonic() - start)


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0
    return out


def main():
    bus = Bus()
    bus.polkit_allow(["org.vdpa_allocator.manage"])
    try:
        d = Daemon(bus, LOAD_CONFIG, run_on_tmpfs=True)
        try:
            d.start()
            print("# leases durable in %s (disk); devices and port links in %s (%s, as /run is on a host)"
                  % (d.state_dir, d.run_dir, "tmpfs" if d.tmpfs_run else "disk"), flush=True)
            for clients, target in ((1, None), (8, 2000)):
                c = c_load(clients)
                p = py_load(clients)
                print("pairs/s, %d client(s): %6.0f from C (bench-load)%s; %6.0f from python threads"
                      % (clients, c, "  [target >= %d]" % target if target else "", p), flush=True)
            if call(bus, "ListLeases")[0]:
                raise RuntimeError("leases left after the load")
            if d.stop() != 0:
                raise RuntimeError(d.read_log())
        finally:
            d.stop()
            d.remove()

        starts, firsts, rss, hwm = [], [], [], []
        for i in range(5):
            d = Daemon(bus, BIG_CONFIG, run_on_tmpfs=True)
            try:
                t0 = time.monotonic()
                d.start()  # polls NameHasOwner every 10 ms
                starts.append((time.monotonic() - t0) * 1000)
                call(bus, "ListLeases")
                firsts.append((time.monotonic() - t0) * 1000)
                for k in range(64):  # a few leases, then the counts
                    call(bus, "Allocate", ("b2000000-0000-4000-8000-000000000000", "bench", "52:54:00:b2:00:%02x" % k, "bench", {}),
                         "(ssssa{sv})")
                call(bus, "ListLeases")
                st = status(d.proc.pid)
                rss.append(st["VmRSS"])
                hwm.append(st["VmHWM"])
                if d.stop() != 0:
                    raise RuntimeError(d.read_log())
            finally:
                d.stop()
                d.remove()
        starts.sort()
        firsts.sort()
        print("start-up with 4096 slots, exec to name owned: median %.0f ms (min %.0f, max %.0f)  [target < 250 ms]"
              % (starts[2], starts[0], starts[-1]))
        print("start-up with 4096 slots, exec to first answered call: median %.0f ms" % firsts[2])
        print("memory with 4096 slots and 64 leases: VmRSS %.1f MiB, VmHWM %.1f MiB (max of 5)  [target < 16 MiB]"
              % (max(rss), max(hwm)))
    finally:
        bus.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
