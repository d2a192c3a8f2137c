# SPDX-License-Identifier: LGPL-2.1-or-later
"""vdpa-allocator.conf for the simulated NIC (the daemon's [simulate]
backend, vdpa-allocator/daemon/va-backend-sim.c), from keyword arguments:

    sim_config(pfs=1, vfs=1,
               pools={"accel": ACCEL},
               networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334)})

A section's keys are written in the order given, "_" as "-"
(fallback_bridge=... is fallback-bridge=...), so that dict(ACCEL,
max_vqp=4) overrides a key; a key whose value is None is left out."""

# the simulated ConnectX-6 Dx's pool as most tiers declare it
ACCEL = {"match_vendor": "15b3", "max_vqp": 1}


def _section(header, keys):
    lines = ["[%s]" % header]
    for key, value in keys.items():
        if value is not None:
            lines.append("%s=%s" % (key.replace("_", "-"), value))
    return "\n".join(lines) + "\n"


def sim_config(pfs=1, vfs=1, numa_nodes=None, pools=None, networks=None, groups=None, comment=None, path=None):
    """The text of a vdpa-allocator.conf: [simulate] with pfs PFs of vfs
    VFs each (numa_nodes: numa-nodes=), then a [pool NAME] per entry of
    pools and a [network NAME] per entry of networks ({name: {key: value}}),
    then any other group of groups ({"hook": {...}}); comment: lines
    written first, each as "# ...". path: also written there."""
    parts = []
    if comment:
        parts.append("".join("# %s\n" % line for line in comment.splitlines()))
    parts.append(_section("simulate", {"pfs": pfs, "vfs": vfs, "numa-nodes": numa_nodes}))
    for name, keys in (pools or {}).items():
        parts.append("\n" + _section("pool %s" % name, keys))
    for name, keys in (networks or {}).items():
        parts.append("\n" + _section("network %s" % name, keys))
    for name, keys in (groups or {}).items():
        parts.append("\n" + _section(name, keys))
    text = "".join(parts)
    if path:
        with open(path, "w") as f:
            f.write(text)
    return text
