# SPDX-License-Identifier: LGPL-2.1-or-later
"""The libvirt hook as libvirt calls it (argv and the domain XML on stdin),
against the real daemon on the simulated NIC and a private system bus."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from vatest import hookdoc
from vatest.bus import PATH, Bus, Daemon, SharedDaemonTest, call, leases, own_daemon, pool_props, vdpactl
from vatest.hookdoc import CONFIG, PLAIN, UUID, domain
from vatest.paths import HOOK
from vatest.simconf import ACCEL, sim_config


def hook(xml, op, sub, name="vm1", hook_path=HOOK, env=None):
    return subprocess.run([hook_path, name, op, sub, "-"], input=xml, capture_output=True, text=True, timeout=30,
                          env=env)


class HookTest(SharedDaemonTest):
    """One daemon for the cases that leave only leases (SharedDaemonTest
    checks they are undone); @own_daemon for the one that stops it."""

    CONFIG = CONFIG

    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.bus.close()

    def setUp(self):
        super().setUp()
        hookdoc.PORT_ROOT = os.path.join(self.daemon.run_dir, "ports")

    def leases(self):
        return leases(self.bus)

    def assertOneLine(self, r, *parts):
        self.assertEqual(r.returncode, 1, r)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for p in parts:
            self.assertIn(p, lines[0])

    def assertNeverFails(self, r, *parts):
        """A call libvirt must not see fail: exit 0, one line saying why."""
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for p in parts:
            self.assertIn(p, lines[0])

    def test_prepare_allocates_stop_and_release_give_back(self):
        xml = domain([("52:54:00:6b:3c:58", "vpc2", "vdpa"), ("52:54:00:6b:3c:59", "vpc1", "bridge")])
        r = hook(xml, "prepare", "begin")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        leases = self.leases()
        self.assertEqual([(x["mac"], x["network"], x["vlan"]) for x in leases], [("52:54:00:6b:3c:58", "vpc2", 2334)])
        self.assertEqual(leases[0]["domain_name"], "vm1")
        self.assertTrue(os.path.exists(leases[0]["port"]))
        # a second prepare of the same start is idempotent
        self.assertEqual(hook(xml, "prepare", "begin").returncode, 0)
        self.assertEqual(len(self.leases()), 1)
        # start begin reads the networks (libvirt gives hooks no environment:
        # in production the compiled-in configuration directory)
        env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=self.daemon.conf_dir)
        for op, sub in (("start", "begin"), ("started", "begin")):
            r = hook(xml, op, sub, env=env)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), (op, r.stderr))
        r = hook(xml, "stopped", "end")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.leases(), [])
        self.assertFalse(os.path.exists(leases[0]["port"]))
        # libvirt calls release end after stopped end, and after failed starts
        r = hook(xml, "release", "end")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_exhausted_pool_refuses_with_one_line(self):
        hook(domain([("52:54:00:00:00:01", "vpc2", "vdpa"), ("52:54:00:00:00:02", "vpc2", "vdpa")], "a"), "prepare", "begin")
        other = domain([("52:54:00:00:00:03", "vpc2", "vdpa")], "b", "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b")
        r = hook(other, "prepare", "begin", name="b")
        self.assertOneLine(r, "vdpa-allocator: domain b: NIC 52:54:00:00:00:03:", "pool accel is exhausted")

    def test_unknown_network_and_invalid_metadata(self):
        r = hook(domain([("52:54:00:00:00:01", "nowhere", "vdpa")]), "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "52:54:00:00:00:01", "no network named 'nowhere'")
        # a portable NIC refused at start is named once: the resolver's
        # line already names it
        r = hook(domain([("52:54:00:00:00:01", "nowhere", "bridge")]), "start", "begin")
        self.assertOneLine(r, "domain vm1", "no network named 'nowhere'")
        self.assertEqual(r.stderr.count("52:54:00:00:00:01"), 1, r.stderr)
        bad = domain([("52:54:00:00:00:01", "vpc2", "vdpa")]).replace('network="vpc2"', 'network="vpc2" vlan="9"')
        r = hook(bad, "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "invalid domain XML", "cannot be combined")
        r = hook("<domain><name>vm1</name><metadata><x xmlns='http://vdpa-allocator.org/xmlns/domain/1.0'", "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "invalid domain XML")
        self.assertEqual(self.leases(), [])

    @own_daemon()
    def test_daemon_down_refuses_start_but_not_stop(self):
        self.daemon.stop()
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        r = hook(xml, "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "NIC 52:54:00:00:00:01", "vdpa-allocatord is not running")
        r = hook(xml, "stopped", "end")
        self.assertEqual(r.returncode, 0)
        self.assertIn("reconciliation will", r.stderr)
        self.daemon.start()

    def test_reconnect_claims(self):
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        hook(xml, "prepare", "begin")
        port = self.leases()[0]["port"]
        os.unlink(port)
        r = hook(xml, "reconnect", "begin")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(os.path.lexists(port))

    def test_metadata_that_does_not_parse_never_fails_a_running_guest(self):
        # issue 25 (1): virsh detach-interface --live of a marked NIC leaves
        # its vdpa:nic naming a MAC with no <interface>; a libvirtd restart
        # then ran reconnect, the hook failed, and libvirt killed the guest
        a, b = "52:54:00:00:00:01", "52:54:00:00:00:02"
        xml = domain([(a, "vpc2", "vdpa"), (b, "vpc2", "vdpa")])
        self.assertEqual(hook(xml, "prepare", "begin").returncode, 0)
        ports = sorted(x["port"] for x in self.leases())
        meta_a, meta_b = ('<vdpa:nic mac="%s" network="vpc2"/>' % m for m in (a, b))
        detached = domain([(a, "vpc2", "vdpa")]).replace(meta_a, meta_a + meta_b)
        self.assertIn(meta_b, detached)
        self.assertNotIn("address='%s'" % b, detached)
        queues0 = xml.replace(meta_b, '<vdpa:nic mac="%s" pool="accel" queues="0"/>' % b)
        self.assertNotEqual(queues0, xml)
        for name, bad in (("detached", detached), ("queues=0", queues0)):
            with self.subTest(bad=name):
                # a call that starts a guest still refuses it
                self.assertOneLine(hook(bad, "prepare", "begin"), "domain vm1", "invalid domain XML")
                # reconnect claims by UUID: the port links come back
                for port in ports:
                    os.unlink(port)
                r = hook(bad, "reconnect", "begin")
                self.assertNeverFails(r, "domain vm1", "leases claimed by UUID", "invalid domain XML")
                self.assertTrue(all(os.path.lexists(p) for p in ports), r.stderr)
                # started, marked for a swap back: one line, never a failure
                marked = bad.replace("<vdpa:nic ", "<vdpa:nic swap-back='accelerated' ", 1)
                r = hook(marked, "started", "begin")
                self.assertNeverFails(r, "domain vm1", "no swap back", "invalid domain XML")
        # stop and release give the leases back by UUID
        r = hook(detached, "stopped", "end")
        self.assertNeverFails(r, "domain vm1", "leases released by UUID", "matches no <interface>")
        self.assertEqual(self.leases(), [])
        r = hook(detached, "release", "end")
        self.assertNeverFails(r, "leases released by UUID")
        # nothing to key on at all: still exit 0, one line
        for op, sub in (("reconnect", "begin"), ("started", "begin"), ("stopped", "end")):
            r = hook("<domain><name>vm1</name><metadata><x xmlns='http://vdpa-allocator.org/xmlns/domain/1.0' swap-back",
                     op, sub)
            self.assertNeverFails(r, "domain vm1", "invalid domain XML")
        r = hook(detached.replace("<uuid>%s</uuid>" % UUID, ""), "reconnect", "begin")
        self.assertNeverFails(r, "no lease claimed")

    def test_a_configuration_that_does_not_load_is_never_taken_as_empty(self):
        # issue 25 (9): a typo in any conf.d file made every start of a
        # domain with a portable NIC on a Linux bridge fail as "no network
        # named 'lan'", and [hook] timeout-ms went back to 10 s unsaid
        d = tempfile.mkdtemp(prefix="va-hook-")
        self.addCleanup(shutil.rmtree, d)
        conf = os.path.join(d, "etc")
        shutil.copytree(self.daemon.conf_dir, conf)
        os.makedirs(os.path.join(conf, "conf.d"), exist_ok=True)
        bad = os.path.join(conf, "conf.d", "50-typo.conf")
        with open(bad, "w") as f:
            f.write("[hook]\ntimeout-ms=1500\n\n[network lan]\nvlna=31\n")
        env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=conf)
        a = "52:54:00:00:00:01"
        xml = domain([(a, "vpc2", "vdpa"), ("52:54:00:00:00:02", "lan", "bridge")])
        # what starts or moves a guest fails with the loader's line
        for op in ("prepare", "start", "restore", "migrate"):
            with self.subTest(op=op):
                r = hook(xml, op, "begin", env=env)
                self.assertOneLine(r, "domain vm1: the configuration does not load: %s: [network lan] vlna: unknown key" % bad)
        self.assertEqual(self.leases(), [])
        # what never fails goes on with the default budget, and says so
        self.assertEqual(hook(xml, "prepare", "begin").returncode, 0)
        (lease,) = self.leases()
        os.unlink(lease["port"])
        r = hook(xml, "reconnect", "begin", env=env)
        self.assertNeverFails(r, "domain vm1: leases claimed (the configuration does not load, so the default budget of 10000 ms",
                              bad)
        self.assertTrue(os.path.lexists(lease["port"]))
        r = hook(xml, "stopped", "end", env=env)
        self.assertNeverFails(r, "domain vm1: leases released (the configuration does not load", bad)
        self.assertEqual(self.leases(), [])
        # no configuration directory at all is a host not yet set up: empty
        env["VDPA_ALLOCATOR_CONFIG_DIR"] = os.path.join(d, "none")
        r = hook(xml, "prepare", "begin", env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_any_name_libvirt_accepts_gets_a_lease(self):
        # issue 25 (7): café-vm, a name with a tab or over 256 bytes were
        # refused at commit, after the device was made; the name is
        # informational: stored escaped or cut, never refused
        for i, (name, shown) in enumerate((("caf\u00e9-vm", "caf\u00e9-vm"), ("a\tb", "a\\tb"),
                                           ("n" * 300, "n" * 253 + "..."))):
            with self.subTest(name=name[:20]):
                uuid = "4dea22b3-1d52-d8f3-2516-782e98ab3f%02x" % i
                xml = domain([("52:54:00:00:01:%02x" % i, "vpc2", "vdpa")], name, uuid)
                r = hook(xml, "prepare", "begin", name=name)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                (lease,) = self.leases()
                self.assertEqual(lease["domain_name"], shown)
                self.assertTrue(os.path.exists(lease["port"]))
                # found by the name as libvirt spells it
                doc = json.loads(vdpactl("lease", "list", "--domain", name, "-j", check=True).stdout)
                self.assertEqual([x["domain_name"] for x in doc["leases"]], [shown])
                r = hook(xml, "stopped", "end", name=name)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(self.leases(), [])

    def test_restore_and_migrate_rewrite_for_this_host(self):
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa"), ("52:54:00:00:00:02", "vpc2", "bridge")])
        for op in ("restore", "migrate"):
            r = hook(xml, op, "begin")
            self.assertEqual(r.returncode, 0, r.stderr)
            # the vDPA NIC stays vDPA; the one saved on a tap stays on a
            # bridge, though there is room: QEMU cannot load it on vhost-vdpa
            self.assertEqual(r.stdout.count('type="vdpa"'), 1, r.stdout)
            self.assertEqual(r.stdout.count('type="bridge"'), 1, r.stdout)
            self.assertIn(os.path.join(self.daemon.run_dir, "ports", UUID), r.stdout)
        # a full pool: the NICs fall back to the network's bridge and VLAN
        hook(domain([("52:54:00:00:00:07", "vpc2", "vdpa"), ("52:54:00:00:00:08", "vpc2", "vdpa")], "c",
                    "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"), "prepare", "begin", name="c")
        r = hook(xml, "restore", "begin")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count('type="bridge"'), 2)
        self.assertEqual(r.stdout.count('<tag id="2334"/>'), 2)

    def test_linux_bridge_vlan_fails_closed_at_start(self):
        xml = domain([("52:54:00:00:00:01", "lan", "bridge")])
        env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=self.daemon.conf_dir)
        r = hook(xml, "start", "begin", env=env)
        # the tap libvirt named (vnetN) does not exist here: refused, closed
        self.assertOneLine(r, "domain vm1", "NIC 52:54:00:00:00:01", "VLAN 30 on Linux bridge br0", "vnet")

    def test_other_calls_do_nothing(self):
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        for op, sub in (("prepare", "end"), ("started", "begin"), ("stopped", "begin"), ("attach", "begin"),
                        ("migrate", "end"), ("frobnicate", "begin")):
            r = hook(xml, op, sub)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), (op, sub))
        self.assertEqual(self.leases(), [])

    def test_plain_domain_never_reaches_the_helper(self):
        # the dispatcher alone, without its helper: a domain without
        # metadata must pass without it (so without D-Bus or libxml2)
        d = tempfile.mkdtemp(prefix="va-hook-")
        self.addCleanup(shutil.rmtree, d)
        lone = os.path.join(d, "vdpa-allocator-hook")
        shutil.copy(HOOK, lone)
        for op in ("prepare", "start", "stopped", "release", "restore", "migrate"):
            sub = "end" if op in ("stopped", "release") else "begin"
            r = hook(PLAIN, op, sub, name="plain", hook_path=lone)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), op)
        r = hook(domain([("52:54:00:00:00:01", "vpc2", "vdpa")]), "prepare", "begin", hook_path=lone)
        self.assertOneLine(r, "cannot run", "vdpa-allocator-hook-helper")
        # the real pair: still nothing for a plain domain
        r = hook(PLAIN, "prepare", "begin", name="plain")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))

    def test_started_reaches_the_helper_only_for_a_swap_back_mark(self):
        # started begin has work only for a NIC marked swap-back: the
        # dispatcher alone passes any other marked domain at every start
        d = tempfile.mkdtemp(prefix="va-hook-")
        self.addCleanup(shutil.rmtree, d)
        lone = os.path.join(d, "vdpa-allocator-hook")
        shutil.copy(HOOK, lone)
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        r = hook(xml, "started", "begin", hook_path=lone)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        marked = xml.replace("<vdpa:nic ", "<vdpa:nic swap-back='accelerated' ", 1)
        self.assertNotEqual(marked, xml)
        r = hook(marked, "started", "begin", hook_path=lone)
        # reached it; and started never fails, not even for a missing helper
        self.assertNeverFails(r, "cannot run", "vdpa-allocator-hook-helper")

    def test_oversized_document_is_refused_not_taken_as_plain(self):
        # the namespace lies past the 16 MiB the dispatcher keeps: it must
        # read stdin to the end and let the helper refuse, not exit 0
        pad = "<!--" + "x" * (16 * 1024 * 1024) + "-->"
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")]).replace("<domain type='qemu'>", "<domain type='qemu'>" + pad)
        r = hook(xml, "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "over 16777216 bytes")
        self.assertEqual(self.leases(), [])

    def test_a_bus_that_never_authenticates_does_not_hang_the_hook(self):
        # dbus-daemon wedged: the socket accepts and never answers
        d = tempfile.mkdtemp(prefix="va-hook-")
        self.addCleanup(shutil.rmtree, d)
        path = os.path.join(d, "bus")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(srv.close)
        srv.bind(path)
        srv.listen(4)
        # the budget is the configuration's (default 10 s), not a constant
        conf = os.path.join(d, "etc")
        os.makedirs(conf)
        with open(os.path.join(conf, "vdpa-allocator.conf"), "w") as f:
            f.write("[hook]\ntimeout-ms=1500\n")
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=" + path, VDPA_ALLOCATOR_CONFIG_DIR=conf)
        t0 = time.monotonic()
        r = hook(domain([("52:54:00:00:00:01", "vpc2", "vdpa")]), "prepare", "begin", env=env)
        elapsed = time.monotonic() - t0
        self.assertOneLine(r, "domain vm1", "the system bus did not answer within 1.5 seconds")
        self.assertGreaterEqual(elapsed, 1.4)  # waited its budget, not the default's 10 s or nothing

    def test_source_dev_other_than_the_port_path_is_refused(self):
        # QEMU would open whatever file <source dev> names
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")], port_root="/etc")
        r = hook(xml, "prepare", "begin")
        self.assertOneLine(r, "domain vm1", "NIC 52:54:00:00:00:01", "<source dev='/etc/%s/52:54:00:00:00:01'/>" % UUID,
                           "is not the NIC's port path")
        self.assertEqual(self.leases(), [])

    def test_vdpactl_lease_list_by_domain(self):
        hook(domain([("52:54:00:00:00:01", "vpc2", "vdpa")]), "prepare", "begin")
        r = vdpactl("lease", "list", "--domain", "vm1", "-j", check=True)
        self.assertEqual(len(json.loads(r.stdout)["leases"]), 1)
        r = vdpactl("lease", "list", "--domain", "other", "-j", check=True)
        self.assertEqual(json.loads(r.stdout)["leases"], [])


# A daemon at its bounds: answers TryAgain to its first N calls of each
# method, then as vdpa-allocatord would; writes each call's name to a log.
BUSY_DAEMON = r"""
import sys
from gi.repository import Gio, GLib
XML = ("<node><interface name='org.vdpa_allocator.Allocator1'>"
       "<method name='Allocate'><arg type='s' direction='in'/><arg type='s' direction='in'/><arg type='s' direction='in'/>"
       "<arg type='s' direction='in'/><arg type='a{sv}' direction='in'/><arg type='a{sv}' direction='out'/></method>"
       "<method name='SwapBack'><arg type='s' direction='in'/><arg type='s' direction='in'/></method>"
       "</interface></node>")
