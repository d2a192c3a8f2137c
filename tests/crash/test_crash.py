# SPDX-License-Identifier: LGPL-2.1-or-later
"""Crash safety under load: 8 client processes, each on its own bus
connection and its own (uuid, mac) keys, allocate and release while the
daemon is SIGKILLed at random points and restarted. Each client keeps a
journal of every request it sent and what, if anything, it got back; the
end state (ListLeases, the SQLite file, the simulated devices and the port
links) must agree with every acknowledged answer, and every request that got
no answer must be either fully applied or fully absent.

VA_CRASH_SEED sets the seed (printed either way), VA_CRASH_OPS the number of
operations per client (default 1000) and VA_CRASH_CLIENTS the clients
(default 8)."""

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unittest

from vatest.bus import IFACE, NAME, PATH, Bus, Daemon, call
from vatest.simconf import ACCEL, sim_config
from gi.repository import Gio, GLib  # after vatest.bus: it requires Gio 2.0

KEYS_PER_CLIENT = 6  # 2 domains x 3 NICs
POOL = "accel"
VLAN = 2334
QUEUES = 4

# 64 slots for 48 keys: no exhaustion, so every daemon error is a failure,
# and slots are reused often.
CONFIG = sim_config(pfs=2, vfs=32, numa_nodes=2, pools={POOL: dict(ACCEL, max_vqp=QUEUES)},
                    networks={"vpc2": dict(mode="vdpa", pool=POOL, vlan=VLAN)})

# answers that say the request never reached a daemon, or that the daemon
# went away with it: neither says whether it was applied
UNDELIVERED = {"org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"}


