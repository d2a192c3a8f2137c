# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpactl's exit statuses (vdpactl(8) EXIT STATUS) and its messages: 0 ok,
1 failed, 2 usage, 3 unreachable, 4 refused by policy; one line on stderr in
our words, never GDBus's. The real daemon on a private bus, a bus whose
policy denies a call, and a python3-dbusmock stand-in that answers with
errors the real daemon never sends."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from vatest.bus import NAME, PATH, IFACE, Bus, Daemon, vdpactl
from vatest.simconf import ACCEL, sim_config
from gi.repository import GLib  # after vatest.bus: it requires Gio 2.0

UUID = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
MAC = "52:54:00:00:00:01"
NOBODY = 65534
MOCK = "org.freedesktop.DBus.Mock"


class ExitCodeTest(unittest.TestCase):
    def assertExit(self, r, status, *words):
        """@status, nothing on stdout, one line on stderr in our words."""
        self.assertEqual(r.returncode, status, (r.args, r.stderr))
        self.assertEqual(r.stdout, "", r.args)
        self.assertEqual(len(r.stderr.splitlines()), 1, (r.args, r.stderr))
        self.assertTrue(r.stderr.startswith("vdpactl: "), r.stderr)
        for bad in ("GDBus", "org.freedesktop.DBus.Error", "Rejected send message"):
            self.assertNotIn(bad, r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)

    def test_2_usage(self):
        for args in ([], ["frobnicate"], ["status", "--bogus"], ["status", "extra"], ["pool", "frob"],
                     ["pool", "show"], ["pool", "show", "no/such"], ["lease", "frob"], ["network", "frob"],
                     ["allocate", "-u", UUID], ["allocate", "-u", UUID, "-m", MAC],
                     ["allocate", "-u", UUID, "-m", MAC, "-n", "x", "--vlan", "5000"], ["release", "-u", UUID],
                     ["release", "-u", UUID, "--vlan"], ["domain", "frob"], ["domain"], ["domain", "attach", "vm1"],
                     ["domain", "detach", "vm1"], ["rewrite", "--to", "fast"], ["rewrite", "a", "b"],
                     ["rewrite", "--capacity", "x"], ["version", "x"], ["reconcile", "--queues", "2"],
                     # issue 26: malformed identifiers are usage errors, as the page says
                     ["allocate", "-u", "6f1e2a3b", "-m", MAC, "-n", "vpc2"], ["allocate", "-u", UUID, "-m", "52:54", "-n", "vpc2"],
                     ["release", "-u", "6f1e2a3b", "--all"], ["release", "-u", UUID, "-m", "52:54"],
                     # an option that would be ignored is refused
                     ["allocate", "-u", UUID, "-m", MAC, "-n", "vpc2", "--vlan", "5"],
                     ["release", "-u", UUID, "--domain", "web5", "--all"], ["release", "--domain", "web5"],
                     # global options where they mean nothing
                     ["-j", "release", "-u", UUID, "--all"], ["pool", "drain", "accel", "-j"], ["-j", "version"],
                     ["--connect", "test:///default", "status"], ["--connect"], ["help", "frob"]):
            r = vdpactl(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertEqual(len(r.stderr.splitlines()), 1, (args, r.stderr))
            self.assertNotIn("GDBus", r.stderr)

    def test_3_unreachable(self):
        # no bus at all
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=" + os.path.join(tempfile.gettempdir(), "va-no-such-bus"))
        r = subprocess.run([os.environ.get("VDPACTL") or vdpactl("--version").args[0], "status"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertExit(r, 3, "cannot reach the system bus")
        # a bus, no daemon on it
        bus = Bus()
        try:
            for args in (["status"], ["pool", "list"], ["lease", "list", "-j"], ["reconcile"],
                         ["allocate", "-u", UUID, "-m", MAC, "-n", "vpc2"], ["release", "-u", UUID, "--all"]):
                self.assertExit(vdpactl(*args), 3, "vdpa-allocatord is not running")
        finally:
            bus.close()
        # libvirt not reachable
        self.assertExit(vdpactl("domain", "--connect", "qemu+unix:///system?socket=/nonexistent/libvirt-sock", "show", "vm1"), 3,
                        "libvirt at")

    def test_0_1_and_4_against_the_daemon(self):
        bus = Bus(extra_policy="""<policy context="mandatory">
    <deny send_destination="%s" send_interface="%s" send_member="Drain"/>
  </policy>""" % (NAME, IFACE))
        daemon = Daemon(bus)
        try:
            bus.polkit_allow([])
            daemon.start()
            self.assertEqual(vdpactl("status").returncode, 0)
            self.assertEqual(vdpactl("allocate", "-u", UUID, "-m", MAC, "-n", "vpc2").returncode, 0)
            # 1: the daemon refused the operation itself
            self.assertExit(vdpactl("allocate", "-u", UUID, "-m", MAC, "-n", "nope"), 1, "nope")
            self.assertExit(vdpactl("pool", "show", "ghost"), 1, "no pool named 'ghost'")
            # issue 26, human output: words, not property names; local
            # ISO 8601 times, not epochs; the columns a script picks
            r = vdpactl("allocate", "-u", UUID, "-m", MAC, "-n", "vpc2")
            self.assertRegex(r.stdout, r"(?m)^leased since +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")
            self.assertRegex(r.stdout, r"(?m)^domain UUID +%s$" % UUID)
            for raw in ("domain_name", "created", "chardev"):
                self.assertNotRegex(r.stdout, r"(?m)^%s " % raw)
            r = vdpactl("pool", "show", "accel")
            self.assertIn("VLAN method", r.stdout)
            self.assertNotIn("VlanMethod", r.stdout)
            self.assertNotIn("HealthReason", r.stdout)
            self.assertIn("VLAN-METHOD", vdpactl("status").stdout)
            r = vdpactl("lease", "list", "-o", "mac,Device,pool", "--no-headers")
            self.assertRegex(r.stdout, r"^%s +vdpa\S+ +accel\n$" % MAC)
            self.assertNotIn("/ports/", vdpactl("lease", "list").stdout)  # the port path only with -o
            self.assertIn("/ports/", vdpactl("lease", "list", "-o", "PORT").stdout)
            for args in (("lease", "list", "-o", "FROB"), ("lease", "list", "-j", "-o", "MAC"), ("pool", "list", "--no-headers", "-j")):
                self.assertExit(vdpactl(*args), 2)
            # -j: one key order, whatever order the daemon's dictionary had
            for doc in (json.loads(vdpactl("pool", "show", "accel", "-j").stdout), json.loads(vdpactl("status", "-j").stdout)["pools"][0],
                        json.loads(vdpactl("lease", "list", "-j").stdout)["leases"][0]):
                keys = [k for k in doc if k != "version"]
                self.assertEqual(keys, sorted(keys))

            # 4: polkit said no to an unprivileged caller...
            self.assertExit(vdpactl("release", "-u", UUID, "-m", MAC, user=NOBODY), 4,
                            "needs root or the polkit action org.vdpa_allocator.manage")
            # in the words of the command typed, not of the D-Bus method
            r = vdpactl("release", "-u", UUID, "--all", user=NOBODY)
            self.assertExit(r, 4, "not authorized: 'vdpactl release' needs root or the polkit action org.vdpa_allocator.manage")
            self.assertNotIn("ReleaseDomain", r.stderr)
            # ...or the bus's policy did, before the daemon saw the call
            self.assertExit(vdpactl("pool", "drain", "accel"), 4, "the system bus's policy refused the call")
            # reads stay open to everyone
            self.assertEqual(vdpactl("lease", "list", user=NOBODY).returncode, 0)

            # issue 26: nothing released is not "released", exit 0
            other = "52:54:00:00:00:50"
            self.assertExit(vdpactl("release", "--uuid", UUID, "--mac", other), 1, "no lease of NIC %s" % other,
                            "nothing was released")
            self.assertEqual(len(json.loads(vdpactl("lease", "list", "-j").stdout)["leases"]), 1)
            self.assertExit(vdpactl("release", "--uuid", UUID.replace("6f", "7f", 1), "--all"), 1, "holds no lease")
            self.assertExit(vdpactl("release", "--domain", "web6", "--all"), 1, "domain 'web6' holds no lease")
            # -j before the command, as ip -j takes it
            self.assertEqual(json.loads(vdpactl("-j", "status").stdout)["lease_count"], 1)
            # release by the name lease list shows
            self.assertEqual(vdpactl("allocate", "-u", UUID, "-d", "web5", "-m", other, "-n", "vpc2").returncode, 0)
            r = vdpactl("release", "--domain", "web5", "--mac", other)
            self.assertEqual((r.returncode, r.stdout), (0, "released the lease of NIC %s of domain web5\n" % other), r.stderr)
            r = vdpactl("release", "--domain", UUID, "--all")
            self.assertEqual((r.returncode, r.stdout), (0, "released 1 lease(s) of domain %s\n" % UUID), r.stderr)

            # 5: done in part. libvirt is down (the daemon's URI reaches
            # nothing): devices were checked, vanished domains not. Before:
            # exit 0, as if all was checked.
            r = vdpactl("reconcile", "-j")
            self.assertEqual(r.returncode, 5, r.stderr)
            self.assertFalse(json.loads(r.stdout)["libvirt_reachable"])
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn("reconcile done in part: libvirt did not answer", r.stderr)
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_4_libvirt_refused_is_not_unreachable(self):
        # issue 26: a non-root "domain show" read "Permission denied" with
        # 3, "unreachable"; a refusal is 4, as polkit's
        d = tempfile.mkdtemp(prefix="va-lv-")
        self.addCleanup(shutil.rmtree, d)
        os.chmod(d, 0o700)
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.bind(os.path.join(d, "sock"))
        sock.listen(1)
        uri = "qemu+unix:///system?socket=" + os.path.join(d, "sock")
        self.assertExit(vdpactl("domain", "show", "vm1", "--connect", uri, user=NOBODY), 4, "refused the connection",
                        "Permission denied")

    def test_a_pool_no_pf_matches_is_not_exhausted(self):
        # issue 26: the example configuration on a host without its NIC;
        # before, "pool cx6-p1 is exhausted: 0 slots, 0 leased, ...", the
        # key that matched nothing unnamed
        bus = Bus()
        daemon = Daemon(bus, config=sim_config(pools={"cx6-p1": dict(ACCEL, match_pf="enp179s0f1")},
                                               networks={"vpc2": dict(mode="vdpa", pool="cx6-p1", vlan=2334)}))
        try:
            daemon.start()
            self.assertExit(vdpactl("allocate", "-u", UUID, "-m", MAC, "--network", "vpc2"), 1,
                            "no PF matches pool cx6-p1 (match-pf=enp179s0f1 match-vendor=15b3)")
            self.assertExit(vdpactl("allocate", "-u", UUID, "-m", MAC, "--pool", "cx6-p1", "--vlan", "5"), 1,
                            "no PF matches pool cx6-p1 (match-pf=enp179s0f1")
            # a draining pool's refusal names the command that helps
            vdpactl("pool", "drain", "cx6-p1", check=True)
            self.assertExit(vdpactl("allocate", "-u", UUID, "-m", MAC, "--network", "vpc2"), 1, "is draining",
                            "'vdpactl pool undrain cx6-p1'", "'vdpactl domain portable DOMAIN'")
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_errors_the_daemon_never_sends_are_said_in_our_words(self):
        bus = Bus()
        mock = subprocess.Popen(["/usr/bin/python3", "-m", "dbusmock", "--system", NAME, PATH, IFACE],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            bus.wait_for_name(NAME)

            def answer(method, in_sig, error):
                code = "raise dbus.exceptions.DBusException('raw text of the stand-in', name='%s')" % error
                bus.conn.call_sync(NAME, PATH, MOCK, "AddMethod", GLib.Variant("(sssss)", (IFACE, method, in_sig, "", code)),
                                   None, 0, 5000, None)

            answer("ListLeases", "", "org.freedesktop.DBus.Error.InvalidArgs")
            answer("Release", "ss", "org.freedesktop.DBus.Error.UnknownMethod")
            answer("ReleaseDomain", "s", "com.example.Unheard.Of")
            answer("Reconcile", "", "org.vdpa_allocator.Error.PermissionDenied")
            answer("Drain", "sb", "org.freedesktop.DBus.Error.AccessDenied")
            self.assertExit(vdpactl("lease", "list"), 1, "did not understand the call", "same version as vdpactl")
            self.assertExit(vdpactl("release", "-u", UUID, "-m", MAC), 1, "did not understand the call")
            self.assertExit(vdpactl("release", "-u", UUID, "--all"), 1, "an error vdpactl does not know")
            self.assertExit(vdpactl("reconcile"), 4, "raw text of the stand-in")
            self.assertExit(vdpactl("pool", "drain", "accel"), 4, "policy refused")
        finally:
            mock.terminate()
            mock.wait(10)
            bus.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
