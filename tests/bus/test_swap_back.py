# SPDX-License-Identifier: LGPL-2.1-or-later
"""SwapBack (issue 14): the daemon's swap back of a domain that moved here,
asked for by the hook's started begin. The real daemon on the simulated NIC
over a private bus with polkit mocked; libvirt's test driver holds a paused
domain, so that vdpa-allocator-libvirt-swap waits for it and meets its
bound. The swap itself needs QEMU: tests/libvirt/test_migrate.py."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from gi.repository import GLib

from vatest.bus import Bus, Daemon, call, dbus_error_name, NAME, PATH, IFACE
from vatest.paths import HOOK
from vatest.simconf import ACCEL, sim_config

UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
TRIED_UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fb1"
NOBODY = 65534

CONFIG = sim_config(
    pfs=1, vfs=2, pools={"accel": dict(ACCEL, max_vqp=4)},
    networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334, fallback_bridge="br-ovs", fallback_bridge_type="ovs")},
    groups={"hook": {"swap-back-timeout-s": 2}})

# a NIC vdpactl made portable for a move, as libvirt's live XML shows it
DOMAIN = """<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
  <name>moved</name><uuid>%s</uuid><memory>65536</memory><os><type>hvm</type></os>
  <metadata><vdpa:nics xmlns:vdpa="http://vdpa-allocator.org/xmlns/domain/1.0">
    <vdpa:nic mac="52:54:00:6b:3c:58" network="vpc2" swap-back="accelerated"/>
  </vdpa:nics></metadata>
  <devices><interface type='bridge'><mac address='52:54:00:6b:3c:58'/><source bridge='br-ovs'/>
    <virtualport type='openvswitch'/><vlan><tag id='2334'/></vlan><model type='virtio'/></interface></devices>
  %s