def client_keys(client):
    return [("%08x-0000-4000-8000-%012x" % (0xc0000000 + client, u), "52:54:00:%02x:%02x:%02x" % (client, u, m))
            for u in range(2) for m in range(KEYS_PER_CLIENT // 2)]


# -- the client process ---------------------------------------------------------


def run_client(client, seed, journal_path, stop_path):
    """Sequential requests on our keys until stop_path exists; the journal
    gets one line per request sent. After an unanswered one, waits for the
    daemon, then retries it or (half the time) carries on with another,
    leaving it in doubt. Once told to stop, an unanswered request ends the
    client: its key stays in doubt for the checks."""
    rng = random.Random("%s-%d" % (seed, client))
    conn = Gio.DBusConnection.new_for_address_sync(
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"],
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    keys = client_keys(client)
    believed = {k: False for k in keys}  # leased, as far as our answers tell
    retry = None
    seq = 0

    def daemon_up():
        return conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                              GLib.Variant("(s)", (NAME,)), None, 0, -1, None).unpack()[0]

    with open(journal_path, "w") as journal:
        while not os.path.exists(stop_path):
            if retry:
                key, op = retry
                retry = None
            else:
                key = rng.choice(keys)
                if believed[key]:
                    op = "release" if rng.random() < 0.8 else "allocate"
                else:
                    op = "allocate" if rng.random() < 0.8 else "release"
            entry = {"client": client, "seq": seq, "uuid": key[0], "mac": key[1], "op": op, "t0": time.monotonic()}
            seq += 1
            # sent before sending: a kill's snapshot must know what was in flight
            journal.write(json.dumps(dict(entry, result="sent")) + "\n")
            journal.flush()
            try:
                if op == "allocate":
                    args = GLib.Variant("(ssssa{sv})", (key[0], "vm%d" % client, key[1], "vpc2", {}))
                else:
                    args = GLib.Variant("(ss)", key)
                ret = conn.call_sync(NAME, PATH, IFACE, op.capitalize(), args, None, 0, 60000, None).unpack()
                entry["result"] = "ok"
                if op == "allocate":
                    entry["lease"] = ret[0]
                believed[key] = op == "allocate"
            except GLib.Error as e:
                name = Gio.DBusError.get_remote_error(e)
                entry["error"] = name or e.message
                if name and name.startswith("org.vdpa_allocator.Error."):
                    entry["result"] = "error"  # answered: nothing changed
                else:
                    entry["result"] = "undelivered" if name in UNDELIVERED else "unanswered"
                    deadline = time.monotonic() + 60
                    while not daemon_up() and not os.path.exists(stop_path):
                        if time.monotonic() > deadline:
                            raise TimeoutError("the daemon did not come back")
                        time.sleep(0.005)
                    if rng.random() < 0.5:
                        retry = (key, op)
            entry["t1"] = time.monotonic()
            journal.write(json.dumps(entry) + "\n")
            journal.flush()


# -- the test -----------------------------------------------------------------------


ABSENT = ("absent",)
PRESENT_UNKNOWN = ("present", None, None)


def outcomes(entries):
    """The states a key may be in after its journal: ABSENT, ("present",
    slot, device) when an answer told, PRESENT_UNKNOWN when only an
    unanswered Allocate could have made it. Also whether any request on it
    went unanswered."""
    possible = {ABSENT}
    in_doubt = False
    for e in entries:
        if e["result"] in ("undelivered", "error"):
            continue
        if e["result"] == "ok":
            if e["op"] == "allocate":
                possible = {("present", e["lease"]["slot"], e["lease"]["device"])}
            else:
                possible = {ABSENT}
            in_doubt = False
            continue
        in_doubt = True  # "unanswered", or "sent" with its answer still to come
        applied = {ABSENT} if e["op"] == "release" else {s if s != ABSENT else PRESENT_UNKNOWN for s in possible}
        possible = possible | applied
    return possible, in_doubt


def read_journals(paths):
    """(uuid, mac) → its requests in sending order; a request whose answer
    is not in the journal yet is "sent", that is in doubt."""
    by_key = {}
    for path in paths:
        last = {}
        if not os.path.exists(path):  # a client still starting
            continue
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    e = json.loads(line)
                    last[e["seq"]] = e
        for seq in sorted(last):
            e = last[seq]
            by_key.setdefault((e["uuid"], e["mac"]), []).append(e)
    return by_key


def read_record(path):
    """A sim device record (a link vdpaN -> SLOT/MAC), or None for what the
    sim backend does not list either."""
    try:
        slot, mac = os.readlink(path).split("/", 1)
    except (OSError, ValueError):
        return None
    name = os.path.basename(path)
    dev_dir = os.path.join(os.path.dirname(os.path.dirname(path)), "dev")
    return {"slot": slot, "mac": mac, "chardev": os.path.join(dev_dir, "vhost-vdpa-" + name[len("vdpa"):])}


class CrashTest(unittest.TestCase):
    def setUp(self):
        self.bus = Bus()
        self.bus.polkit_allow(["org.vdpa_allocator.manage"])
        self.daemon = Daemon(self.bus, CONFIG)
        self.clients = []
        self.failed = True  # keeps the evidence unless the test gets to its end

    def tearDown(self):
        for p in self.clients:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.daemon.stop()
        if not self.failed:
            self.daemon.remove()
        else:
            print("state, run dir, journals and daemon log kept in", self.daemon.root)
        self.bus.close()

    def test_sigkill_under_load(self):
        seed = int(os.environ.get("VA_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
        n_clients = int(os.environ.get("VA_CRASH_CLIENTS", "8"))
        n_ops = int(os.environ.get("VA_CRASH_OPS", "1000"))
        print("seed %d (VA_CRASH_SEED=%d repeats the kill delays and each client's requests), %d clients x %d operations"
              % (seed, seed, n_clients, n_ops), flush=True)
        rng = random.Random(seed)
        started = time.monotonic()
        self.daemon.start()

        journals = [os.path.join(self.daemon.root, "journal-%d.jsonl" % c) for c in range(n_clients)]
        stop = os.path.join(self.daemon.root, "stop")
        self.clients = [subprocess.Popen([sys.executable, __file__, "--client", str(c), str(seed), journals[c], stop])
                        for c in range(n_clients)]

        def answered():
            n = 0
            for path in journals:
                if os.path.exists(path):
                    with open(path) as f:
                        n += sum(1 for line in f if '"result": "ok"' in line)
            return n

        kills = 0
        problems = []  # what the kills' snapshots found, then the end state
        while answered() < n_clients * n_ops:
            for c, p in enumerate(self.clients):
                self.assertIsNone(p.poll(), "client %d died" % c)
            # the daemon's own start-up reconciliation is a target too
            time.sleep(rng.uniform(0.02, 0.5))
            self.assertEqual(self.daemon.stop(signal.SIGKILL), -signal.SIGKILL, self.daemon.read_log())
            kills += 1
            self.check_snapshot(journals, kills, problems)
            time.sleep(rng.uniform(0, 0.1))
            self.daemon.start()
        # the last kill hits every client mid-request, and none retries
        self.daemon.proc.send_signal(signal.SIGKILL)
        with open(stop, "w"):
            pass
        self.assertEqual(self.daemon.stop(signal.SIGKILL), -signal.SIGKILL, self.daemon.read_log())
        kills += 1
        for c, p in enumerate(self.clients):
            self.assertEqual(p.wait(60), 0, "client %d failed" % c)
        self.check_snapshot(journals, kills, problems)
        self.daemon.start()
        load_seconds = time.monotonic() - started

        by_key = read_journals(journals)
        entries = [e for key_entries in by_key.values() for e in key_entries]
        self.assertEqual([e for e in entries if e["result"] == "sent"], [], "requests the clients did not journal the end of")
        counts = {r: sum(1 for e in entries if e["result"] == r) for r in ("ok", "error", "unanswered", "undelivered")}
        print("%d requests in %.1f s with %d SIGKILLs: %d answered ok, %d answered with an error, %d unanswered "
              "(the daemon died with them), %d undelivered (no daemon on the bus)"
              % (len(entries), load_seconds, kills, counts["ok"], counts["error"], counts["unanswered"],
                 counts["undelivered"]), flush=True)
        self.assertGreaterEqual(counts["ok"], n_clients * n_ops)
        self.assertGreater(kills, 2, "too few kills to say anything")
        errors = [e for e in entries if e["result"] == "error"]
        self.assertEqual(errors, [], "the daemon refused requests it should have served")

        print("%d problem(s) in the %d snapshots of leases.db taken while the daemon lay dead" % (len(problems), kills))
        leases = call(self.bus, "ListLeases")[0]
        listed = {(x["uuid"], x["mac"]): x for x in leases}
        self.check_unique(leases, problems)
        self.check_journals(by_key, listed, problems)
        self.check_devices(by_key, listed, problems, orphans_allowed=True)

        # Reconcile removes the devices of requests that died half done
        report = call(self.bus, "Reconcile")[0]
        print("final Reconcile: %d orphan device(s) removed, %d re-made, %d stale port link(s) removed, %d lease(s) released"
              % (len(report["orphans"]), len(report["missing"]), len(report["stale_links"]), report["released"]))
        logged = [re.search(r"(\d+) orphan device.* (\d+) stale port link", line)
                  for line in self.daemon.read_log().splitlines() if "reconciled:" in line]
        print("the daemon's %d start-up reconciliations removed %d orphan device(s) and %d stale port link(s)"
              % (len(logged), sum(int(m.group(1)) for m in logged if m), sum(int(m.group(2)) for m in logged if m)))
        self.assertEqual(report["released"], 0)
        after = call(self.bus, "ListLeases")[0]
        self.assertEqual(sorted(json.dumps(x, sort_keys=True) for x in after),
                         sorted(json.dumps(x, sort_keys=True) for x in leases), "Reconcile changed the leases")
        self.check_devices(by_key, listed, problems, orphans_allowed=False)
        self.check_store(leases, problems)

        # and a clean stop keeps all of it
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log())
        self.check_store(leases, problems)
        self.daemon.start()
        again = call(self.bus, "ListLeases")[0]
        self.assertEqual(sorted((x["uuid"], x["mac"], x["slot"], x["device"]) for x in again),
                         sorted((x["uuid"], x["mac"], x["slot"], x["device"]) for x in leases))

        in_doubt = sum(1 for k in by_key if outcomes(by_key[k])[1])
        print("%d lease(s) at the end; %d key(s) ended on an unanswered request; %.1f s in all"
              % (len(leases), in_doubt, time.monotonic() - started))
        self.assertEqual(problems, [], "\n" + "\n".join(problems[:50]) + ("\n... %d in all" % len(problems)))
        self.failed = False

    def check_snapshot(self, journals, kill, problems):
        """With the daemon dead: what leases.db holds (a copy, so that
        SQLite's recovery of the WAL happens there) against the journals so
        far. An answer lost here may be covered up by later requests."""
        snap = os.path.join(self.daemon.root, "snapshot")
        shutil.rmtree(snap, ignore_errors=True)
        os.makedirs(snap)
        for name in ("leases.db", "leases.db-wal"):
            if os.path.exists(os.path.join(self.daemon.state_dir, name)):
                shutil.copy(os.path.join(self.daemon.state_dir, name), snap)
        by_key = read_journals(journals)
        db = sqlite3.connect(os.path.join(snap, "leases.db"))
        try:
            rows = db.execute("SELECT uuid, mac, slot, device FROM leases").fetchall()
        finally:
            db.close()
        stored = {(r[0], r[1]): ("present", r[2], r[3]) for r in rows}
        slots = [r[2] for r in rows]
        if len(slots) != len(set(slots)):
            problems.append("at kill %d: leases.db leases a slot twice: %s" % (kill, sorted(s for s in slots if slots.count(s) > 1)))
        for key in set(by_key) | set(stored):
            possible, _ = outcomes(by_key.get(key, []))
            state = stored.get(key, ABSENT)
            if state in possible or (state != ABSENT and PRESENT_UNKNOWN in possible):
                continue
            last = [e for e in by_key.get(key, []) if e["result"] not in ("sent", "undelivered")][-1:]
            problems.append("at kill %d: leases.db has %s/%s %s, the journal allows only %s (last answer: %s)" % (
                kill, key[0], key[1], "absent" if state == ABSENT else "on %s (%s)" % state[1:],
                sorted("absent" if s == ABSENT else "on %s (%s)" % s[1:] for s in possible),
                "%s %s" % (last[0]["op"], last[0]["result"]) if last else "none"))

    def check_unique(self, leases, problems):
        for field in ("slot", "device", "chardev", "port"):
            seen = {}
            for x in leases:
                if x[field] in seen:
                    problems.append("%s %s leased twice: to %s/%s and %s/%s" % (
                        field, x[field], seen[x[field]]["uuid"], seen[x[field]]["mac"], x["uuid"], x["mac"]))
                seen[x[field]] = x

    def check_journals(self, by_key, listed, problems):
        for key in listed:
            if key not in by_key:
                problems.append("%s/%s is leased but no client ever asked for it" % key)
        for key, entries in by_key.items():
            possible, _ = outcomes(entries)
            lease = listed.get(key)
            if lease is None:
                state = ABSENT
            else:
                state = ("present", lease["slot"], lease["device"])
                if (lease["pool"], lease["vlan"], lease["queues"]) != (POOL, VLAN, QUEUES):
                    problems.append("%s/%s: lease %r is not what network vpc2 gives" % (key + (lease,)))
            if state in possible or (state != ABSENT and PRESENT_UNKNOWN in possible):
                continue
            last = entries[-1]
            problems.append("%s/%s is %s, but its journal allows only %s (last request: %s %s, %s)" % (
                key[0], key[1], "absent" if state == ABSENT else "leased on %s (%s)" % state[1:],
                sorted("absent" if s == ABSENT else "leased on %s (%s)" % s[1:] for s in possible),
                last["op"], last["result"], last.get("lease", {}).get("slot", "")))
        # an answered Allocate hands out what the store keeps
        for key, entries in by_key.items():
            oks = [e for e in entries if e["result"] == "ok"]
            if oks and oks[-1]["op"] == "allocate" and oks[-1] is entries[-1]:
                got, lease = oks[-1]["lease"], listed.get(key)
                if lease is not None:
                    for field in ("slot", "device", "chardev", "port"):
                        if got[field] != lease[field]:
                            problems.append("%s/%s: answered %s %s, listed %s" % (key + (field, got[field], lease[field])))

    def check_devices(self, by_key, listed, problems, orphans_allowed):
        vdpa_dir = os.path.join(self.daemon.run_dir, "sim", "vdpa")
        ports_dir = os.path.join(self.daemon.run_dir, "ports")
        records = {}
        leftovers = []
        for name in os.listdir(vdpa_dir):
            rec = None if name.startswith(".") else read_record(os.path.join(vdpa_dir, name))
            if rec:
                records[name] = rec
            else:
                leftovers.append(name)
        when = "after Reconcile" if not orphans_allowed else "before Reconcile"

        for key, lease in listed.items():
            rec = records.get(lease["device"])
            doubt = " (its last request went unanswered)" if outcomes(by_key.get(key, []))[1] else ""
            if rec is None:
                problems.append("%s: %s/%s is leased on %s but its device record %s is missing%s"
                                % (when, key[0], key[1], lease["slot"], lease["device"], doubt))
            elif (rec["slot"], rec["mac"], rec["chardev"]) != (lease["slot"], key[1], lease["chardev"]):
                problems.append("%s: %s/%s: device %s records %r, the lease says slot %s chardev %s%s"
                                % (when, key[0], key[1], lease["device"], rec, lease["slot"], lease["chardev"], doubt))
            if not os.path.exists(lease["chardev"]):
                problems.append("%s: %s/%s: chardev %s missing%s" % (when, key[0], key[1], lease["chardev"], doubt))
            if lease["port"] != os.path.join(ports_dir, key[0], key[1]):
                problems.append("%s: %s/%s: port %s is not where ports go" % (when, key[0], key[1], lease["port"]))
            try:
                target = os.readlink(lease["port"])
            except OSError as e:
                problems.append("%s: %s/%s: port link %s: %s%s" % (when, key[0], key[1], lease["port"], e.strerror, doubt))
            else:
                if target != lease["chardev"]:
                    problems.append("%s: %s/%s: port link points to %s, not its chardev %s%s"
                                    % (when, key[0], key[1], target, lease["chardev"], doubt))

        if not orphans_allowed:
            if leftovers:
                print("note: %d unreadable file(s) in %s, temp files of records cut short by a kill: %s"
                      % (len(leftovers), vdpa_dir, " ".join(sorted(leftovers))))
            owned = {x["device"] for x in listed.values()}
            for name, rec in sorted(records.items()):
                if name not in owned:
                    problems.append("%s: device %s (slot %s, mac %s) exists with no lease" % (when, name, rec["slot"], rec["mac"]))
        # a port link with no lease behind it would hand a VM whatever
        # device its chardev number names next (before Reconcile, the
        # daemon's start-up reconciliation may still be on its way)
        if not orphans_allowed and os.path.isdir(ports_dir):
            for uuid in os.listdir(ports_dir):
                for mac in os.listdir(os.path.join(ports_dir, uuid)):
                    if (uuid, mac) not in listed:
                        path = os.path.join(ports_dir, uuid, mac)
                        problems.append("%s: port link %s -> %s exists with no lease" % (when, path, os.readlink(path)))

    def check_store(self, leases, problems):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.daemon.state_dir, "leases.db"), uri=True)
        try:
            rows = db.execute("SELECT uuid, mac, pool, slot, device, chardev, port, vlan, queues FROM leases").fetchall()
        finally:
            db.close()
        fields = ("uuid", "mac", "pool", "slot", "device", "chardev", "port", "vlan", "queues")
        listed = sorted(tuple(x[f] for f in fields) for x in leases)
        if sorted(rows) != listed:
            stored, shown = set(rows), set(listed)
            problems.append("leases.db and ListLeases differ: only in the file %s; only listed %s"
                            % (sorted(stored - shown), sorted(shown - stored)))
        slots = [r[3] for r in rows]
        if len(slots) != len(set(slots)):
            problems.append("leases.db leases a slot twice: %s" % sorted(s for s in slots if slots.count(s) > 1))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--client":
        run_client(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        unittest.main(verbosity=2)
