# SPDX-License-Identifier: LGPL-2.1-or-later
"""What an operator's monitoring reads from the daemon (issue 16): its
journal events, read off journald's native protocol on sockets this test
owns, and its metrics file, parsed with Prometheus' own text parser
(python3-prometheus-client).

GLib writes to the journal when stderr is a stream to journald
(/run/systemd/journal/stdout), and then sends each record as a datagram to
/run/systemd/journal/socket; both paths are fixed. So the test re-execs
itself in a private mount namespace (unshare, root) with a tmpfs over
/run/systemd, where it binds both sockets itself."""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from vatest.bus import IFACE, NAME, PATH, Bus, Daemon, call, vdpactl
from vatest.paths import VDPACTL
from gi.repository import GLib  # after vatest.bus: it requires Gio 2.0

JOURNAL = "/run/systemd/journal"
UUID1 = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
NOBODY = 65534

# vdpa-allocator/daemon/va-daemon-events.h; contrib/vdpa-allocator.catalog explains each
IDS = {
    "allocate": "d73213d9ccab4db7b837ac41c78e9183",
    "release": "df37de9a4776449e87d7a29642093ed7",
    "claim": "ecddd6d0a5054f8c88a60a3a9128b973",
    "lease_broken": "e87cb17030b04b2e940c49df37de2ec6",
    "drain": "323cefc46043433eac69d748d5fa0683",
    "reload": "75cb046076e24ce8be03434141720342",
    "denied": "6a144a9b1f41448f9937e80526573101",
    "low_watermark": "aa0d82a61dbd440598a1a70e801c2e36",
    "pf_health": "d06469585f4346028a2c219cd6086096",
    "pool_warning": "7d946d9fafcd48dfba9d154a07ab5217",
    "swap_back": "5ed5e85968c54c54bfda2254e2f5200d",
    "promote": "ab8b0f391e004ed1afbc4f8b83335d3b",
}


