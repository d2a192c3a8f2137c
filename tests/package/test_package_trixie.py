#!/usr/bin/python3
"""The package for Debian 13 (trixie): contrib/build-deb.sh run inside a
trixie root made by mmdebstrap with trixie's build dependencies
(tests/package/build-trixie-root.sh, a cache entry; the .deb is one too,
vatest/package.py), lintian's verdict there, and the package installed in
that root (an overlay: tests/package/in-root.sh) as on a booted 13 host:
its dependencies met by 13's packages, what its postinst does with
libvirt 11's AppArmor profiles and libvirtd, AppArmor 4's parser and
systemd 257 on the files in place (tests/package/trixie-checks.sh)."""

import os
import re
import subprocess
import tempfile
import unittest

from vatest import package
from vatest.paths import SRCDIR as SRC


class PackageTrixie(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        b = package.build("trixie")
        cls.build_log, cls.build_rc, cls.deb = b.log, b.rc, b.deb
        cls.facts = {}
        cls.lines = []
        if not cls.deb:
            return
        root, _ = package.trixie_root()
        with tempfile.TemporaryDirectory(prefix="va-trixie-") as d:
            subprocess.run(["cp", cls.deb, os.path.join(SRC, "tests", "package", "trixie-checks.sh"), d], check=True)
            r = subprocess.run([os.path.join(SRC, "tests", "package", "in-root.sh"), root, d, "sh",
                                "/build/trixie-checks.sh", "/build/" + os.path.basename(cls.deb)],
                               capture_output=True, text=True, timeout=600)
        cls.output = r.stdout + r.stderr
        for line in r.stdout.splitlines():
            name, _, value = line.partition(": ")
            cls.lines.append((name, value))
            cls.facts.setdefault(name, value.strip())

    def setUp(self):
        self.assertIsNotNone(self.deb, "no vdpa-allocator_*.deb built in the trixie root:\n" + self.build_log[-6000:])

    def fact(self, name):
        self.assertIn(name, self.facts, self.output[-4000:])
        return self.facts[name]

    def all(self, name):
        return [v for n, v in self.lines if n == name]

    def test_lintian_has_no_errors_or_warnings(self):
        self.assertEqual(self.build_rc, 0, "build-deb.sh failed in the trixie root:\n" + self.build_log[-6000:])
        tags = [l for l in self.build_log.splitlines() if re.match(r"^[EW]: vdpa-allocator", l)]
        self.assertEqual(tags, [])
        self.assertIn("build-deb: lintian", self.build_log)
        # built by 13's toolchain, against 13's libraries
        self.assertRegex(self.build_log, r"Dependency systemd found: YES 25[7-9]")

    def test_depends_are_13s(self):
        depends = subprocess.run(["dpkg-deb", "-f", self.deb, "Depends"], capture_output=True, text=True,
                                 check=True).stdout
        # trixie's time_t transition renamed GLib's library package
        self.assertIn("libglib2.0-0t64", depends)
        self.assertEqual(self.fact("dpkg-install"), "0", "\n".join(self.all("dpkg-output")))

    def test_libvirt_13_is_libvirtd(self):
        # Debian 13's libvirt 11.3 packages ship the monolithic libvirtd, no
        # virtqemud: the hook runs under libvirtd and its profile
        daemons = self.fact("libvirt-daemons").split()
        self.assertIn("libvirtd", daemons)
        self.assertNotIn("virtqemud", daemons)
        self.assertIn("libvirtd.service", self.fact("libvirt-units").split())
        self.assertNotIn("virtqemud.service", self.fact("libvirt-units").split())
        self.assertEqual(self.fact("libvirtd-profile-local"), "1")
        self.assertEqual(self.fact("libvirtd-profile-hooks"), "1")
        self.assertNotEqual(self.fact("libvirt-hooks-path"), "0")

    def test_postinst_restarts_libvirtd_for_the_hook(self):
        calls = self.all("systemd-call")
        self.assertIn("deb-systemd-invoke try-restart libvirtd.service", calls)
        self.assertIn("restarted libvirtd.service so libvirt runs its new hook",
                      "\n".join(self.all("dpkg-output")))
        self.assertEqual(self.fact("hook-target"), "/usr/libexec/vdpa-allocator-hook")

    def test_apparmor_qemu_rules_through_the_dropin(self):
        # libvirt 11's abstraction includes libvirt-qemu.d/ and calls
        # local/ deprecated: the postinst leaves local/ alone
        self.assertEqual(self.fact("qemu-abstraction-dropin"), "1")
        self.assertEqual(self.fact("local-qemu-include"), "0")
        t = "/etc/apparmor.d/libvirt/TEMPLATE.qemu"
        self.assertTrue(self.fact("aa-parse " + t).startswith("0"), self.fact("aa-parse " + t))
        self.assertEqual(self.fact("aa-vhost-vdpa " + t), "1")

    def test_apparmor_libvirtd_rules(self):
        self.assertEqual(self.fact("local-libvirtd-include"), "1")
        p = "/etc/apparmor.d/usr.sbin.libvirtd"
        self.assertTrue(self.fact("aa-parse " + p).startswith("0"), self.fact("aa-parse " + p))
        self.assertEqual(self.fact("aa-hook " + p), "1")

    def test_polkit_rule_directory(self):
        self.assertIn("/etc/polkit-1/rules.d", self.fact("polkit-rules-dirs").split())
        self.assertIn("/usr/share/polkit-1/rules.d/60-libvirt.rules", self.fact("polkit-libvirt-rule").split())

    def test_unit_on_systemd_257(self):
        self.assertEqual(self.fact("unit-verify"), "0", self.fact("unit-verify"))
        rc, _, level = self.fact("unit-exposure").partition(" ")
        self.assertEqual(rc, "0", "exposure %s, above 2.9 on systemd 257 (test_package.py says why 2.9)" % level)
        self.assertIn("0 pool(s)", self.fact("check-config"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
