# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpactl domain against libvirt's own test driver (a real libvirt
connection, no libvirtd): show, and redefinitions that libvirt's parser must
accept."""

import json
import os
import re
import shlex
import shutil
import sqlite3
import struct
import subprocess
import tempfile
import unittest

from vatest import ctl
from vatest.bus import Bus, Daemon, vdpactl
from vatest.paths import HOOK, SRCDIR, VDPACTL
from vatest.simconf import ACCEL, sim_config

EXAMPLES = os.path.join(SRCDIR, "contrib", "examples")
UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"


class DomainCliTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="va-lvtest-")
        self.addCleanup(shutil.rmtree, self.dir)
        with open(os.path.join(EXAMPLES, "vm1.xml")) as f:
            xml = f.read()
        xml = xml.replace("<domain type='kvm'>", "<domain type='test'>")
        self.node = os.path.join(self.dir, "node.xml")
        with open(self.node, "w") as f:
            f.write("<node>\n" + xml + "</node>\n")
        self.uri = "test://" + self.node

    def ctl(self, *args):
        return vdpactl("domain", "--connect", self.uri, *args)

    def test_show_without_daemon(self):
        bus = Bus()
        try:
            r = self.ctl("show", "vm1", "-j")
            self.assertEqual(r.returncode, 0, r.stderr)
            shown = json.loads(r.stdout)
            self.assertEqual([(n["mac"], n["network"], n["form"]) for n in shown["nics"]],
                             [("52:54:00:6b:3c:58", "vpc2", "portable"),
                              ("52:54:00:6b:3c:59", "vpc1", "portable")])
            self.assertFalse(shown["daemon_reachable"])
            self.assertIsNone(shown["nics"][0]["device"])
            # the table still says so in words
            r = self.ctl("show", "vm1")
            self.assertIn("(daemon unreachable)", r.stdout.splitlines()[1])
        finally:
            bus.close()

    def test_show_with_lease(self):
        bus = Bus()
        daemon = Daemon(bus, config=open(os.path.join(EXAMPLES, "sim", "vdpa-allocator.conf")).read())
        try:
            daemon.start()
            vdpactl("allocate", "-u", UUID, "-m", "52:54:00:6b:3c:58", "-n", "vpc2", check=True)
            nics = json.loads(self.ctl("show", UUID, "-j").stdout)["nics"]
            self.assertTrue(nics[0]["device"].startswith("vdpa"), nics)
            self.assertIsNone(nics[1]["device"])
            # with the daemon up, the rewrite uses live capacity: a drained
            # pool sends vpc2 to its fallback bridge, which libvirt accepts
            r = self.ctl("accelerate", "vm1")
            self.assertEqual(r.returncode, 0, r.stderr)
            vdpactl("pool", "drain", "cx6-p1", check=True)
            r = self.ctl("accelerate", "vm1")
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_redefine_both_ways(self):
        # no daemon: an offline rewrite from the configuration, which
        # libvirt's own parser then accepts
        for verb, form in (("accelerate", "accelerated"), ("portable", "portable")):
            r = self.ctl(verb, "vm1", "--config", EXAMPLES)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("redefined with %s NICs" % form, r.stdout)

    def test_errors_are_one_line(self):
        # 1: the operation failed; 2: a usage error
        for args, status in ((("show", "nope"), 1), (("accelerate", "nope"), 1), (("accelerate", "vm1", "--config", self.dir), 1),
                             (("frobnicate", "vm1"), 2), (("show",), 2), (("show", "vm1", "--bogus"), 2)):
            r = self.ctl(*args)
            self.assertEqual(r.returncode, status, args)
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.splitlines()), 1, (args, r.stderr))
        r = vdpactl("domain", "--connect", "test:///nonexistent/file.xml", "show", "vm1")
        self.assertEqual(r.returncode, 3)  # libvirt unreachable
        self.assertIn("libvirt at test:///nonexistent/file.xml", r.stderr)

    def test_offline_policy_is_one_for_every_client(self):
        """The daemon down: every client rewrites offline from the
        configuration, or fails with the loader's one line (file and line)
        when it cannot be parsed (docs/hook-contract.md)."""
        bad = os.path.join(self.dir, "bad")
        os.mkdir(bad)
        with open(os.path.join(bad, "vdpa-allocator.conf"), "w") as f:
            f.write("[network vpc2]\nmode=virtio\n[pool cx6-p1\nvfs=2\n")
        with open(os.path.join(EXAMPLES, "vm1.xml")) as f:
            xml = f.read()
        expected = os.path.join(bad, "vdpa-allocator.conf") + ":3: "

        def run(cmd, config, stdin=None):
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=config)
            return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60)

        clients = {
            "hook migrate begin": ([HOOK, "vm1", "migrate", "begin", "-"], xml, "vdpa-allocator: domain vm1: the configuration does not load: "),
            "hook restore begin": ([HOOK, "vm1", "restore", "begin", "-"], xml, "vdpa-allocator: domain vm1: the configuration does not load: "),
            "vdpactl domain accelerate": ([VDPACTL, "domain", "--connect", self.uri, "accelerate", "vm1"], None, "vdpactl: "),
            "vdpactl domain portable": ([VDPACTL, "domain", "--connect", self.uri, "portable", "vm1"], None, "vdpactl: "),
            "vdpactl rewrite": ([VDPACTL, "rewrite", "-"], xml, "vdpactl: "),
        }
        bus = Bus()  # a bus without the daemon: "not running"
        try:
            messages = set()
            for name, (cmd, stdin, prefix) in clients.items():
                r = run(cmd, bad, stdin)
                self.assertEqual((r.returncode, r.stdout), (1, ""), (name, r.stderr))
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, (name, r.stderr))
                self.assertTrue(lines[0].startswith(prefix + expected), (name, lines[0]))
                messages.add(lines[0][len(prefix):])
            # one message, whichever client met the file
            self.assertEqual(len(messages), 1, messages)
            self.assertIn("[pool cx6-p1", messages.pop())

            # a good configuration: the offline rewrite, as before
            for name, (cmd, stdin, prefix) in clients.items():
                r = run(cmd, EXAMPLES, stdin)
                self.assertEqual(r.returncode, 0, (name, r.stderr))
                if name.startswith("hook"):
                    # nothing can be leased without the daemon: portable
                    self.assertIn("<domain", r.stdout)
                    self.assertNotIn('type="vdpa"', r.stdout)
                    self.assertEqual(r.stderr, "")
                elif name == "vdpactl rewrite":
                    self.assertEqual(r.stdout.count('type="vdpa"'), 1, r.stdout)
                else:
                    self.assertIn("redefined with", r.stdout)
        finally:
            bus.close()

    def add_domain(self, name, uuid, metadata, iface):
        """A second domain in the test driver's node: @metadata inside
        <metadata>, @iface its one interface."""
        with open(self.node) as f:
            node = f.read()
        dom = ("<domain type='test'><name>%s</name><uuid>%s</uuid><metadata>%s</metadata><memory>65536</memory>"
               "<os><type>hvm</type></os><devices>%s</devices></domain>\n" % (name, uuid, metadata, iface))
        with open(self.node, "w") as f:
            f.write(node.replace("</node>", dom + "</node>"))

    def test_issue26_nothing_to_accelerate_is_refused(self):
        # a domain without vdpa:nics: "redefined with accelerated NICs",
        # exit 0, before; now a refusal that says why
        self.add_domain("plain", "4dea22b3-1d52-d8f3-2516-782e98ab3fb2", "",
                        "<interface type='network'><mac address='52:54:00:00:00:77'/><source network='default'/>"
                        "<model type='virtio'/></interface>")
        for args in (("accelerate", "plain", "--config", EXAMPLES), ("portable", "plain", "--config", EXAMPLES),
                     ("accelerate", "--live", "plain")):
            r = self.ctl(*args)
            self.assertEqual((r.returncode, r.stdout), (1, ""), (args, r.stderr))
            self.assertIn("marks no NIC in its vdpa:nics metadata", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_issue26_connect_and_json_where_habits_put_them(self):
        # virsh and ip habits: --connect after the subcommand, -j before
        # the command; both were unknown options there before
        for argv in (("domain", "show", "vm1", "--connect", self.uri, "-j"), ("-j", "domain", "show", "vm1", "--connect", self.uri),
                     ("--connect", self.uri, "domain", "show", "-j", "vm1"), ("domain", "show", "vm1", "--connect=" + self.uri, "--json")):
            r = vdpactl(*argv)
            self.assertEqual(r.returncode, 0, (argv, r.stderr))
            self.assertEqual(json.loads(r.stdout)["domain"], "vm1")
        # --connect is domain's alone; -j where nothing prints JSON
        for argv in (("--connect", self.uri, "status"), ("domain", "--connect", self.uri, "attach", "vm1", "-n", "vpc2", "-j")):
            r = vdpactl(*argv)
            self.assertEqual(r.returncode, 2, (argv, r.stderr))

    def test_live_accelerate_onto_private_memory_is_hardware_only(self):
        # issue 28: a software device's relay reaches only shared,
        # file-backed guest memory, and a running guest's memory stays as
        # it started. Before, the swap took the pool's software slot and
        # plugged a NIC that moves nothing.
        conf = sim_config(pfs=1, vfs=1, pools={"accel": dict(ACCEL, software_slots=1)},
                          networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334, fallback_bridge="br0"),
                                    "vpc1": dict(mode="virtio", vlan=2200, fallback_bridge="br0")})
        bus = Bus()
        daemon = Daemon(bus, config=conf)
        try:
            daemon.start()
            vdpactl("allocate", "-u", "4dea22b3-1d52-d8f3-2516-782e98ab3fb9", "-m", "52:54:00:00:00:99", "-n", "vpc2", check=True)
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)
            r = ctl.vdpactl("domain", "--connect", self.uri, "accelerate", "--live", "vm1", "-j", check=False, env=env)
            self.assertEqual(r.returncode, 5, r.stderr)
            nics = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}
            nic = nics["52:54:00:6b:3c:58"]
            self.assertEqual(nic["form_after"], "portable")
            self.assertIn("stays portable: hardware only, as the running domain's memory is not shared and file-backed", nic["note"])
            self.assertIn("pool 'accel' has no free hardware slot", nic["note"])
            forms = [x["form"] for x in json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"]]
            self.assertEqual(forms, ["hardware"])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    FAILOVER_CONF = dict(pfs=1, vfs=1, pools={"pt": dict(kind="sriov", match_pci="0000:3b:00.0")},
                         networks={"vpc2": dict(mode="sriov", pool="pt", vlan=2334, fallback_bridge="br0", failover="true"),
                                   "vpc1": dict(mode="virtio", vlan=2200, fallback_bridge="br0")})

    def standby_node(self):
        """vm1 running in the failover form: NIC ...:58 its virtio standby
        alone, as a start leaves it (libvirt's test driver runs it)."""
        with open(self.node) as f:
            xml = f.read()
        xml = xml.replace("<mac address='52:54:00:6b:3c:58'/>\n      <source network='default'/>\n      <model type='virtio'/>",
                          "<mac address='52:54:00:6b:3c:58'/>\n      <source network='default'/>\n      <model type='virtio'/>"
                          "<teaming type='persistent'/><alias name='ua-vdpa-5254006b3c58'/>", 1)
        self.assertIn("ua-vdpa-5254006b3c58", xml)
        with open(self.node, "w") as f:
            f.write(xml)

    def test_live_accelerate_swaps_a_portable_failover_nic_to_its_standby(self):
        # issue 27, point 5: the portable NIC goes to its standby (here
        # libvirt's test driver cannot unplug: it stays portable and says
        # so). Before, the note said there was no live swap to it yet
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(**self.FAILOVER_CONF))
        try:
            daemon.start()
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)
            r = ctl.vdpactl("domain", "--connect", self.uri, "accelerate", "--live", "vm1", "-j", check=False, env=env)
            self.assertEqual(r.returncode, 5, r.stderr)
            nic = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual((nic["path"], nic["form_after"], nic["failover"], nic["failover_vf"]), ("swap", "portable", False, None))
            self.assertIn("stays portable: libvirt refused the unplug", nic["note"])
            self.assertEqual(json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"], [])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_a_standby_gets_a_vf_leased_and_plugged_or_runs_alone_and_says_why(self):
        # issue 27, point 5: a standby without its VF (as a start leaves
        # it) gets one of its pool, leased first, then plugged; libvirt's
        # test driver refuses every plug, so the lease is given back and
        # the guest stays on its standby. Before, accelerate --live left a
        # standby alone without a word
        self.standby_node()
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(**self.FAILOVER_CONF))
        try:
            daemon.start()
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)

            def live(*args):
                return ctl.vdpactl("domain", "--connect", self.uri, *args, check=False, env=env)

            r = live("accelerate", "--live", "vm1", "-j")
            self.assertEqual(r.returncode, 5, r.stderr)
            nic = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual((nic["form_after"], nic["failover"], nic["failover_vf"]), ("accelerated", True, None))
            self.assertIn("on its virtio standby alone: libvirt refused VF 0000:3c:00.0: this function is not supported", nic["note"])
            self.assertIn("its VF lease was released", nic["note"])
            self.assertEqual(json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"], [])
            r = live("show", "vm1", "-j")
            self.assertEqual(r.returncode, 0, r.stderr)
            nic = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual((nic["failover"], nic["passthrough_vf"]), (True, None))
            self.assertIn("no VF plugged; pool pt has 1 free", nic["standby_only"])
            # no free VF: said by the plug, by show and in its table
            vdpactl("allocate", "-u", "11111111-2222-3333-4444-555555555555", "-m", "52:54:00:00:00:01", "-n", "vpc2", check=True)
            r = live("accelerate", "--live", "vm1", "-j")
            self.assertEqual(r.returncode, 5, r.stderr)
            nic = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual(nic["failover_vf"], None)
            self.assertIn("on its virtio standby alone: no free VF", nic["note"])
            r = live("accelerate", "--live", "vm1")
            self.assertIn("(failover standby alone, no VF)", r.stdout)
            self.assertIn("1 of its NICs stays as portable, or on its failover standby without a VF", r.stderr)
            nic = {n["mac"]: n for n in json.loads(live("show", "vm1", "-j").stdout)["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual(nic["standby_only"], "no free VF in pool pt")
            self.assertIn("on its failover standby alone: no free VF in pool pt", live("show", "vm1").stdout)
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_a_standby_gets_its_vf_tried_whatever_another_nic_meets(self):
        # the standby's VF needs no rewrite: a refusal of the accelerated
        # form for another NIC (here vpc1's pool, which no PF matches, with
        # no fallback) left the standby alone with that refusal as its note
        self.standby_node()
        conf = dict(self.FAILOVER_CONF, pools={"pt": dict(kind="sriov", match_pci="0000:3b:00.0"),
                                               "nopf": dict(ACCEL, match_pf="enp179s0f1")})
        conf["networks"] = dict(conf["networks"], vpc1=dict(mode="vdpa", pool="nopf", vlan=2200))
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(**conf))
        try:
            daemon.start()
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)
            r = ctl.vdpactl("domain", "--connect", self.uri, "accelerate", "--live", "vm1", "-j", check=False, env=env)
            self.assertEqual(r.returncode, 5, r.stderr)
            nics = {n["mac"]: n for n in json.loads(r.stdout)["nics"]}
            self.assertIn("stays portable: NIC 52:54:00:6b:3c:59: pool 'nopf' has no free slot", nics["52:54:00:6b:3c:59"]["note"])
            self.assertIn("on its virtio standby alone: libvirt refused VF 0000:3c:00.0", nics["52:54:00:6b:3c:58"]["note"])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_reconcile_releases_a_failover_vf_unplugged_behind_its_back(self):
        # issue 27, point 5: a member unplugged from the running guest by
        # other means (virsh detach-device-alias, the guest) lets its VF go
        # to no driver; reconcile gives its lease back. Before, the lease
        # of a running domain stayed until its stop. While libvirt holds
        # the VF (QEMU's own unplug at a migration keeps it), it stays
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(**self.FAILOVER_CONF))
        try:
            daemon.start(libvirt_uri=self.uri)
            vdpactl("allocate", "-u", UUID, "-m", "52:54:00:6b:3c:58", "-n", "vpc2", check=True)
            (lease,) = json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"]
            vf = lease["mgmtdev"].split("/", 1)[1]
            daemon.stop()
            # older than the grace that covers an Allocate before its plug
            with sqlite3.connect(os.path.join(daemon.state_dir, "leases.db")) as c:
                c.execute("UPDATE leases SET created = created - 3600")
            held = os.path.join(daemon.run_dir, "sim", "vf", vf + ".held")
            os.makedirs(os.path.dirname(held), exist_ok=True)
            open(held, "w").close()
            daemon.start(libvirt_uri=self.uri)
            doc = json.loads(vdpactl("reconcile", "-j", check=True).stdout)
            self.assertEqual(doc["released"], 0, doc)
            self.assertEqual(len(json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"]), 1)
            os.unlink(held)
            doc = json.loads(vdpactl("reconcile", "-j", check=True).stdout)
            self.assertEqual(doc["released"], 1, doc)
            self.assertEqual(json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"], [])
            self.assertIn("NIC 52:54:00:6b:3c:58 of domain %s: its failover VF %s was unplugged from the running guest" % (UUID, vf),
                          daemon.read_log())
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_save_leaves_a_failover_standby_to_qemu(self):
        # issue 27, point 5: QEMU unplugs a failover pair's VF for a move
        # by itself and the guest goes on on its standby: no swap. Before,
        # the save swapped the standby to portable first (here: refused by
        # libvirt's test driver, so the save failed)
        self.standby_node()
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(**self.FAILOVER_CONF))
        try:
            daemon.start()
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)
            image = os.path.join(self.dir, "vm1.save")
            r = ctl.vdpactl("domain", "--connect", self.uri, "save", "vm1", image, "-j", check=False, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            nic = {n["mac"]: n for n in doc["nics"]}["52:54:00:6b:3c:58"]
            self.assertEqual((nic["path"], nic["form_before"], nic["form_after"], nic["failover"]),
                             ("native", "accelerated", "accelerated", True))
            self.assertIn("failover: no swap", nic["note"])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_issue26_partial_live_accelerate_and_restore_of_a_portable_nic(self):
        bus = Bus()
        with open(os.path.join(EXAMPLES, "sim", "vdpa-allocator.conf")) as f:
            daemon = Daemon(bus, config=f.read())
        try:
            daemon.start()
            # a drained pool: the NIC on vpc2 stays portable. Before, the
            # report said "done" and -j "done": true, exit 0.
            vdpactl("pool", "drain", "cx6-p1", check=True)
            # the daemon's configuration, where vdpactl reads a NIC's mode:
            # vpc1 is virtio, which stays portable by intent
            env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=daemon.conf_dir)

            def live(*args):
                return ctl.vdpactl("domain", "--connect", self.uri, *args, check=False, env=env)

            r = live("accelerate", "--live", "vm1", "-j")
            self.assertEqual(r.returncode, 5, r.stderr)
            doc = json.loads(r.stdout)
            self.assertEqual((doc["done"], doc["partial"]), (False, True))
            nics = {n["mac"]: n for n in doc["nics"]}
            self.assertEqual(nics["52:54:00:6b:3c:58"]["form_after"], "portable")
            self.assertIn("stays portable", nics["52:54:00:6b:3c:58"]["note"])
            self.assertIn("done in part", r.stderr)
            r = live("accelerate", "--live", "vm1")
            self.assertEqual(r.returncode, 5, r.stderr)
            self.assertNotIn("accelerate done", r.stdout)
            self.assertIn("accelerate done in part: 1 of its NICs stays as portable", r.stderr)
            vdpactl("pool", "undrain", "cx6-p1", check=True)

            # restore of a domain whose NICs the operator made portable:
            # nothing marked them, so nothing is swapped or leased. Before,
            # restore leased a device for each and tried the swap.
            # libvirt's test driver's save image: its magic, the length,
            # the live XML
            image = os.path.join(self.dir, "vm1.save")
            with open(self.node) as f:
                xml = f.read().replace("<node>\n", "").replace("</node>\n", "").encode()
            with open(image, "wb") as f:
                f.write(b"TestGuestMagic\0" + struct.pack("<i", len(xml)) + xml)
            # each test:// connection is a host of its own: one without vm1
            empty = os.path.join(self.dir, "empty.xml")
            with open(empty, "w") as f:
                f.write("<node/>\n")
            r = ctl.vdpactl("domain", "restore", image, "-j", "--swap-back-timeout", "0", "--connect", "test://" + empty,
                            check=False, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            doc = json.loads(r.stdout)
            self.assertTrue(doc["done"])
            for n in doc["nics"]:
                self.assertEqual((n["path"], n["form_after"]), ("as-is", "portable"), n)
                self.assertIn("not marked by a swap", n["note"])
            self.assertEqual(json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"], [])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_issue26_a_refusal_says_why_the_pool_has_no_room(self):
        # "pool 'cx6-p1' has no free slot and its network allows no
        # fallback" for a draining pool with free slots: now the reason
        # and the command that helps; and for a pool that no PF matches
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(
            pfs=1, vfs=2, pools={"cx6-p1": ACCEL, "nopf": dict(ACCEL, match_pf="enp179s0f1")},
            networks={"vpc2": dict(mode="vdpa", pool="cx6-p1", vlan=2334), "vpc1": dict(mode="vdpa", pool="nopf", vlan=2200)}))
        try:
            daemon.start()
            vdpactl("pool", "drain", "cx6-p1", check=True)
            r = self.ctl("accelerate", "vm1")
            self.assertEqual((r.returncode, r.stdout), (1, ""), r.stderr)
            self.assertIn("pool 'cx6-p1' has no free slot (it is draining: 'vdpactl pool undrain cx6-p1' ends that; "
                          "'vdpactl domain portable DOMAIN' runs the domain without acceleration)", r.stderr)
            vdpactl("pool", "undrain", "cx6-p1", check=True)
            r = self.ctl("accelerate", "vm1")
            self.assertEqual((r.returncode, r.stdout), (1, ""), r.stderr)
            self.assertIn("pool 'nopf' has no free slot (no PF matches pool nopf (match-pf=enp179s0f1 match-vendor=15b3))",
                          r.stderr)
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_issue26_progress_on_a_terminal_only(self):
        # a save said nothing until it ended (42 s in the issue); on a
        # terminal each phase is a line with its elapsed time, and nothing
        # of that in a pipe or with -j
        image = os.path.join(self.dir, "vm1.save")
        cmd = [VDPACTL, "domain", "save", "vm1", image, "--connect", self.uri]
        bus = Bus()  # no daemon: nothing is accelerated, nothing to lease
        try:
            r = subprocess.run(["script", "-qec", " ".join(shlex.quote(a) for a in cmd), "/dev/null"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout)
            self.assertRegex(r.stdout, r"vdpactl: \[ *\d+\.\d s\] saving the domain to %s\r?\n" % re.escape(image))
            self.assertRegex(r.stdout, r"vdpactl: \[ *\d+\.\d s\] saved\r?\n")
            os.unlink(image)
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
        finally:
            bus.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