def reexec_in_namespace():
    if os.environ.get("VA_OBSERVE_NS") == "1":
        return
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root for a private mount namespace")
        sys.exit(77)
    env = dict(os.environ, VA_OBSERVE_NS="1")
    script = "mount -t tmpfs -o mode=0755 va-journal /run/systemd && mkdir -p %s && exec \"$@\"" % JOURNAL
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def parse_native(data):
    """One datagram of journald's native protocol: KEY=VALUE lines, or KEY
    newline, a little-endian 64-bit length, the value and a newline."""
    fields = {}
    i = 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            v = data[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        fields[k.decode()] = v.decode()
    return fields


class Journal:
    """journald's two sockets, bound by this test: the stream the daemon's
    stderr is, and the datagram socket the records arrive on."""

    def __init__(self):
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(JOURNAL + "/socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(JOURNAL + "/stdout")
        self.listener.listen(4)
        self.records = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def stream(self):
        """A client end for a daemon's stderr; journald's side is drained."""
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(JOURNAL + "/stdout")
        server, _ = self.listener.accept()
        threading.Thread(target=self._drain, args=(server,), daemon=True).start()
        return client

    def _drain(self, s):
        self.stream_text = b""
        with s:
            while True:
                b = s.recv(65536)
                if not b:
                    return
                self.stream_text += b

    def _read(self):
        while True:
            data = self.dgram.recv(1 << 20)
            with self.cond:
                self.records.append(parse_native(data))
                self.cond.notify_all()

    def wait(self, kind, timeout=20, **match):
        """The first record with the MESSAGE_ID of @kind and the fields of
        @match, waiting for it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for r in self.records:
                    if r.get("MESSAGE_ID") == IDS[kind] and all(r.get(k) == v for k, v in match.items()):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %s event with %s; got %s" % (kind, match, [
                        (r.get("MESSAGE_ID"), r.get("MESSAGE")) for r in self.records]))
                self.cond.wait(left)

    def count(self, kind):
        with self.cond:
            return sum(1 for r in self.records if r.get("MESSAGE_ID") == IDS[kind])


def allocate(bus, uuid, m, network="vpc2"):
    return call(bus, "Allocate", (uuid, "vm1", m, network, {}), "(ssssa{sv})")[0]


def metrics(path):
    from prometheus_client.parser import text_string_to_metric_families
    with open(path) as f:
        text = f.read()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        out[("#type", fam.name)] = fam.type
    return text, out


PF_HEALTH = ("vdpa_allocator_pf_healthy", "vdpa_allocator_pf_unhealthy_reason")


def sample(m, name, **labels):
    return m[(name, tuple(sorted(labels.items())))]


class Observe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.journal = Journal()
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.close()

    def setUp(self):
        self.bus.polkit_allow([])
        self.daemon = Daemon(self.bus)
        self.stream = self.journal.stream()
        self.daemon.start(stderr=self.stream.fileno())
        self.prom = os.path.join(self.daemon.run_dir, "metrics.prom")

    def tearDown(self):
        rc = self.daemon.stop()
        self.stream.close()
        self.assertEqual(rc, 0, self.daemon.read_log())
        self.assertFalse(os.path.exists(self.prom), "a stopped daemon leaves no metrics that say all is well")
        r = subprocess.run([VDPACTL, "metrics"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, VDPA_ALLOCATOR_RUN_DIR=self.daemon.run_dir))
        self.assertEqual((r.returncode, r.stdout), (3, ""), "no daemon: vdpactl's status 3, as for an unreachable one")
        self.assertIn("vdpa-allocatord is not running", r.stderr)
        self.daemon.remove()

    def assertLeaseFields(self, r, lease):
        self.assertEqual(r["VA_POOL"], "accel")
        self.assertEqual(r["VA_DOMAIN_UUID"], UUID1)
        self.assertEqual(r["VA_DOMAIN_NAME"], "vm1")
        self.assertEqual(r["VA_MAC"], lease["mac"])
        self.assertEqual(r["VA_VLAN"], "2334")
        self.assertEqual(r["VA_SLOT"], lease["slot"])
        self.assertEqual(r["VA_NETWORK"], "vpc2")

    def test_journal_events(self):
        lease = allocate(self.bus, UUID1, "52:54:00:00:00:01")
        r = self.journal.wait("allocate", VA_MAC=lease["mac"])
        self.assertLeaseFields(r, lease)
        self.assertEqual(r["PRIORITY"], "5")
        self.assertEqual(r["GLIB_DOMAIN"], "va-events")
        self.assertIn(lease["slot"], r["MESSAGE"])

        self.assertEqual(call(self.bus, "Claim", (UUID1,), "(s)")[0], 1)
        r = self.journal.wait("claim")
        self.assertEqual((r["VA_DOMAIN_UUID"], r["VA_COUNT"]), (UUID1, "1"))

        vdpactl("pool", "drain", "accel", check=True)
        r = self.journal.wait("drain", VA_DRAINING="1")
        self.assertEqual(r["VA_POOL"], "accel")
        vdpactl("pool", "undrain", "accel", check=True)
        self.journal.wait("drain", VA_DRAINING="0", VA_POOL="accel")

        # polkit says no to nobody: the denial names uid and action
        r = vdpactl("pool", "drain", "accel", user=NOBODY)
        self.assertNotEqual(r.returncode, 0)
        r = self.journal.wait("denied", VA_UID=str(NOBODY))
        self.assertEqual(r["VA_ACTION"], "org.vdpa_allocator.manage")
        self.assertEqual(r["VA_METHOD"], "Drain")
        self.assertEqual(r["PRIORITY"], "4")

        # 8 slots, low-watermark=3: the sixth lease leaves 2 free
        self.assertEqual(self.journal.count("low_watermark"), 0)
        for i in range(2, 7):
            allocate(self.bus, UUID1, "52:54:00:00:00:%02x" % i)
        r = self.journal.wait("low_watermark")
        self.assertEqual((r["VA_POOL"], r["VA_FREE"]), ("accel", "2"))
        self.assertEqual(r["PRIORITY"], "4")

        self.daemon.proc.send_signal(signal.SIGHUP)
        r = self.journal.wait("reload")
        self.assertEqual(r["VA_CONFIG_DIR"], self.daemon.conf_dir)
        self.assertEqual((r["VA_POOLS"], r["VA_NETWORKS"]), ("1", "3"))

        call(self.bus, "Release", (UUID1, lease["mac"]), "(ss)")
        r = self.journal.wait("release", VA_MAC=lease["mac"])
        self.assertLeaseFields(r, lease)

    def wait_for_metrics(self):
        deadline = time.monotonic() + 10
        while not os.path.exists(self.prom) and time.monotonic() < deadline:
            time.sleep(0.05)
        return metrics(self.prom)

    def test_pf_health_keeps_its_series(self):
        """A PF's health series are labelled by the PF alone, its reason one
        of a fixed set of words with a series each: a PF going down, or its
        reason's words changing, adds and removes no series (a free-text
        reason label did, one series per wording)"""
        _, m = self.wait_for_metrics()
        before = {k: v for k, v in m.items() if k[0] in PF_HEALTH}
        self.daemon.stop()
        with open(os.path.join(self.daemon.conf_dir, "vdpa-allocator.conf")) as f:
            conf = f.read()
        with open(os.path.join(self.daemon.conf_dir, "vdpa-allocator.conf"), "w") as f:
            f.write(conf.replace("[simulate]\n", "[simulate]\nunhealthy-pfs=sim1\n", 1))
        self.daemon.start(stderr=self.stream.fileno())
        _, m = self.wait_for_metrics()
        after = {k: v for k, v in m.items() if k[0] in PF_HEALTH}
        self.assertEqual(sorted(after), sorted(before), "the same series, healthy or not")
        self.assertEqual({dict(k[1])["reason"] for k in after if k[0] == "vdpa_allocator_pf_unhealthy_reason"},
                         {"gone", "unsupported", "no_sriov", "no_netdev", "link_down", "no_vdpa_vf", "prepare_failed",
                          "other"})
        pci = {dict(k[1])["pf"]: dict(k[1])["pci"] for k in after}
        for pf, healthy in (("sim0", 1), ("sim1", 0)):
            self.assertEqual(sample(m, "vdpa_allocator_pf_healthy", pool="accel", pf=pf, pci=pci[pf]), healthy)
        reasons = {(dict(k[1])["pf"], dict(k[1])["reason"]) for k, v in after.items()
                   if k[0] == "vdpa_allocator_pf_unhealthy_reason" and v == 1}
        self.assertEqual(reasons, {("sim1", "link_down")}, "one reason of the unhealthy PF; none of the healthy one")

    def test_metrics_file_follows_the_leases(self):
        self.wait_for_metrics()
        self.assertEqual(os.stat(self.prom).st_mode & 0o777, 0o644)
        text, m = metrics(self.prom)
        self.assertEqual(sample(m, "vdpa_allocator_pool_slots", pool="accel"), 8)
        self.assertEqual(sample(m, "vdpa_allocator_pool_slots_free", pool="accel"), 8)
        self.assertEqual(sample(m, "vdpa_allocator_pool_slots_leased", pool="accel"), 0)
        self.assertEqual(sample(m, "vdpa_allocator_pool_healthy", pool="accel"), 1)
        self.assertEqual(sample(m, "vdpa_allocator_pool_draining", pool="accel"), 0)
        self.assertEqual(sample(m, "vdpa_allocator_leases_broken", pool="accel"), 0)
        self.assertEqual(sample(m, "vdpa_allocator_allocations_total"), 0)
        self.assertEqual(m[("#type", "vdpa_allocator_allocation_duration_seconds")], "histogram")
        self.assertEqual(m[("#type", "vdpa_allocator_allocations")], "counter")
        self.assertEqual(sample(m, "vdpa_allocator_info", version=sample_version(text), backend="sim"), 1)
        pfs = {dict(k[1])["pf"]: v for k, v in m.items() if k[0] == "vdpa_allocator_pf_healthy"}
        self.assertEqual(pfs, {"sim0": 1, "sim1": 1})
        # the daemon says where its file is, the run directory it was
        # started with (--run-dir), and vdpactl reads it there, not in
        # the run directory vdpactl would use
        self.assertEqual(property_value(self.bus, "MetricsFile"), self.prom)
        self.assertEqual(ctl_metrics(self.daemon.root).stdout, text)

        # a reader's open file keeps what it opened: the daemon renames a
        # new file over the name, it does not rewrite this one in place
        held = open(self.prom)
        lease = allocate(self.bus, UUID1, "52:54:00:00:00:01")
        with self.assertRaises(GLib.Error):
            allocate(self.bus, UUID1, "52:54:00:00:00:02", network="no-such-network")
        r = vdpactl("allocate", "--uuid", UUID1, "--mac", "52:54:00:00:00:03", "--network", "vpc2", user=NOBODY)
        self.assertNotEqual(r.returncode, 0, "polkit allows nothing to nobody here")
        vdpactl("pool", "drain", "accel", check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            after, m = metrics(self.prom)
            if sample(m, "vdpa_allocator_pool_draining", pool="accel") == 1:
                break
            time.sleep(0.05)
        self.assertEqual(held.read(), text, "replaced by a rename, not rewritten in place")
        self.assertNotEqual(os.fstat(held.fileno()).st_ino, os.stat(self.prom).st_ino)
        held.close()
        self.assertEqual(sample(m, "vdpa_allocator_pool_slots_leased", pool="accel"), 1)
        self.assertEqual(sample(m, "vdpa_allocator_pool_slots_free", pool="accel"), 0, "draining: nothing to get")
        self.assertEqual(sample(m, "vdpa_allocator_leases", network="vpc2", pool="accel", form="hardware"), 1)
        self.assertEqual(sample(m, "vdpa_allocator_allocations_total"), 1)
        self.assertEqual(sample(m, "vdpa_allocator_allocation_failures_total", reason="no_such_network"), 1)
        # a refused caller is not a failed allocation (issue 25): journal only
        self.assertEqual(sample(m, "vdpa_allocator_allocation_failures_total", reason="permission_denied"), 0)
        self.assertEqual(sample(m, "vdpa_allocator_allocation_failures_total", reason="pool_exhausted"), 0)
        # timed: the two that were authorized; the refused one is counted only
        self.assertEqual(sample(m, "vdpa_allocator_allocation_duration_seconds_count"), 2)
        self.assertEqual(sample(m, "vdpa_allocator_allocation_duration_seconds_bucket", le="+Inf"), 2)
        self.assertGreater(sample(m, "vdpa_allocator_allocation_duration_seconds_sum"), 0)
        les = [dict(k[1])["le"] for k in m if k[0] == "vdpa_allocator_allocation_duration_seconds_bucket"]
        self.assertIn("0.0025", les)
        self.assertEqual(ctl_metrics(self.daemon.root).stdout, after)
        call(self.bus, "Release", (UUID1, lease["mac"]), "(ss)")


class Catalog(unittest.TestCase):
    def test_every_event_is_explained_and_the_catalog_parses(self):
        src = os.environ.get("VA_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
        with open(os.path.join(src, "vdpa-allocator", "daemon", "va-daemon-events.h")) as f:
            header = {line.split()[1]: line.split()[2].strip('"') for line in f if line.startswith("#define VA_EVENT_")}
        self.assertEqual(sorted(header.values()), sorted(IDS.values()), "this test's IDs are the header's")
        root = tempfile.mkdtemp(prefix="va-catalog-")
        try:
            os.makedirs(os.path.join(root, "usr/lib/systemd/catalog"))
            shutil.copy(os.path.join(src, "contrib", "vdpa-allocator.catalog"), os.path.join(root, "usr/lib/systemd/catalog"))
            subprocess.run(["journalctl", "--root=" + root, "--update-catalog"], check=True, capture_output=True)
            listed = subprocess.run(["journalctl", "--root=" + root, "--list-catalog"], check=True, capture_output=True,
                                    text=True).stdout
        finally:
            shutil.rmtree(root)
        ids = {line.split()[0] for line in listed.splitlines()}
        self.assertEqual(ids, set(IDS.values()))


def ctl_metrics(root):
    """vdpactl metrics with a run directory of its own (VDPA_ALLOCATOR_RUN_DIR)
    other than the daemon's, holding another file of metrics"""
    other = os.path.join(root, "vdpactl-run")
    os.makedirs(other, exist_ok=True)
    with open(os.path.join(other, "metrics.prom"), "w") as f:
        f.write("# not the running daemon's metrics\n")
    return subprocess.run([VDPACTL, "metrics"], capture_output=True, text=True, check=True, timeout=60,
                          env=dict(os.environ, VDPA_ALLOCATOR_RUN_DIR=other))


def property_value(bus, name):
    """The manager's property @name, straight off the bus."""
    ret = bus.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Properties", "Get", GLib.Variant("(ss)", (IFACE, name)),
                             None, 0, -1, None)
    return ret.unpack()[0]


def sample_version(text):
    line = next(l for l in text.splitlines() if l.startswith("vdpa_allocator_info{"))
    return line.split('version="', 1)[1].split('"', 1)[0]


if __name__ == "__main__":
    reexec_in_namespace()
    unittest.main(verbosity=2)
