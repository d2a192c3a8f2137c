# SPDX-License-Identifier: LGPL-2.1-or-later
"""The paired-guest benchmark's report (docs/pairbench.md): iperf3 -J
documents in, one row per test and NIC kind out, as a table printed like the
reference's (docs/reference.md), one JSON document (docs/pairbench-report.schema.json,
described in docs/pairbench.md) and a plot (matplotlib, SVG and PNG).

Pure functions, no I/O but the write_* helpers, so that tests/pair/test_report.py can
feed it fixtures.

NIC kinds:
  vnic           network1's virtio NIC (the reference's "vNIC")
  vdpa           network2's NIC in its accelerated (vDPA) form
  vdpa-fallback  network2's NIC in the virtio fallback the network allows,
                 when the host cannot run the vDPA form; never counted as vDPA
  sriov          network3's NIC (mode=sriov): a VF of a kind=sriov pool
                 passed through, the guest running the VF's own driver; only
                 where the host has such a pool (no fallback row: network3
                 is not in the guests at all otherwise)
  vdpa-software  network4's NIC (mode=vdpa on a software-only pool): a
                 software vDPA device (VDUSE, served by the daemon's relay)
                 bound to vhost_vdpa; only where the host can make one
                 (vatest/pairsoftware.py says why not)
A vDPA, SR-IOV or software vDPA row whose path did not run carries status "unavailable" and
a reason, and no numbers at all."""

import json
import statistics

SCHEMA_ID = "https://vdpa-allocator.org/schema/pairbench-report-1.json"
UNAVAILABLE = "unavailable: no vhost-vdpa device on this host"
SRIOV_UNAVAILABLE = "unavailable: no kind=sriov pool on this host"
SOFTWARE_UNAVAILABLE = "unavailable: this host cannot make a software vDPA device (VDUSE)"

# name in guest-init.sh, label as in the reference's table, protocol
TESTS = [
    ("udp16", "UDP 16 B, 100 Mbit/s", "udp"),
    ("udp1460", "UDP 1460 B, 1 Gbit/s", "udp"),
    ("tcp4", "TCP, 4 streams", "tcp"),
    ("tcp5r", "TCP reverse, 5 streams", "tcp"),
]
TEST_NAMES = [t[0] for t in TESTS]
KINDS = ["vnic", "vdpa", "vdpa-fallback", "sriov", "vdpa-software"]
KIND_LABEL = {"vnic": "vNIC", "vdpa": "vDPA", "vdpa-fallback": "vDPA NIC, fallback", "sriov": "SR-IOV VF",
              "vdpa-software": "vDPA (software)"}
PATHS = {"vnic": "vNIC -> vNIC", "vdpa": "vDPA -> vDPA", "vdpa-fallback": "network2 (fallback: virtio) -> same",
         "sriov": "SR-IOV VF -> SR-IOV VF", "vdpa-software": "vDPA (software) -> vDPA (software)"}
# the accelerated kinds, their availability keys and their ratio column
ACCEL = {"vdpa": ("vdpa_available", "vdpa_reason", UNAVAILABLE, "ratio_vdpa_vnic"),
         "sriov": ("sriov_available", "sriov_reason", SRIOV_UNAVAILABLE, "ratio_sriov_vnic"),
         "vdpa-software": ("software_available", "software_reason", SOFTWARE_UNAVAILABLE, "ratio_software_vnic")}
NUMBERS = ["bandwidth_mbps", "loss_percent", "pps", "retransmits", "cpu_s_per_gbit", "ratio_vdpa_vnic",
           "ratio_sriov_vnic", "ratio_software_vnic"]
# the figures whose run-to-run range a repeated test reports
SPREAD = ["bandwidth_mbps", "loss_percent", "pps"]
# docs/reference.md's figures (a hand-run ConnectX-5, two hosts, 30 s
# tests): (test, kind) -> (bandwidth Mbit/s, loss %, pps). test_report.py
# holds this and the document's table together
REFERENCE = {
    ("udp16", "vnic"): (12.1, 0.46, 95144.3),
    ("udp16", "vdpa"): (19.2, 0.74, 151418.0),
    ("udp1460", "vnic"): (267.0, 51.0, 94735.1),
    ("udp1460", "vdpa"): (843.0, 1.8, 148343.5),
}
# the reference's two ratios: (test, figure, its index in REFERENCE, words)
REFERENCE_RATIOS = [("udp16", "pps", 2, "packets/s at UDP 16 B"), ("udp1460", "bandwidth_mbps", 0, "bandwidth at UDP 1460 B")]


