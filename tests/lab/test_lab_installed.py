#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The installed-host case (issue 12), run INSIDE a lab host booted with
systemd as PID 1 and AppArmor on (lab_host.py --systemd): Debian's own
units and stock configuration (apparmor.service, dbus, polkitd, udevd,
libvirtd from libvirt-daemon-system with its default qemu.conf: QEMU as
libvirt-qemu under its AppArmor profile), the project installed into that
root by install_project(), the daemon run by systemd from its unit, and a
domain started paused on a vdpa interface of a vduse-test pool.

    lab_host.py --systemd -- /usr/bin/python3 tests/lab/test_lab_installed.py [-v]

install_project() is the seam: today it puts the build tree's files where
the package will (a unit made from contrib/vdpa-allocatord.service.in with
ExecStart= in the build tree); later it becomes dpkg -i of the package
contrib/build-deb.sh builds."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import test_lab_daemon as lab  # beside this file: paths, config, VDUSE helpers
from test_lab_daemon import log, wait_until, Timer
from vatest.paths import BUILDDIR

SRCDIR = lab.SRCDIR
UNIT_IN = os.path.join(SRCDIR, "contrib", "vdpa-allocatord.service.in")
POLKIT_POLICY = os.path.join(SRCDIR, "contrib", "org.vdpa_allocator.policy")
HOOK_LINK = "/etc/libvirt/hooks/qemu.d/50-vdpa-allocator"
UNIT = "vdpa-allocatord.service"
URI = "qemu:///system"
STATE_DIR = "/var/lib/vdpa-allocator"  # the unit's StateDirectory=
# what QEMU needs for the node libvirtd opens and passes it (issue 12); the
# package must ship it into the libvirt-qemu abstraction's local include
APPARMOR_QEMU_LOCAL = "/etc/apparmor.d/local/abstractions/libvirt-qemu"
APPARMOR_QEMU_RULE = "/dev/vhost-vdpa-* rw,\n"
# libvirtd's profile runs hooks below /etc/libvirt/hooks/ only (rmix), and
# AppArmor checks the link's target: the hook and what it runs need a rule
APPARMOR_LIBVIRTD_LOCAL = "/etc/apparmor.d/local/usr.sbin.libvirtd"
APPARMOR_LIBVIRTD_PROFILE = "/etc/apparmor.d/usr.sbin.libvirtd"

SERVICES = ["apparmor.service", "dbus.service", "systemd-udevd.service", "libvirtd.service", UNIT]


