# SPDX-License-Identifier: LGPL-2.1-or-later
"""The domain documents and the simulated NIC's configuration that the
hook's bus tests (tests/bus/test_hook.py) and its benchmarks
(bench_hook.py, bench_flood.py) share. domain() lays out port paths below
PORT_ROOT unless given port_root; a test with its own daemon sets
PORT_ROOT to that daemon's."""

from vatest.simconf import ACCEL, sim_config

# the fallback of the hook's networks
OVS = {"fallback_bridge": "br-ovs", "fallback_bridge_type": "ovs"}

UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"

CONFIG = sim_config(
    pfs=1, vfs=2, pools={"accel": dict(ACCEL, max_vqp=4)},
    networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334, **OVS),
              "vpc1": dict(mode="virtio", vlan=2200, **OVS),
              "lan": dict(mode="virtio", vlan=30, fallback_bridge="br0")})


# where the daemon under test makes port links: set from its run directory,
# since QEMU opens what <source dev> names and the daemon refuses another
PORT_ROOT = "/run/vdpa-allocator/ports"


def domain(nics, name="vm1", uuid=UUID, port_root=None):
    """nics: (mac, network, form) with form 'vdpa' or 'bridge'."""
    port_root = port_root or PORT_ROOT
    meta = "".join('<vdpa:nic mac="%s" network="%s"/>' % (m, n) for m, n, _ in nics)
    ifaces = ""
    for m, _, form in nics:
        if form == "vdpa":
            ifaces += ("<interface type='vdpa'><mac address='%s'/><source dev='%s/%s/%s'/>"
                       "<model type='virtio'/></interface>" % (m, port_root, uuid, m))
        else:
            ifaces += ("<interface type='bridge'><mac address='%s'/><source bridge='br-ovs'/>"
                       "<target dev='vnet%d'/><model type='virtio'/></interface>" % (m, len(ifaces) % 7))
    return ("<domain type='qemu'><name>%s</name><uuid>%s</uuid><memory>65536</memory>"
            "<metadata><vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>%s</vdpa:nics></metadata>"
            "<os><type>hvm</type></os><devices>%s</devices></domain>" % (name, uuid, meta, ifaces))


PLAIN = ("<domain type='qemu'><name>plain</name><uuid>11111111-2222-3333-4444-555555555555</uuid>"
         "<memory>65536</memory><os><type>hvm</type></os><devices><interface type='network'>"
         "<mac address='52:54:00:00:00:01'/><source network='default'/></interface></devices></domain>")
