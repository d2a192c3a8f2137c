# SPDX-License-Identifier: LGPL-2.1-or-later
"""The paired-guest benchmark end to end with short durations
(pairbench.py --time VA_PAIR_TIME, default 1, --repeat VA_PAIR_REPEAT, default
2): the report's schema, packets on
every vNIC row, no domains left, every lease back, the VLANs kept apart, and
the SR-IOV rows unavailable (this machine has no SR-IOV PF), and the
software vDPA rows unavailable with their reason where the host has no
VDUSE (this machine), measured where it has.
Needs root, libvirtd, QEMU and Open vSwitch (contrib/install-deps.sh); the
benchmark enters its own namespaces."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

from vatest import pairreport as rep

HERE = os.path.dirname(os.path.abspath(__file__))

SCHEMA = os.path.join(HERE, "..", "..", "docs", "pairbench-report.schema.json")
REPEAT = os.environ.get("VA_PAIR_REPEAT", "2")


# below meson's 900 s: a run that hangs ends here, its output kept
# (VA_PAIR_TIMEOUT: seconds)
TIMEOUT = int(os.environ.get("VA_PAIR_TIMEOUT", "840"))


def run_bench(argv, out):
    """Runs the benchmark with its output in files, so that a run past
    TIMEOUT still says how far it came: it is sent SIGTERM (it stops its
    guests and libvirtd), and its output so far is returned."""
    paths = [os.path.join(out, "pairbench.stdout"), os.path.join(out, "pairbench.stderr")]
    with open(paths[0], "w") as o, open(paths[1], "w") as e:
        # its own process group: unshare blocks SIGTERM; the namespace's
        # pid 1 and the benchmark under it take it (vatest.libvirt stops
        # the guests and libvirtd on it)
        p = subprocess.Popen(argv, stdout=o, stderr=e, text=True, start_new_session=True)
        try:
            rc = p.wait(timeout=TIMEOUT)
            why = ""
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            rc = p.returncode
            why = "\npairbench.py did not finish in %d s, and was stopped\n" % TIMEOUT
    texts = []
    for x in paths:
        with open(x, errors="replace") as f:
            texts.append(f.read())
    stdout, stderr = texts
    return subprocess.CompletedProcess(argv, rc, stdout, stderr + why)


class PairBench(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the benchmark needs root (namespaces, libvirtd)")
        cls.out = tempfile.mkdtemp(prefix="va-pair-")
        cls.proc = run_bench(["/usr/bin/python3", os.path.join(HERE, "pairbench.py"), "--time",
                              os.environ.get("VA_PAIR_TIME", "1"), "--repeat", REPEAT, "--out", cls.out], cls.out)
        sys.stderr.write(cls.proc.stdout + cls.proc.stderr[-4000:])
        if cls.proc.returncode == 77:
            raise unittest.SkipTest(cls.proc.stderr.strip().splitlines()[-1])
        path = os.path.join(cls.out, "pairbench.json")
        cls.report = None
        if os.path.exists(path):
            with open(path) as f:
                cls.report = json.load(f)

    def setUp(self):
        self.assertIsNotNone(self.report, "no report; the run said:\n" + self.proc.stderr[-3000:])

    def test_exit_status(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])

    def test_schema(self):
        with open(SCHEMA) as f:
            schema = json.load(f)
        self.assertEqual(rep.validate(self.report, schema), [])
        self.assertTrue(os.path.getsize(os.path.join(self.out, "pairbench.svg")) > 0)
        self.assertTrue(os.path.getsize(os.path.join(self.out, "pairbench.png")) > 0)

    def test_every_vnic_row_has_packets(self):
        vnic = [r for r in self.report["rows"] if r["kind"] == "vnic"]
        self.assertEqual(sorted(r["test"] for r in vnic), sorted(rep.TEST_NAMES))
        for r in vnic:
            self.assertEqual(r["status"], "measured", r)
            self.assertGreater(r["bytes"], 0, r)
            self.assertGreater(r["bandwidth_mbps"], 0, r)
            if r["test"].startswith("udp"):
                self.assertGreater(r["pps"], 0, r)

    def test_every_test_ran_as_often_as_asked(self):
        """--repeat: each measured row is the median of that many runs,
        with the lowest and highest of its bandwidth, and the printed
        table says how far the runs came apart."""
        measured = [r for r in self.report["rows"] if r["status"] == "measured"]
        self.assertTrue(measured)
        self.assertEqual(self.report["params"]["repeats"], int(REPEAT))
        for r in measured:
            self.assertEqual(r["repeats"], int(REPEAT), r)
            lo, hi = r["spread"]["bandwidth_mbps"]
            self.assertLessEqual(lo, r["bandwidth_mbps"], r)
            self.assertLessEqual(r["bandwidth_mbps"], hi, r)
        if int(REPEAT) > 1:
            self.assertIn("each figure is the median of %s runs" % REPEAT, self.proc.stdout)

    def test_vdpa_rows_never_invent_numbers(self):
        for r in self.report["rows"]:
            if r["kind"] == "vdpa" and not self.report["vdpa_available"]:
                self.assertEqual(r["status"], "unavailable")
                self.assertTrue(r["note"].startswith(rep.UNAVAILABLE), r)
                self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS))

    def test_sriov_rows_unavailable_here(self):
        """This machine has no SR-IOV PF and the default configuration no
        network vpc3: every test has an sriov row, unavailable with the
        reason, no numbers, and network3 was in no guest."""
        self.assertIs(self.report["sriov_available"], False)
        self.assertEqual(self.report["sriov_reason"],
                         "unavailable: no kind=sriov pool on this host (the configuration has no network vpc3)")
        s = [r for r in self.report["rows"] if r["kind"] == "sriov"]
        self.assertEqual(sorted(r["test"] for r in s), sorted(rep.TEST_NAMES))
        for r in s:
            self.assertEqual((r["status"], r["note"]), ("unavailable", self.report["sriov_reason"]), r)
            self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS), r)
            self.assertIsNone(r["bytes"], r)
        self.assertNotIn("network3", self.report["networks"])
        self.assertFalse(any("network3_nic" in g for g in self.report["guests"].values()))
        with open(os.path.join(self.out, "vm2-console.log")) as f:
            self.assertNotIn("192.171.0.", f.read(), "no test ran against a third address")

    def test_both_guests_consoles_are_kept(self):
        """vm2-console.log (the client, iperf3's JSON) and vm1-console.log
        (the server: why a path stopped answering) are in the output."""
        for vm, role in (("vm1", "server"), ("vm2", "client")):
            with open(os.path.join(self.out, vm + "-console.log"), errors="replace") as f:
                self.assertIn("VA-GUEST-READY role=%s " % role, f.read(), vm)

    def test_software_rows_say_why_or_carry_packets(self):
        """The software vDPA path: where the host cannot make the devices
        (this machine: no VDUSE), every vdpa-software row is unavailable
        with the one reason found, printed in one line, and network4 was in
        no guest; where it can, every row has packets, two software leases
        were held during the run, and the software bridge kept network1's
        VLAN off vm1's software NIC."""
        s = [r for r in self.report["rows"] if r["kind"] == "vdpa-software"]
        self.assertEqual(sorted(r["test"] for r in s), sorted(rep.TEST_NAMES))
        line = [ln for ln in self.proc.stdout.splitlines() if ln.startswith("network4 vpc4, vDPA (software): ")]
        self.assertEqual(len(line), 1, self.proc.stdout)
        if not self.report["software_available"]:
            why = self.report["software_reason"]
            self.assertTrue(why.startswith("unavailable: "), why)
            self.assertTrue(line[0].endswith(": " + why), line)
            for r in s:
                self.assertEqual((r["status"], r["note"]), ("unavailable", why), r)
                self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS), r)
            self.assertNotIn("network4", self.report["networks"])
            with open(os.path.join(self.out, "vm2-console.log")) as f:
                self.assertNotIn("192.172.0.", f.read(), "no test ran against a software NIC")
            return
        for r in s:
            self.assertEqual(r["status"], "measured", r)
            self.assertGreater(r["bytes"], 0, r)
        during = [l for l in self.report["leases"]["during"] if l.get("form") == "software"]
        self.assertEqual(len(during), 2, self.report["leases"]["during"])
        iso = self.report["isolation"]["software"]
        self.assertTrue(iso["ok"], iso)
        self.assertEqual(sorted(p["reached"] for p in iso["probes"]), [False, True], iso)

    def test_cleanup_and_leases(self):
        self.assertEqual(self.report["domains_left"], [])
        self.assertTrue(self.report["leases"]["returned"], self.report["leases"])
        self.assertEqual(self.report["leases"]["after"], self.report["leases"]["before"])

    def test_vlans_do_not_cross(self):
        iso = self.report["isolation"]
        if not self.report["networks"]["network1"]["tagged"]:
            self.skipTest("untagged: this host carries no VLANs (Open vSwitch did not start)")
        self.assertTrue(iso["ok"], iso)
        crossing = [p for p in iso["probes"] if p["port_vlan"] != p["dst_vlan"]]
        self.assertEqual(len(crossing), 2)
        self.assertFalse(any(p["reached"] for p in crossing), crossing)
        self.assertTrue(all(p["reached"] for p in iso["probes"] if p["port_vlan"] == p["dst_vlan"]), iso)


if __name__ == "__main__":
    unittest.main(verbosity=2)