def measure(doc, proto, cpu_seconds=None):
    """The numbers of one iperf3 -J client document. UDP: the receiver's
    bandwidth, the loss iperf3 reports, and packets per second delivered.
    TCP: the receiver's bandwidth and the sender's retransmits; iperf3 counts
    no TCP packets, so pps is None. cpu_seconds: host CPU time the two QEMU
    processes spent during the test, or None."""
    end = doc["end"]
    recv = end["sum_received"]
    seconds = recv["seconds"] or 1e-9
    bits = recv["bytes"] * 8
    row = {
        "bandwidth_mbps": recv["bits_per_second"] / 1e6,
        "loss_percent": None,
        "pps": None,
        "retransmits": None,
        "bytes": recv["bytes"],
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "cpu_s_per_gbit": (cpu_seconds / (bits / 1e9)) if cpu_seconds is not None and bits > 0 else None,
    }
    if proto == "udp":
        s = end.get("sum", recv)
        row["loss_percent"] = float(s.get("lost_percent", 0.0))
        row["pps"] = (s["packets"] - s.get("lost_packets", 0)) / seconds
    else:
        row["retransmits"] = end.get("sum_sent", {}).get("retransmits")
    return row


def measure_runs(runs, proto):
    """The numbers of a test run several times: the median of each, the
    repeat count, and the [min, max] of the SPREAD figures. retransmits
    stays an integer (the median's lower middle)."""
    rows = [measure(r["doc"], proto, r.get("cpu_seconds")) for r in runs]
    out = {"repeats": len(rows), "spread": {}}
    for key in rows[0]:
        values = [r[key] for r in rows if r[key] is not None]
        if len(values) < len(rows):
            out[key] = None
        elif key in ("retransmits", "bytes"):
            out[key] = statistics.median_low(values)
        else:
            out[key] = statistics.median(values)
        if key in SPREAD and out[key] is not None:
            out["spread"][key] = [min(values), max(values)]
    return out


def empty_row(test, kind, status, note):
    label = dict((t[0], t[1]) for t in TESTS)[test]
    row = {"test": test, "label": label, "kind": kind, "status": status, "note": note,
           "path": PATHS[kind], "repeats": None, "spread": None}
    for k in NUMBERS + ["bytes", "seconds", "cpu_seconds"]:
        row[k] = None
    return row


def build_report(results, meta):
    """results: {test: {kind: {"doc": iperf3 doc, "rc": int, "cpu_seconds":
    float|None}}}, or a list of such dicts per kind for a test run several
    times (a row then holds the medians, its repeat count and spread, and
    fails if any run failed); a kind missing from a test did not run. meta: the run's
    description (host, networks, params, leases, isolation, ...), copied in.
    meta["vdpa_available"] False makes every vdpa row unavailable, and
    meta["sriov_available"] False (or missing) every sriov row, and
    meta["software_available"] False (or missing) every vdpa-software row."""
    proto = dict((t[0], t[2]) for t in TESTS)
    rows = []
    avail = {k: bool(meta.get(a[0])) for k, a in ACCEL.items()}
    vdpa_ok = avail["vdpa"]
    for test in TEST_NAMES:
        per = results.get(test, {})
        made = {}
        for kind in KINDS:
            if kind in ACCEL and not avail[kind]:
                row = empty_row(test, kind, "unavailable", meta.get(ACCEL[kind][1]) or ACCEL[kind][2])
            elif kind not in per:
                if kind == "vdpa-fallback" and vdpa_ok:
                    continue  # the accelerated form ran: no fallback
                row = empty_row(test, kind, "not-run", "this path did not run")
            else:
                runs = per[kind] if isinstance(per[kind], list) else [per[kind]]
                bad = [(i, r) for i, r in enumerate(runs, 1)
                       if r.get("rc", 1) != 0 or "sum_received" not in (r.get("doc") or {}).get("end", {})]
                if bad or not runs:
                    i, r = bad[0] if bad else (1, {})
                    doc = r.get("doc") or {}
                    row = empty_row(test, kind, "failed", "iperf3%s: %s" % (
                        " (run %d of %d)" % (i, len(runs)) if len(runs) > 1 else "",
                        doc.get("error") or "rc %s" % r.get("rc")))
                else:
                    row = empty_row(test, kind, "measured",
                                    "virtio fallback of the vDPA network" if kind == "vdpa-fallback" else "")
                    row.update(measure_runs(runs, proto[test]))
            made[kind] = row
        vn = made.get("vnic")
        for kind, a in ACCEL.items():
            r = made.get(kind)
            if r and r["status"] == "measured" and vn and vn["status"] == "measured" and vn["bandwidth_mbps"]:
                r[a[3]] = r["bandwidth_mbps"] / vn["bandwidth_mbps"]
        rows.extend(made[k] for k in KINDS if k in made)
    report = {"$schema": SCHEMA_ID, "schema_version": 1}
    report.update(meta)
    for kind, a in ACCEL.items():
        report[a[0]] = avail[kind]
        if not avail[kind]:
            report[a[1]] = meta.get(a[1]) or a[2]
        else:
            report.setdefault(a[1], None)
    report["rows"] = rows
    return report


