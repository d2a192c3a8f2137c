#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The whole suite in the lab host (docs/test-tiers.md), run INSIDE it by
lab_host.py: vdpa-allocatord on the kernel backend with a pool of VDUSE
devices (type=vduse-test), the real system bus with the project's policy,
systemd-udevd with the project's rule, and libvirtd with the project's hook
in qemu.d, where a vdpa interface can start for real (the build machine
caps locked memory and has no vhost-vdpa).

    lab_host.py -- /usr/bin/python3 tests/lab/test_lab_daemon.py [-v] [TEST...]

The module's fixture (Lab, started once by setUpModule) brings everything
up and tears it down; the helpers start_vduse() and wait_until()
(vatest.lab), vdpactl() (vatest.ctl) and virsh() (vatest.libvirt) are for
the test classes here and for those to come (VLAN isolation, the hook's
Linux-bridge path, module unloading): add a unittest.TestCase to this file
and use LAB.

It refuses to run anywhere but in the lab host: it loads modules, starts
udevd and a system bus, and writes below /etc."""

import grp
import json
import os
import re
import shutil
import stat
import subprocess
import time
import unittest

from vatest import lab
from vatest.lab import (AUTO, BRIDGE, CONFIG, DEVICE_GROUP, DEVICE_MODE, NETWORK, PLAIN, PLAIN_VLAN, POOL, SLOTS, VLAN,
                        WORK, Timer, bridge_vlans, domain_xml, holds_for, in_lab_host, log, master, start_vduse,
                        stop_vduse, vdpa_devices, vdpa_driver, wait_until)
from vatest.ctl import leases, vdpactl, vdpactl_json  # on the default system bus
from vatest.libvirt import NS_ENV, Libvirt, run, virsh
from vatest.paths import DAEMON, HOOK, SRCDIR, SYSCONFDIR, VDPACTL

UDEV_RULE = os.path.join(SRCDIR, "udev-rules", "90-vdpa-allocator.rules")
BUS_POLICY = os.path.join(SRCDIR, "contrib", "org.vdpa_allocator.Allocator1.conf")
# the hook reads its compiled-in configuration directory, so the daemon is
# given the same one; the lab host writes it in its overlay
CONFIG_DIR = os.path.join(SYSCONFDIR, "vdpa-allocator")
# the default run directory: the udev rule reads RUN/nodes/
RUN_DIR = "/run/vdpa-allocator"


def pool(name=POOL):
    for p in vdpactl_json("pool", "list")["pools"]:
        if p["name"] == name:
            return p
    raise KeyError("no pool %s in vdpactl pool list" % name)


class Lab:
    """Everything the cases share, brought up once: modules, udevd with the
    project's rule, the system bus with the project's policy, virtlogd and
    libvirtd with the hook (vatest.libvirt.Libvirt), a VLAN-filtering
    bridge, one VDUSE device per slot, and the daemon."""

    def __init__(self):
        self.lv = None
        self.vduse = lab.VDUSE  # slot -> Popen of its vduse-net (vatest.lab)
        self.daemon = None
        self.daemon_log = None
        self.udevd = False
        self.timings = {}

    # --- life cycle ------------------------------------------------------

    def start(self):
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _step(self, what, fn, *args):
        with Timer(what) as t:
            fn(*args)
        self.timings[what] = t.s

    def _start(self):
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        self._step("modprobe", run, ["modprobe", "-a", "vdpa", "vduse", "vhost_vdpa", "tun", "bridge"])
        self._step("systemd-udevd", self.start_udevd)
        self._step("configuration and bus policy", self.write_files)
        self._step("dbus-daemon, virtlogd, libvirtd", self.start_libvirt)
        self._step("bridge " + BRIDGE, self.make_bridge)
        for slot in SLOTS:
            self._step("VDUSE device va-" + slot, start_vduse, slot)
        self._step("vdpa-allocatord", self.start_daemon)

    def stop(self):
        """Tears down what start() made, whatever state it is in; never
        raises (the lab host is thrown away anyway)."""
        t0 = time.monotonic()
        if self.lv and "libvirtd" in self.lv.procs:
            for dom in virsh("list", "--all", "--name", check=False, timeout=30).stdout.split():
                virsh("destroy", dom, check=False, timeout=60)
                virsh("undefine", dom, check=False, timeout=30)
        if self.daemon:
            for lease in self._leases_quietly():
                vdpactl("release", "--uuid", lease["uuid"], "--all", check=False)
            self.stop_daemon()
        if self.lv:
            try:
                self.lv.stop()
            except Exception as e:
                log("teardown: %s", e)
            self.lv = None
        # devices a failed case left behind, then their VDUSE devices
        for dev in vdpa_devices():
            if dev.startswith("va-"):
                run(["vdpa", "dev", "del", dev], check=False)
        for slot in list(self.vduse):
            stop_vduse(slot)
        if self.udevd:
            run(["udevadm", "control", "--exit"], check=False)
            self.udevd = False
        log("%-40s %6.1f s", "teardown", time.monotonic() - t0)

    def _leases_quietly(self):
        try:
            return leases()
        except Exception:
            return []

    # --- the parts -------------------------------------------------------

    def start_udevd(self):
        os.makedirs("/etc/udev/rules.d", exist_ok=True)
        shutil.copy(UDEV_RULE, "/etc/udev/rules.d/")
        run(["/lib/systemd/systemd-udevd", "--daemon"])
        self.udevd = True
        run(["udevadm", "trigger", "--action=add"], check=False)
        run(["udevadm", "settle", "-t", "60"], timeout=90)

    def write_files(self):
        # the lower layer is the build machine's: whatever it has there
        # (an installed configuration) is hidden, ours alone is read
        shutil.rmtree(CONFIG_DIR, ignore_errors=True)
        os.makedirs(CONFIG_DIR)
        with open(os.path.join(CONFIG_DIR, "vdpa-allocator.conf"), "w") as f:
            f.write(CONFIG)
        os.makedirs("/etc/dbus-1/system.d", exist_ok=True)
        shutil.copy(BUS_POLICY, "/etc/dbus-1/system.d/")

    def start_libvirt(self):
        # the lab host is a machine of this test's own: what
        # enter_namespaces() gives the libvirt tier on the build machine
        os.environ[NS_ENV] = "1"
        self.lv = Libvirt(hooks={"50-vdpa-allocator": HOOK}, system_bus=True)
        self.lv.start(timeout=180)

    def make_bridge(self):
        run(["ip", "link", "add", BRIDGE, "type", "bridge", "vlan_filtering", "1"])
        run(["ip", "link", "set", BRIDGE, "up"])

    def start_daemon(self):
        state = os.path.join(WORK, "state")
        self.daemon_log = open(os.path.join(WORK, "daemon.log"), "a")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "VDPA_ALLOCATOR_"))}
        self.daemon = subprocess.Popen([DAEMON, "--config", CONFIG_DIR, "--state-dir", state, "--run-dir", RUN_DIR],
                                       stdin=subprocess.DEVNULL, stdout=self.daemon_log, stderr=subprocess.STDOUT, env=env)

        def up():
            if self.daemon.poll() is not None:
                raise RuntimeError("vdpa-allocatord exited %d:\n%s" % (self.daemon.returncode, self.read_daemon_log()))
            return vdpactl("status", check=False).returncode == 0
        wait_until(up, 60, "vdpa-allocatord on the system bus")

    def stop_daemon(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait(10)
        self.daemon = None
        if self.daemon_log:
            self.daemon_log.close()
            self.daemon_log = None

    def read_daemon_log(self):
        try:
            with open(os.path.join(WORK, "daemon.log"), errors="replace") as f:
                return f.read()
        except OSError as e:
            return "(%s)" % e


LAB = Lab()


def setUpModule():
    if not in_lab_host():
        raise unittest.SkipTest("runs only inside the lab host: lab_host.py -- /usr/bin/python3 %s" % __file__)
    t0 = time.monotonic()
    LAB.start()
    log("%-40s %6.1f s", "setup, in all", time.monotonic() - t0)


def tearDownModule():
    LAB.stop()


class DaemonInLab(unittest.TestCase):
    """The daemon on the kernel backend, a pool of VDUSE devices, the hook in
    a real libvirtd: the three things the build machine cannot do."""

    UUID = "1ab00000-0000-4000-8000-000000000001"
    MAC = "52:54:00:1a:b0:01"

    def setUp(self):
        self.t0 = time.monotonic()

    def tearDown(self):
        for dom in virsh("list", "--all", "--name", check=False).stdout.split():
            virsh("destroy", dom, check=False)
            virsh("undefine", dom, check=False)
        vdpactl("release", "--uuid", self.UUID, "--all", check=False)
        log("%-40s %6.1f s", self.id().rsplit(".", 1)[-1], time.monotonic() - self.t0)

    def assertNoLeaseAndNoDevice(self, device, timeout=30):
        wait_until(lambda: leases() == [], timeout, "the lease given back")
        wait_until(lambda: device not in vdpa_devices(), timeout, "vdpa device %s deleted" % device)
        self.assertFalse(os.path.lexists(os.path.join(RUN_DIR, "ports", self.UUID, self.MAC)))

    def test_1_pool_of_vduse_devices_discovered(self):
        status = vdpactl_json("status")
        self.assertEqual(status["backend"], "kernel")
        p = pool()
        self.assertTrue(p["healthy"], p)
        self.assertEqual((p["total"], p["free"], p["leased"]), (len(SLOTS), len(SLOTS), 0), p)
        self.assertEqual(p["vlan_method"], "bridge")
        log("pool: %s", json.dumps(p, sort_keys=True))

    def test_2_allocate_makes_the_device_release_deletes_it(self):
        with Timer("vdpactl allocate"):
            lease = json.loads(vdpactl("allocate", "-j", "--uuid", self.UUID, "--domain", "lab-cli", "--mac", self.MAC,
                                       "--network", NETWORK).stdout)
        log("lease: %s", json.dumps(lease, sort_keys=True))
        self.assertEqual(lease["pool"], POOL)
        self.assertIn(lease["mgmtdev"], SLOTS)
        device = "va-" + lease["mgmtdev"]
        self.assertEqual(lease["device"], device)
        self.assertEqual(lease["vlan"], VLAN)

        # the real node, with the pool's group and mode
        node = lease["chardev"]
        self.assertRegex(node, r"^/dev/vhost-vdpa-\d+$")
        st = os.stat(node)
        self.assertTrue(stat.S_ISCHR(st.st_mode), node)
        self.assertEqual(grp.getgrgid(st.st_gid).gr_name, DEVICE_GROUP)
        self.assertEqual(stat.S_IMODE(st.st_mode), DEVICE_MODE, "%s is %o" % (node, stat.S_IMODE(st.st_mode)))
        self.assertEqual(os.readlink(lease["port"]), node)

        # on the vdpa bus, bound to vhost_vdpa, as iproute2 sees it
        shown = json.loads(run(["vdpa", "-j", "dev", "show"]).stdout)["dev"]
        self.assertIn(device, shown)
        self.assertEqual(shown[device]["mgmtdev"], "vduse")
        self.assertEqual(vdpa_driver(device), "vhost_vdpa")
        self.assertEqual(os.path.basename(node), [n for n in os.listdir("/sys/bus/vdpa/devices/" + device)
                                                  if n.startswith("vhost-vdpa-")][0])

        # the representor stand-in in the uplink bridge, the VLAN untagged
        self.assertEqual(master(lease["mgmtdev"]), BRIDGE)
        self.assertEqual(bridge_vlans(lease["mgmtdev"]), [(VLAN, ["Egress Untagged", "PVID"])])
        self.assertEqual(pool()["leased"], 1)

        with Timer("vdpactl release"):
            vdpactl("release", "--uuid", self.UUID, "--mac", self.MAC)
        with Timer("lease and device gone"):
            self.assertNoLeaseAndNoDevice(device)
        self.assertFalse(os.path.exists(node))
        self.assertIsNone(master(lease["mgmtdev"]))
        self.assertEqual(pool()["free"], len(SLOTS))

    def rewritten(self, name, network=NETWORK, form="accelerated", acpi=False):
        """A domain that cannot boot anything (vatest.lab.domain_xml) with
        one NIC marked for @network, in @form as vdpactl rewrite makes it."""
        xml = domain_xml(name, self.UUID, self.MAC, network, acpi=acpi)
        r = subprocess.run([VDPACTL, "rewrite", "--to", form, "--config", CONFIG_DIR, "-"], input=xml,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_3_virsh_start_paused_runs_qemu_on_vhost_vdpa(self):
        name = "lab-accel"
        with Timer("vdpactl rewrite"):
            xml = self.rewritten(name)
        port = os.path.join(RUN_DIR, "ports", self.UUID, self.MAC)
        self.assertIn("<interface type=\"vdpa\">", xml)
        self.assertIn("<source dev=\"%s\"/>" % port, xml)
        with Timer("virsh define"):
            LAB.lv.define(xml)
        with Timer("virsh start --paused"):
            r = virsh("start", "--paused", name, check=False, timeout=180)
        self.assertEqual(r.returncode, 0, "%s%s\nlibvirtd:\n%s\ndaemon:\n%s" % (
            r.stdout, r.stderr, LAB.lv.read_log("/var/log/libvirt/qemu/%s.log" % name)[-3000:], LAB.read_daemon_log()[-3000:]))
        self.assertEqual(virsh("domstate", name).stdout.strip(), "paused")

        (lease,) = leases()
        log("lease: %s", json.dumps(lease, sort_keys=True))
        self.assertEqual((lease["uuid"], lease["mac"], lease["network"]), (self.UUID, self.MAC, NETWORK))
        device, node = lease["device"], lease["chardev"]
        self.assertEqual(vdpa_driver(device), "vhost_vdpa")
        self.assertEqual(master(lease["mgmtdev"]), BRIDGE)
        self.assertEqual(bridge_vlans(lease["mgmtdev"]), [(VLAN, ["Egress Untagged", "PVID"])])
        self.assertRegex(virsh("dumpxml", name).stdout, r"<interface type='vdpa'>")

        # QEMU: a vhost-vdpa netdev on the fd libvirt opened through the port
        with open("/run/libvirt/qemu/%s.pid" % name) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().decode().split("\0")
        netdev = [a for a in argv if "vhost-vdpa" in a]
        log("qemu %d: %s", pid, " ".join(netdev))
        self.assertTrue(netdev, " ".join(argv))
        fds = [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)]
        self.assertIn(node, fds)
        with open("/proc/%d/limits" % pid) as f:
            log("qemu %d: %s", pid, [line.strip() for line in f if "locked memory" in line][0])

        # and stays there
        holds_for(lambda: os.path.exists("/proc/%d" % pid) and virsh("domstate", name).stdout.strip() == "paused", 3,
                  "QEMU %d up and the domain paused" % pid)

        # the native path is not open on QEMU 7.2: vdpactl domain migrate
        # reads the vhost-vdpa netdev's blocker and picks the swap, which
        # a paused guest cannot take (it cannot eject the NIC), so it
        # stops there, the domain and its NIC and lease as they were
        with Timer("vdpactl domain migrate (refused)"):
            r = vdpactl("domain", "migrate", name, "qemu+tcp://127.0.0.1:1/system", "--live", "-j", check=False, timeout=120)
        log("vdpactl domain migrate on a paused vhost-vdpa guest: exit %d: %s%s", r.returncode, r.stdout, r.stderr)
        self.assertEqual(r.returncode, 1, r.stderr)
        doc = json.loads(r.stdout)
        self.assertTrue(any("VHOST_F_LOG_ALL" in b for b in doc["blockers"]), doc["blockers"])
        self.assertEqual([(n["mac"], n["path"], n["form_after"]) for n in doc["nics"]], [(self.MAC, "swap", "accelerated")])
        self.assertIn("not running", doc["error"])
        self.assertEqual(virsh("domstate", name).stdout.strip(), "paused")
        self.assertRegex(virsh("dumpxml", name).stdout, r"<interface type='vdpa'>")
        self.assertEqual([x["device"] for x in leases()], [device])

        with Timer("virsh destroy"):
            virsh("destroy", name)
        with Timer("lease and device gone"):
            self.assertNoLeaseAndNoDevice(device)


    def start_paused(self, name):
        with Timer("virsh start --paused " + name):
            r = virsh("start", "--paused", name, check=False, timeout=180)
        self.assertEqual(r.returncode, 0, "%s%s\nlibvirtd:\n%s\ndaemon:\n%s" % (
            r.stdout, r.stderr, LAB.lv.read_log("/var/log/libvirt/qemu/%s.log" % name)[-3000:], LAB.read_daemon_log()[-3000:]))
        self.assertEqual(virsh("domstate", name).stdout.strip(), "paused")

    def tap_of(self, name):
        """The tap libvirt made for the domain's one NIC."""
        taps = re.findall(r"<target dev='([^']+)'/>", virsh("dumpxml", name).stdout)
        self.assertEqual(len(taps), 1, taps)
        return taps[0]

    def test_4_hook_puts_the_tap_in_its_vlan_on_a_linux_bridge(self):
        # libvirt puts a tap on a Linux bridge with the bridge's default
        # VLAN 1; at "start begin" the hook makes it VLAN 20, untagged, alone
        name = "lab-plain"
        xml = self.rewritten(name, PLAIN, "portable")
        self.assertIn("<source bridge=\"%s\"/>" % BRIDGE, xml)
        LAB.lv.define(xml)
        self.start_paused(name)
        tap = self.tap_of(name)
        self.assertEqual(master(tap), BRIDGE)
        self.assertEqual(bridge_vlans(tap), [(PLAIN_VLAN, ["Egress Untagged", "PVID"])])
        self.assertEqual(leases(), [])
        virsh("destroy", name)
        wait_until(lambda: not os.path.exists("/sys/class/net/" + tap), 30, "tap %s gone" % tap)

    def test_5_auto_falls_back_to_virtio_on_the_same_vlan(self):
        # the pool drained: "vdpactl domain accelerate" asks the daemon,
        # which knows there is no room, and the NIC stays portable; the
        # hook puts its tap in the network's VLAN, the one a vDPA NIC of
        # the network gets
        name = "lab-auto"
        LAB.lv.define(self.rewritten(name, AUTO, "portable"))
        vdpactl("pool", "drain", POOL)
        try:
            vdpactl("domain", "accelerate", name)
            self.assertIn("<interface type='bridge'>", virsh("dumpxml", "--inactive", name).stdout)
            self.start_paused(name)
            tap = self.tap_of(name)
            self.assertEqual(bridge_vlans(tap), [(VLAN, ["Egress Untagged", "PVID"])])
            self.assertEqual(leases(), [])
            virsh("destroy", name)
        finally:
            vdpactl("pool", "undrain", POOL)
        # room again: accelerated, on the same VLAN
        vdpactl("domain", "accelerate", name)
        self.assertIn("<interface type='vdpa'>", virsh("dumpxml", "--inactive", name).stdout)
        self.start_paused(name)
        (lease,) = leases()
        self.assertEqual((lease["network"], lease["vlan"]), (AUTO, VLAN))
        self.assertEqual(bridge_vlans(lease["mgmtdev"]), [(VLAN, ["Egress Untagged", "PVID"])])
        virsh("destroy", name)
        self.assertNoLeaseAndNoDevice(lease["device"])


    def test_6_restore_keeps_a_nic_saved_on_a_tap_portable(self):
        # saved on a tap while the pool was drained, restored with room:
        # QEMU cannot load that virtio-net into vhost-vdpa ("saved image
        # requires TUN_F_UFO support"), so the hook keeps it on the bridge
        name = "lab-restore"
        LAB.lv.define(self.rewritten(name, AUTO, "portable"))
        vdpactl("pool", "drain", POOL)
        try:
            self.start_paused(name)
            with Timer("virsh managedsave"):
                virsh("managedsave", name, timeout=180)
        finally:
            vdpactl("pool", "undrain", POOL)
        self.assertEqual(pool()["free"], len(SLOTS))
        self.start_paused(name)  # restore begin
        self.assertIn("<interface type='bridge'>", virsh("dumpxml", name).stdout)
        self.assertEqual(bridge_vlans(self.tap_of(name)), [(VLAN, ["Egress Untagged", "PVID"])])
        self.assertEqual(leases(), [])
        virsh("destroy", name)

    def test_7_a_refused_save_keeps_the_lease(self):
        # QEMU refuses to save (or migrate) a vhost-vdpa device without
        # dirty-page logging (VHOST_F_LOG_ALL), which VDUSE lacks: the
        # guest goes on, its lease and device with it
        name = "lab-nosave"
        LAB.lv.define(self.rewritten(name, AUTO, "accelerated"))
        self.start_paused(name)
        (lease,) = leases()
        r = virsh("managedsave", name, check=False, timeout=180)
        log("managedsave: %s", r.stderr.strip().replace("\n", " "))
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(virsh("domstate", name).stdout.strip(), "paused")
        self.assertEqual(leases(), [lease])
        self.assertIn(lease["device"], vdpa_devices())
        virsh("destroy", name)
        self.assertNoLeaseAndNoDevice(lease["device"])


    def test_8_survives_sigkill_and_reconciles_the_real_kernel(self):
        # the lease's domain is defined, so reconciliation with the real
        # libvirtd keeps its lease
        name = "lab-keep"
        LAB.lv.define(self.rewritten(name, NETWORK, "accelerated"))
        lease = json.loads(vdpactl("allocate", "-j", "--uuid", self.UUID, "--domain", name, "--mac", self.MAC,
                                   "--network", NETWORK).stdout)
        other = "va-" + [slot for slot in SLOTS if slot != lease["mgmtdev"]][0]

        LAB.daemon.kill()
        LAB.daemon.wait(10)
        LAB.stop_daemon()
        with Timer("vdpa-allocatord after SIGKILL"):
            LAB.start_daemon()
        self.assertEqual([(x["uuid"], x["mac"], x["device"]) for x in leases()], [(self.UUID, self.MAC, lease["device"])])
        self.assertIn(lease["device"], vdpa_devices())
        self.assertEqual(os.readlink(lease["port"]), lease["chardev"])
        report = vdpactl_json("reconcile")
        log("reconcile: %s", json.dumps(report, sort_keys=True))
        self.assertEqual((report["orphans"], report["missing"], report["released"]), ([], [], 0))

        # a va-* device no lease owns is removed; a leased one that went is
        # made again, bound, with its node and link
        run(["vdpa", "dev", "add", "name", other, "mgmtdev", "vduse"])
        run(["vdpa", "dev", "del", lease["device"]])
        report = vdpactl_json("reconcile")
        log("reconcile: %s", json.dumps(report, sort_keys=True))
        self.assertEqual((report["orphans"], report["missing"]), ([other], ["%s/%s" % (self.UUID, self.MAC)]))
        self.assertNotIn(other, vdpa_devices())
        self.assertEqual(vdpa_driver(lease["device"]), "vhost_vdpa")
        (now,) = leases()
        st = os.stat(now["chardev"])
        self.assertEqual((grp.getgrgid(st.st_gid).gr_name, stat.S_IMODE(st.st_mode)), (DEVICE_GROUP, DEVICE_MODE))
        self.assertEqual(os.readlink(now["port"]), now["chardev"])
        vdpactl("release", "--uuid", self.UUID, "--mac", self.MAC)
        self.assertNoLeaseAndNoDevice(lease["device"])


    def test_9_no_release_under_a_running_guest(self):
        # the kernel's DEV_DEL waits until QEMU closes the node: a release
        # that tried would hang the daemon; it is refused, quickly, with one
        # line, the lease and the device kept
        name = "lab-busy"
        LAB.lv.define(self.rewritten(name, NETWORK, "accelerated"))
        self.start_paused(name)
        (lease,) = leases()
        with Timer("vdpactl release, refused"):
            r = vdpactl("release", "--uuid", self.UUID, "--mac", self.MAC, check=False, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stderr, "vdpactl: NIC %s of domain %s: its device %s (%s) is open: a guest runs on it; stop the domain "
                         "first\n" % (self.MAC, self.UUID, lease["device"], lease["chardev"]))
        r = vdpactl("release", "--uuid", self.UUID, "--all", check=False, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(vdpactl_json("status")["backend"], "kernel")  # still serving
        self.assertEqual(leases(), [lease])
        self.assertIn(lease["device"], vdpa_devices())
        virsh("destroy", name)
        self.assertNoLeaseAndNoDevice(lease["device"])


    def test_10_hot_plug_on_a_running_guest(self):
        # libvirt calls no hook for hot-plug: vdpactl leases, then attaches
        mac = "52:54:00:1a:b0:0a"
        name = "lab-hotplug"
        LAB.lv.define(self.rewritten(name, PLAIN, "portable", acpi=True))
        self.start_paused(name)
        with Timer("vdpactl domain attach"):
            vdpactl("domain", "attach", name, "--network", NETWORK, "--mac", mac, timeout=120)
        (lease,) = leases()
        self.assertEqual((lease["mac"], lease["network"]), (mac, NETWORK))
        self.assertIn("<source dev='%s'/>" % lease["port"], virsh("dumpxml", name).stdout)
        with open("/run/libvirt/qemu/%s.pid" % name) as f:
            pid = int(f.read().strip())
        self.assertIn(lease["chardev"], [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)])
        # a paused guest never ejects the NIC: the lease stays, said so
        with Timer("vdpactl domain detach"):
            r = vdpactl("domain", "detach", name, "--mac", mac, check=False, timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "vdpactl: detach requested, but the guest has not let go of the NIC yet: its lease stays until "
                         "'vdpactl release' once it has, or until the domain stops\n")
        self.assertEqual(leases(), [lease])
        virsh("destroy", name)
        self.assertNoLeaseAndNoDevice(lease["device"])

    def test_11_a_refused_hot_plug_keeps_its_lease_until_the_domain_stops(self):
        # no ACPI, no PCI hot-plug: QEMU refuses the device but keeps the
        # vhost-vdpa fd it was given (QEMU 7.2, libvirt 9.0)
        mac = "52:54:00:1a:b0:0b"
        name = "lab-nohotplug"
        LAB.lv.define(self.rewritten(name, PLAIN, "portable"))
        self.start_paused(name)
        r = vdpactl("domain", "attach", name, "--network", NETWORK, "--mac", mac, check=False, timeout=120)
        log("attach: %s", r.stderr.strip())
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^vdpactl: libvirt refused the attach: .*does not support hotplugging.*; QEMU still holds the "
                         r"device, so its lease stays until the domain stops\n$")
        (lease,) = leases()
        self.assertEqual(vdpactl_json("status")["backend"], "kernel")  # still serving
        virsh("destroy", name)
        self.assertNoLeaseAndNoDevice(lease["device"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
