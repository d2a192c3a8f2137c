# SPDX-License-Identifier: LGPL-2.1-or-later
"""Whether this host can run the paired-guest benchmark's SR-IOV path
(docs/pairbench.md), as one pure decision that tests/pair/test_sriov.py
feeds with documents and a fake sysfs root:

  - the configuration has a network vpc3 of mode=sriov on a kind=sriov pool;
  - the daemon serves that configuration (this version refuses kind=sriov
    pools: vdpa-allocatord's config_served);
  - `vdpactl status -j` lists the pool with at least 2 free slots (one VF
    per guest);
  - the pool's libvirt hostdev network (vdpa-allocator-POOL, which the
    daemon defines) lists at least 2 VFs, and each is a real VF:
    SYSFS/bus/pci/devices/ADDR/physfn exists.

The first that fails is the reason, worded "unavailable: ..."."""

import os
import re

NETWORK = "vpc3"
NEEDED = 2  # one VF per guest
UNAVAILABLE = "unavailable: no kind=sriov pool on this host"


def parse_config(text):
    """vdpa-allocator.conf(5) as {"pool": {NAME: {key: value}}, "network":
    {...}}; other sections, comments and blank lines are skipped, and a key
    given twice keeps its last value (the daemon refuses such files anyway)."""
    out = {"pool": {}, "network": {}}
    cur = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        m = re.match(r"\[(\w+)(?:\s+(\S+))?\]$", line)
        if m:
            cur = out.get(m.group(1), {}).setdefault(m.group(2), {}) if m.group(1) in out and m.group(2) else None
            continue
        if cur is not None and "=" in line:
            k, v = line.split("=", 1)
            cur[k.strip()] = v.strip()
    return out


def sriov_pools(text):
    """Names of the kind=sriov pools of a configuration."""
    return [n for n, p in parse_config(text)["pool"].items() if p.get("kind") == "sriov"]


def without_sriov(text):
    """The configuration without its kind=sriov pools and the networks on
    them: what the benchmark gives a daemon that refused the whole file."""
    conf = parse_config(text)
    drop_pools = set(sriov_pools(text))
    drop = {("pool", n) for n in drop_pools}
    drop |= {("network", n) for n, v in conf["network"].items() if v.get("pool") in drop_pools}
    out, skipping = [], False
    for line in text.splitlines(True):
        m = re.match(r"\s*\[(\w+)(?:\s+(\S+))?\]\s*$", line)
        if m:
            skipping = (m.group(1), m.group(2)) in drop
        if not skipping:
            out.append(line)
    return "".join(out)


def hostdev_vfs(xml):
    """The PCI addresses (DDDD:BB:SS.F) a libvirt hostdev network's
    <forward> lists, in its order."""
    out = []
    for m in re.finditer(r"<address\b([^>]*)/>", xml or ""):
        attrs = dict(re.findall(r"(\w+)=['\"]([^'\"]*)['\"]", m.group(1)))
        if attrs.get("type") != "pci":
            continue
        try:
            out.append("%04x:%02x:%02x.%x" % tuple(int(attrs[k], 0) for k in ("domain", "bus", "slot", "function")))
        except (KeyError, ValueError):
            continue
    return out


def decide(config_text, status, vfs, sysfs="/sys", daemon_error=None, network=NETWORK):
    """(available, reason, check). config_text: the benchmark's
    vdpa-allocator.conf; status: `vdpactl status -j` as a dict (None when
    the daemon did not run it); vfs: hostdev_vfs() of the pool's libvirt
    network, or None when there is no such network; daemon_error: why the
    daemon refused the configuration, if it did. check: what was read."""
    check = {"network": network, "pool": None, "free": None, "vfs": list(vfs or [])}
    conf = parse_config(config_text)
    net = conf["network"].get(network)
    if net is None:
        return False, "%s (the configuration has no network %s)" % (UNAVAILABLE, network), check
    if net.get("mode") != "sriov":
        return False, "unavailable: network %s is mode=%s, not mode=sriov" % (network, net.get("mode", "(unset)")), check
    pool = net.get("pool")
    check["pool"] = pool
    if not pool:
        return False, "%s (network %s names no pool)" % (UNAVAILABLE, network), check
    if pool not in conf["pool"]:
        return False, "%s (network %s's pool %s is not configured)" % (UNAVAILABLE, network, pool), check
    kind = conf["pool"][pool].get("kind", "vdpa")
    if kind != "sriov":
        return False, "%s (network %s's pool %s is kind=%s)" % (UNAVAILABLE, network, pool, kind), check
    if daemon_error:
        return False, "unavailable: vdpa-allocatord does not serve kind=sriov pool %s (%s)" % (pool, daemon_error), check
    pools = {p.get("name"): p for p in (status or {}).get("pools", [])}
    if pool not in pools:
        return False, "unavailable: vdpactl status lists no pool %s" % pool, check
    free = pools[pool].get("free", 0)
    check["free"] = free
    if free < NEEDED:
        return False, "unavailable: pool %s has %d free slot(s); the two guests need %d" % (pool, free, NEEDED), check
    if vfs is None:
        warning = pools[pool].get("warning")
        return False, "unavailable: no libvirt network vdpa-allocator-%s lists the pool's VFs%s" % (
            pool, " (the pool's warning: %s)" % warning if warning else ""), check
    if len(vfs) < NEEDED:
        return False, "unavailable: libvirt network vdpa-allocator-%s lists %d VF(s); the two guests need %d" % (
            pool, len(vfs), NEEDED), check
    for addr in vfs:
        physfn = os.path.join(sysfs, "bus", "pci", "devices", addr, "physfn")
        if not os.path.exists(physfn):
            return False, "unavailable: slot %s of pool %s is no VF in sysfs (no %s)" % (addr, pool, physfn), check
    return True, None, check
