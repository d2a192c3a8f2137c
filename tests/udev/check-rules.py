#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks udev-rules/ without systemd-udevd: `udevadm verify` when this
udevadm has it (systemd 253 and later), and in any case every rule line
against the rules syntax of udev(7): KEY[{attr}] OP "value" separated by
commas, match keys with ==/!=, assignment keys with =/+=/-=/:=, values in
double quotes, RUN programs absolute and present. Also the modules-load.d
file: the three modules, never virtio_vdpa. And the ConnectX mark against
the model table of va-kernel.c, the one home of the PCI ids: every PF id
of the table and any 15b3 PF with VFs is marked, no VF id is, and the
rules name no device id of their own."""

import fnmatch
import os
import re
import shutil
import subprocess
import sys

from vatest.paths import SRCDIR

SRC = os.path.join(SRCDIR, "udev-rules")
MATCH = {"ACTION", "DEVPATH", "KERNEL", "KERNELS", "NAME", "SYMLINK", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER", "DRIVERS",
         "ATTR", "ATTRS", "SYSCTL", "ENV", "CONST", "TAG", "TAGS", "TEST", "PROGRAM", "RESULT"}
ASSIGN = {"NAME", "SYMLINK", "OWNER", "GROUP", "MODE", "SECLABEL", "ATTR", "SYSCTL", "ENV", "TAG", "RUN", "LABEL",
          "GOTO", "IMPORT", "OPTIONS"}
WITH_ATTR = {"ATTR", "ATTRS", "SYSCTL", "ENV", "CONST", "TEST", "RUN", "IMPORT", "SECLABEL"}
TOKEN = re.compile(r'\s*([A-Z]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|-=|:=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
errors = []


def check_rules(path):
    with open(path) as f:
        lines = f.read().split("\n")
    rules = 0
    for n, line in enumerate(lines, 1):
        where = "%s:%d" % (os.path.basename(path), n)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            errors.append(where + ": line continuations are not used here")
            continue
        pos, keys = 0, []
        while pos < len(line):
            m = TOKEN.match(line, pos)
            if not m:
                errors.append("%s: cannot parse at column %d: %r" % (where, pos + 1, line[pos:pos + 30]))
                break
            key, attr, op, value, _ = m.groups()
            keys.append((key, op))
            if attr is not None and key not in WITH_ATTR:
                errors.append("%s: %s takes no {attribute}" % (where, key))
            if op in ("==", "!="):
                if key not in MATCH:
                    errors.append("%s: %s is no match key" % (where, key))
            elif key not in ASSIGN:
                errors.append("%s: %s cannot be assigned" % (where, key))
            if key == "RUN":
                prog = value.split()[0] if value.split() else ""
                if not prog.startswith("/") or not os.access(prog, os.X_OK):
                    errors.append("%s: RUN program %r is not an absolute path to an executable" % (where, prog))
                if re.search(r"(?<!\$)\$(?!\$|[a-z]+\b|\{)", value.replace("$$", "")):
                    errors.append("%s: a lone $ in RUN: udev substitutes it; write $$ for the shell" % where)
                # the shell must parse what udev hands it
                shell = value.replace("$$", "$").replace("%k", "va-x").replace("%p", "/devices/x")
                if value.startswith("/bin/sh -c '") and value.endswith("'"):
                    r = subprocess.run(["/bin/sh", "-n", "-c", shell[len("/bin/sh -c '"):-1]], capture_output=True, text=True)
                    if r.returncode:
                        errors.append("%s: RUN shell does not parse: %s" % (where, r.stderr.strip()))
            pos = m.end()
        if not any(op in ("==", "!=") for _, op in keys):
            errors.append(where + ": a rule without a match applies to every device")
        rules += 1
    return rules


def check_modules(path):
    with open(path) as f:
        mods = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    # not mlx5_vdpa: udev loads it by its alias, and a kernel without it
    # (Debian's) would log "Failed to find module" at every boot
    if mods != ["vdpa", "vhost_vdpa"]:
        errors.append("vdpa-allocator.conf: modules are %r" % mods)
    if "virtio_vdpa" in mods:
        errors.append("vdpa-allocator.conf: virtio_vdpa would steal the devices")


def rule_tokens(line):
    return [m.groups()[:4] for m in TOKEN.finditer(line)]


def marks(lines, attrs):
    """Whether a rule assigning ID_VDPA_ALLOCATOR=1 matches a PCI device
    with these sysfs attributes, as udev matches: glob patterns with |
    alternatives; an absent attribute reads as empty."""
    for line in lines:
        toks = rule_tokens(line)
        if ("ENV", "ID_VDPA_ALLOCATOR", "=", "1") not in toks:
            continue
        ok = True
        for key, attr, op, value in toks:
            if op not in ("==", "!="):
                continue
            if key == "ACTION":
                have = "add"
            elif key == "SUBSYSTEM":
                have = "pci"
            elif key == "ATTR":
                have = attrs.get(attr, "")
            else:
                continue
            hit = any(fnmatch.fnmatchcase(have, alt) for alt in value.split("|"))
            if hit != (op == "=="):
                ok = False
        if ok:
            return True
    return False


def check_model_table(rules_path):
    with open(os.path.join(SRCDIR, "vdpa-allocator", "daemon", "va-kernel.c")) as f:
        src = f.read()
    table = src[src.index("static const VaKernelModel models[]"):]
    table = table[:table.index("};")]
    models = re.findall(r'\{ 0x([0-9a-f]{4}), "[^"]*", (TRUE|FALSE), (TRUE|FALSE) \}', table)
    if len(models) < 10:
        errors.append("va-kernel.c: the model table did not parse (%d entries)" % len(models))
        return
    with open(rules_path) as f:
        lines = [l for l in f.read().split("\n") if l.strip() and not l.lstrip().startswith("#")]
    for line in lines:
        if any(key == "ATTR" and attr == "device" for key, attr, _, _ in rule_tokens(line)):
            errors.append("90-vdpa-allocator.rules: names PCI device ids; their one home is va-kernel.c's table")
    for dev, is_vf, _ in models:
        attrs = {"vendor": "0x15b3", "device": "0x" + dev, "class": "0x020000"}
        if is_vf == "FALSE":
            attrs["sriov_totalvfs"] = "8"
        if marks(lines, attrs) != (is_vf == "FALSE"):
            errors.append("15b3:%s (%s in va-kernel.c) is %smarked by the rules" %
                          (dev, "a VF" if is_vf == "TRUE" else "a PF", "" if is_vf == "TRUE" else "not "))
    # a 15b3 PF the table does not name: discovery takes it for kind=sriov
    if not marks(lines, {"vendor": "0x15b3", "device": "0x1029", "sriov_totalvfs": "4"}):
        errors.append("a 15b3 PF with VFs outside the model table is not marked")
    if marks(lines, {"vendor": "0x15b3", "device": "0x1017", "sriov_totalvfs": "0"}):
        errors.append("a 15b3 PF that can make no VF is marked")
    if marks(lines, {"vendor": "0x8086", "device": "0x10c9", "sriov_totalvfs": "7"}):
        errors.append("another vendor's PF is marked as a ConnectX")


rules_file = os.path.join(SRC, "90-vdpa-allocator.rules")
check_model_table(rules_file)
n = check_rules(rules_file)
check_modules(os.path.join(SRC, "vdpa-allocator.conf"))
udevadm = shutil.which("udevadm")
if udevadm:
    r = subprocess.run([udevadm, "verify", rules_file], capture_output=True, text=True)
    if "Unknown command" in r.stderr or "unknown" in r.stderr.lower() and r.returncode:
        print("# udevadm has no verify (systemd before 253): syntax checked here only")
    elif r.returncode:
        errors.append("udevadm verify: " + (r.stderr or r.stdout).strip())
    else:
        print("# udevadm verify: ok")
else:
    print("# no udevadm on this machine: syntax checked here only")
for e in errors:
    print("error: " + e)
print("%d rule(s) checked, %d error(s)" % (n, len(errors)))
sys.exit(1 if errors else 0)
