# SPDX-License-Identifier: LGPL-2.1-or-later
"""vatest/pairreport.py on committed iperf3 -J fixtures: the numbers, the ratio
column, unavailable and fallback rows, the SR-IOV rows, the table, the
schema and the plot (SVG and PNG, matplotlib).
No root, no guests."""

import json
import os
import struct
import tempfile
import unittest
import xml.etree.ElementTree as ET

from vatest import pairreport as rep

HERE = os.path.dirname(os.path.abspath(__file__))

SRC = os.path.join(HERE, "..", "..")
SCHEMA = os.path.join(SRC, "docs", "pairbench-report.schema.json")


def fixture(name):
    with open(os.path.join(HERE, "fixtures", name)) as f:
        return json.load(f)


def ok(name, cpu=None):
    return {"rc": 0, "doc": fixture(name), "cpu_seconds": cpu}


META = {"host": {"backend": "kernel", "vhost_vdpa_devices": ["/dev/vhost-vdpa-0"]}, "vdpa_reason": None,
        "networks": {"network1": {"name": "vpc1", "mode": "virtio", "vlan": 2200, "bridge": "br", "bridge_type": "ovs",
                                  "tagged": True, "form": "virtio"},
                     "network2": {"name": "vpc2", "mode": "vdpa", "vlan": 2334, "bridge": "br", "bridge_type": "ovs",
                                  "tagged": True, "form": "accelerated"}, "note": "test"},
        "params": {"time_s": 10, "tests": rep.TEST_NAMES}, "leases": {"before": [], "during": [], "after": [], "returned": True},
        "domains_left": [], "isolation": {"probes": [], "ok": True}, "wall_time_s": 1.0}


def rows(report, test):
    return {r["kind"]: r for r in report["rows"] if r["test"] == test}