refusals, log = int(sys.argv[1]), sys.argv[2]
seen = {}
def call(conn, sender, path, iface, method, params, inv):
    seen[method] = seen.get(method, 0) + 1
    with open(log, "a") as f:
        f.write(method + "\n")
    if seen[method] <= refusals:
        inv.return_dbus_error("org.vdpa_allocator.Error.TryAgain", "32 RewriteDomain calls are in progress already; try again")
    elif method == "SwapBack":
        inv.return_value(None)
    else:
        uuid, name, mac, network, _ = params.unpack()
        s, q = (lambda v: GLib.Variant("s", v)), (lambda v: GLib.Variant("q", v))
        lease = {"uuid": s(uuid), "domain_name": s(name), "mac": s(mac), "network": s(network), "pool": s("accel"),
                 "slot": s("0000:3c:00.0"), "device": s("va-0000:3c:00.0"), "chardev": s("/dev/vhost-vdpa-0"),
                 "port": s("/run/x"), "vlan": q(2334), "queues": q(1), "created": GLib.Variant("t", 1), "kind": s("vdpa")}
        inv.return_value(GLib.Variant("(a{sv})", (lease,)))
def acquired(conn, name):
    print("ready", flush=True)
conn = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
conn.register_object("/org/vdpa_allocator/Allocator1", Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0], call, None, None)
Gio.bus_own_name_on_connection(conn, "org.vdpa_allocator.Allocator1", 0, acquired, None)
GLib.MainLoop().run()
"""


class BusyDaemonTest(unittest.TestCase):
    """issue 25 (4): Busy is never a failure for a caller acting for
    libvirt. A daemon whose slots anyone can fill answers TryAgain; the
    hook waited for nothing and failed the start (migrate begin, 5 of 5)."""

    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.close()

    def busy_daemon(self, refusals):
        d = tempfile.mkdtemp(prefix="va-busy-")
        self.addCleanup(shutil.rmtree, d)
        log = os.path.join(d, "calls")
        proc = subprocess.Popen([sys.executable, "-c", BUSY_DAEMON, str(refusals), log], stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        self.assertEqual(proc.stdout.readline().strip(), "ready")
        conf = os.path.join(d, "etc")
        os.makedirs(conf)
        with open(os.path.join(conf, "vdpa-allocator.conf"), "w") as f:
            f.write("[hook]\ntimeout-ms=1500\n")
        return log, dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=conf)

    def calls(self, log):
        with open(log) as f:
            return f.read().split()

    def test_prepare_and_started_wait_out_try_again(self):
        log, env = self.busy_daemon(2)
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        r = hook(xml, "prepare", "begin", env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        # a portable NIC marked for a swap back, as after a move
        moved = domain([("52:54:00:00:00:01", "vpc2", "bridge")]).replace("<vdpa:nic ", "<vdpa:nic swap-back='accelerated' ", 1)
        r = hook(moved, "started", "begin", env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.calls(log), ["Allocate"] * 3 + ["SwapBack"] * 3)

    def test_reconnect_asks_a_swap_back_for_a_nic_a_swap_lost(self):
        # issue 25 (5): a swap cut short by libvirtd's restart marks its NIC
        # swap-back-outcome="lost" (no <interface> left, so the live XML
        # does not parse); libvirtd's reconnect is the moment to plug it
        # back, which the daemon's swap helper does once libvirtd runs
        log, env = self.busy_daemon(0)
        lost = domain([("52:54:00:00:00:01", "vpc2", "bridge")]).replace(
            "</vdpa:nics>", '<vdpa:nic mac="52:54:00:00:00:02" network="vpc2" swap-back="accelerated" '
            'swap-back-outcome="lost"/></vdpa:nics>', 1)
        r = hook(lost, "reconnect", "begin", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.calls(log), ["SwapBack"])
        # nothing lost: no swap back at a reconnect
        r = hook(lost.replace('swap-back-outcome="lost"', 'swap-back-outcome="refused"'), "reconnect", "begin", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.calls(log), ["SwapBack"])

    def test_try_again_past_the_budget_fails_what_may_fail_in_one_line(self):
        log, env = self.busy_daemon(1000)
        xml = domain([("52:54:00:00:00:01", "vpc2", "vdpa")])
        t0 = time.monotonic()
        r = hook(xml, "prepare", "begin", env=env)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("NIC 52:54:00:00:00:01: still refused after", r.stderr)
        self.assertIn("try again", r.stderr)
        self.assertGreaterEqual(elapsed, 1.4)  # waited its budget (1.5 s), not the default's 10 s
        self.assertGreater(len(self.calls(log)), 2)
        # started never fails: the NIC keeps its mark, unmarked by an
        # outcome, for the daemon's resume or the next started begin
        moved = domain([("52:54:00:00:00:01", "vpc2", "bridge")]).replace("<vdpa:nic ", "<vdpa:nic swap-back='accelerated' ", 1)
        r = hook(moved, "started", "begin", env=env)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("no swap back of its portable NICs", r.stderr)
        self.assertIn("still refused after", r.stderr)


SRIOV_CONFIG = sim_config(
    pfs=2, vfs=2, pools={"accel": {"match_pci": "0000:3b:00.0"}, "pt": {"kind": "sriov", "match_pci": "0001:3b:00.0"}},
    networks={"pt2334": dict(mode="sriov", pool="pt", vlan=2334),
              "ptfo": dict(mode="sriov", pool="pt", vlan=2334, fallback_bridge="br0", failover="true"),
              "ptfo-ovs": dict(mode="sriov", pool="pt", vlan=2334, fallback_bridge="br-ovs", fallback_bridge_type="ovs",
                               failover="true"),
              "ptauto": dict(mode="auto", pool="pt", vlan=2334, fallback_bridge="br-ovs", fallback_bridge_type="ovs")})
UUID2 = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"


def sriov_domain(nics, name="vm1", uuid=UUID):
    """nics: (mac, network, vf, vlan): vf None is the defined form (libvirt
    at prepare begin), else the live one libvirt shows from start begin:
    type='hostdev' with the VF it chose ("0001:3c:00.0") and its <vlan>."""
    meta = "".join('<vdpa:nic mac="%s" network="%s"/>' % (m, n) for m, n, _, _ in nics)
    ifaces = ""
    for m, _, vf, vlan in nics:
        tag = "<vlan><tag id='%d'/></vlan>" % vlan if vlan else ""
        if vf is None:
            ifaces += "<interface type='network'><mac address='%s'/><source network='vdpa-allocator-pt'/>%s</interface>" % (m, tag)
        else:
            dom, bus, rest = vf.split(":")
            slot, fn = rest.split(".")
            ifaces += ("<interface type='hostdev' managed='yes'><mac address='%s'/><driver name='vfio'/><source>"
                       "<address type='pci' domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/></source>%s"
                       "<alias name='hostdev0'/></interface>" % (m, dom, bus, slot, fn, tag))
    return ("<domain type='qemu'><name>%s</name><uuid>%s</uuid><memory>65536</memory>"
            "<metadata><vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>%s</vdpa:nics></metadata>"
            "<os><type>hvm</type></os><devices>%s</devices></domain>" % (name, uuid, meta, ifaces))


class SoftwareMemoryHookTest(unittest.TestCase):
    """Issue 28: a software device's relay reaches only shared, file-backed
    guest memory. At prepare the hook asks for hardware only for a domain
    without it, so a full pool refuses in one line rather than start the
    guest on a NIC that moves nothing; with it, the NIC gets its software
    device."""

    CONF = sim_config(pfs=1, vfs=1, pools={"accel": dict(ACCEL, software_slots=1)},
                      networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334, fallback_bridge="br0")})
    SHARED = ("<memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>"
              "<os>")

    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.close()

    def setUp(self):
        self.daemon = Daemon(self.bus, config=self.CONF)
        self.daemon.start()
        self.port_root = os.path.join(self.daemon.run_dir, "ports")

    def tearDown(self):
        self.daemon.stop()
        self.daemon.remove()

    def test_a_full_pool_gives_software_only_to_shared_memory(self):
        first = domain([("52:54:00:00:00:01", "vpc2", "vdpa")], "a", port_root=self.port_root)
        self.assertEqual(hook(first, "prepare", "begin", name="a").returncode, 0)
        uuid = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
        plain = domain([("52:54:00:00:00:02", "vpc2", "vdpa")], "b", uuid, port_root=self.port_root)
        r = hook(plain, "prepare", "begin", name="b")
        self.assertEqual(r.returncode, 1, r)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("NIC 52:54:00:00:00:02: pool 'accel' has no free hardware slot, and the NIC is hardware only", r.stderr)
        self.assertIn("the domain's memory is not shared and file-backed", r.stderr)
        self.assertEqual([x["mac"] for x in leases(self.bus)], ["52:54:00:00:00:01"])
        shared = plain.replace("<os>", self.SHARED, 1)
        r = hook(shared, "prepare", "begin", name="b")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        sw = [x for x in leases(self.bus) if x["mac"] == "52:54:00:00:00:02"]
        self.assertEqual([x["form"] for x in sw], ["software"])


class SriovHookTest(SharedDaemonTest):
    """kind=sriov: libvirt picks the VF from the pool's hostdev network
    after prepare begin (libvirt 9.0's prepare XML still shows
    type='network', tests/lab/lab-igb-daemon.sh); the hook records it at
    start begin. One daemon for the cases that leave only leases
    (SharedDaemonTest checks they are undone, the simulated VFs' files
    too); @own_daemon for those that read what it did since its start or
    restart it."""

    CONFIG = SRIOV_CONFIG

    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.bus.close()

    def setUp(self):
        super().setUp()
        self.env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=self.daemon.conf_dir)

    def settle(self, daemon):
        # and until it has tried to define pool pt's hostdev network in
        # libvirt, which is unreachable here: the pool's Warning says so
        super().settle(daemon)
        deadline = time.monotonic() + 300
        while not pool_props(self.bus, PATH + "/pool/pt")["Warning"]:
            self.assertLess(time.monotonic(), deadline, daemon.read_log())
            time.sleep(0.05)

    def leases(self):
        return leases(self.bus)

    def pool(self):
        return json.loads(vdpactl("pool", "show", "pt", "-j", check=True).stdout)

    def start(self, xml, name="vm1"):
        return hook(xml, "start", "begin", name=name, env=self.env)

    def assertOneLine(self, r, *parts):
        self.assertEqual(r.returncode, 1, r)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for p in parts:
            self.assertIn(p, lines[0])

    def test_start_records_libvirts_vf_and_stop_gives_it_back(self):
        mac = "52:54:00:15:23:34"
        r = hook(sriov_domain([(mac, "pt2334", None, 2334)]), "prepare", "begin", env=self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.leases(), [])
        live = sriov_domain([(mac, "pt2334", "0001:3c:00.1", 2334)])
        r = self.start(live)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        (lease,) = self.leases()
        self.assertEqual((lease["kind"], lease["slot"], lease["pool"], lease["vlan"], lease["queues"]),
                         ("sriov", "0001:3c:00.1", "pt", 2334, 0))
        self.assertEqual((lease["device"], lease["chardev"], lease["port"]), ("", "", ""))
        self.assertFalse(os.path.exists(os.path.join(self.daemon.run_dir, "ports", UUID)))
        doc = json.loads(vdpactl("lease", "list", "-j", check=True).stdout)
        (j,) = doc["leases"]
        self.assertEqual((j["kind"], j["mgmtdev"], j["device"], j["port"]), ("sriov", "pci/0001:3c:00.1", None, None))
        table = vdpactl("lease", "list", check=True).stdout
        self.assertIn("KIND", table.splitlines()[0])
        self.assertIn("sriov", table)
        p = self.pool()
        self.assertEqual((p["total"], p["leased"], p["free"]), (2, 1, 1))
        # a second start begin of the same start is idempotent
        self.assertEqual(self.start(live).returncode, 0)
        self.assertEqual(len(self.leases()), 1)
        r = hook(live, "stopped", "end", env=self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.leases(), [])
        self.assertEqual(self.pool()["free"], 2)

    @own_daemon()
    def test_a_failover_standby_leases_nothing_and_its_tap_is_tagged(self):
        # issue 27, point 5: the standby is a tap on the network's bridge;
        # its VF is leased when the daemon plugs it beside the standby
        def standby(mac, network, bridge):
            return ("<domain type='qemu'><name>vm1</name><uuid>%s</uuid><memory>65536</memory>"
                    "<metadata><vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"
                    "<vdpa:nic mac='%s' network='%s'/></vdpa:nics></metadata>"
                    "<os><type machine='pc-q35-7.2'>hvm</type></os><devices><interface type='bridge'><mac address='%s'/>"
                    "<source bridge='%s'/><target dev='vnet93'/><model type='virtio'/><teaming type='persistent'/>"
                    "<alias name='ua-vdpa-525400000001'/></interface></devices></domain>" % (UUID, mac, network, mac, bridge))
        mac = "52:54:00:00:00:01"
        ovs = standby(mac, "ptfo-ovs", "br-ovs")
        for op in ("prepare", "start", "started"):
            r = hook(ovs, op, "begin", env=self.env)
            self.assertEqual((op, r.returncode, r.stderr), (op, 0, ""))
        self.assertEqual(self.leases(), [])
        # started begin asked the daemon for its VF (before, the
        # dispatcher ran nothing without a swap-back mark): its helper
        # leases and plugs once the domain runs; libvirt is not here
        deadline = time.monotonic() + 60
        while "vm1: swap back after its move incomplete" not in self.daemon.read_log():
            self.assertLess(time.monotonic(), deadline, self.daemon.read_log())
            time.sleep(0.05)
        self.assertIn("domain vm1 (%s): swap back after its move started" % UUID, self.daemon.read_log())
        # with its VF beside it (the member libvirt shows), nothing to ask
        member = ("<interface type='hostdev' managed='yes'><mac address='%s'/><source><address type='pci' domain='0x0001' "
                  "bus='0x3c' slot='0x00' function='0x1'/></source><teaming type='transient' persistent='ua-vdpa-525400000001'/>"
                  "<alias name='ua-vdpa-vf-525400000001'/></interface></devices>" % mac)
        r = hook(ovs.replace("</devices>", member), "started", "begin", env=self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        # the daemon logs a SwapBack before it answers the hook
        self.assertEqual(self.daemon.read_log().count("swap back after its move started"), 1)
        # on a Linux bridge the hook tags the tap, as for a portable NIC:
        # vnet93 does not exist here, so the start is refused, closed
        r = self.start(standby(mac, "ptfo", "br0"))
        self.assertOneLine(r, "NIC %s" % mac, "VLAN 2334 on Linux bridge br0", "vnet93")
        self.assertEqual(self.leases(), [])

    def test_the_daemon_picks_a_free_vf_for_a_failover_member(self):
        # issue 27, point 5: the plug of a failover member leases before
        # it attaches, so the daemon picks the VF (Allocate without vf);
        # before, it refused ("the lease names the VF it chose")
        held = os.path.join(self.daemon.run_dir, "sim", "vf", "0001:3c:00.0.held")
        os.makedirs(os.path.dirname(held), exist_ok=True)
        open(held, "w").close()  # libvirt passes it through, unleased: passed over
        r = vdpactl("allocate", "--uuid", UUID, "--mac", "52:54:00:00:00:01", "--network", "ptfo", "-j")
        self.assertEqual(r.returncode, 0, r.stderr)
        (lease,) = self.leases()
        self.assertEqual((lease["kind"], lease["slot"], lease["pool"], lease["vlan"]), ("sriov", "0001:3c:00.1", "pt", 2334))
        # asked again (a second started begin): the same VF
        r = vdpactl("allocate", "--uuid", UUID, "--mac", "52:54:00:00:00:01", "--network", "ptfo")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([x["slot"] for x in self.leases()], ["0001:3c:00.1"])
        # none free (the held one stays offered, not leased): the guest
        # stays on its standby, and the plug says the pool is full
        r = vdpactl("allocate", "--uuid", UUID2, "--mac", "52:54:00:00:00:02", "--network", "ptfo")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pool pt is exhausted", r.stderr)
        self.assertEqual(self.pool()["free"], 1)
        os.unlink(held)
        r = vdpactl("allocate", "--uuid", UUID2, "--mac", "52:54:00:00:00:02", "--network", "ptfo")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(x["slot"] for x in self.leases()), ["0001:3c:00.0", "0001:3c:00.1"])
        # a plain passthrough NIC still names libvirt's pick
        r = vdpactl("allocate", "--uuid", UUID2, "--mac", "52:54:00:00:00:03", "--network", "pt2334")
        self.assertIn("pool pt is kind sriov", r.stderr)

    def test_refusals_are_one_line_and_fail_the_start(self):
        a = "52:54:00:00:00:01"
        self.assertEqual(self.start(sriov_domain([(a, "pt2334", "0001:3c:00.0", 2334)])).returncode, 0)
        # a VF leased to another NIC
        r = self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.0", 2334)], "vm2", UUID2), "vm2")
        self.assertOneLine(r, "domain vm2", "NIC 52:54:00:00:00:02", "VF 0001:3c:00.0 of pool pt is leased to NIC %s" % a)
        # a VF not in the NIC's pool (one of the vdpa pool's)
        r = self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", "0000:3c:00.0", 2334)], "vm2", UUID2), "vm2")
        self.assertOneLine(r, "NIC 52:54:00:00:00:02", "VF 0000:3c:00.0 is not in pool pt")
        # a VLAN libvirt applied that is not the NIC's
        r = self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 2335)], "vm2", UUID2), "vm2")
        self.assertOneLine(r, "NIC 52:54:00:00:00:02", "on VLAN 2335, but the NIC's intent is VLAN 2334")
        r = self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 0)], "vm2", UUID2), "vm2")
        self.assertOneLine(r, "NIC 52:54:00:00:00:02", "on VLAN 0, but the NIC's intent is VLAN 2334")
        # no VF in the live XML: fail closed
        xml = sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 2334)], "vm2", UUID2).replace(
            "<address type='pci' domain='0x0001' bus='0x3c' slot='0x00' function='0x1'/>", "")
        r = self.start(xml, "vm2")
        self.assertOneLine(r, "NIC 52:54:00:00:00:02", "libvirt shows no VF for it")
        self.assertEqual([x["mac"] for x in self.leases()], [a])
        # Allocate on a kind=sriov pool without the VF: never a vDPA device
        r = vdpactl("allocate", "--uuid", UUID2, "--mac", "52:54:00:00:00:02", "--network", "pt2334")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pool pt is kind sriov", r.stderr)
        self.assertEqual(len(self.leases()), 1)

    @own_daemon()
    def test_reconcile_resets_a_vf_left_with_a_vlan_and_no_lease(self):
        # the simulated NIC keeps a VF's VLAN and MAC in RUN/sim/vf/SLOT;
        # SLOT.held stands for libvirt's saved state of a passthrough
        vfdir = os.path.join(self.daemon.run_dir, "sim", "vf")
        os.makedirs(vfdir, exist_ok=True)
        # after the daemon's own start-up reconciliation, which would
        # otherwise be the one that resets the VF
        deadline = time.monotonic() + 60
        while "reconciled:" not in self.daemon.read_log():
            self.assertLess(time.monotonic(), deadline, self.daemon.read_log())
            time.sleep(0.05)
        for slot, state in (("0001:3c:00.0", "2334 52:54:00:00:00:09"), ("0001:3c:00.1", "2335 52:54:00:00:00:0a"),
                            ("0001:3c:00.1.held", "")):
            with open(os.path.join(vfdir, slot), "w") as f:
                f.write(state)
        # libvirt is down here: done in part (5), the report still printed
        r = vdpactl("reconcile", "-j")
        self.assertEqual(r.returncode, 5, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["repaired"], ["VF 0001:3c:00.0 (sim1): no lease, left with VLAN and MAC 2334 52:54:00:00:00:09: reset"])
        self.assertFalse(os.path.exists(os.path.join(vfdir, "0001:3c:00.0")))
        self.assertTrue(os.path.exists(os.path.join(vfdir, "0001:3c:00.1")))
        doc = json.loads(vdpactl("reconcile", "-j").stdout)
        self.assertEqual(doc["repaired"], [])

    def test_a_lease_whose_vf_libvirt_holds_is_not_released(self):
        # issue 25 (8): a kind=sriov lease has no chardev, so release took
        # it under a running guest and the VF counted free while in use
        mac, vf = "52:54:00:15:23:34", "0001:3c:00.1"
        live = sriov_domain([(mac, "pt2334", vf, 2334)])
        self.assertEqual(self.start(live).returncode, 0)
        held = os.path.join(self.daemon.run_dir, "sim", "vf", vf + ".held")
        os.makedirs(os.path.dirname(held), exist_ok=True)
        open(held, "w").close()
        r = vdpactl("release", "--uuid", UUID, "--mac", mac)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("its VF %s is passed through (libvirt holds it): a guest runs on it" % vf, r.stderr)
        # libvirt calls stopped end before it gives the VF back, then
        # release end: the first says why in one line, the second releases
        r = hook(live, "stopped", "end", env=self.env)
        self.assertEqual(r.returncode, 0)
        self.assertIn("leases not released now", r.stderr)
        self.assertEqual([x["slot"] for x in self.leases()], [vf])
        self.assertEqual(self.pool()["free"], 1)
        os.unlink(held)
        r = hook(live, "release", "end", env=self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.leases(), [])
        self.assertEqual(self.pool()["free"], 2)

    def reconcile_without_libvirt(self):
        """vdpactl reconcile -j here, where libvirt does not answer: done in
        part (status 5, vdpactl(8)), the report printed whole."""
        r = vdpactl("reconcile", "-j", check=False)
        self.assertEqual(r.returncode, 5, r.stderr)
        return json.loads(r.stdout)

    @own_daemon()
    def test_reconcile_leaves_a_vf_a_host_driver_holds_and_does_not_offer_it(self):
        # issue 25 (6): a free VF on igbvf or mlx5_core (a container's VF,
        # a host storage VF) counted as left by a crash: its VLAN and MAC
        # were reset at every daemon start
        vfdir = os.path.join(self.daemon.run_dir, "sim", "vf")
        os.makedirs(vfdir, exist_ok=True)
        deadline = time.monotonic() + 60
        while "reconciled:" not in self.daemon.read_log():
            self.assertLess(time.monotonic(), deadline, self.daemon.read_log())
            time.sleep(0.05)
        vf = "0001:3c:00.0"
        for name, text in ((vf, "100 52:54:00:00:00:09"), (vf + ".driver", "igbvf\n")):
            with open(os.path.join(vfdir, name), "w") as f:
                f.write(text)
        line = "VF %s is bound to host driver igbvf: in use by the host, not offered" % vf
        doc = self.reconcile_without_libvirt()
        self.assertEqual((doc["repaired"], doc["host_held"]), ([], [line]))
        with open(os.path.join(vfdir, vf)) as f:
            self.assertEqual(f.read(), "100 52:54:00:00:00:09")
        p = self.pool()
        self.assertEqual((p["leased"], p["free"]), (0, 1))
        r = self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", vf, 2334)]))
        self.assertOneLine(r, "NIC 52:54:00:00:00:02", "VF %s" % vf)
        self.assertEqual(self.leases(), [])
        # the next discovery (here: a restart) says so on the pool too, and
        # the daemon's own reconcile resets nothing
        self.daemon.stop()
        self.daemon.start()
        deadline = time.monotonic() + 60
        while self.daemon.read_log().count("reconciled:") < 2:
            self.assertLess(time.monotonic(), deadline, self.daemon.read_log())
            time.sleep(0.05)
        with open(os.path.join(vfdir, vf)) as f:
            self.assertEqual(f.read(), "100 52:54:00:00:00:09")
        self.assertEqual(self.pool()["free"], 1)
        # let go: offered again
        os.unlink(os.path.join(vfdir, vf + ".driver"))
        doc = self.reconcile_without_libvirt()
        self.assertEqual(doc["host_held"], [])

    def test_auto_nic_falls_back_to_virtio_on_its_vlan_when_the_pool_is_full(self):
        self.assertEqual(self.start(sriov_domain([("52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 2334)])).returncode, 0)
        self.assertEqual(self.start(sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 2334)], "vm2", UUID2),
                                    "vm2").returncode, 0)
        p = self.pool()
        self.assertEqual((p["leased"], p["free"]), (2, 0))
        xml = ("<domain type='qemu'><name>vm3</name><uuid>11111111-2222-3333-4444-555555555555</uuid><memory>65536</memory>"
               "<metadata><vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"
               "<vdpa:nic mac='52:54:00:00:00:03' network='ptauto'/></vdpa:nics></metadata><os><type>hvm</type></os>"
               "<devices><interface type='network'><mac address='52:54:00:00:00:03'/><source network='default'/>"
               "</interface></devices></domain>")
        out = call(self.bus, "RewriteDomain", (xml, "auto"), "(ss)")[0]
        self.assertIn('<source bridge="br-ovs"/>', out)
        self.assertIn('<tag id="2334"/>', out)
        self.assertNotIn("vdpa-allocator-pt", out)
        # with a VF free again, auto takes the pool's hostdev network
        self.assertEqual(hook(sriov_domain([("52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 2334)], "vm2", UUID2),
                              "stopped", "end", name="vm2", env=self.env).returncode, 0)
        out = call(self.bus, "RewriteDomain", (xml, "auto"), "(ss)")[0]
        self.assertIn('<source network="vdpa-allocator-pt"/>', out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
