# SPDX-License-Identifier: LGPL-2.1-or-later
"""The tiny test guest (tests/guest/build-guest.sh) as the libvirt tiers and
the paired benchmark boot it: its domain XML, its kernel command line (the
va.* parameters tests/guest/guest-init.sh reads) and what its serial
console reports."""

import json
import os
import re
import subprocess
import time

# the libvirt tiers' Linux bridge and the test's own address on it
BRIDGE = "va-br0"
HOST_IP = "10.77.0.1"
BOOT_TIMEOUT = 90  # READY is ~3 s on plain QEMU; libvirt and two busy guests add to it


def answers(addr, timeout=60, netns=None):
    """Pings the guest at @addr (from network namespace @netns) once a
    second until it answers or @timeout s pass, and returns the last
    ping's CompletedProcess: a TCG guest brings a NIC up in its own time,
    more than 10 s on a busy machine. busybox's ping: the build machine
    need not have iputils."""
    argv = (["ip", "netns", "exec", netns] if netns else []) + ["busybox", "ping", "-c", "1", "-W", "1", addr]
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if r.returncode == 0 or time.monotonic() > deadline:
            return r


def serial_path(name):
    return "/var/log/libvirt/qemu/%s-serial.log" % name


NS = "http://vdpa-allocator.org/xmlns/domain/1.0"


def with_intent(xml, uuid, nics):
    """Adds a <uuid> and vdpa:nics metadata for (mac, network) pairs."""
    meta = "".join('<vdpa:nic mac="%s" network="%s"/>' % n for n in nics)
    return xml.replace("<memory", "<uuid>%s</uuid>\n  <metadata><vdpa:nics xmlns:vdpa='%s'>%s</vdpa:nics></metadata>\n  <memory"
                       % (uuid, NS, meta), 1)


def domain_type():
    """qemu (TCG), or kvm inside a lab host whose kernel offers it
    (LAB_DOMAIN_TYPE: tests/lab/lab-init.sh)."""
    t = os.environ.get("LAB_DOMAIN_TYPE") or "qemu"
    if t not in ("qemu", "kvm"):
        raise ValueError("LAB_DOMAIN_TYPE must be qemu or kvm, not %r" % t)
    return t


def domain_xml(name, kernel, initrd, cmdline, macs, bridge=BRIDGE, machine="pc", uuid=None, interfaces="",
               intent=(), memory=256, acpi=True, serial=True):
    """A guest with no disk: a NIC on bridge per MAC of macs, then the
    <interface> elements of interfaces (XML text); machine: pc or q35.
    intent: [(mac, network)], the vdpa-allocator metadata marking those
    NICs. kernel None: a domain that boots nothing (no kernel, initrd or
    command line); serial False: no console file; memory in MiB."""
    meta = "".join("""
      <vdpa:nic mac='%s' network='%s'/>""" % nic for nic in intent)
    if meta:
        meta = """
  <metadata>
    <vdpa:nics xmlns:vdpa='%s'>%s
    </vdpa:nics>
  </metadata>""" % (NS, meta)
    boot = """
    <kernel>%s</kernel>
    <initrd>%s</initrd>
    <cmdline>%s</cmdline>""" % (kernel, initrd, cmdline) if kernel is not None else ""
    console = """
    <serial type='file'>
      <source path='%s'/>
      <target port='0'/>
    </serial>""" % serial_path(name) if serial else ""
    nics = "".join("""
    <interface type='bridge'>
      <source bridge='%s'/>
      <mac address='%s'/>
      <model type='virtio'/>
    </interface>""" % (bridge, mac) for mac in macs)
    return """<domain type='%(type)s'>
  <name>%(name)s</name>%(uuid)s%(meta)s
  <memory unit='MiB'>%(memory)d</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='%(machine)s'>hvm</type>%(boot)s
  </os>
  %(features)s<on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>%(nics)s%(console)s
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
""" % dict(type=domain_type(), name=name, uuid="\n  <uuid>%s</uuid>" % uuid if uuid else "", meta=meta,
           memory=memory, machine=machine, boot=boot, features="<features><acpi/></features>\n  " if acpi else "", nics=nics + interfaces,
           console=console)


# The guest's kernel command line without its va.* parameters.
# cryptomgr.notests skips the crypto API's self-tests of each algorithm as
# it registers: they check the kernel's crypto code, nothing a test here
# relies on (virtio-net, iperf3, ACPI hotplug), and cost ~0.3 s of a plain
# TCG boot but ~10 s nested in the lab host (TCG inside TCG:
# crypto_algapi_init alone took 9.7 s there, with initcall_debug).
KERNEL_CMDLINE = "console=ttyS0 quiet no_timer_check cryptomgr.notests=1"


def guest_cmdline(name, **va):
    return "%s va.name=%s %s" % (KERNEL_CMDLINE, name, " ".join("va.%s=%s" % kv for kv in va.items()))


def iperf3_results(console):
    """{test name: iperf3 -J document} from a client guest's console."""
    out = {}
    for m in re.finditer(r"VA-IPERF3-BEGIN test=(\S+).*?\n(.*?)\nVA-IPERF3-END test=\S+ rc=(\d+)", console, re.S):
        out[m.group(1)] = (int(m.group(3)), json.loads(m.group(2)))
    return out