</domain>""" % (UUID, "%s")


def wait_for(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class SwapBackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.close()

    def setUp(self):
        self.bus.polkit_allow([])
        self.dir = tempfile.mkdtemp(prefix="va-swapback-")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir)
        self.node = os.path.join(self.dir, "node.xml")
        # the daemon's start resumes the swaps back of marked domains: it
        # starts on a host where none is marked, then the domain moves in
        self.write_node(DOMAIN.replace(' swap-back="accelerated"', ""))
        self.daemon = Daemon(self.bus, config=CONFIG)
        self.daemon.start(libvirt_uri="test://" + self.node)
        self.assertTrue(wait_for(lambda: "no running domain has a NIC still marked for a swap back" in
                                 self.daemon.read_log()), self.daemon.read_log())
        self.write_node(DOMAIN)

    def write_node(self, *domains):
        """libvirt's test driver reads the file at each connection."""
        with open(self.node, "w") as f:
            # runstate 3: paused, as on a migration's destination until Finish
            f.write("<node>%s</node>\n" % "".join(d % "<test:runstate>3</test:runstate>" for d in domains))

    def tearDown(self):
        rc = self.daemon.stop()
        self.assertEqual(rc, 0, self.daemon.read_log())
        self.daemon.remove()

    def swap_back(self, uuid=UUID, name="moved"):
        return call(self.bus, "SwapBack", (uuid, name), "(ss)")

    def assertDBusError(self, name, func, *args):
        with self.assertRaises(GLib.Error) as ctx:
            func(*args)
        self.assertEqual(dbus_error_name(ctx.exception), name, ctx.exception.message)

    def test_arguments_are_checked(self):
        for uuid, name in (("", "moved"), ("not-a-uuid", "moved"), ("x" * 100000, "moved")):
            self.assertDBusError("org.vdpa_allocator.Error.InvalidArgument", self.swap_back, uuid, name)
        # wrong D-Bus types never reach the daemon's code
        with self.assertRaises(GLib.Error) as ctx:
            call(self.bus, "SwapBack", (UUID,), "(s)")
        self.assertEqual(dbus_error_name(ctx.exception), "org.freedesktop.DBus.Error.InvalidArgs")
        self.assertNotIn("swap back after its move started", self.daemon.read_log())

    def test_any_name_libvirt_accepts_is_taken_and_shown_escaped(self):
        # issue 25 (7): the name is informational; a name on two lines or
        # over 256 bytes was refused, so its swap back never ran
        self.swap_back(name="two\nlines" + "n" * 300)
        self.assertTrue(wait_for(lambda: "swap back after its move started" in self.daemon.read_log()), self.daemon.read_log())
        line = [l for l in self.daemon.read_log().splitlines() if "swap back after its move started" in l][0]
        self.assertIn("domain two\\nlines" + "n" * 243 + "... (%s)" % UUID, line)
        self.assertTrue(wait_for(lambda: "swap back after its move incomplete" in self.daemon.read_log()),
                        self.daemon.read_log())

    def test_refused_without_root_or_polkit(self):
        cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "gdbus", "call", "--system",
               "--dest", NAME, "--object-path", PATH, "--method", IFACE + ".SwapBack", UUID, "moved"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("org.vdpa_allocator.Error.PermissionDenied", r.stderr)
        self.assertIn("SwapBack needs root or the polkit action org.vdpa_allocator.manage", r.stderr)
        self.assertNotIn("swap back after its move started", self.daemon.read_log())
        self.bus.polkit_allow(["org.vdpa_allocator.manage"])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(wait_for(lambda: "swap back after its move started" in self.daemon.read_log()))

    def test_one_helper_per_domain_bounded_in_time(self):
        t0 = time.monotonic()
        self.swap_back()
        # the helper waits for the paused domain: a second ask is Busy
        self.assertDBusError("org.vdpa_allocator.Error.Busy", self.swap_back)
        self.assertTrue(wait_for(lambda: "swap back after its move incomplete" in self.daemon.read_log()),
                        self.daemon.read_log())
        waited = time.monotonic() - t0
        log = self.daemon.read_log()
        self.assertIn("did not run without a job within 2 s", log)
        self.assertEqual(len([l for l in log.splitlines() if "swap back after its move incomplete" in l]), 1)
        self.assertGreaterEqual(waited, 2)
        # done: the next ask is taken again; no lease was made meanwhile
        self.swap_back()
        self.assertEqual(call(self.bus, "ListLeases")[0], [])

    def helpers(self):
        """The pids of the daemon's vdpa-allocator-libvirt-swap children
        (valgrind runs the daemon in its own process: still its children)."""
        pids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    stat = f.read()
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().split(b"\0")
            except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.daemon.proc.pid and cmd[0].endswith(b"vdpa-allocator-libvirt-swap"):
                pids.append(int(pid))
        return pids

    def test_stop_ends_the_helpers_and_logs_them(self):
        # a bound far past the test: only the daemon's stop ends the helper
        with open(os.path.join(self.daemon.conf_dir, "vdpa-allocator.conf"), "w") as f:
            f.write(CONFIG.replace("swap-back-timeout-s=2", "swap-back-timeout-s=600"))
        self.assertTrue(self.daemon.reload(lambda: "configuration reloaded" in self.daemon.read_log()))
        self.swap_back()
        self.assertTrue(wait_for(lambda: len(self.helpers()) == 1), self.daemon.read_log())
        helper = self.helpers()[0]

        def catches_sigterm():
            with open("/proc/%d/status" % helper) as f:
                caught = [l.split()[1] for l in f if l.startswith("SigCgt:")][0]
            return int(caught, 16) & (1 << (signal.SIGTERM - 1))
        # its handler is in place (before it, SIGTERM ends it silently)
        self.assertTrue(wait_for(catches_sigterm))
        rc = self.daemon.stop()
        log = self.daemon.read_log()
        self.assertEqual(rc, 0, log)
        # the helper had SIGTERM (it waited for the domain: it stops at once),
        # is gone and reaped, and its end is one event
        self.assertFalse(os.path.exists("/proc/%d" % helper), log)
        self.assertIn("stopping 1 swap(s) back: SIGTERM now, SIGKILL after 45 s", log)
        ends = [l for l in log.splitlines() if "swap back after its move" in l and "started" not in l]
        self.assertEqual(len(ends), 1, log)
        self.assertIn("domain moved: swap back after its move incomplete: stopped as the daemon stopped; "
                      "the NICs not swapped yet stay portable: stopped by SIGTERM before the domain ran without a job "
                      "(state 3,", ends[0])
        self.assertNotIn("SIGKILL", ends[0])
        self.daemon.start(libvirt_uri="test://" + self.node)

    def test_hook_started_begin_asks_and_never_fails(self):
        with open(self.node) as f:
            xml = f.read()[len("<node>"):-len("</node>\n")]
        env = dict(os.environ, VDPA_ALLOCATOR_CONFIG_DIR=self.daemon.conf_dir)
        r = subprocess.run([HOOK, "moved", "started", "begin", "-"], input=xml, capture_output=True, text=True,
                           timeout=30, env=env)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        self.assertTrue(wait_for(lambda: "swap back after its move started" in self.daemon.read_log()))
        # a NIC without the marker, or with an outcome, asks for nothing
        for other in (xml.replace(' swap-back="accelerated"', ""),
                      xml.replace('swap-back="accelerated"', 'swap-back="accelerated" swap-back-outcome="no-room"')):
            r = subprocess.run([HOOK, "moved", "started", "begin", "-"], input=other, capture_output=True, text=True,
                               timeout=30, env=env)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        # no daemon: one line, and still status 0 (libvirt would kill the guest)
        self.daemon.stop()
        r = subprocess.run([HOOK, "moved", "started", "begin", "-"], input=xml, capture_output=True, text=True,
                           timeout=30, env=env)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("domain moved: no swap back of its portable NICs", r.stderr)
        self.daemon.start(libvirt_uri="test://" + self.node)


    def test_start_resumes_a_swap_back_cut_short(self):
        # the domain moved in while the daemon was down, or its stop cut the
        # swap back short: the NIC is still marked and has no outcome; one
        # with an outcome was tried and stays as it is
        tried = DOMAIN.replace(UUID, TRIED_UUID).replace("<name>moved</name>", "<name>tried</name>").replace(
            'swap-back="accelerated"', 'swap-back="accelerated" swap-back-outcome="no-room"')
        self.write_node(DOMAIN, tried)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log())
        self.daemon.start(libvirt_uri="test://" + self.node)
        self.assertTrue(wait_for(lambda: "resumed the swap back of 1 domain(s) whose NICs are still marked" in
                                 self.daemon.read_log()), self.daemon.read_log())
        log = self.daemon.read_log()
        self.assertIn("domain moved (%s): swap back after its move started" % UUID, log)
        self.assertNotIn("domain tried", log)
        # it is the hook's own swap back: a second ask is Busy, and it ends
        # at its bound as one event
        self.assertDBusError("org.vdpa_allocator.Error.Busy", self.swap_back)
        self.assertTrue(wait_for(lambda: "swap back after its move incomplete" in self.daemon.read_log()),
                        self.daemon.read_log())

    def test_start_with_libvirt_unreachable_resumes_nothing(self):
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log())
        self.daemon.start(libvirt_uri="test:///nonexistent-so-unreachable")
        self.assertTrue(wait_for(lambda: "no swap back resumed: listing the running domains failed" in
                                 self.daemon.read_log()), self.daemon.read_log())
        self.assertEqual(call(self.bus, "ListLeases")[0], [])

if __name__ == "__main__":
    unittest.main(verbosity=2)
