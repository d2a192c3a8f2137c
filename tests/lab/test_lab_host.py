#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lab host harness (lab_host.py, vatest.labhost): the command runs on
the 6.12 kernel over the build machine's root, its status and output come
back, writes land in the tmpfs overlay and not on the build machine, one
asked for KVM (--kvm) offers it to nested guests, a lab host that does
not finish within its bound is killed and reported, and a lab kernel that
panics is reported with its call trace and booted once
more."""

import os
import subprocess
import sys
import unittest

from vatest import labhost


class LabHost(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        miss = labhost.missing_tools()
        if miss:
            raise unittest.SkipTest("missing " + " ".join(miss))

    def test_command_status_and_output(self):
        marker = "/etc/lab-host-overlay-probe.%d" % os.getpid()
        r = labhost.run(["sh", "-c", "uname -r; touch %s && echo wrote; "
                          "ls /lib/modules/$(uname -r)/modules.dep; echo domain type $LAB_DOMAIN_TYPE; "
                          "exit 3" % marker], timeout=300)
        print("lab-host:", r.summary(), file=sys.stderr)
        self.assertFalse(r.timed_out, r.console[-3000:])
        self.assertEqual(r.rc, 3, r.console[-3000:])
        self.assertRegex(r.output, r"^6\.12\.")
        self.assertIn("wrote", r.output)
        self.assertIn("modules.dep", r.output)
        self.assertIn("domain type qemu\n", r.output)
        self.assertFalse(os.path.exists(marker), "a write inside the lab host reached the build machine")
        self.assertIsNotNone(r.boot_s)

    def test_claims_cpu_for_its_session(self):
        # the share contrib/run-tests.sh asks for lands on the lab host's
        # session (meson starts each test in its own), a bad value on none
        if not os.path.exists("/proc/self/autogroup"):
            self.skipTest("no autogroup scheduling in this kernel")
        probe = "from vatest import labhost; labhost.claim_cpu(); print(open('/proc/self/autogroup').read())"

        def autogroup_nice(value):
            env = dict(os.environ)
            env.pop("VA_LAB_AUTOGROUP_NICE", None)
            if value is not None:
                env["VA_LAB_AUTOGROUP_NICE"] = value
            r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                               start_new_session=True, check=True)
            return r.stdout.split()[-1], r.stderr
        want = "-5" if os.geteuid() == 0 else "5"
        self.assertEqual(autogroup_nice(want), (want, ""))
        self.assertEqual(autogroup_nice(None), ("0", ""))
        nice, err = autogroup_nice("x")
        self.assertEqual(nice, "0")
        self.assertIn("VA_LAB_AUTOGROUP_NICE=x not applied", err)

    def test_kvm_for_nested_guests(self):
        # --kvm: the lab kernel's KVM on SVM, which TCG emulates; QEMU as
        # libvirt-qemu (group kvm) may open it, and QEMU's own KVM answers
        r = labhost.run(["sh", "-c", "echo domain type $LAB_DOMAIN_TYPE; stat -c 'kvm node %G %a' /dev/kvm; "
                         "printf 'info kvm\\nquit\\n' | qemu-system-x86_64 -accel kvm -machine none -nodefaults "
                         "-display none -monitor stdio"], timeout=300, kvm=True)
        print("lab-host:", r.summary(), file=sys.stderr)
        self.assertEqual(r.rc, 0, r.output + r.console[-3000:])
        self.assertIn("domain type kvm\n", r.output)
        self.assertIn("kvm node kvm 660\n", r.output)
        self.assertIn("kvm support: enabled", r.output)

    def test_time_bound(self):
        r = labhost.run(["sleep", "3600"], timeout=15)
        self.assertTrue(r.timed_out)
        self.assertIsNone(r.rc)

    def test_kernel_panic_reported_and_booted_again_once(self):
        # sysrq's crash panics the kernel as a fault in its code would
        # (drivers/tty/sysrq.c, sysrq_handle_crash)
        lab_host = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab_host.py")
        r = subprocess.run([sys.executable, lab_host, "--timeout", "300", "--", "sh", "-c",
                            "echo booted; echo c > /proc/sysrq-trigger; sleep 60"],
                           capture_output=True, text=True, timeout=900)
        sys.stderr.write(r.stderr[-2000:])
        self.assertEqual(r.returncode, 125, r.stderr[-3000:])
        self.assertEqual(r.stderr.count(labhost.PANIC_RETRY), 1, r.stderr[-3000:])
        reports = [l for l in r.stderr.splitlines()
                   if l.startswith(labhost.KERNEL_PREFIX) and "Kernel panic - not syncing: sysrq triggered crash" in l]
        self.assertEqual(len(reports), 2, r.stderr[-3000:])
        self.assertEqual(r.stderr.count("lab-host: boot-to-command"), 2, r.stderr[-3000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
