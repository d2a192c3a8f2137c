# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpactl domain against libvirt's own test driver (a real libvirt
connection, no libvirtd): show, and redefinitions that libvirt's parser must
accept."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from vatest.bus import Bus, Daemon, vdpactl
from vatest.paths import HOOK, SRCDIR, VDPACTL

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