def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _ranged(row, key, spec):
    """A figure, and its (min-max) over the runs when the test repeated."""
    v = _fmt(row[key], spec)
    lo_hi = (row.get("spread") or {}).get(key)
    if lo_hi and (row.get("repeats") or 1) > 1:
        v += " (%s-%s)" % (_fmt(lo_hi[0], spec), _fmt(lo_hi[1], spec))
    return v


def table(report):
    """The rows as a Markdown table in the reference's shape, with the
    columns the reference lacks appended."""
    head = ["test", "path", "bandwidth (Mbit/s)", "loss (%)", "throughput (pps)", "TCP retransmits",
            "host CPU (s/Gbit)", "ratio to vNIC"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["rows"]:
        path = r["path"]
        if r["status"] != "measured":
            cells = [r["label"], path, r["note"] if r["status"] != "not-run" else "not run"] + [""] * 5
        else:
            rv = r[ACCEL[r["kind"]][3] if r["kind"] in ACCEL else "ratio_vdpa_vnic"]
            ratio = "%.2fx" % rv if rv is not None else ("n/a (fallback)" if r["kind"] == "vdpa-fallback" else "")
            cells = [r["label"], path, _ranged(r, "bandwidth_mbps", ",.1f"), _ranged(r, "loss_percent", ".2f"),
                     _ranged(r, "pps", ",.1f"), _fmt(r["retransmits"], "d"), _fmt(r["cpu_s_per_gbit"], ".2f"), ratio]
        lines.append("| " + " | ".join(cells) + " |")
    for note in (spread_note(report), noise_note(report), reference_note(report)):
        if note:
            lines += ["", note + "."]
    return "\n".join(lines) + "\n"


COLOURS = {"vnic": "#4878a8", "vdpa": "#d07030", "vdpa-fallback": "#90a8c0", "sriov": "#4a9a58", "vdpa-software": "#e8b048"}
HATCH = {"vnic": "", "vdpa": "", "vdpa-fallback": "//", "sriov": "", "vdpa-software": ".."}

# (key, axis label, scale, tests with a number there)
PANELS = [
    ("bandwidth_mbps", "bandwidth (Mbit/s, log scale)", "log"),
    ("loss_percent", "UDP datagram loss (%)", "linear"),
    ("pps", "UDP packets delivered (packets/s)", "linear"),
]


def noise_note(report):
    """network1's vNIC and network2's virtio fallback are one path twice:
    the same virtio-net device on the same bridge, under TCG. Where both
    were measured, how far apart their figures came out (the largest
    ratio of bandwidth, UDP loss or pps over the tests), said to be the
    run-to-run noise it is; None when there is no such pair."""
    by = {(r["test"], r["kind"]): r for r in report["rows"]}
    worst = None
    for test in TEST_NAMES:
        a, b = by.get((test, "vnic")), by.get((test, "vdpa-fallback"))
        if not a or not b or a["status"] != "measured" or b["status"] != "measured":
            continue
        for key, words in (("bandwidth_mbps", "bandwidth"), ("loss_percent", "UDP loss"), ("pps", "packets/s")):
            x, y = a.get(key), b.get(key)
            if x is None or y is None or min(x, y) <= 0:
                continue
            ratio = max(x, y) / min(x, y)
            if worst is None or ratio > worst[0]:
                worst = (ratio, dict((t[0], t[1]) for t in TESTS)[test], words)
    if worst is None:
        return None
    return ("network1's vNIC and network2's fallback are the same virtio path under TCG: they differ by up to %.1fx "
            "(%s, %s) in this run, which is the emulation's noise, not a difference between the networks" % worst)


def reference_note(report):
    """The reference's vDPA/vNIC ratios (docs/reference.md) and, where this
    run measured both paths of a test, this run's beside them."""
    by = {(r["test"], r["kind"]): r for r in report["rows"]}
    said = []
    for test, key, i, words in REFERENCE_RATIOS:
        ref = REFERENCE[(test, "vdpa")][i] / REFERENCE[(test, "vnic")][i]
        a, b = by.get((test, "vnic")), by.get((test, "vdpa"))
        ours = ""
        if a and b and a["status"] == b["status"] == "measured" and a.get(key) and b.get(key) is not None:
            ours = " (this run: %.2fx)" % (b[key] / a[key])
        said.append("%.2fx %s%s" % (ref, words, ours))
    return ("the hand-run reference (docs/reference.md: ConnectX-5 hardware, two hosts, 30 s tests) measured "
            "vDPA/vNIC " + " and ".join(said) + "; this run's guests are emulated (TCG): its ratios are not a "
            "ConnectX's")


def spread_note(report):
    """How far a repeated test's runs came apart (the largest max/min of
    bandwidth, UDP loss or pps over the measured rows), so that a gap
    between two paths smaller than that is read as noise; None when no
    test repeated."""
    worst = None
    repeats = 1
    for r in report["rows"]:
        if r["status"] != "measured" or (r.get("repeats") or 1) < 2:
            continue
        repeats = max(repeats, r["repeats"])
        for key, words in (("bandwidth_mbps", "bandwidth"), ("loss_percent", "UDP loss"), ("pps", "packets/s")):
            lo_hi = (r.get("spread") or {}).get(key)
            if not lo_hi or lo_hi[0] <= 0:
                continue
            ratio = lo_hi[1] / lo_hi[0]
            if worst is None or ratio > worst[0]:
                worst = (ratio, r["label"], KIND_LABEL[r["kind"]], words)
    if worst is None:
        return None
    return ("each figure is the median of %d runs; one path's runs differ among themselves by up to %.1fx (%s, %s, %s): "
            "a difference between paths smaller than that is noise" % ((repeats,) + worst))


def figure(report, title="vdpa-allocator paired-guest benchmark: two guests under QEMU TCG (software emulation), measured in this run"):
    """A matplotlib figure: three panels (bandwidth, UDP loss, UDP pps),
    each with one group of bars per test and the NIC kinds side by side
    (vNIC, vDPA, its fallback, SR-IOV VF, software vDPA: those the report
    has rows of).
    A path that did not run gets no bar but its status ("unavailable",
    "failed", "not run") written where the bar would stand; iperf3 counts
    no TCP packets, so the loss and pps panels show the UDP tests only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    by = {(r["test"], r["kind"]): r for r in report["rows"]}
    kinds = [k for k in KINDS if any(r["kind"] == k for r in report["rows"])] or ["vnic"]
    labels = dict((t[0], t[1]) for t in TESTS)
    proto = dict((t[0], t[2]) for t in TESTS)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 5.2), constrained_layout=True)
    width = 0.8 / len(kinds)
    for ax, (key, ylabel, scale) in zip(axes, PANELS):
        tests = [t for t in TEST_NAMES if key == "bandwidth_mbps" or proto[t] == "udp"]
        values = [by.get((t, k), {}).get(key) for t in tests for k in kinds]
        # the whiskers' tops too: a panel shows every run it summarises
        highs = [((by.get((t, k)) or {}).get("spread") or {}).get(key, [None, None])[1] for t in tests for k in kinds]
        top = max([v for v in values + highs if v] + [1.0])
        ax.set_yscale(scale)
        if scale == "log":
            bottom = min([v for v in values if v] + [top]) / 10
            ax.set_ylim(bottom, top * 8)
            note_y = bottom * 1.3
        else:
            ax.set_ylim(0, top * 1.25)
            note_y = top * 0.02
        for i, k in enumerate(kinds):
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(tests))]
            for x, t in zip(xs, tests):
                r = by.get((t, k))
                v = r.get(key) if r else None
                if r and r["status"] == "measured" and v is not None:
                    ax.bar(x, v if scale == "linear" or v > 0 else note_y, width * 0.95, color=COLOURS[k],
                           hatch=HATCH[k], edgecolor="white", linewidth=0.5)
                    lo_hi = (r.get("spread") or {}).get(key)
                    if lo_hi and (r.get("repeats") or 1) > 1 and (scale == "linear" or lo_hi[0] > 0):
                        # whiskers: the lowest and highest of the runs
                        ax.errorbar(x, v, yerr=[[max(v - lo_hi[0], 0)], [max(lo_hi[1] - v, 0)]], fmt="none",
                                    ecolor="#333333", elinewidth=0.8, capsize=2)
                    text = ("%.2f" % v) if key == "loss_percent" else ("{:,.0f}".format(v) if v >= 100 else "%.1f" % v)
                    ax.annotate(text, (x, v if v > 0 else note_y), xytext=(0, 2), textcoords="offset points",
                                ha="center", va="bottom", fontsize=7)
                else:
                    status = "not run" if not r or r["status"] == "not-run" else r["status"]
                    # named: a kind without bars has no legend entry
                    ax.text(x, note_y, "%s: %s" % (KIND_LABEL[k], status), rotation=90, ha="center", va="bottom", fontsize=7, color="#a00000")
        ax.set_xticks(range(len(tests)))
        ax.set_xticklabels([labels[t].replace(", ", ",\n") for t in tests], fontsize=8)
        ax.set_xlim(-0.6, len(tests) - 0.4)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("test")
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        if key == "pps":
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:,.0f}".format(v)))
    # a legend entry for each kind with a bar; a path that did not run is
    # said where its bars would stand and in the footer
    drawn = [k for k in kinds if any(r["kind"] == k and r["status"] == "measured" for r in report["rows"])]
    handles = [matplotlib.patches.Patch(facecolor=COLOURS[k], hatch=HATCH[k], edgecolor="white", label=KIND_LABEL[k])
               for k in drawn]
    if handles:
        axes[0].legend(handles=handles, loc="upper left", ncol=len(handles), frameon=False, fontsize=8)
    def why(reason):
        # the whole reason is in the JSON and the table: keep to the width
        return reason if len(reason) <= 150 else reason[:147] + "..."
    repeats = report.get("params", {}).get("repeats") or 1
    foot = "%s s per test, %s; host backend %s; vDPA available: %s\nSR-IOV available: %s\nvDPA (software) available: %s" % (
        report.get("params", {}).get("time_s", "?"),
        "one run" if repeats == 1 else "%d runs: bars the median, whiskers the lowest and highest" % repeats,
        report.get("host", {}).get("backend", "?"),
        "yes" if report.get("vdpa_available") else "no (%s)" % why(report.get("vdpa_reason") or UNAVAILABLE),
        "yes" if report.get("sriov_available") else "no (%s)" % why(report.get("sriov_reason") or SRIOV_UNAVAILABLE),
        "yes" if report.get("software_available") else "no (%s)" % why(report.get("software_reason") or SOFTWARE_UNAVAILABLE))
    for note in (spread_note(report), noise_note(report)):
        if note:
            foot += "\n" + note
    fig.suptitle(title, x=0.01, ha="left", fontweight="bold")
    fig.supxlabel(foot, fontsize=8, color="#555555", x=0.01, ha="left")
    return fig


def write_plots(report, svg_path, png_path):
    """The figure as SVG and PNG; the SVG without a date, so that one report
    gives one file, and with its text as text, so that it can be searched."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure(report)
    try:
        with matplotlib.rc_context({"svg.hashsalt": "vdpa-allocator", "svg.fonttype": "none"}):
            fig.savefig(svg_path, format="svg", metadata={"Date": None})
        fig.savefig(png_path, format="png", dpi=100)
    finally:
        plt.close(fig)


def write_all(report, json_path, svg_path, png_path=None):
    with open(json_path, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    write_plots(report, svg_path, png_path or svg_path[:-4] + ".png")


# --- a small validator for the subset of JSON Schema our schema uses --------
# (type, required, properties, additionalProperties, items, enum, minimum);
# Debian 12 has python3-jsonschema, but the test tiers should not need it.

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(v, t):
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, _TYPES[t])


def validate(doc, schema, path="$", defs=None):
    """Returns a list of error strings (empty: valid)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    errs = []
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        if not any(_type_ok(doc, x) for x in ts):
            return ["%s: %r is not %s" % (path, doc, t)]
    if "enum" in schema and doc not in schema["enum"]:
        errs.append("%s: %r not in %s" % (path, doc, schema["enum"]))
    if "const" in schema and doc != schema["const"]:
        errs.append("%s: %r is not %r" % (path, doc, schema["const"]))
    if "minimum" in schema and isinstance(doc, (int, float)) and doc < schema["minimum"]:
        errs.append("%s: %r < %r" % (path, doc, schema["minimum"]))
    if isinstance(doc, dict):
        for k in schema.get("required", []):
            if k not in doc:
                errs.append("%s: missing %s" % (path, k))
        props = schema.get("properties", {})
        for k, v in doc.items():
            if k in props:
                errs += validate(v, props[k], "%s.%s" % (path, k), defs)
            elif schema.get("additionalProperties") is False:
                errs.append("%s: unexpected %s" % (path, k))
    if isinstance(doc, list) and "items" in schema:
        for i, v in enumerate(doc):
            errs += validate(v, schema["items"], "%s[%d]" % (path, i), defs)
    return errs
