#!/usr/bin/python3
"""Writes vdpa-mgmtdev-reply.hex, a reply of the vdpa MGMTDEV_GET dump for
a PCI management device, which neither this machine's kernel (no vdpa
family) nor the lab host (only VDUSE's, bus-less: see capture-genl.sh and
vdpa-mgmtdev-reply-vduse.hex) can give. It is laid out from the uapi alone:
enum values read from /usr/include/linux/vdpa.h, the message packed with
struct.pack as netlink(7) and genetlink define it, in the order the kernel's
vdpa_mgmtdev_fill puts the two names. These bytes were NOT captured. The
requests once derived here are now captured from iproute2 (capture-genl.sh).
"""
import re
import struct

FAMILY = 0x1c  # any generic netlink family id: the kernel assigns it
SEQ = 0x6b0d4b1b


def enum(header, first):
    """Values of the enum whose first member is @first."""
    text = re.sub(r"/\*.*?\*/", "", open("/usr/include/linux/" + header).read(), flags=re.S)
    text = re.sub(r"^#(.*\\\n)*.*$", "", text, flags=re.M)  # macros, continued or not
    body = text[text.index(first):]
    body = body[:body.index("}")]
    values, n = {}, 0
    for line in body.splitlines():
        line = re.sub(r"/\*.*?\*/", "", line).strip().rstrip(",")
        if not line or line.startswith("#") or line.startswith("/*"):
            continue
        m = re.match(r"(\w+)\s*=\s*(\w+)", line)
        if m:
            n = values[m.group(2)] if m.group(2) in values else int(m.group(2), 0)
            values[m.group(1)] = n
        elif re.match(r"^\w+$", line):
            values[line] = n
        n = values[m.group(1) if m else line] + 1
    return values


def attr(t, payload):
    pad = (4 - len(payload) % 4) % 4
    return struct.pack("<HH", 4 + len(payload), t) + payload + b"\0" * pad


def strz(t, s):
    return attr(t, s.encode() + b"\0")


def genl(cmd, version, flags, attrs):
    body = struct.pack("<BBH", cmd, version, 0) + b"".join(attrs)
    return struct.pack("<IHHII", 16 + len(body), FAMILY, flags, SEQ, 0) + body


vc = enum("vdpa.h", "VDPA_CMD_UNSPEC")
va = enum("vdpa.h", "VDPA_ATTR_UNSPEC")

fixtures = {
    # a reply of the dump `vdpa mgmtdev show` asks for: the mgmtdev pci/0000:3b:00.2
    "vdpa-mgmtdev-reply": genl(vc["VDPA_CMD_MGMTDEV_NEW"], 1, 0x2, [
        strz(va["VDPA_ATTR_MGMTDEV_BUS_NAME"], "pci"),
        strz(va["VDPA_ATTR_MGMTDEV_DEV_NAME"], "0000:3b:00.2")]),
}
for name, data in fixtures.items():
    with open(name + ".hex", "w") as f:
        f.write(data.hex() + "\n")
    print(name)