class Report(unittest.TestCase):
    def setUp(self):
        with open(SCHEMA) as f:
            self.schema = json.load(f)

    def plot(self, report):
        """write_all's files: the JSON as before, the SVG well-formed with
        the axes' units, the PNG a real image of the figure's size. Returns
        the SVG's text and the PNG's bytes."""
        with tempfile.TemporaryDirectory() as d:
            j, s, p = (os.path.join(d, "pairbench." + e) for e in ("json", "svg", "png"))
            rep.write_all(report, j, s)
            with open(j) as f:
                self.assertEqual(json.load(f), json.loads(json.dumps(report)))
            with open(s) as f:
                svg = f.read()
            with open(p, "rb") as f:
                png = f.read()
        root = ET.fromstring(svg)
        self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
        for label in ("bandwidth (Mbit/s, log scale)", "UDP datagram loss (%)", "UDP packets delivered (packets/s)", "vNIC",
                      "UDP 16 B,", "test"):
            self.assertIn(label, svg)
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        w, h = struct.unpack(">II", png[16:24])
        self.assertEqual((w, h), (1500, 520))
        self.assertGreater(len(png), 20000, "a figure with three panels, not a blank image")
        return svg, png

    def figure_texts(self, report):
        import matplotlib.pyplot as plt
        fig = rep.figure(report)
        try:
            legend = fig.axes[0].get_legend()
            return ([t.get_text() for t in legend.get_texts()] if legend else [],
                    fig._suptitle.get_text(), fig._supxlabel.get_text())
        finally:
            plt.close(fig)

    def legend(self, report):
        """The legend's entries, as drawn."""
        return self.figure_texts(report)[0]

    def texts(self, report):
        """The title and the footer."""
        return self.figure_texts(report)[1:]

    def test_repeated_tests_give_medians_and_their_spread(self):
        """--repeat N: each row holds the median of its N runs and their
        lowest and highest, the table shows them, the footer and the
        table say how far the runs of one path came apart, and one failed
        run fails the row naming it."""
        runs = [ok("udp16-vnic.json"), ok("udp16-vdpa.json"), ok("udp16-vnic.json")]
        results = {"udp16": {"vnic": runs, "vdpa": runs[1:2] * 3},
                   "tcp4": {"vnic": [ok("tcp4-vnic.json"), {"rc": 1, "doc": fixture("udp1460-failed.json")},
                                     ok("tcp4-vnic.json")]}}
        report = rep.build_report(results, dict(META, vdpa_available=True, params=dict(META["params"], repeats=3)))
        self.assertEqual(rep.validate(report, self.schema), [])
        u = rows(report, "udp16")
        self.assertEqual(u["vnic"]["repeats"], 3)
        self.assertAlmostEqual(u["vnic"]["bandwidth_mbps"], 12.1)
        self.assertEqual([round(x, 1) for x in u["vnic"]["spread"]["bandwidth_mbps"]], [12.1, 19.2])
        self.assertEqual([round(x, 1) for x in u["vnic"]["spread"]["pps"]], [95144.3, 151418.0])
        self.assertNotIn("retransmits", u["vnic"]["spread"])
        self.assertEqual(u["vdpa"]["spread"]["bandwidth_mbps"][0], u["vdpa"]["spread"]["bandwidth_mbps"][1])
        self.assertAlmostEqual(u["vdpa"]["ratio_vdpa_vnic"], 19.2 / 12.1, msg="the ratio is of the medians")
        t = rows(report, "tcp4")
        self.assertEqual(t["vnic"]["status"], "failed")
        self.assertIn("(run 2 of 3)", t["vnic"]["note"])
        self.assertEqual([t["vnic"][k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS))
        table = rep.table(report)
        self.assertIn("| UDP 16 B, 100 Mbit/s | vNIC -> vNIC | 12.1 (12.1-19.2) | 0.46 (0.46-0.74) | 95,144.3 (95,144.3-151,418.0) |",
                      table)
        note = rep.spread_note(report)
        self.assertIn("the median of 3 runs", note)
        self.assertIn("1.6x (UDP 16 B, 100 Mbit/s, vNIC, UDP loss)", note)
        self.assertIn(note, table)
        title, foot = self.texts(report)
        self.assertIn("3 runs: bars the median, whiskers the lowest and highest", foot)
        import matplotlib.pyplot as plt
        fig = rep.figure(report)
        try:
            # the pps panel reaches the highest run, not only the medians
            self.assertGreaterEqual(fig.axes[2].get_ylim()[1], 151418.0)
        finally:
            plt.close(fig)
        self.assertIn(note, foot)
        # one run each: no spread said anywhere
        single = rep.build_report({"udp16": {"vnic": ok("udp16-vnic.json")}}, dict(META, vdpa_available=True))
        self.assertIsNone(rep.spread_note(single))
        self.assertIn("| 12.1 | 0.46 |", rep.table(single))

    def test_the_reference_lives_in_docs_and_its_ratios_end_the_table(self):
        # issue 26: the figures the demo compares against are in the
        # repository (docs/reference.md, its source named), one table that
        # pairreport's REFERENCE must equal
        with open(os.path.join(SRC, "docs", "reference.md")) as f:
            doc = f.read()
        self.assertIn("**Source**", doc)
        labels = {"UDP 16 B": "udp16", "UDP 1460 B": "udp1460"}
        kinds = {"vNIC -> vNIC": "vnic", "vDPA -> vDPA": "vdpa"}
        table = {}
        for line in doc.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5 and cells[0] in labels:
                table[(labels[cells[0]], kinds[cells[1]])] = tuple(float(c.replace(",", "")) for c in cells[2:])
        self.assertEqual(table, rep.REFERENCE)
        # the run measured both paths of udp16 only: its ratio beside the
        # reference's 1.59x; udp1460's reference ratio alone
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa": ok("udp16-vdpa.json")}}
        report = rep.build_report(results, dict(META, vdpa_available=True))
        note = rep.reference_note(report)
        self.assertIn("1.59x packets/s at UDP 16 B (this run: %.2fx)" % (151418.0 / 95144.3), note)
        self.assertIn("3.16x bandwidth at UDP 1460 B;", note)
        self.assertIn("docs/reference.md", note)
        self.assertTrue(rep.table(report).rstrip().endswith(note + "."))

    def test_vdpa_host_numbers_and_ratios(self):
        results = {"udp16": {"vnic": ok("udp16-vnic.json", cpu=0.5), "vdpa": ok("udp16-vdpa.json")},
                   "tcp4": {"vnic": ok("tcp4-vnic.json"), "vdpa": ok("tcp4-vdpa.json")},
                   "udp1460": {"vnic": {"rc": 1, "doc": fixture("udp1460-failed.json")}}}
        report = rep.build_report(results, dict(META, vdpa_available=True))
        self.assertEqual(rep.validate(report, self.schema), [])
        u = rows(report, "udp16")
        # docs/reference.md: 12.1 Mbit/s, 0.46 %, 95,144.3 pps against 19.2, 0.74, 151,418
        self.assertAlmostEqual(u["vnic"]["bandwidth_mbps"], 12.1)
        self.assertAlmostEqual(u["vnic"]["loss_percent"], 0.46, places=2)
        self.assertAlmostEqual(u["vnic"]["pps"], 95144.3, places=1)
        self.assertAlmostEqual(u["vdpa"]["pps"], 151418.0, places=1)
        self.assertAlmostEqual(u["vdpa"]["loss_percent"], 0.74, places=2)
        self.assertAlmostEqual(u["vdpa"]["ratio_vdpa_vnic"], 19.2 / 12.1)
        self.assertIsNone(u["vnic"]["ratio_vdpa_vnic"])
        # 0.5 CPU s over 12.1 Mbit/s * 10 s = 0.121 Gbit
        self.assertAlmostEqual(u["vnic"]["cpu_s_per_gbit"], 0.5 / 0.121, places=3)
        self.assertNotIn("vdpa-fallback", u, "the accelerated form ran: no fallback row")
        t = rows(report, "tcp4")
        self.assertEqual((t["vnic"]["retransmits"], t["vdpa"]["retransmits"]), (0, 12))
        self.assertIsNone(t["vnic"]["pps"])
        self.assertIsNone(t["vnic"]["loss_percent"])
        self.assertAlmostEqual(t["vdpa"]["ratio_vdpa_vnic"], 8680 / 9390)
        f = rows(report, "udp1460")
        self.assertEqual(f["vnic"]["status"], "failed")
        self.assertIn("Connection refused", f["vnic"]["note"])
        self.assertEqual(f["vdpa"]["status"], "not-run")
        for r in report["rows"]:
            if r["status"] != "measured":
                self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS), r)

        table = rep.table(report)
        self.assertIn("| test | path | bandwidth (Mbit/s) | loss (%) | throughput (pps) |", table)
        self.assertIn("| UDP 16 B, 100 Mbit/s | vNIC -> vNIC | 12.1 | 0.46 | 95,144.3 | - | 4.13 |  |", table)
        self.assertIn("| UDP 16 B, 100 Mbit/s | vDPA -> vDPA | 19.2 | 0.74 | 151,418.0 | - | - | 1.59x |", table)
        self.assertIn("| TCP, 4 streams | vDPA -> vDPA | 8,680.0 | - | - | 12 | - | 0.92x |", table)

        svg, png = self.plot(report)
        # the bars' values, as the table has them
        for value in ("12.1", "19.2", "0.46", "0.74", "95,144", "151,418", "8,680", "9,390"):
            self.assertIn(">%s<" % value, svg)
        self.assertIn("failed", svg, "udp1460's vNIC run failed: no bar, its status")
        self.assertIn("vDPA", svg)
        other, _ = self.plot(rep.build_report({"udp16": {"vnic": ok("udp16-vnic.json")}}, dict(META, vdpa_available=True)))
        self.assertNotIn(">19.2<", other, "the plot follows the report")

    def test_no_vdpa_host_fallback_rows_and_no_numbers_for_vdpa(self):
        meta = dict(META, vdpa_available=False, vdpa_reason=rep.UNAVAILABLE)
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa-fallback": ok("udp16-vdpa.json")}}
        report = rep.build_report(results, meta)
        self.assertEqual(rep.validate(report, self.schema), [])
        u = rows(report, "udp16")
        self.assertEqual(u["vdpa"]["status"], "unavailable")
        self.assertEqual(u["vdpa"]["note"], "unavailable: no vhost-vdpa device on this host")
        self.assertEqual([u["vdpa"][k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS))
        self.assertEqual(u["vdpa-fallback"]["status"], "measured")
        self.assertIsNone(u["vdpa-fallback"]["ratio_vdpa_vnic"], "a fallback is no vDPA: no ratio")
        # every test has its vdpa row, even where nothing ran
        self.assertEqual(sorted(r["test"] for r in report["rows"] if r["kind"] == "vdpa"), sorted(rep.TEST_NAMES))
        table = rep.table(report)
        self.assertIn("| UDP 16 B, 100 Mbit/s | vDPA -> vDPA | unavailable: no vhost-vdpa device on this host |", table)
        self.assertIn("| UDP 16 B, 100 Mbit/s | network2 (fallback: virtio) -> same | 19.2 | 0.74 | 151,418.0 | - | - | "
                      "n/a (fallback) |", table)
        svg, png = self.plot(report)
        self.assertIn("unavailable", svg, "the vDPA bars that did not run say why")
        self.assertIn("vDPA NIC, fallback", svg)
        # issue 26, point 8: the legend names only kinds with bars, the
        # title says TCG, and the one virtio path measured twice is said to
        # differ by noise (table, footer)
        self.assertEqual(self.legend(report), ["vNIC", "vDPA NIC, fallback"])
        self.assertIn("TCG", self.texts(report)[0])
        note = rep.noise_note(report)
        self.assertRegex(note, r"^network1's vNIC and network2's fallback are the same virtio path under TCG: they differ by up to "
                               r"[0-9.]+x \(UDP 16 B, 100 Mbit/s, [a-zA-Z/ ]+\) in this run, which is the emulation's noise")
        self.assertIn("\n\n" + note + ".\n", table)
        self.assertIn("vDPA: unavailable", svg, "a bar that did not run names its kind, which has no legend entry")
        self.assertIn(note, self.texts(report)[1])
        # without the fallback pair there is nothing to call noise
        self.assertIsNone(rep.noise_note(rep.build_report({"udp16": {"vnic": ok("udp16-vnic.json")}}, meta)))

    def test_sriov_rows_unavailable_by_default(self):
        """A host without the path (no sriov keys in meta: this machine):
        every test has its sriov row, unavailable with the reason, no
        numbers; the table, the footer and the plot say so."""
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa": ok("udp16-vdpa.json")}}
        report = rep.build_report(results, dict(META, vdpa_available=True))
        self.assertEqual(rep.validate(report, self.schema), [])
        self.assertEqual((report["sriov_available"], report["sriov_reason"]), (False, rep.SRIOV_UNAVAILABLE))
        s = [r for r in report["rows"] if r["kind"] == "sriov"]
        self.assertEqual(sorted(r["test"] for r in s), sorted(rep.TEST_NAMES))
        for r in s:
            self.assertEqual((r["status"], r["note"], r["path"]), ("unavailable", rep.SRIOV_UNAVAILABLE, "SR-IOV VF -> SR-IOV VF"))
            self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS), r)
        self.assertIsNone(rows(report, "udp16")["vdpa"]["ratio_sriov_vnic"])
        reason = "unavailable: pool vfs has 1 free slot(s); the two guests need 2"
        report = rep.build_report(results, dict(META, vdpa_available=True, sriov_available=False, sriov_reason=reason))
        self.assertEqual(rep.validate(report, self.schema), [])
        self.assertEqual(rows(report, "udp16")["sriov"]["note"], reason)
        self.assertIn("| UDP 16 B, 100 Mbit/s | SR-IOV VF -> SR-IOV VF | %s |" % reason, rep.table(report))
        svg, _ = self.plot(report)
        self.assertNotIn("SR-IOV VF", self.legend(report), "no legend entry without bars")
        self.assertEqual(self.legend(report), ["vNIC", "vDPA"])
        self.assertIn("SR-IOV available: no (%s)" % reason, svg)
        # a long reason (libvirt's words) is cut in the footer, whole in the table
        long = "unavailable: no libvirt network vdpa-allocator-vfs lists the pool's VFs (the pool's warning: " + "x" * 200 + ")"
        report = rep.build_report(results, dict(META, vdpa_available=True, sriov_available=False, sriov_reason=long))
        self.assertIn(long, rep.table(report))
        fig = rep.figure(report)
        try:
            foot = fig._supxlabel.get_text()
        finally:
            import matplotlib.pyplot as plt
            plt.close(fig)
        self.assertIn("SR-IOV available: no (%s..." % long[:147], foot)
        self.assertNotIn(long, foot)

    def test_sriov_measured_with_ratio_and_failed(self):
        """An SR-IOV host: measured sriov rows get ratio_sriov_vnic (and no
        vDPA ratio), a failed one its error and no numbers, one that did
        not run not-run; the colour is the sriov one."""
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa-fallback": ok("udp16-vnic.json"),
                             "sriov": ok("udp16-vdpa.json", cpu=0.25)},
                   "tcp4": {"vnic": ok("tcp4-vnic.json"), "vdpa-fallback": ok("tcp4-vnic.json"), "sriov": ok("tcp4-vdpa.json")},
                   "udp1460": {"vnic": ok("udp16-vnic.json"), "sriov": {"rc": 1, "doc": fixture("udp1460-failed.json")}}}
        meta = dict(META, vdpa_available=False, vdpa_reason=rep.UNAVAILABLE, sriov_available=True, sriov_reason=None,
                    sriov_check={"network": "vpc3", "pool": "vfs", "free": 2, "vfs": ["0000:01:10.0", "0000:01:10.2"]})
        meta["networks"] = dict(META["networks"], network3={
            "name": "vpc3", "mode": "sriov", "vlan": 2400, "subnet": "192.171.0.0/24", "bridge": "vdpa-allocator-vfs",
            "bridge_type": "hostdev", "tagged": True, "form": "accelerated"})
        report = rep.build_report(results, meta)
        self.assertEqual(rep.validate(report, self.schema), [])
        self.assertEqual((report["sriov_available"], report["sriov_reason"]), (True, None))
        u = rows(report, "udp16")
        self.assertEqual(u["sriov"]["status"], "measured")
        self.assertAlmostEqual(u["sriov"]["bandwidth_mbps"], 19.2)
        self.assertAlmostEqual(u["sriov"]["pps"], 151418.0, places=1)
        self.assertAlmostEqual(u["sriov"]["ratio_sriov_vnic"], 19.2 / 12.1)
        self.assertIsNone(u["sriov"]["ratio_vdpa_vnic"], "an SR-IOV VF is no vDPA")
        self.assertIsNone(u["vdpa-fallback"]["ratio_sriov_vnic"])
        self.assertEqual(u["vdpa"]["status"], "unavailable")
        t = rows(report, "tcp4")
        self.assertAlmostEqual(t["sriov"]["ratio_sriov_vnic"], 8680 / 9390)
        self.assertEqual(t["sriov"]["retransmits"], 12)
        f = rows(report, "udp1460")["sriov"]
        self.assertEqual(f["status"], "failed")
        self.assertIn("Connection refused", f["note"])
        self.assertEqual([f[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS))
        self.assertEqual(rows(report, "tcp5r")["sriov"]["status"], "not-run")
        table = rep.table(report)
        self.assertIn("| UDP 16 B, 100 Mbit/s | SR-IOV VF -> SR-IOV VF | 19.2 | 0.74 | 151,418.0 | - | 1.30 | 1.59x |", table)
        self.assertIn("| TCP, 4 streams | SR-IOV VF -> SR-IOV VF | 8,680.0 | - | - | 12 | - | 0.92x |", table)
        self.assertIn("| UDP 1460 B, 1 Gbit/s | SR-IOV VF -> SR-IOV VF | iperf3: ", table)
        svg, _ = self.plot(report)
        self.assertIn(rep.COLOURS["sriov"], svg, "the sriov bars in their own colour")
        self.assertIn("SR-IOV available: yes", svg)
        # the schema knows the kind: a wrong one is caught
        report["rows"][0]["kind"] = "sr-iov"
        self.assertTrue(any("kind" in e for e in rep.validate(report, self.schema)))

    SOFTWARE_REASON = ("unavailable: no /dev/vduse/control, and modprobe vduse failed (modprobe: FATAL: Module vduse not "
                       "found in directory /lib/modules/6.18.44-fc-v1098)")

    def test_software_rows_unavailable_with_the_reason(self):
        """A host that cannot make a software vDPA device: every test has
        its vdpa-software row, unavailable with the reason found (the
        default when meta has none), no numbers; the table, the footer and
        the plot say it, and the legend has no entry for it."""
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa": ok("udp16-vdpa.json")}}
        report = rep.build_report(results, dict(META, vdpa_available=True))
        self.assertEqual(rep.validate(report, self.schema), [])
        self.assertEqual((report["software_available"], report["software_reason"]), (False, rep.SOFTWARE_UNAVAILABLE))
        report = rep.build_report(results, dict(META, vdpa_available=True, software_available=False,
                                                software_reason=self.SOFTWARE_REASON))
        self.assertEqual(rep.validate(report, self.schema), [])
        s = [r for r in report["rows"] if r["kind"] == "vdpa-software"]
        self.assertEqual(sorted(r["test"] for r in s), sorted(rep.TEST_NAMES))
        for r in s:
            self.assertEqual((r["status"], r["note"], r["path"], r["label"] in dict((t[0], t[1]) for t in rep.TESTS).values()),
                             ("unavailable", self.SOFTWARE_REASON, "vDPA (software) -> vDPA (software)", True))
            self.assertEqual([r[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS), r)
        self.assertIsNone(rows(report, "udp16")["vdpa"]["ratio_software_vnic"])
        self.assertIn("| UDP 16 B, 100 Mbit/s | vDPA (software) -> vDPA (software) | %s |" % self.SOFTWARE_REASON,
                      rep.table(report))
        svg, _ = self.plot(report)
        self.assertEqual(self.legend(report), ["vNIC", "vDPA"])
        self.assertIn("vDPA (software): unavailable", svg, "the bars that did not run say why")
        self.assertIn("vDPA (software) available: no (%s)" % self.SOFTWARE_REASON, self.texts(report)[1])

    def test_software_rows_measured_with_their_ratio(self):
        """A host with VDUSE: measured vdpa-software rows get
        ratio_software_vnic (no vDPA or SR-IOV ratio), their own colour and
        legend entry; one whose run failed says so; network4 validates."""
        results = {"udp16": {"vnic": ok("udp16-vnic.json"), "vdpa-fallback": ok("udp16-vnic.json"),
                             "vdpa-software": ok("udp16-vdpa.json", cpu=0.25)},
                   "tcp4": {"vnic": ok("tcp4-vnic.json"), "vdpa-software": ok("tcp4-vdpa.json")},
                   "udp1460": {"vnic": ok("udp16-vnic.json"), "vdpa-software": {"rc": 1, "doc": fixture("udp1460-failed.json")}}}
        meta = dict(META, vdpa_available=False, vdpa_reason=rep.UNAVAILABLE, software_available=True, software_reason=None,
                    software_check={"network": "vpc4", "pool": "soft", "vduse_control": True, "modprobe": {}, "free": 2})
        meta["networks"] = dict(META["networks"], network4={
            "name": "vpc4", "mode": "vdpa", "vlan": 2336, "subnet": "192.172.0.0/24", "bridge": "br-soft",
            "bridge_type": "linux", "tagged": True, "form": "accelerated"})
        report = rep.build_report(results, meta)
        self.assertEqual(rep.validate(report, self.schema), [])
        self.assertEqual((report["software_available"], report["software_reason"]), (True, None))
        u = rows(report, "udp16")["vdpa-software"]
        self.assertEqual(u["status"], "measured")
        self.assertAlmostEqual(u["pps"], 151418.0, places=1)
        self.assertAlmostEqual(u["ratio_software_vnic"], 19.2 / 12.1)
        self.assertEqual((u["ratio_vdpa_vnic"], u["ratio_sriov_vnic"]), (None, None), "software vDPA is neither")
        self.assertIsNone(rows(report, "udp16")["vdpa-fallback"]["ratio_software_vnic"])
        self.assertAlmostEqual(rows(report, "tcp4")["vdpa-software"]["ratio_software_vnic"], 8680 / 9390)
        f = rows(report, "udp1460")["vdpa-software"]
        self.assertEqual(f["status"], "failed")
        self.assertEqual([f[k] for k in rep.NUMBERS], [None] * len(rep.NUMBERS))
        self.assertEqual(rows(report, "tcp5r")["vdpa-software"]["status"], "not-run")
        table = rep.table(report)
        self.assertIn("| UDP 16 B, 100 Mbit/s | vDPA (software) -> vDPA (software) | 19.2 | 0.74 | 151,418.0 | - | 1.30 | 1.59x |",
                      table)
        self.assertIn("| TCP, 4 streams | vDPA (software) -> vDPA (software) | 8,680.0 | - | - | 12 | - | 0.92x |", table)
        svg, _ = self.plot(report)
        self.assertIn(rep.COLOURS["vdpa-software"], svg)
        self.assertEqual(self.legend(report), ["vNIC", "vDPA NIC, fallback", "vDPA (software)"])
        self.assertIn("vDPA (software) available: yes", self.texts(report)[1])

    def test_validator_catches_a_number_in_a_bad_place(self):
        report = rep.build_report({}, dict(META, vdpa_available=False, vdpa_reason=rep.UNAVAILABLE))
        report["rows"][0]["bandwidth_mbps"] = "fast"
        report["rows"][0]["extra"] = 1
        errs = rep.validate(report, self.schema)
        self.assertTrue(any("bandwidth_mbps" in e for e in errs), errs)
        self.assertTrue(any("unexpected extra" in e for e in errs), errs)


if __name__ == "__main__":
    unittest.main(verbosity=2)
