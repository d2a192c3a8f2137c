#!/usr/bin/python3
"""Writes the umockdev testbeds of the kernel backend's tests.

The files are umockdev-record's text format (P: path, E: property,
A: attribute, L: link relative to the device, N: device node) for sysfs
layouts of ConnectX NICs as mlx5_core shows them. They are committed; run
this script from this folder after a deliberate change and review the diff.
"""

BRIDGE = "/devices/pci0000:3a/0000:3a:00.0"


def dev(path, props=(), attrs=(), links=(), node=None):
    out = ["P: " + path]
    if node:
        out.append("N: " + node)
    out += ["E: %s=%s" % kv for kv in props]
    out += ["A: %s=%s" % kv for kv in attrs]
    out += ["L: %s=%s" % kv for kv in links]
    return "\n".join(out) + "\n\n"


def bdf(bus, fn):
    """PCI address of function number fn on bus (8 functions a slot)."""
    return "0000:%02x:%02x.%d" % (bus, fn // 8, fn % 8)


def pci_bridge():
    return dev(BRIDGE, [("SUBSYSTEM", "pci"), ("DRIVER", "pcieport")],
               [("vendor", "0x8086"), ("device", "0x2030"), ("class", "0x060400")])


def pf(bus, device, numa, numvfs, total, netdev, mode, operstate="up", mlx=True):
    addr = bdf(bus, 0)
    path = BRIDGE + "/" + addr
    links = [("driver", "../../../../bus/pci/drivers/mlx5_core")]
    links += [("virtfn%d" % i, "../" + bdf(bus, 2 + i)) for i in range(numvfs)]
    out = dev(path, [("SUBSYSTEM", "pci"), ("DRIVER", "mlx5_core"),
                     ("PCI_ID", "15B3:%04X" % device), ("PCI_SLOT_NAME", addr)],
              [("vendor", "0x15b3"), ("device", "0x%04x" % device),
               ("class", "0x020000"), ("numa_node", str(numa)),
               ("sriov_numvfs", str(numvfs)), ("sriov_totalvfs", str(total)),
               ("sriov_drivers_autoprobe", "1")], links)
    attrs = [("ifindex", "4"), ("address", "b8:ce:f6:00:3b:00"),
             ("flags", "0x1003" if operstate == "up" else "0x1002"),
             ("operstate", operstate), ("carrier", "1" if operstate == "up" else "0")]
    # mlx5 registers the uplink's devlink port with the eswitch's switch id
    # in legacy mode too (drivers/net/ethernet/mellanox/mlx5/core/en_rep.c,
    # esw/devlink_port.c); netdevsim does the same (drivers/net/netdevsim/
    # netdev.c), as tests/lab/lab-simdrivers.sh shows: the switch id says
    # nothing of the mode, which is devlink's ESWITCH_GET
    if mlx:
        attrs += [("phys_switch_id", "00003bfffef6ceb8"), ("phys_port_name", "p0")]
    out += dev(path + "/net/" + netdev, [("SUBSYSTEM", "net"), ("INTERFACE", netdev),
                                         ("IFINDEX", "4")], attrs)
    return out


def vfs(bus, count, pfname, mode, device=0x101e):
    out = ""
    for i in range(count):
        addr = bdf(bus, 2 + i)
        path = BRIDGE + "/" + addr
        out += dev(path, [("SUBSYSTEM", "pci"), ("DRIVER", "mlx5_core"),
                          ("PCI_ID", "15B3:%04X" % device), ("PCI_SLOT_NAME", addr)],
                   [("vendor", "0x15b3"), ("device", "0x%04x" % device), ("class", "0x020000"),
                    ("numa_node", "1"), ("driver_override", "(null)")],
                   [("physfn", "../" + bdf(bus, 0)),
                    ("driver", "../../../../bus/pci/drivers/mlx5_core")])
        vfnet = "%sv%d" % (pfname, i)
        out += dev(path + "/net/" + vfnet, [("SUBSYSTEM", "net"), ("INTERFACE", vfnet),
                                            ("IFINDEX", str(20 + i))],
                   [("ifindex", str(20 + i)), ("operstate", "down")])
        if mode == "switchdev":
            rep = "%snpf0vf%d" % (pfname.replace("np0", ""), i)
            pfpath = BRIDGE + "/" + bdf(bus, 0)
            out += dev(pfpath + "/net/" + rep, [("SUBSYSTEM", "net"), ("INTERFACE", rep),
                                                ("IFINDEX", str(40 + i))],
                       [("ifindex", str(40 + i)), ("operstate", "up"),
                        ("phys_switch_id", "00003bfffef6ceb8"),
                        ("phys_port_name", "pf0vf%d" % i)])
    return out


def vdpa(bus, vf, name, index, bound):
    """A vdpa device made on VF vf: mlx5_vdpa's management device is the
    auxiliary mlx5_core.vnet.N, but vdpa_alloc_device is given the mlx5
    core device, the VF's PCI device, as parent (drivers/vdpa/mlx5/net/
    mlx5_vnet.c, mlx5_vdpa_dev_add): the vdpa device is a direct child of
    the VF, beside the auxiliary device, not under it."""
    addr = bdf(bus, 2 + vf)
    vfpath = BRIDGE + "/" + addr
    aux = vfpath + "/mlx5_core.vnet.%d" % (2 + vf)
    out = dev(aux, [("SUBSYSTEM", "auxiliary"), ("DRIVER", "mlx5_vdpa.vnet")], [],
              [("driver", "../../../../../bus/auxiliary/drivers/mlx5_vdpa.vnet")])
    aux = vfpath
    props = [("SUBSYSTEM", "vdpa")]
    links = []
    if bound:
        props.append(("DRIVER", "vhost_vdpa"))
        links.append(("driver", "../../../../../bus/vdpa/drivers/vhost_vdpa"))
    out += dev(aux + "/" + name, props, [("driver_override", "vhost_vdpa" if bound else "(null)")],
               links)
    if bound:
        out += dev(aux + "/" + name + "/vhost-vdpa-%d" % index,
                   [("SUBSYSTEM", "vhost-vdpa"), ("DEVNAME", "/dev/vhost-vdpa-%d" % index),
                    ("MAJOR", "509"), ("MINOR", str(index))],
                   [("dev", "509:%d" % index)], node="vhost-vdpa-%d" % index)
    return out


def igb(numvfs, up=True):
    """Intel 82576 PF 8086:10c9 as the igb driver shows it (drivers/net/
    ethernet/intel/igb/igb_main.c: at most 7 VFs, igb_sriov_reinit; no
    devlink instance) behind QEMU's emulation (hw/net/igb.c: VF offset
    0x80, stride 2, so VF N is at device 0x10, function 2N). Its VFs
    8086:10ca were made with sriov_drivers_autoprobe 0: no driver bound.
    The uplink's flags are dev->flags as net/core/net-sysfs.c shows them:
    0x1003 up, 0x1002 down."""
    root = "/devices/pci0000:00/0000:00:02.0"
    addr = "0000:01:00.0"
    path = root + "/" + addr
    vfaddr = ["0000:01:10.%d" % (2 * i) for i in range(numvfs)]
    out = dev(root, [("SUBSYSTEM", "pci"), ("DRIVER", "pcieport")],
              [("vendor", "0x1b36"), ("device", "0x000c"), ("class", "0x060400")])
    out += dev(path, [("SUBSYSTEM", "pci"), ("DRIVER", "igb"), ("PCI_ID", "8086:10C9"),
                      ("PCI_CLASS", "20000"), ("PCI_SLOT_NAME", addr)],
               [("vendor", "0x8086"), ("device", "0x10c9"), ("class", "0x020000"),
                ("numa_node", "-1"), ("sriov_numvfs", str(numvfs)), ("sriov_totalvfs", "7"),
                ("sriov_drivers_autoprobe", "1")],
               [("driver", "../../../../bus/pci/drivers/igb")]
               + [("virtfn%d" % i, "../" + a) for i, a in enumerate(vfaddr)])
    out += dev(path + "/net/enp1s0", [("SUBSYSTEM", "net"), ("INTERFACE", "enp1s0"),
                                      ("IFINDEX", "3")],
               [("ifindex", "3"), ("address", "52:54:00:12:34:56"),
                ("flags", "0x1003" if up else "0x1002"),
                ("operstate", "up" if up else "down"), ("carrier", "1" if up else "0")])
    for a in vfaddr:
        out += dev(root + "/" + a, [("SUBSYSTEM", "pci"), ("PCI_ID", "8086:10CA"),
                                    ("PCI_CLASS", "20000"), ("PCI_SLOT_NAME", a)],
                   [("vendor", "0x8086"), ("device", "0x10ca"), ("class", "0x020000"),
                    ("driver_override", "(null)")],
                   [("physfn", "../" + addr)])
    return out


def write(name, text, what):
    with open(name, "w") as f:
        f.write(text)
    index.append("- `%s`: %s" % (name, what))


index = []
PF6 = "enp59s0f0np0"
write("cx6dx-switchdev.umockdev",
      pci_bridge() + pf(0x3b, 0x101d, 1, 8, 127, PF6, "switchdev") + vfs(0x3b, 8, PF6, "switchdev"),
      "ConnectX-6 Dx PF 15b3:101d, 8 VFs 15b3:101e, eswitch switchdev with representors "
      "(mlx5_core's sysfs: drivers/net/ethernet/mellanox/mlx5/core/sriov.c, en_rep.c)")
write("cx6dx-legacy.umockdev",
      pci_bridge() + pf(0x3b, 0x101d, 1, 8, 127, "enp59s0f0", "legacy") + vfs(0x3b, 8, "enp59s0f0", "legacy"),
      "ConnectX-6 Dx PF 15b3:101d, 8 VFs 15b3:101e, eswitch legacy: no representors, but the "
      "uplink has its phys_switch_id all the same (esw/devlink_port.c)")
write("cx5.umockdev",
      pci_bridge().replace("3a", "5d") + pf(0x5e, 0x1017, 0, 0, 16, "enp94s0f0", "legacy", mlx=False).replace("3a", "5d"),
      "ConnectX-5 PF 15b3:1017, no VFs: a model that cannot carry vDPA")
write("cx6dx-vdpa.umockdev",
      pci_bridge() + pf(0x3b, 0x101d, 1, 2, 127, PF6, "switchdev") + vfs(0x3b, 2, PF6, "switchdev")
      + vdpa(0x3b, 0, "va-0000:3b:00.2", 0, True) + vdpa(0x3b, 1, "va-0000:3b:00.3", 1, False),
      "ConnectX-6 Dx PF with 2 VFs; vdpa device va-0000:3b:00.2 bound to vhost_vdpa "
      "(child vhost-vdpa-0), va-0000:3b:00.3 made but not yet bound; each a direct child of its "
      "VF's PCI device (drivers/vdpa/mlx5/net/mlx5_vnet.c), vhost-vdpa-N under it "
      "(drivers/vhost/vdpa.c)")

write("cx4lx-legacy.umockdev",
      pci_bridge() + pf(0x3b, 0x1015, 0, 4, 8, "enp59s0f0np0", "legacy")
      + vfs(0x3b, 4, "enp59s0f0np0", "legacy", device=0x1016),
      "ConnectX-4 Lx PF 15b3:1015 (mlx5_core_pci_table in "
      "drivers/net/ethernet/mellanox/mlx5/core/main.c), 4 VFs 15b3:1016 of 8, eswitch legacy: "
      "no vDPA (no virtio queue object), a candidate for kind=sriov pools")

write("cx6dx-hotplug.umockdev",
      pf(0x3b, 0x101d, 1, 8, 127, PF6, "switchdev") + vfs(0x3b, 8, PF6, "switchdev"),
      "the PF and VFs of `cx6dx-switchdev.umockdev` without the PCI bridge: "
      "the same PF coming back after it left the host")

write("igb-legacy.umockdev", igb(2),
      "Intel 82576 PF 8086:10c9 (drivers/net/ethernet/intel/igb/igb_main.c, as QEMU's "
      "hw/net/igb.c emulates it), link up, 2 VFs 8086:10ca made with sriov_drivers_autoprobe 0 "
      "(no driver): another vendor's legacy-only SR-IOV PF, with no devlink instance, for kind=sriov pools")

with open("README.md", "w") as f:
    f.write("""# umockdev testbeds of SR-IOV NICs

umockdev-record's text format, written by `make-testbeds.py` (run it in this
folder after a deliberate change, review the diff). They model the sysfs that
mlx5_core, mlx5_vdpa, vhost_vdpa and igb show, each after the kernel source file
named below (Linux 6.12); umockdev takes no comments in the files, so they
are described here. The eswitch mode and the representors are no sysfs
fact: the kernel backend asks devlink, which the tests answer with
tests/kernel/testbed-devlink.h (shaped as netdevsim answered in the lab
host, tests/kernel/netlink/devlink-port-*.hex).

""" + "\n".join(index) + "\n")
