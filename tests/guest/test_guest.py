# SPDX-License-Identifier: LGPL-2.1-or-later
"""The tiny guest on plain QEMU (TCG, direct kernel boot, no libvirt): it is
built from Debian packages, boots to VA-GUEST-READY (within the time the
libvirt tier and the benchmark count on: the guest-boot benchmark), and a client and a server joined by
a QEMU stream netdev on a unix socket (no host networking at all) run
iperf3, and a client whose server stalls ends each run at its bound."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from vatest import guest
from vatest.paths import TEST_CACHE

HERE = os.path.dirname(os.path.abspath(__file__))
QEMU = "/usr/bin/qemu-system-x86_64"
# the boot time the libvirt tier and the benchmark count on: asserted only
# by the benchmark (meson test --suite bench guest-boot), since a loaded
# machine misses any fixed budget
READY_BUDGET = float(os.environ["VA_GUEST_READY_BUDGET"]) if os.environ.get("VA_GUEST_READY_BUDGET") else None


def build_guest():
    r = subprocess.run(["sh", os.path.join(HERE, "build-guest.sh"), TEST_CACHE], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError("build-guest.sh failed:\n" + r.stderr)
    vals = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return vals["KERNEL"], vals["INITRD"]


def wait_for(path, marker, timeout, proc):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            text = f.read()
        # a whole line: the guest may be mid-way through writing it
        if re.search(re.escape(marker) + ".*\n", text):
            return text
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise TimeoutError("no %r after %d s:\n%s" % (marker, timeout, text[-3000:]))


class Guest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [t for t in (QEMU, "apt-get", "dpkg-deb", "cpio", "/bin/busybox", "iperf3") if not shutil.which(t)]
        if missing:
            raise unittest.SkipTest("missing %s (contrib/install-deps.sh)" % ", ".join(missing))
        cls.kernel, cls.initrd = build_guest()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="va-guest-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def qemu(self, name, cmdline, netdev):
        log = os.path.join(self.dir, name + ".serial")
        open(log, "w").close()
        argv = [QEMU, "-accel", "tcg", "-m", "256", "-smp", "1", "-nodefaults", "-display", "none",
                "-no-reboot", "-kernel", self.kernel, "-initrd", self.initrd,
                "-append", "%s %s" % (guest.guest_cmdline(name), cmdline),
                "-serial", "file:" + log, "-netdev", netdev,
                "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:88:00:%02x" % (len(self.procs) + 1)]
        with open(os.path.join(self.dir, name + ".err"), "w") as err:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        self.procs.append(p)
        return p, log

    def test_boots_to_ready(self):
        # the benchmark boots three times and holds the fastest to the
        # budget: one boot measures the machine's load as much as the guest
        took = []
        for i in range(3 if READY_BUDGET else 1):
            t0 = time.monotonic()
            p, log = self.qemu("g%d" % i, "va.ip=10.88.0.1/24", "user,id=n0,restrict=on")
            text = wait_for(log, "VA-GUEST-READY", 60, p)
            took.append(time.monotonic() - t0)
            p.kill()
            p.wait()
            self.assertIn("ips=10.88.0.1/24", text)
            # a virtio-only guest loads none of the optional VF drivers
            self.assertNotIn("VA-GUEST-MODULE", text)
            self.assertNotIn("VA-GUEST-WARN", text)
        sys.stderr.write("\nguest: QEMU start to VA-GUEST-READY in %s s%s\n" % (
            ", ".join("%.2f" % t for t in took), " (budget for the fastest: %.0f s)" % READY_BUDGET if READY_BUDGET else ""))
        if READY_BUDGET:
            self.assertLess(min(took), READY_BUDGET)

    def test_client_runs_iperf3_against_server_and_powers_off(self):
        sock = os.path.join(self.dir, "link.sock")
        srv, srv_log = self.qemu("srv", "va.role=server va.ip=10.88.0.1/24",
                                 "stream,id=n0,server=on,addr.type=unix,addr.path=" + sock)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.02)
        cli, cli_log = self.qemu("cli", "va.role=client va.ip=10.88.0.2/24 va.peer=10.88.0.1 va.tests=ping,tcp va.time=2",
                                 "stream,id=n0,server=off,addr.type=unix,addr.path=" + sock)
        text = wait_for(cli_log, "VA-GUEST-DONE", 120, cli)
        self.assertEqual(cli.wait(30), 0, "the client powers itself off")
        self.assertIn("VA-GUEST-READY", wait_for(srv_log, "VA-GUEST-READY", 1, srv))
        self.assertIn("VA-PING-END test=ping rc=0", text)
        m = re.search(r"VA-IPERF3-BEGIN test=tcp.*?\n(.*?)\nVA-IPERF3-END test=tcp rc=(\d+)", text, re.S)
        self.assertIsNotNone(m, text[-3000:])
        self.assertEqual(m.group(2), "0", m.group(1)[-2000:])
        bps = json.loads(m.group(1))["end"]["sum_received"]["bits_per_second"]
        sys.stderr.write("\nguest: iperf3 TCP over a QEMU stream netdev: %.1f Mbit/s\n" % (bps / 1e6))
        self.assertGreater(bps, 0)
        self.assertIn("VA-GUEST-DONE failed=0", text)

    def test_a_stalled_iperf3_run_is_killed_and_retried_once(self):
        """A server that takes the control connection and never answers
        (slirp hands it to `sleep`) stalls an iperf3 client forever: the
        client kills each run at va.bound, says why it runs it again, and
        goes on to VA-GUEST-DONE with the test failed."""
        cli, cli_log = self.qemu("cli", "va.role=client va.ip=10.0.2.15/24 va.peer=10.0.2.2 va.tests=tcp@10.0.2.100 "
                                 "va.time=2 va.bound=5",
                                 "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:5201-cmd:sleep 600")
        text = wait_for(cli_log, "VA-GUEST-DONE", 150, cli)
        self.assertIn("VA-IPERF3-RETRY test=tcp@10.0.2.100 iperf3 did not finish in 5 s", text)
        self.assertIn("VA-IPERF3-END test=tcp@10.0.2.100 rc=137", text)
        self.assertIn("VA-GUEST-DONE failed=1", text)

    def test_initrd_carries_the_vf_drivers_with_their_dependencies(self):
        """The SR-IOV path's VF drivers (docs/pairbench.md) are in the
        initrd where the kernel builds them as modules, each line of
        lib/modules/optional its load order (dependencies first, every one
        in the initrd) and the PCI aliases it serves; the initrd's own
        /sbin/va-load-optional, run by busybox sh on a fake sysfs with a
        recording insmod, loads the driver of a VF present and no other:
        the 82576 VF (8086:10ca) that QEMU's igb makes, a ConnectX-5 VF
        (15b3:1018) with mlx5_core's chain in order, skipping a module
        already loaded; nothing for virtio alone."""
        d = tempfile.mkdtemp(prefix="va-initrd-")
        self.addCleanup(shutil.rmtree, d, True)
        root = os.path.join(d, "root")
        os.makedirs(root)
        subprocess.run("gzip -dc '%s' | cpio -id --quiet" % self.initrd, shell=True, cwd=root, check=True, timeout=60)
        moddir = os.path.join(root, "lib", "modules")
        with open(os.path.join(moddir, "optional")) as f:
            lines = [ln.split() for ln in f.read().splitlines() if ln.strip()]
        with open(os.path.join(moddir, "load-order")) as f:
            base = f.read().split()
        mods = os.listdir(moddir)
        chains = {ln[0].split(",")[-1]: (ln[0].split(","), ln[1:]) for ln in lines}
        sys.stderr.write("\nguest: optional drivers %s\n" % " ".join(ln[0] for ln in lines))
        self.assertIn("igbvf", chains, "Debian's kernel builds CONFIG_IGBVF=m")
        self.assertIn("pci:v00008086d000010CAsv*sd*bc*sc*i*", chains["igbvf"][1])
        for mod, (chain, aliases) in chains.items():
            self.assertTrue(aliases and all(a.startswith("pci:v") for a in aliases), (mod, aliases))
            for m in chain:
                self.assertIn(m + ".ko", mods, "%s needs %s" % (mod, m))
                self.assertNotIn(m, base, "%s is loaded only for its devices" % m)

        insmod = os.path.join(d, "insmod")
        record = os.path.join(d, "insmod.log")
        with open(insmod, "w") as f:
            f.write("#!/bin/sh\necho \"$1\" >>'%s'\ncase \"$1\" in */ixgbevf.ko) exit 1 ;; esac\n" % record)
        os.chmod(insmod, 0o755)

        def load(*modaliases, loaded=()):
            sysfs = tempfile.mkdtemp(dir=d)
            for i, alias in enumerate(modaliases):
                dev = os.path.join(sysfs, "bus", "pci", "devices", "0000:00:%02x.0" % (i + 3))
                os.makedirs(dev)
                with open(os.path.join(dev, "modalias"), "w") as f:
                    f.write(alias + "\n")
            for m in loaded:
                os.makedirs(os.path.join(sysfs, "module", m))
            if os.path.exists(record):
                os.unlink(record)
            r = subprocess.run(["/bin/busybox", "sh", os.path.join(root, "sbin", "va-load-optional"), sysfs, moddir],
                               capture_output=True, text=True, env=dict(os.environ, INSMOD=insmod), timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            tried = open(record).read().split() if os.path.exists(record) else []
            return r.stdout.split(), [os.path.relpath(t, moddir) for t in tried]

        virtio = "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"
        self.assertEqual(load(virtio), ([], []))
        self.assertEqual(load(virtio, "pci:v00008086d000010CAsv00008086sd0000A03Cbc02sc00i00"),
                         (["loaded=igbvf"], ["igbvf.ko"]))
        if "ixgbevf" in chains:
            self.assertEqual(load("pci:v00008086d000010EDsv00008086sd00000000bc02sc00i00"),
                             (["failed=ixgbevf"], ["ixgbevf.ko"]), "a failed insmod is said")
        if "mlx5_core" in chains:
            chain = chains["mlx5_core"][0]
            self.assertLess(chain.index("mlxfw"), chain.index("mlx5_core"), "dependencies first")
            out, tried = load("pci:v000015B3d00001018sv000015B3sd00000080bc02sc00i00", loaded=["psample"])
            want = [m for m in chain if m != "psample"]
            self.assertEqual(out, ["loaded=" + m for m in want])
            self.assertEqual(tried, [m + ".ko" for m in want])

if __name__ == "__main__":
    unittest.main(verbosity=2)
