# SPDX-License-Identifier: LGPL-2.1-or-later
"""The paired-guest benchmark's report (docs/pairbench.md): iperf3 -J
documents in, one row per test and NIC kind out, as a table printed like the
reference's (REFERENCE.md), one JSON document (docs/pairbench-report.schema.json,
described in docs/pairbench.md) and a hand-written SVG plot.

Pure functions, no I/O but the write_* helpers, so that test_report.py can
feed it fixtures.

NIC kinds:
  vnic           network1's virtio NIC (the reference's "vNIC")
  vdpa           network2's NIC in its accelerated (vDPA) form
  vdpa-fallback  network2's NIC in the virtio fallback the network allows,
                 when the host cannot run the vDPA form; never counted as vDPA
A vDPA row whose path did not run carries status "unavailable" and a reason,
and no numbers at all."""

import json

SCHEMA_ID = "https://vdpa-allocator.org/schema/pairbench-report-1.json"
UNAVAILABLE = "unavailable: no vhost-vdpa device on this host"

# name in guest-init.sh, label as in the reference's table, protocol
TESTS = [
    ("udp16", "UDP 16 B, 100 Mbit/s", "udp"),
    ("udp1460", "UDP 1460 B, 1 Gbit/s", "udp"),
    ("tcp4", "TCP, 4 streams", "tcp"),
    ("tcp5r", "TCP reverse, 5 streams", "tcp"),
]
TEST_NAMES = [t[0] for t in TESTS]
KINDS = ["vnic", "vdpa", "vdpa-fallback"]
KIND_LABEL = {"vnic": "vNIC", "vdpa": "vDPA", "vdpa-fallback": "vDPA NIC, fallback"}
PATHS = {"vnic": "vNIC -> vNIC", "vdpa": "vDPA -> vDPA", "vdpa-fallback": "network2 (fallback: virtio) -> same"}
NUMBERS = ["bandwidth_mbps", "loss_percent", "pps", "retransmits", "cpu_s_per_gbit", "ratio_vdpa_vnic"]


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


def empty_row(test, kind, status, note):
    label = dict((t[0], t[1]) for t in TESTS)[test]
    row = {"test": test, "label": label, "kind": kind, "status": status, "note": note,
           "path": PATHS[kind]}
    for k in NUMBERS + ["bytes", "seconds", "cpu_seconds"]:
        row[k] = None
    return row


def build_report(results, meta):
    """results: {test: {kind: {"doc": iperf3 doc, "rc": int, "cpu_seconds":
    float|None}}}; a kind missing from a test did not run. meta: the run's
    description (host, networks, params, leases, isolation, ...), copied in.
    meta["vdpa_available"] False makes every vdpa row unavailable."""
    proto = dict((t[0], t[2]) for t in TESTS)
    rows = []
    vdpa_ok = bool(meta.get("vdpa_available"))
    for test in TEST_NAMES:
        per = results.get(test, {})
        made = {}
        for kind in KINDS:
            if kind == "vdpa" and not vdpa_ok:
                row = empty_row(test, kind, "unavailable", meta.get("vdpa_reason") or UNAVAILABLE)
            elif kind not in per:
                if kind == "vdpa-fallback" and vdpa_ok:
                    continue  # the accelerated form ran: no fallback
                row = empty_row(test, kind, "not-run", "this path did not run")
            else:
                r = per[kind]
                doc = r.get("doc") or {}
                if r.get("rc", 1) != 0 or "sum_received" not in doc.get("end", {}):
                    row = empty_row(test, kind, "failed", "iperf3: %s" % (doc.get("error") or "rc %s" % r.get("rc")))
                else:
                    row = empty_row(test, kind, "measured",
                                    "virtio fallback of the vDPA network" if kind == "vdpa-fallback" else "")
                    row.update(measure(doc, proto[test], r.get("cpu_seconds")))
            made[kind] = row
        vn, vd = made.get("vnic"), made.get("vdpa")
        if vd and vd["status"] == "measured" and vn and vn["status"] == "measured" and vn["bandwidth_mbps"]:
            vd["ratio_vdpa_vnic"] = vd["bandwidth_mbps"] / vn["bandwidth_mbps"]
        rows.extend(made[k] for k in KINDS if k in made)
    report = {"$schema": SCHEMA_ID, "schema_version": 1}
    report.update(meta)
    report["vdpa_available"] = vdpa_ok
    report["rows"] = rows
    return report


