# SPDX-License-Identifier: LGPL-2.1-or-later
"""The failover form of a VF NIC (issue 27, point 5) in a real libvirtd
with QEMU under TCG: a NIC on a network with failover=true, rewritten by
`vdpactl rewrite`, is a virtio standby with <teaming type='persistent'/>
and a ua- alias; libvirt defines it, our hook (with the daemon on the
private system bus) leases nothing for it, and QEMU starts the guest with
the standby alone, its virtio-net device carrying failover=on.

Once it runs, the hook's started begin asks the daemon for the standby's
VF: its helper leases one of the simulated pool's VFs and asks libvirt to
plug the transient member on it. This machine has no SR-IOV VF, so
libvirt refuses the plug (the VF's PCI address is not on this host): the
lease is released and the guest goes on on the standby, as on a host
whose pool has no free VF. That a real VF is plugged (failover_pair_id
on its vfio-pci device) is for the lab tier (lab-igb-daemon, igb VFs);
the member's XML is held by the golden cases (tests/golden/cases/144-*,
145-*). Private mount and network namespaces (tests/lib/vatest/libvirt.py)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from vatest.guest import BOOT_TIMEOUT, BRIDGE, HOST_IP, domain_xml, guest_cmdline, serial_path, with_intent
from vatest.libvirt import Libvirt, SkipTier, build_guest, enter_namespaces, run, skip_reason, wait_for_console
from vatest.paths import DAEMON, HOOK, SYSCONFDIR, VDPACTL
from vatest.simconf import sim_config

enter_namespaces()


# the simulated backend's PF 0000:3b:00.0 (vdpa-allocator/daemon/va-backend-sim.c);
# its hostdev network cannot be defined here (no VF in sysfs), which only
# makes the pool warn: the standby needs none of it
CONFIG = sim_config(pools={"pt": dict(kind="sriov", match_pci="0000:3b:00.0")},
                    networks={"fo": dict(mode="sriov", pool="pt", fallback_bridge=BRIDGE, failover="true")})



class Failover(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        cls.kernel, cls.initrd = build_guest()
        cls.lv = Libvirt(hooks={"50-vdpa-allocator": HOOK})
        try:
            cls.lv.start()
        except SkipTier as e:
            raise unittest.SkipTest(str(e))
        cls.tmp = tempfile.mkdtemp(prefix="va-failover-")
        cls.daemon = None
        try:
            run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            run(["ip", "addr", "add", HOST_IP + "/24", "dev", BRIDGE])
            run(["ip", "link", "set", BRIDGE, "up"])
            # the hook reads the compiled-in configuration directory
            cls.conf = os.path.join(cls.tmp, "etc")
            os.makedirs(os.path.join(cls.conf, "vdpa-allocator"))
            with open(os.path.join(cls.conf, "vdpa-allocator", "vdpa-allocator.conf"), "w") as f:
                f.write(CONFIG)
            run(["mount", "--bind", cls.conf, SYSCONFDIR])
            cls.lv.mounts.append(SYSCONFDIR)
            env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}
            cls.daemon_log = open(os.path.join(cls.tmp, "daemon.log"), "a")
            cls.daemon = subprocess.Popen([DAEMON, "--config", os.path.join(cls.conf, "vdpa-allocator"), "--state-dir",
                                           os.path.join(cls.tmp, "state"), "--run-dir", os.path.join(cls.tmp, "run")],
                                          stdout=cls.daemon_log, stderr=subprocess.STDOUT, env=env)
            deadline = time.monotonic() + 30
            while run([VDPACTL, "status"], check=False).returncode != 0:
                if cls.daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("daemon did not come up")
                time.sleep(0.05)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.daemon:
                cls.daemon.terminate()
                cls.daemon.wait(20)
                cls.daemon_log.close()
        finally:
            cls.lv.stop()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def tearDown(self):
        for dom in self.lv.virsh("list", "--all", "--name", check=False).stdout.split():
            self.lv.virsh("destroy", dom, check=False)
            self.lv.virsh("undefine", dom, check=False)

    def leases(self):
        return run([VDPACTL, "lease", "list"], check=True).stdout.splitlines()[1:]

    def test_standby_starts_alone_with_failover_on(self):
        name = "va-failover"
        mac = "52:54:00:77:00:51"
        alias = "ua-vdpa-525400770051"
        marked = with_intent(domain_xml(name, self.kernel, self.initrd, guest_cmdline(name, ip="10.77.0.51/24"), [mac],
                                        machine="q35"), "77777777-0000-0000-0000-000000000051", [(mac, "fo")])
        r = subprocess.run([VDPACTL, "rewrite", "--to", "accelerated", "--config", os.path.join(self.conf, "vdpa-allocator"), "-"],
                           input=marked, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('<teaming type="persistent"/>', r.stdout)
        self.lv.define(r.stdout)
        # libvirt keeps the user alias and the teaming in the definition
        inactive = self.lv.virsh("dumpxml", "--inactive", name).stdout
        self.assertIn("<teaming type='persistent'/>", inactive)
        self.assertIn("<alias name='%s'/>" % alias, inactive)

        if os.path.exists(serial_path(name)):
            os.unlink(serial_path(name))
        t0 = time.monotonic()
        r = self.lv.virsh("start", name, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_for_console(serial_path(name), "VA-GUEST-READY", BOOT_TIMEOUT,
                         lambda: self.lv.virsh("domstate", name, check=False).stdout.strip() == "running")
        sys.stderr.write("\n%s: virsh start to VA-GUEST-READY in %.1f s\n" % (name, time.monotonic() - t0))

        # the standby alone: one interface with the MAC, a tap on the bridge
        live = self.lv.virsh("dumpxml", name).stdout
        ifaces = re.findall(r"<interface type='(\w+)'>.*?</interface>", live, re.S)
        self.assertEqual(ifaces, ["bridge"], live)
        self.assertEqual(live.count("<mac address='%s'/>" % mac), 1, live)
        self.assertIn("<teaming type='persistent'/>", live)
        self.assertIn("<alias name='%s'/>" % alias, live)
        self.assertNotIn("hostdev", live)
        tap = re.search(r"<target dev='(vnet\d+)'/>", live).group(1)
        self.assertIn("master %s" % BRIDGE, run(["ip", "-o", "link", "show", "dev", tap]).stdout)
        # the hook leased no VF for it
        self.assertEqual(self.leases(), [])

        # QEMU's command line (libvirt writes it into the domain's log):
        # the virtio-net device of the alias has failover on, and no device
        # names a failover pair (no VF is plugged)
        log = self.lv.read_log("/var/log/libvirt/qemu/%s.log" % name)
        start = log.rfind("/usr/bin/qemu-system-x86_64")
        self.assertGreaterEqual(start, 0, log[-3000:])
        cmdline = log[start:log.index("-msg timestamp=on", start)]
        devices = [d for d in re.findall(r"-device '?(\{.*?\}|\S+)", cmdline) if alias in d]
        self.assertEqual(len(devices), 1, cmdline)
        self.assertIn("virtio-net-pci", devices[0])
        self.assertRegex(devices[0], r'"failover":true|failover=on')
        self.assertNotIn("failover_pair_id", cmdline)
        self.assertNotIn("vfio-pci", cmdline)
        sys.stderr.write("%s: %s\n" % (name, devices[0]))
        # QEMU says this when the guest's driver acks VIRTIO_NET_F_STANDBY
        # and no primary (VF) is there: the test guest's kernel has one
        negotiated = "Primary device not found" in log[log.index("-msg timestamp=on", start):]
        sys.stderr.write("%s: the guest %s the standby feature\n" % (name, "negotiated" if negotiated else "did not negotiate"))

        # the guest talks on the standby alone (its net_failover makes the
        # standby the lower device of the interface the guest configures)
        r = run(["busybox", "ping", "-c", "1", "-W", "5", "10.77.0.51"], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        # started begin asked the daemon for the VF: its helper leased one
        # (the daemon's pick), and libvirt refused the member on it (no
        # such PCI device here), so the lease went back and the guest
        # stays on its standby; the journal's event says so
        deadline = time.monotonic() + 120
        log = ""
        while "VA_SWAP_BACK_RESULT" not in log and "swap back after its move incomplete" not in log:
            self.assertLess(time.monotonic(), deadline, log[-3000:])
            time.sleep(0.2)
            with open(os.path.join(self.tmp, "daemon.log")) as f:
                log = f.read()
        line = [l for l in log.splitlines() if "swap back after its move incomplete" in l][0]
        sys.stderr.write("%s: %s\n" % (name, line))
        self.assertIn("%s standby refused: on its virtio standby alone: libvirt refused VF 0000:3c:00." % mac, line)
        self.assertIn("its VF lease was released", line)
        self.assertEqual(self.leases(), [])
        live = self.lv.virsh("dumpxml", name).stdout
        self.assertNotIn("hostdev", live)
        r = run(["busybox", "ping", "-c", "1", "-W", "5", "10.77.0.51"], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        # the portable form of the same domain: a plain virtio NIC
        r = subprocess.run([VDPACTL, "rewrite", "--to", "portable", "--config", os.path.join(self.conf, "vdpa-allocator"), "-"],
                           input=inactive, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("teaming", r.stdout)
        self.assertNotIn(alias, r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