def sh(cmd, check=True, timeout=120, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def systemctl(*args, check=True, timeout=180):
    return sh(["systemctl"] + list(args), check=check, timeout=timeout)


def virsh(*args, check=True, timeout=180):
    return sh(["virsh", "-q", "-c", URI] + list(args), check=check, timeout=timeout)


def denials():
    """The kernel log's AppArmor denials, verbatim."""
    return [line for line in sh(["dmesg"]).stdout.splitlines() if 'apparmor="DENIED"' in line]


def unit_text():
    """contrib's unit with the build tree's daemon; the paths the build tree
    needs (and an installed daemon will not) are passed as options."""
    with open(UNIT_IN) as f:
        text = f.read()
    exec_start = "ExecStart=%s --config %s --state-dir %s --run-dir %s" % (lab.DAEMON, lab.CONFIG_DIR, STATE_DIR,
                                                                          lab.RUN_DIR)
    text, n = re.subn(r"^ExecStart=.*$", exec_start, text, flags=re.M)
    assert n == 1, "no ExecStart= in %s" % UNIT_IN
    # ProtectHome= and PrivateTmp= would hide a build tree there
    if BUILDDIR.startswith(("/home/", "/root/")):
        text = text.replace("ProtectHome=yes", "ProtectHome=read-only")
    if BUILDDIR.startswith(("/tmp/", "/var/tmp/")):
        text = text.replace("PrivateTmp=yes", "PrivateTmp=no")
    return text


def add_qemu_rule():
    os.makedirs(os.path.dirname(APPARMOR_QEMU_LOCAL), exist_ok=True)
    with open(APPARMOR_QEMU_LOCAL, "a") as f:
        f.write(APPARMOR_QEMU_RULE)


def install_project():
    """THE SEAM: what `dpkg -i vdpa-allocator_*.deb` will do. Puts the
    build tree's pieces where the package installs them, and tells the
    running system as its postinst should."""
    shutil.copy(lab.UDEV_RULE, "/etc/udev/rules.d/")
    sh(["udevadm", "control", "--reload"])
    shutil.copy(lab.BUS_POLICY, "/etc/dbus-1/system.d/")
    systemctl("reload", "dbus.service")
    os.makedirs("/usr/share/polkit-1/actions", exist_ok=True)
    shutil.copy(POLKIT_POLICY, "/usr/share/polkit-1/actions/")
    os.makedirs(os.path.dirname(HOOK_LINK), exist_ok=True)
    os.symlink(lab.HOOK, HOOK_LINK)
    with open("/etc/systemd/system/" + UNIT, "w") as f:
        f.write(unit_text())
    with open(APPARMOR_LIBVIRTD_LOCAL, "a") as f:
        f.write("%s/* rmix,\n" % os.path.dirname(os.path.realpath(lab.HOOK)))
    sh(["apparmor_parser", "-r", APPARMOR_LIBVIRTD_PROFILE], timeout=300)
    if os.environ.get("LAB_APPARMOR_QEMU_RULE") == "1":
        add_qemu_rule()
    systemctl("daemon-reload")
    # libvirtd reads its hook directory only when it starts
    systemctl("restart", "libvirtd.service")


def cap_bounding_set():
    """The unit's CapabilityBoundingSet=, as a list."""
    caps = []
    for line in unit_text().splitlines():
        if line.startswith("CapabilityBoundingSet="):
            caps += line.split("=", 1)[1].split()
    return caps


PROBE = """import os, sys
target = sys.argv[1]
seen, denied = [], 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        denied += 1
        continue
    for fd in fds:
        try:
            if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == target:
                seen.append(pid + ":" + open("/proc/%s/comm" % pid).read().strip())
        except OSError:
            pass
print(",".join(seen) or "none", denied)
"""


def held_open_probe(chardev, caps):
    """What va_chardev_held_open's /proc/*/fd scan sees for chardev in a
    transient unit with the daemon unit's identity and caps: (pids that hold
    it, number of /proc/PID/fd it could not list)."""
    r = sh(["systemd-run", "--wait", "--pipe", "--quiet", "-p", "CapabilityBoundingSet=" + " ".join(caps),
            "-p", "NoNewPrivileges=yes", "-p", "ProtectSystem=strict", "/usr/bin/python3", "-c", PROBE, chardev])
    log("held_open probe with %s: %s", " ".join(caps), r.stdout.strip())
    seen, denied = r.stdout.split()
    return ([] if seen == "none" else [h.split(":")[0] for h in seen.split(",")]), int(denied)


def domain_xml(name, uuid, mac):
    xml = """<domain type='qemu'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <metadata>
    <vdpa:nics xmlns:vdpa='%(ns)s'>
      <vdpa:nic mac='%(mac)s' network='%(network)s'/>
    </vdpa:nics>
  </metadata>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='bridge'>
      <mac address='%(mac)s'/>
      <source bridge='%(bridge)s'/>
      <model type='virtio'/>
    </interface>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
""" % dict(name=name, uuid=uuid, ns=lab.NS, mac=mac, network=lab.NETWORK, bridge=lab.BRIDGE)
    r = sh([lab.VDPACTL, "rewrite", "--to", "accelerated", "--config", lab.CONFIG_DIR, "-"], input=xml)
    return r.stdout


def journal(unit, lines=60):
    return sh(["journalctl", "-b", "-u", unit, "--no-pager", "-n", str(lines)], check=False).stdout


def qemu_pid(name):
    with open("/run/libvirt/qemu/%s.pid" % name) as f:
        return int(f.read().strip())


def under_systemd():
    try:
        with open("/proc/1/comm") as f:
            return f.read().strip() == "systemd"
    except OSError:
        return False


def setUpModule():
    if not (lab.in_lab_host() and under_systemd()):
        raise unittest.SkipTest("runs only inside the lab host booted with systemd: "
                                "lab_host.py --systemd -- /usr/bin/python3 %s" % __file__)


class InstalledHost(unittest.TestCase):
    """One walk through an operator's journey; the cases run in order and
    share what the earlier ones made."""

    NAME = "lab-installed"
    UUID = "1ab00000-0000-4000-8000-0000000000aa"
    MAC = "52:54:00:1a:b0:aa"
    explore = os.environ.get("LAB_INSTALLED_EXPLORE") == "1"

    @classmethod
    def setUpClass(cls):
        cls.denials_at_boot = denials()
        shutil.rmtree(lab.WORK, ignore_errors=True)
        os.makedirs(lab.WORK)
        with Timer("modprobe"):
            sh(["modprobe", "-a", "vdpa", "vduse", "vhost_vdpa", "bridge"])
        with Timer("install_project"):
            install_project()
        os.makedirs(lab.CONFIG_DIR, exist_ok=True)
        with open(os.path.join(lab.CONFIG_DIR, "vdpa-allocator.conf"), "w") as f:
            f.write(lab.CONFIG)
        sh(["ip", "link", "add", lab.BRIDGE, "type", "bridge", "vlan_filtering", "1"])
        sh(["ip", "link", "set", lab.BRIDGE, "up"])
        for slot in lab.SLOTS:
            with Timer("VDUSE device va-" + slot):
                lab.start_vduse(slot)
        with Timer("systemctl start " + UNIT):
            r = systemctl("start", UNIT, check=False)
        if r.returncode != 0:
            raise RuntimeError("systemctl start %s: %s%s\n%s" % (UNIT, r.stdout, r.stderr, journal(UNIT)))

    def test_1_services_up(self):
        for unit in SERVICES:
            r = systemctl("is-active", unit, check=False)
            self.assertEqual(r.stdout.strip(), "active", "%s: %s\n%s" % (unit, r.stdout, journal(unit)))
        failed = systemctl("list-units", "--failed", "--plain", "--no-legend").stdout
        log("failed units: %s", failed.strip() or "none")
        log("system: %s", systemctl("is-system-running", check=False).stdout.strip())
        log("%s", sh(["systemd-analyze", "time"], check=False, timeout=60).stdout.strip())
        with open("/sys/kernel/security/lsm") as f:
            self.assertIn("apparmor", f.read().split(","))
        profiles = json.loads(sh(["aa-status", "--json"]).stdout)["profiles"]
        self.assertEqual(profiles.get("libvirtd"), "enforce", profiles)
        # polkitd is D-Bus activated; asking it activates it, and it knows
        # the project's action
        self.assertIn("org.vdpa_allocator.manage", sh(["pkaction", "--action-id", "org.vdpa_allocator.manage"]).stdout)
        self.assertEqual(systemctl("is-active", "polkit.service", check=False).stdout.strip(), "active")
        status = json.loads(sh([lab.VDPACTL, "status", "-j"]).stdout)
        self.assertEqual(status["backend"], "kernel")

    def start_paused(self):
        with Timer("virsh start --paused"):
            return virsh("start", "--paused", self.NAME, check=False)

    def test_2_domain_starts_paused_under_its_profile(self):
        with open(os.path.join(lab.WORK, "dom.xml"), "w") as f:
            f.write(domain_xml(self.NAME, self.UUID, self.MAC))
        virsh("define", os.path.join(lab.WORK, "dom.xml"))
        r = self.start_paused()
        log("virsh start: rc %d %s%s", r.returncode, r.stdout.strip(), r.stderr.strip())
        pids = sh(["pidof", "libvirtd"], check=False).stdout.split()
        for p in pids:
            with open("/proc/%s/attr/current" % p) as f:
                log("libvirtd %s: label %s", p, f.read().strip())
        log("audit lines in the kernel log: %d, suppressed: %s", sum('audit' in l for l in sh(["dmesg"]).stdout.splitlines()),
            [l for l in sh(["dmesg"]).stdout.splitlines() if "suppressed" in l or "lost" in l])
        for path in ("/etc/apparmor.d/libvirt/libvirt-%s.files" % self.UUID, APPARMOR_QEMU_LOCAL):
            log("%s:\n%s", path, sh(["cat", path], check=False).stdout)
        if self.explore and r.returncode != 0:
            log("EXPLORE: failed without the rule; denials:\n%s", "\n".join(denials()))
            log("qemu log:\n%s", sh(["tail", "-n", "30", "/var/log/libvirt/qemu/%s.log" % self.NAME], check=False).stdout)
            log("libvirtd:\n%s", journal("libvirtd.service", 20))
            type(self).denials_before_fix = denials()
            add_qemu_rule()
            r = self.start_paused()
            log("EXPLORE: with %s in %s: rc %d %s", APPARMOR_QEMU_RULE.strip(), APPARMOR_QEMU_LOCAL, r.returncode, r.stderr.strip())
        if r.returncode != 0:
            log("qemu log:\n%s", sh(["tail", "-n", "30", "/var/log/libvirt/qemu/%s.log" % self.NAME], check=False).stdout)
            log("denials:\n%s", "\n".join(denials()))
            log("libvirtd:\n%s", journal("libvirtd.service", 40))
            log("daemon:\n%s", journal(UNIT, 40))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(virsh("domstate", self.NAME).stdout.strip(), "paused")
        pid = qemu_pid(self.NAME)
        with open("/proc/%d/status" % pid) as f:
            uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
        self.assertEqual({int(u) for u in uids}, {int(sh(["id", "-u", "libvirt-qemu"]).stdout)})
        with open("/proc/%d/attr/current" % pid) as f:
            label = f.read().strip()
        log("qemu %d: label %s", pid, label)
        self.assertEqual(label, "libvirt-%s (enforce)" % self.UUID)
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().decode().split("\0")
        netdev = [a for a in argv if "vhost-vdpa" in a]
        log("qemu %d: %s", pid, " ".join(netdev))
        self.assertTrue(netdev, " ".join(argv))
        (lease,) = lab.leases()
        self.assertEqual(lab.vdpa_driver(lease["device"]), "vhost_vdpa")
        fds = [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)]
        self.assertIn(lease["chardev"], fds)
        type(self).lease = lease
        if self.explore:
            # the same profile opening the node by its path, as QEMU would
            # if libvirtd passed no fd: EACCES (the profile lacks a rule) or
            # EBUSY (vhost-vdpa allows one opener, the guest)
            r = sh(["aa-exec", "-p", "libvirt-" + self.UUID, "--", "/usr/bin/qemu-system-x86_64", "-nodefaults",
                    "-display", "none", "-machine", "none", "-netdev",
                    "vhost-vdpa,vhostdev=%s,id=x" % lease["chardev"]], check=False, timeout=60)
            log("EXPLORE: QEMU under libvirt-%s opening %s itself: rc %d %s", self.UUID, lease["chardev"], r.returncode,
                (r.stdout + r.stderr).strip())
            log("EXPLORE: denials now:\n%s", "\n".join(denials()))
            type(self).denials_before_fix = denials()  # that one is ours

    def test_3_no_apparmor_denials(self):
        seen = [d for d in denials() if d not in getattr(type(self), "denials_before_fix", [])]
        log("AppArmor denials: %d\n%s", len(seen), "\n".join(seen))
        self.assertEqual(seen, [])

    def lease_or_skip(self):
        lease = getattr(type(self), "lease", None)
        if lease is None:
            self.skipTest("no running guest")
        return lease

    def test_4_a_proc_fd_scan_with_cap_sys_ptrace_sees_qemu(self):
        # va_chardev_held_open's scan, in a unit with the daemon's caps:
        # /proc/PID/fd of QEMU (libvirt-qemu) needs CAP_SYS_PTRACE
        lease = self.lease_or_skip()
        caps = cap_bounding_set()
        log("unit's CapabilityBoundingSet: %s", " ".join(caps))
        pid = str(qemu_pid(self.NAME))
        unit_set = held_open_probe(lease["chardev"], caps)
        with_ptrace = held_open_probe(lease["chardev"], [c for c in caps if c != "CAP_SYS_PTRACE"] + ["CAP_SYS_PTRACE"])
        log("/proc/*/fd scan for %s (QEMU %s): unit's set %s; plus CAP_SYS_PTRACE %s", lease["chardev"], pid, unit_set,
            with_ptrace)
        self.assertIn(pid, with_ptrace[0])
        without = held_open_probe(lease["chardev"], [c for c in caps if c != "CAP_SYS_PTRACE"])
        self.assertNotIn(pid, without[0])

    def release_under_the_guest(self, lease):
        """vdpactl release while QEMU holds the device; (CompletedProcess,
        vdpa devices right after). A daemon that misses QEMU's fd goes on to
        DEV_DEL, which blocks until QEMU closes the node (and would block
        the lab host's power-off): the domain is destroyed in any case."""
        try:
            r = sh([lab.VDPACTL, "release", "--uuid", self.UUID, "--mac", self.MAC], check=False, timeout=90)
            devices = lab.vdpa_devices()
        finally:
            virsh("destroy", self.NAME, check=False)
        log("vdpactl release under the guest: rc %d %s; vdpa devices then %s", r.returncode, r.stderr.strip(), devices)
        return r, devices

    def test_5_the_unit_refuses_a_release_under_a_running_guest(self):
        lease = self.lease_or_skip()
        if self.explore:
            dropin = "/run/systemd/system/%s.d/ptrace.conf" % UNIT
            os.makedirs(os.path.dirname(dropin), exist_ok=True)
            with open(dropin, "w") as f:
                f.write("[Service]\nCapabilityBoundingSet=CAP_SYS_PTRACE\n")
            systemctl("daemon-reload")
            systemctl("restart", UNIT)
            r = sh([lab.VDPACTL, "release", "--uuid", self.UUID, "--mac", self.MAC], check=False, timeout=60)
            log("EXPLORE: release under the guest, unit plus CAP_SYS_PTRACE: rc %d %s", r.returncode, r.stderr.strip())
            os.unlink(dropin)
            systemctl("daemon-reload")
            systemctl("restart", UNIT)
            log("EXPLORE: leases after restart: %s", lab.leases())
        r, devices = self.release_under_the_guest(lease)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("is open: a guest runs on it", r.stderr)
        self.assertIn(lease["device"], devices)


if __name__ == "__main__":
    unittest.main(verbosity=2)
