#!/usr/bin/python3
"""The .deb that contrib/build-deb.sh makes from this tree: lintian's
verdict, the files an operator's host needs where Debian 12's dbus-daemon,
polkitd, udevd, systemd and libvirtd read them, the conffiles, and the
paths compiled into the binaries agreeing with the unit."""

import glob
import os
import re
import subprocess
import tempfile
import unittest

from vatest import package
from vatest.paths import SRCDIR as SRC


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # built now, or by an earlier run from the same tree content and
        # build packages (vatest/package.py), log and all
        b = package.build()
        cls.build_log = b.log
        cls.build_rc = b.rc
        cls.deb = b.deb
        cls.root = tempfile.TemporaryDirectory(prefix="va-deb-")
        cls.ctrl = os.path.join(cls.root.name, "DEBIAN")
        cls.files = {}
        if cls.deb:
            run(["dpkg-deb", "-R", cls.deb, cls.root.name])
            # "-rw-r--r-- root/root 123 date time ./path[ -> target]"
            for line in run(["dpkg-deb", "-c", cls.deb]).stdout.splitlines():
                mode, _, _, _, _, rest = line.split(None, 5)
                path, _, target = rest.partition(" -> ")
                cls.files[path[1:].rstrip("/") or "/"] = (mode, target)

    @classmethod
    def tearDownClass(cls):
        cls.root.cleanup()

    def setUp(self):
        # build-deb.sh copies the .deb out before lintian runs: a lintian
        # verdict fails only the lintian case
        self.assertIsNotNone(self.deb, "contrib/build-deb.sh made no single vdpa-allocator_*.deb:\n%s" % self.build_log[-6000:])

    def read(self, path):
        with open(os.path.join(self.root.name, path.lstrip("/"))) as f:
            return f.read()

    def one_of(self, *paths):
        found = [p for p in paths if p in self.files]
        self.assertEqual(len(found), 1, "expected one of %s in the package" % (paths,))
        return found[0]

    def test_lintian_has_no_errors_or_warnings(self):
        # build-deb.sh ran lintian --fail-on error,warning; its lines again
        self.assertEqual(self.build_rc, 0, "contrib/build-deb.sh failed:\n" + self.build_log[-6000:])
        tags = [l for l in self.build_log.splitlines() if re.match(r"^[EW]: vdpa-allocator", l)]
        self.assertEqual(tags, [])
        self.assertIn("build-deb: lintian", self.build_log)

    def test_binaries(self):
        for path in ["/usr/sbin/vdpa-allocatord", "/usr/bin/vdpactl",
                     "/usr/libexec/vdpa-allocator-hook", "/usr/libexec/vdpa-allocator-hook-helper",
                     "/usr/libexec/vdpa-allocator-libvirt-domains", "/usr/libexec/vdpa-allocator-libvirt-network",
                     "/usr/libexec/vdpa-allocator-libvirt-swap", "/usr/libexec/vdpa-allocator-relay"]:
            self.assertIn(path, self.files)
            self.assertTrue(self.files[path][0].startswith("-rwxr-xr-x"), path)

    def test_hook_is_a_symlink_libvirt_finds(self):
        mode, target = self.files.get("/etc/libvirt/hooks/qemu.d/50-vdpa-allocator", ("", ""))
        self.assertTrue(mode.startswith("l"))
        self.assertEqual(target, "/usr/libexec/vdpa-allocator-hook")
        self.assertIn(target, self.files)

    def test_bus_files(self):
        self.assertIn("/usr/share/dbus-1/system.d/org.vdpa_allocator.Allocator1.conf", self.files)
        self.assertIn("/usr/share/dbus-1/interfaces/org.vdpa_allocator.Allocator1.xml", self.files)
        act = self.read("/usr/share/dbus-1/system-services/org.vdpa_allocator.Allocator1.service")
        self.assertIn("Exec=/usr/sbin/vdpa-allocatord\n", act)
        self.assertIn("SystemdService=vdpa-allocatord.service\n", act)
        self.assertIn("/usr/share/polkit-1/actions/org.vdpa_allocator.policy", self.files)

    def test_polkit_rule_is_opt_in(self):
        self.assertFalse([p for p in self.files if "/polkit-1/rules.d/" in p])
        rule = "/usr/share/doc/vdpa-allocator/examples/50-vdpa-allocator-libvirt.rules"
        text = self.read(rule)
        self.assertIn('action.id == "org.vdpa_allocator.manage"', text)
        self.assertIn('subject.isInGroup("libvirt")', text)

    def test_udev_modules_man(self):
        self.one_of("/lib/udev/rules.d/90-vdpa-allocator.rules", "/usr/lib/udev/rules.d/90-vdpa-allocator.rules")
        self.assertIn("/usr/lib/modules-load.d/vdpa-allocator.conf", self.files)
        for page in ["man8/vdpactl.8.gz", "man8/vdpa-allocatord.8.gz", "man8/vdpa-allocator-hook.8.gz",
                     "man5/vdpa-allocator.conf.5.gz"]:
            self.assertIn("/usr/share/man/" + page, self.files)
        self.assertIn("/usr/share/bash-completion/completions/vdpactl", self.files)

    def test_schemas_uncompressed_outside_doc(self):
        # every vdpactl -j schema, as vdpactl(8) names it, uncompressed
        # (domain-move is over 4 KiB, which dh_compress gzips in
        # /usr/share/doc), and outside /usr/share/doc, which minimal images
        # drop; beside the metadata's RELAX NG schema
        schemas = sorted(os.path.basename(p) for p in glob.glob(os.path.join(SRC, "docs", "schemas", "*.json")))
        self.assertIn("domain-move.schema.json", schemas)
        there = sorted(os.path.basename(p) for p in self.files
                       if os.path.dirname(p) == "/usr/share/vdpa-allocator/schemas")
        self.assertEqual(there, sorted(schemas + ["vdpa-metadata.rng"]))
        self.assertEqual([p for p in self.files if p.startswith("/usr/share/doc/vdpa-allocator/schemas")], [])

    def test_journal_catalog(self):
        # systemd's dpkg trigger on this directory runs journalctl --update-catalog
        self.one_of("/lib/systemd/catalog/vdpa-allocator.catalog", "/usr/lib/systemd/catalog/vdpa-allocator.catalog")

    def test_nothing_in_usr_local(self):
        self.assertFalse([p for p in self.files if p.startswith("/usr/local")])

    def test_conffiles(self):
        conffiles = sorted(self.read("DEBIAN/conffiles").split())
        self.assertEqual(conffiles, ["/etc/apparmor.d/abstractions/libvirt-qemu.d/vdpa-allocator",
                                     "/etc/apparmor.d/vdpa-allocator/libvirt-qemu",
                                     "/etc/apparmor.d/vdpa-allocator/usr.sbin.libvirtd",
                                     "/etc/vdpa-allocator/vdpa-allocator.conf"])
        self.assertTrue(self.files["/etc/vdpa-allocator/conf.d"][0].startswith("d"))

    def test_default_configuration_has_no_pools(self):
        conf = self.read("/etc/vdpa-allocator/vdpa-allocator.conf")
        self.assertEqual([l for l in conf.splitlines() if l.strip() and not l.startswith("#")], [])
        # the packaged daemon reads it as valid
        out = run([os.path.join(self.root.name, "usr/sbin/vdpa-allocatord"), "--check-config",
                   "--config", os.path.join(self.root.name, "etc/vdpa-allocator")]).stdout
        self.assertIn("0 pool(s)", out)

    def test_apparmor_rules(self):
        self.assertIn("/dev/vhost-vdpa-[0-9]* rw,", self.read("/etc/apparmor.d/vdpa-allocator/libvirt-qemu"))
        libvirtd = self.read("/etc/apparmor.d/vdpa-allocator/usr.sbin.libvirtd")
        self.assertIn("/usr/libexec/vdpa-allocator-hook rix,", libvirtd)
        self.assertIn("/usr/libexec/vdpa-allocator-hook-helper rix,", libvirtd)
        postinst = self.read("DEBIAN/postinst")
        self.assertIn("include if exists <%s>", postinst)
        self.assertIn("/etc/apparmor.d/local/abstractions/libvirt-qemu vdpa-allocator/libvirt-qemu", postinst)
        self.assertIn("interest-noawait /etc/apparmor.d/abstractions/libvirt-qemu", self.read("DEBIAN/triggers"))

    def test_maintainer_scripts(self):
        postinst = self.read("DEBIAN/postinst")
        self.assertIn("deb-systemd-helper enable 'vdpa-allocatord.service'", postinst)
        self.assertIn("udevadm trigger", postinst)
        self.assertIn("modprobe", postinst)
        postrm = self.read("DEBIAN/postrm")
        purge = postrm[postrm.index("purge)"):]
        self.assertIn('rm -rf "$DPKG_ROOT/var/lib/vdpa-allocator"', purge[:purge.index(";;")])
        for script in ["postinst", "postrm", "prerm"]:
            run(["sh", "-n", os.path.join(self.ctrl, script)])

    def test_unit_agrees_with_the_daemon(self):
        unit_path = self.one_of("/lib/systemd/system/vdpa-allocatord.service",
                                "/usr/lib/systemd/system/vdpa-allocatord.service")
        unit = self.read(unit_path)
        self.assertRegex(unit, r"\nExecStart=/usr/sbin/vdpa-allocatord\b")
        self.assertRegex(unit, r"\nCapabilityBoundingSet=.*\bCAP_SYS_PTRACE\b")
        state = re.search(r"\nStateDirectory=(\S+)", unit).group(1)
        runtime = re.search(r"\nRuntimeDirectory=(\S+)", unit).group(1)
        # the daemon's compiled-in defaults, as --help prints them
        env = {k: v for k, v in os.environ.items() if not k.startswith("VDPA_ALLOCATOR_")}
        helptext = run([os.path.join(self.root.name, "usr/sbin/vdpa-allocatord"), "--help"], env=env).stdout
        self.assertIn("(default /etc/vdpa-allocator)", helptext)
        self.assertIn("(default /var/lib/%s)" % state, helptext)
        self.assertIn("(default /run/%s)" % runtime, helptext)
        self.assertIn("After=", unit)

    def test_unit_exposure(self):
        unit = os.path.join(self.root.name, "lib/systemd/system/vdpa-allocatord.service")
        if not os.path.exists(unit):
            unit = os.path.join(self.root.name, "usr/lib/systemd/system/vdpa-allocatord.service")
        # 2.6 on Debian 12's systemd 252 (3.2 before issue 12), 2.9 since
        # software vDPA devices (issue 28): CAP_SETUID/CAP_SETGID (0.3) for
        # the relay's drop to its user, CAP_KILL (0.1) to stop it then, and
        # DeviceAllow= VDUSE and tun (0.1) under DevicePolicy=closed; fails
        # above
        r = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=29", unit],
                           capture_output=True, text=True)
        level = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
        self.assertIsNotNone(level, r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, "exposure %s, above 2.9" % level.group(1))

    def test_depends_runtime_only(self):
        fields = run(["dpkg-deb", "-f", self.deb, "Depends", "Recommends", "Version"]).stdout
        for test_only in ["umockdev", "dbusmock", "qemu", "valgrind", "libvirt-clients", "debhelper", "lintian"]:
            self.assertNotIn(test_only, fields)
        meson = open(os.path.join(SRC, "meson.build")).read()
        version = re.search(r"version: '([^']+)'", meson).group(1)
        self.assertRegex(fields, r"Version: %s\b" % re.escape(version))

    def test_mlx5_dkms_package(self):
        # the second binary package: DKMS's source folder, named and
        # versioned as dkms.conf says, and the maintainer scripts dh_dkms
        # writes (dkms add/build/install, dkms remove)
        debs = glob.glob(os.path.join(os.path.dirname(self.deb), "vdpa-allocator-mlx5-dkms_*_all.deb"))
        self.assertEqual(len(debs), 1, os.listdir(os.path.dirname(self.deb)))
        meson = open(os.path.join(SRC, "meson.build")).read()
        version = re.search(r"version: '([^']+)'", meson).group(1)
        folder = "usr/src/vdpa-allocator-mlx5-%s" % version
        with tempfile.TemporaryDirectory(prefix="va-dkms-") as d:
            run(["dpkg-deb", "-R", debs[0], d])
            self.assertTrue(os.access(os.path.join(d, folder, "build.sh"), os.X_OK))
            with open(os.path.join(d, folder, "dkms.conf")) as f:
                conf = f.read()
            with open(os.path.join(d, "DEBIAN", "prerm")) as f:
                prerm = f.read()
        self.assertIn('PACKAGE_NAME="vdpa-allocator-mlx5"\n', conf)
        self.assertIn('PACKAGE_VERSION="%s"\n' % version, conf)
        self.assertIn('MAKE[0]="sh ./build.sh ${kernelver} ${kernel_source_dir}"', conf)
        self.assertIn('BUILD_EXCLUSIVE_KERNEL="^6\\.12\\."', conf)
        for i, m in enumerate(["mlx5_core", "mlx5_vdpa", "vringh"]):
            self.assertIn('BUILT_MODULE_NAME[%d]="%s"' % (i, m), conf)
            self.assertIn('DEST_MODULE_LOCATION[%d]="/updates/dkms"' % i, conf)
        self.assertIn("dkms remove", prerm)
        fields = run(["dpkg-deb", "-f", debs[0], "Depends"]).stdout
        self.assertIn("dkms", fields)
        self.assertIn("linux-source-6.12", fields)


if __name__ == "__main__":
    unittest.main(verbosity=2)
