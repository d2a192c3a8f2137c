#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The package's maintainer scripts (contrib/debian/vdpa-allocator.postinst
and .postrm, as they are before debhelper fills #DEBHELPER#) against the
odd local AppArmor files an admin may have (issue 25, point 12): a last line
without a newline, a symbolic link, an empty file, a missing one, and the
marker an earlier postinst glued onto the admin's line. No .deb is built:
the scripts run with DPKG_ROOT (dpkg --root's variable) on a temporary
root; as root, in a mount namespace whose /etc/apparmor.d is an empty
tmpfs, which must stay empty."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("VA_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
POSTINST = os.path.join(SRC, "contrib", "debian", "vdpa-allocator.postinst")
POSTRM = os.path.join(SRC, "contrib", "debian", "vdpa-allocator.postrm")
QEMU = "etc/apparmor.d/local/abstractions/libvirt-qemu"
LIBVIRTD = "etc/apparmor.d/local/usr.sbin.libvirtd"
RULES = {QEMU: "vdpa-allocator/libvirt-qemu", LIBVIRTD: "vdpa-allocator/usr.sbin.libvirtd"}
MARKER = "# vdpa-allocator: added by its package, removed at its purge"
MARKER_NL = "# vdpa-allocator: added by its package with the newline above, removed at its purge"


def reexec_in_namespace():
    """As root: a private mount namespace with an empty tmpfs over
    /etc/apparmor.d, so that a script that misses DPKG_ROOT touches nothing
    real (and the test sees it)."""
    if os.environ.get("VA_MAINT_NS") == "1" or os.geteuid() != 0:
        return
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        return
    env = dict(os.environ, VA_MAINT_NS="1")
    script = "mount -t tmpfs -o mode=0755 va-apparmor /etc/apparmor.d && exec \"$@\""
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def include(path):
    return "include if exists <%s>\n" % RULES[path]


class MaintainerScripts(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="va-maint-")
        self.addCleanup(shutil.rmtree, self.root)
        # libvirt's profiles, whose presence the postinst looks for
        for p in ("etc/apparmor.d/abstractions/libvirt-qemu", "etc/apparmor.d/usr.sbin.libvirtd"):
            self.write(p, b"# libvirt's\n")
        os.makedirs(os.path.join(self.root, "var/lib/vdpa-allocator"))
        self.write("var/lib/vdpa-allocator/leases.db", b"x")

    def tearDown(self):
        if os.environ.get("VA_MAINT_NS") == "1":
            self.assertEqual(os.listdir("/etc/apparmor.d"), [], "a script wrote outside DPKG_ROOT")

    def path(self, p):
        return os.path.join(self.root, p)

    def write(self, p, data):
        os.makedirs(os.path.dirname(self.path(p)), exist_ok=True)
        with open(self.path(p), "wb") as f:
            f.write(data)

    def read(self, p):
        with open(self.path(p), "rb") as f:
            return f.read()

    def run_script(self, script, *args):
        # PATH without the tools of a running system's branches: none may run
        env = {"PATH": "/usr/bin:/bin", "DPKG_ROOT": self.root, "LC_ALL": "C"}
        r = subprocess.run(["sh", "-e", script] + list(args), capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def install(self):
        r = self.run_script(POSTINST, "configure", "")
        # an upgrade, and libvirt's trigger, add nothing twice
        self.run_script(POSTINST, "configure", "0.1.0")
        self.run_script(POSTINST, "triggered", "/etc/apparmor.d/usr.sbin.libvirtd")
        return r

    def purge(self):
        r = self.run_script(POSTRM, "purge")
        self.assertFalse(os.path.exists(self.path("var/lib/vdpa-allocator")))
        return r

    def test_last_line_without_a_newline(self):
        for p in RULES:
            self.write(p, b"  /srv/images/** r,")
        self.install()
        for p in RULES:
            text = self.read(p).decode()
            self.assertEqual(text, "  /srv/images/** r,\n%s\n%s" % (MARKER_NL, include(p)))
        self.purge()
        for p in RULES:
            self.assertEqual(self.read(p), b"  /srv/images/** r,")

    def test_ordinary_file_and_the_admins_own_include_line(self):
        # the admin's own include of our rules, unmarked, is the admin's
        self.write(QEMU, b"# mine\n/dev/foo rw,\n")
        self.write(LIBVIRTD, b"x\n" + include(LIBVIRTD).encode())
        self.install()
        self.assertEqual(self.read(QEMU), ("# mine\n/dev/foo rw,\n%s\n%s" % (MARKER, include(QEMU))).encode())
        self.assertEqual(self.read(LIBVIRTD), b"x\n" + include(LIBVIRTD).encode())
        self.purge()
        self.assertEqual(self.read(QEMU), b"# mine\n/dev/foo rw,\n")
        self.assertEqual(self.read(LIBVIRTD), b"x\n" + include(LIBVIRTD).encode())

    def test_empty_and_missing_files(self):
        self.write(QEMU, b"")
        self.assertFalse(os.path.exists(self.path(LIBVIRTD)))
        ino = os.stat(self.path(QEMU)).st_ino
        self.install()
        for p in RULES:
            self.assertEqual(self.read(p), ("%s\n%s" % (MARKER, include(p))).encode())
        self.purge()
        self.assertEqual(self.read(QEMU), b"")
        self.assertEqual(os.stat(self.path(QEMU)).st_ino, ino, "edited in place")
        # made by the postinst, left empty: libvirt's profile includes it
        # without "if exists", and libvirt-daemon-system makes it so
        self.assertEqual(self.read(LIBVIRTD), b"")

    def test_symbolic_links_are_neither_followed_nor_replaced(self):
        self.write("srv/shared/apparmor-local", b"  /shared/** r,")
        for p in RULES:
            os.makedirs(os.path.dirname(self.path(p)), exist_ok=True)
            os.symlink(os.path.relpath(self.path("srv/shared/apparmor-local"), os.path.dirname(self.path(p))), self.path(p))
        r = self.run_script(POSTINST, "configure", "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 2, r.stderr)
        for p, line in zip(sorted(RULES), sorted(lines)):
            self.assertIn("/%s is a symbolic link" % p, line)
            self.assertIn("include if exists <%s>" % RULES[p], line)
        self.assertEqual(self.read("srv/shared/apparmor-local"), b"  /shared/** r,")
        self.purge()
        for p in RULES:
            self.assertTrue(os.path.islink(self.path(p)))
        self.assertEqual(self.read("srv/shared/apparmor-local"), b"  /shared/** r,")
        # what an earlier postinst wrote through the link: named, not touched
        self.write("srv/shared/apparmor-local", ("x%s\n%s" % (MARKER, include(QEMU))).encode())
        r = self.run_script(POSTRM, "purge")
        self.assertEqual(len(r.stderr.splitlines()), 2, r.stderr)
        self.assertIn("remove the lines of vdpa-allocator", r.stderr)
        for p in RULES:
            self.assertTrue(os.path.islink(self.path(p)))

    def test_marker_glued_by_an_earlier_postinst(self):
        # 0.1's postinst appended onto a last line without a newline
        for p in RULES:
            self.write(p, ("  /srv/images/** r,%s\n%s" % (MARKER, include(p))).encode())
        self.install()
        self.purge()
        for p in RULES:
            self.assertEqual(self.read(p), b"  /srv/images/** r,")

    def test_lines_the_admin_added_after_ours_stay(self):
        self.write(QEMU, b"a")
        self.write(LIBVIRTD, b"a\n")
        self.install()
        for p in RULES:
            with open(self.path(p), "ab") as f:
                f.write(b"b\n")
        self.purge()
        self.assertEqual(self.read(QEMU), b"a\nb\n")
        self.assertEqual(self.read(LIBVIRTD), b"a\nb\n")

    def test_debian_13_abstraction_takes_our_dropin(self):
        # libvirt 11's abstraction (Debian 13) includes libvirt-qemu.d/, where
        # the package's own file is, and calls local/ deprecated: untouched
        self.write("etc/apparmor.d/abstractions/libvirt-qemu",
                   b"  include if exists <abstractions/libvirt-qemu.d>\n  include if exists <local/abstractions/libvirt-qemu>\n")
        self.write(QEMU, b"# mine\n")
        self.install()
        self.assertEqual(self.read(QEMU), b"# mine\n")
        self.assertEqual(self.read(LIBVIRTD), ("%s\n%s" % (MARKER, include(LIBVIRTD))).encode())
        self.purge()
        self.assertEqual(self.read(QEMU), b"# mine\n")


if __name__ == "__main__":
    reexec_in_namespace()
    unittest.main(verbosity=2)
