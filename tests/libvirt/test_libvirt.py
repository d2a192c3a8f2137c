# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real libvirtd boots the tiny guest under TCG, calls our qemu.d hook with
the arguments and the domain XML its documentation promises, and two guests
on a Linux bridge reach each other with iperf3. Everything runs in private
mount and network namespaces (tests/lib/vatest/libvirt.py)."""

import json
import os
import sys
import time
import unittest

from vatest.guest import BOOT_TIMEOUT, BRIDGE, HOST_IP, domain_xml, guest_cmdline, iperf3_results, serial_path
from vatest.libvirt import (HOOK_RECORD_DIR, RECORD_HOOK, Libvirt, SkipTier, build_guest, enter_namespaces, run,
                            skip_reason, wait_for_console)

enter_namespaces()

FAIL_FILE = "/var/lib/libvirt/va-hook-fail"


class LibvirtTier(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        cls.kernel, cls.initrd = build_guest()
        cls.lv = Libvirt(hooks={"50-record": RECORD_HOOK})
        try:
            cls.lv.start()
        except SkipTier as e:
            raise unittest.SkipTest(str(e))
        try:
            # a plain Linux bridge inside our own network namespace, with an
            # address so the test itself can reach the guests
            run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            run(["ip", "addr", "add", HOST_IP + "/24", "dev", BRIDGE])
            run(["ip", "link", "set", BRIDGE, "up"])
        except BaseException:
            cls.lv.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.lv.stop()

    def tearDown(self):
        if os.path.exists(FAIL_FILE):
            os.unlink(FAIL_FILE)
        for dom in self.lv.virsh("list", "--all", "--name", check=False).stdout.split():
            self.lv.virsh("destroy", dom, check=False)
            self.lv.virsh("undefine", dom, check=False)

    def start(self, name):
        # libvirt opens <serial type='file'> with append=on: a READY line of
        # an earlier boot must not count for this one
        if os.path.exists(serial_path(name)):
            os.unlink(serial_path(name))
        self.lv.virsh("start", name)

    def running(self, name):
        return self.lv.virsh("domstate", name, check=False).stdout.strip() == "running"

    def wait_hook(self, name, op, timeout=30):
        deadline = time.monotonic() + timeout
        while op not in self.lv.hook_ops(name):
            if time.monotonic() > deadline:
                self.fail("hook never saw %s for %s: %s" % (op, name, self.lv.hook_ops(name)))
            time.sleep(0.1)

    def test_guest_boots_and_hook_sees_the_life_cycle(self):
        name = "va-one"
        xml = domain_xml(name, self.kernel, self.initrd,
                         guest_cmdline(name, ip="10.77.0.11/24"), ["52:54:00:77:00:11"])
        self.lv.define(xml)
        self.assertEqual(self.lv.hook_ops(name), [], "defining runs no qemu hook")
        t0 = time.monotonic()
        self.start(name)
        console = wait_for_console(serial_path(name), "VA-GUEST-READY", BOOT_TIMEOUT, lambda: self.running(name))
        ready = time.monotonic() - t0
        sys.stderr.write("\nva-one: virsh start to VA-GUEST-READY in %.1f s\n" % ready)
        self.assertIn("ips=10.77.0.11/24", console)
        # the guest is on the bridge, in our namespace (busybox-static's
        # ping: the host need not have iputils)
        r = run(["busybox", "ping", "-c", "1", "-W", "5", "10.77.0.11"], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        calls = self.lv.hook_calls(name)
        ops = [tuple(argv[1:3]) for argv, _ in calls]
        self.assertEqual(ops, [("prepare", "begin"), ("start", "begin"), ("started", "begin")])
        for argv, stdin in calls:
            self.assertEqual(len(argv), 4, argv)  # domain, op, sub-op, extra
            self.assertEqual(argv[3], "-")
            self.assertIn("<name>%s</name>" % name, stdin)
            self.assertIn("52:54:00:77:00:11", stdin)
        # by start begin the live XML names the tap (docs/hook-contract.md)
        self.assertRegex(calls[1][1], r"<target dev='vnet\d+'/>")
        # libvirt gives hooks only LC_ALL, PATH and HOME (and the shell adds PWD)
        first = sorted(p for p in os.listdir(HOOK_RECORD_DIR) if p.endswith(".env"))[-1]
        with open(os.path.join(HOOK_RECORD_DIR, first)) as f:
            keys = {line.split("=", 1)[0] for line in f.read().splitlines() if "=" in line}
        self.assertLessEqual(keys - {"PWD", "SHLVL", "_"}, {"LC_ALL", "PATH", "HOME"}, keys)

        self.lv.virsh("destroy", name)
        self.wait_hook(name, ("release", "end"))
        calls = self.lv.hook_calls(name)
        self.assertEqual([tuple(a[1:3]) for a, _ in calls[3:]], [("stopped", "end"), ("release", "end")])
        for argv, stdin in calls[3:]:
            self.assertIn("<name>%s</name>" % name, stdin)
            self.assertIn("52:54:00:77:00:11", stdin)
        self.lv.virsh("undefine", name)

    def test_failing_prepare_hook_aborts_start_then_stopped_and_release(self):
        name = "va-refused"
        self.lv.define(domain_xml(name, self.kernel, self.initrd, guest_cmdline(name), ["52:54:00:77:00:99"]))
        with open(FAIL_FILE, "w") as f:
            f.write("prepare begin\n")
        r = self.lv.virsh("start", name, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("record-hook: failing prepare begin of %s" % name, r.stderr)
        self.wait_hook(name, ("release", "end"))
        self.assertEqual(self.lv.hook_ops(name), [("prepare", "begin"), ("stopped", "end"), ("release", "end")])
        self.assertFalse(self.running(name))

    def test_two_guests_on_a_bridge_run_iperf3(self):
        kernel, initrd = self.kernel, self.initrd
        self.lv.define(domain_xml("va-srv", kernel, initrd,
                                  guest_cmdline("va-srv", role="server", ip="10.77.0.21/24"),
                                  ["52:54:00:77:00:21"]))
        self.lv.define(domain_xml("va-cli", kernel, initrd,
                                  guest_cmdline("va-cli", role="client", ip="10.77.0.22/24",
                                                peer="10.77.0.21", tests="ping,tcp", time=3),
                                  ["52:54:00:77:00:22"]))
        self.start("va-srv")
        wait_for_console(serial_path("va-srv"), "VA-GUEST-READY", BOOT_TIMEOUT, lambda: self.running("va-srv"))
        self.start("va-cli")
        console = wait_for_console(serial_path("va-cli"), "VA-GUEST-DONE", 180)
        self.assertIn("VA-PING-END test=ping rc=0", console)
        results = iperf3_results(console)
        self.assertIn("tcp", results, console[-3000:])
        rc, doc = results["tcp"]
        self.assertEqual(rc, 0, json.dumps(doc)[:2000])
        sent = doc["end"]["sum_sent"]
        received = doc["end"]["sum_received"]
        sys.stderr.write("\niperf3 va-cli -> va-srv over %s (TCG, TCP, %.1f s): sent %.1f Mbit/s, "
                         "received %.1f Mbit/s, %d retransmits\n" %
                         (BRIDGE, received["seconds"], sent["bits_per_second"] / 1e6,
                          received["bits_per_second"] / 1e6, sent.get("retransmits", -1)))
        self.assertGreater(received["bits_per_second"], 0)
        # the client powered itself off: libvirt saw it and ran the hooks
        self.wait_hook("va-cli", ("release", "end"), timeout=60)
        self.assertEqual(self.lv.hook_ops("va-cli")[-2:], [("stopped", "end"), ("release", "end")])
        self.lv.virsh("destroy", "va-srv")


if __name__ == "__main__":
    unittest.main(verbosity=2)
