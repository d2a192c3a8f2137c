# SPDX-License-Identifier: LGPL-2.1-or-later
"""The tiny guest on plain QEMU (TCG, direct kernel boot, no libvirt): it is
built from Debian packages, boots to VA-GUEST-READY (within the time the
libvirt tier and the benchmark count on: the guest-boot benchmark), and a client and a server joined by
a QEMU stream netdev on a unix socket (no host networking at all) run
iperf3."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

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
                "-append", "console=ttyS0 quiet va.name=%s %s" % (name, cmdline),
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
