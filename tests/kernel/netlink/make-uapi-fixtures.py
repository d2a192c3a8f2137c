#!/usr/bin/python3
"""Writes the fixtures of the netlink messages this machine's kernel cannot
answer (no vdpa family, no devlink family), from the uapi layout alone:
enum values read from /usr/include/linux/{vdpa,devlink,genetlink}.h, the
message laid out with struct.pack as netlink(7) and genetlink define it, in
the attribute order of iproute2's vdpa/vdpa.c (vdpa_opts_put) and
devlink/devlink.c (dl_opts_put). These bytes were NOT captured from iproute2.
"""
import re
import struct

FAMILY = 0x1c  # any generic netlink family id: the kernel assigns it
SEQ = 0x6b0d4b1b
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300


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


def u16(t, v):
    return attr(t, struct.pack("<H", v))


def genl(cmd, version, flags, attrs):
    body = struct.pack("<BBH", cmd, version, 0) + b"".join(attrs)
    return struct.pack("<IHHII", 16 + len(body), FAMILY, flags, SEQ, 0) + body


vc = enum("vdpa.h", "VDPA_CMD_UNSPEC")
va = enum("vdpa.h", "VDPA_ATTR_UNSPEC")
dc = enum("devlink.h", "DEVLINK_CMD_UNSPEC")
da = enum("devlink.h", "DEVLINK_ATTR_UNSPEC")
dm = enum("devlink.h", "DEVLINK_ESWITCH_MODE_LEGACY")

fixtures = {
    # vdpa dev add name va-0000:3b:00.2 mgmtdev pci/0000:3b:00.2 mac 52:54:00:12:34:56 mtu 1500 max_vqp 4
    "vdpa-dev-new": genl(vc["VDPA_CMD_DEV_NEW"], 1, NLM_F_REQUEST | NLM_F_ACK, [
        strz(va["VDPA_ATTR_MGMTDEV_BUS_NAME"], "pci"),
        strz(va["VDPA_ATTR_MGMTDEV_DEV_NAME"], "0000:3b:00.2"),
        strz(va["VDPA_ATTR_DEV_NAME"], "va-0000:3b:00.2"),
        attr(va["VDPA_ATTR_DEV_NET_CFG_MACADDR"], bytes([0x52, 0x54, 0, 0x12, 0x34, 0x56])),
        u16(va["VDPA_ATTR_DEV_NET_CFG_MTU"], 1500),
        u16(va["VDPA_ATTR_DEV_NET_CFG_MAX_VQP"], 4)]),
    # vdpa dev del va-0000:3b:00.2
    "vdpa-dev-del": genl(vc["VDPA_CMD_DEV_DEL"], 1, NLM_F_REQUEST | NLM_F_ACK, [
        strz(va["VDPA_ATTR_DEV_NAME"], "va-0000:3b:00.2")]),
    # vdpa mgmtdev show
    "vdpa-mgmtdev-dump": genl(vc["VDPA_CMD_MGMTDEV_GET"], 1, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, []),
    # a reply of that dump: the mgmtdev pci/0000:3b:00.2
    "vdpa-mgmtdev-reply": genl(vc["VDPA_CMD_MGMTDEV_NEW"], 1, 0x2, [
        strz(va["VDPA_ATTR_MGMTDEV_BUS_NAME"], "pci"),
        strz(va["VDPA_ATTR_MGMTDEV_DEV_NAME"], "0000:3b:00.2")]),
    # devlink dev eswitch set pci/0000:3b:00.0 mode switchdev
    "devlink-eswitch-switchdev": genl(dc["DEVLINK_CMD_ESWITCH_SET"], 1, NLM_F_REQUEST | NLM_F_ACK, [
        strz(da["DEVLINK_ATTR_BUS_NAME"], "pci"),
        strz(da["DEVLINK_ATTR_DEV_NAME"], "0000:3b:00.0"),
        u16(da["DEVLINK_ATTR_ESWITCH_MODE"], dm["DEVLINK_ESWITCH_MODE_SWITCHDEV"])]),
}
for name, data in fixtures.items():
    with open(name + ".hex", "w") as f:
        f.write(data.hex() + "\n")
    print(name)