def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def table(report):
    """The rows as a Markdown table in the reference's shape, with the
    columns the reference lacks appended."""
    head = ["test", "path", "bandwidth (Mbit/s)", "loss (%)", "throughput (pps)", "TCP retransmits",
            "host CPU (s/Gbit)", "vDPA/vNIC"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["rows"]:
        path = r["path"]
        if r["status"] != "measured":
            cells = [r["label"], path, r["note"] if r["status"] != "not-run" else "not run"] + [""] * 5
        else:
            ratio = "%.2fx" % r["ratio_vdpa_vnic"] if r["ratio_vdpa_vnic"] is not None else (
                "n/a (fallback)" if r["kind"] == "vdpa-fallback" else "")
            cells = [r["label"], path, _fmt(r["bandwidth_mbps"], ",.1f"), _fmt(r["loss_percent"], ".2f"),
                     _fmt(r["pps"], ",.1f"), _fmt(r["retransmits"], "d"), _fmt(r["cpu_s_per_gbit"], ".2f"), ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


COLOURS = {"vnic": "#4878a8", "vdpa": "#d07030", "vdpa-fallback": "#90a8c0"}


def svg(report, title="vdpa-allocator paired-guest benchmark: bandwidth per test and NIC kind"):
    """A grouped horizontal bar chart, one group per test, each group scaled
    to its own largest bar (the tests differ by orders of magnitude); the
    values are written beside the bars. Unavailable paths get no bar, only
    their reason."""
    bar_h, gap, left, width = 18, 14, 190, 420
    rows_by_test = {}
    for r in report["rows"]:
        rows_by_test.setdefault(r["test"], []).append(r)
    y = 50
    out = []
    for test in TEST_NAMES:
        rows = rows_by_test.get(test, [])
        if not rows:
            continue
        out.append('<text x="10" y="%d" font-weight="bold">%s</text>' % (y + 12, _esc(rows[0]["label"])))
        y += 18
        top = max([r["bandwidth_mbps"] or 0 for r in rows] + [1e-9])
        for r in rows:
            name = KIND_LABEL[r["kind"]]
            out.append('<text x="20" y="%d">%s</text>' % (y + 13, _esc(name)))
            if r["status"] == "measured":
                w = max(1, int(width * (r["bandwidth_mbps"] or 0) / top))
                out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>' % (left, y, w, bar_h, COLOURS[r["kind"]]))
                label = "%.1f Mbit/s" % r["bandwidth_mbps"]
                if r["loss_percent"] is not None:
                    label += ", loss %.2f %%" % r["loss_percent"]
                if r["kind"] == "vdpa-fallback":
                    label += " (fallback)"
                out.append('<text x="%d" y="%d">%s</text>' % (left + w + 6, y + 13, _esc(label)))
            else:
                out.append('<text x="%d" y="%d" fill="#a00000">%s</text>' % (left, y + 13, _esc(r["note"] or r["status"])))
            y += bar_h + 4
        y += gap
    h = y + 30
    body = "\n".join(out)
    foot = "host: %s; vDPA available: %s" % (report.get("host", {}).get("backend", "?"),
                                             "yes" if report.get("vdpa_available") else "no")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="900" height="%d" font-family="sans-serif" font-size="12">\n'
            '<rect width="100%%" height="100%%" fill="white"/>\n'
            '<text x="10" y="24" font-size="15" font-weight="bold">%s</text>\n%s\n'
            '<text x="10" y="%d" fill="#555">%s</text>\n</svg>\n') % (h, _esc(title), body, h - 12, _esc(foot))


def write_all(report, json_path, svg_path):
    with open(json_path, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(svg_path, "w") as f:
        f.write(svg(report))


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
