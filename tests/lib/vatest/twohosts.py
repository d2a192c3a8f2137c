# SPDX-License-Identifier: LGPL-2.1-or-later
"""Two libvirt "hosts" on this machine, for migration tests (issue 14).

Each host is a process ("agent", `python3 -m vatest.twohosts host ...`)
in a network namespace of its own (ip netns va-a, va-b) and in fresh mount
and UTS namespaces, where it runs vatest.libvirt.Libvirt (private
/etc/libvirt, /run/libvirt, /var/lib/libvirt, ..., virtlogd, a private
system bus, record-hook.sh in qemu.d) and Open vSwitch with the userspace
(netdev) datapath, which needs no kernel module and carries libvirt's <vlan>
tags. libvirtd listens on TCP, auth none, on the host's address only.

    va-a (host A)                               va-b (host B)
    br-va 10.99.0.1  [va-ab] ==== veth ==== [va-ba]  br-va 10.99.0.2
      |  trunk: untagged = migration traffic, tagged = the guests' VLANs
    [va-w30a tag 30] [va-w40a tag 40]
      |                |
    w30 10.30.0.250  w40 10.40.0.250    va-w (the watcher)

The test process itself stays in the outer namespaces that
vatest.libvirt.enter_namespaces() made (its PID namespace kills whatever is
left); it reaches a host through nsenter into the agent.

    hosts = TwoHosts(); hosts.start()
    hosts.virsh("a", "list")                       # qemu:///system on A
    hosts.virsh("a", "migrate", "--live", "--p2p", dom, hosts.uri("b"))
    p = hosts.pinger(["10.30.0.11"]); ...; p.finish()   # replies, gaps
    hosts.stop()

`python3 -m vatest.twohosts ping ...` is the watcher's pinger (raw ICMP, run
inside va-w). The agents and the pinger find this package on the PYTHONPATH
they inherit (tests/meson.build sets it)."""

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from vatest import ctl, guest
from vatest.libvirt import HOOK_RECORD_DIR, RECORD_HOOK, Libvirt, hook_calls, run, wait_for_console
from vatest.paths import DAEMON

# run as a module, not as a file: a script's folder goes first on sys.path,
# and this one's libvirt.py would hide libvirt's own Python binding
SELF = [sys.executable, "-m", "vatest.twohosts"]

BRIDGE = "br-va"
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
HOSTS = {
    "a": {"netns": "va-a", "addr": "10.99.0.1", "trunk": "va-ab", "uuid": "9a000000-0000-4000-8000-00000000000a"},
    "b": {"netns": "va-b", "addr": "10.99.0.2", "trunk": "va-ba", "uuid": "9b000000-0000-4000-8000-00000000000b"},
}
WATCHER_NS = "va-w"
# VLAN -> (subnet prefix, the watcher's address); the watcher hangs off A
VLANS = {30: "10.30.0", 40: "10.40.0"}
WATCHER_HOST = 250


def watcher_addr(vlan):
    return "%s.%d" % (VLANS[vlan], WATCHER_HOST)


def libvirtd_conf(addr, uuid):
    return """
# the migration host's side (tests/lib/vatest/twohosts.py)
listen_tls = 0
listen_tcp = 1
listen_addr = "%s"
auth_tcp = "none"
host_uuid = "%s"
""" % (addr, uuid)


def qemu_conf(addr):
    # incoming migration streams: QEMU listens here, and the URI the
    # source's QEMU is given names it (not the shared hostname)
    return """
migration_address = "%s"
migration_host = "%s"
""" % (addr, addr)


# --- the agent: one host, inside its namespaces ----------------------------

class Ovs:
    """ovsdb-server + ovs-vswitchd over private directories, as pairbench
    starts them, with one netdev bridge."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="va-ovs-")
        self.mounts = []
        self.procs = []

    def start(self):
        run(["mount", "-t", "tmpfs", "-o", "mode=0755", "va-ovs", self.root])
        self.mounts.append(self.root)
        for target, name in (("/run/openvswitch", "run"), ("/etc/openvswitch", "etc"), ("/var/log/openvswitch", "log")):
            src = os.path.join(self.root, name)
            os.makedirs(src)
            os.makedirs(target, exist_ok=True)
            run(["mount", "--bind", src, target])
            self.mounts.append(target)
        run(["ovsdb-tool", "create", "/etc/openvswitch/conf.db", OVS_SCHEMA])
        self._spawn("ovsdb-server", ["ovsdb-server", "/etc/openvswitch/conf.db", "--remote=punix:/run/openvswitch/db.sock",
                                     "--pidfile=/run/openvswitch/ovsdb-server.pid",
                                     "--log-file=/var/log/openvswitch/ovsdb-server.log"])
        deadline = time.monotonic() + 15
        while not os.path.exists("/run/openvswitch/db.sock"):
            if time.monotonic() > deadline or self.procs[-1].poll() is not None:
                raise RuntimeError("ovsdb-server did not come up")
            time.sleep(0.05)
        run(["ovs-vsctl", "--no-wait", "init"])
        # userspace TSO, else TCP through the netdev datapath fails on checksums
        run(["ovs-vsctl", "--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"])
        self._spawn("ovs-vswitchd", ["ovs-vswitchd", "unix:/run/openvswitch/db.sock", "--pidfile=/run/openvswitch/ovs-vswitchd.pid",
                                     "--log-file=/var/log/openvswitch/ovs-vswitchd.log"])
        run(["ovs-vsctl", "--timeout=20", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev"])
        run(["ip", "link", "set", BRIDGE, "up"])

    def _spawn(self, name, argv):
        log = open(os.path.join(self.root, name + ".out"), "w")
        self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT))
        log.close()

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        self.procs = []
        for target in reversed(self.mounts):
            if run(["umount", target], check=False).returncode != 0:
                run(["umount", "--lazy", target], check=False)
        self.mounts = []


def agent(name):
    """Runs host NAME until its stdin closes. Lines on stdin are commands
    (stop-libvirtd, start-libvirtd); each is answered OK or ERR on stdout."""
    h = HOSTS[name]
    run(["hostname", "va-host-" + name])
    run(["ip", "link", "set", "lo", "up"])
    ovs = Ovs()
    lv = None
    try:
        ovs.start()
        run(["ovs-vsctl", "--timeout=10", "add-port", BRIDGE, h["trunk"]])
        run(["ip", "link", "set", h["trunk"], "up"])
        if name == "a":
            for vlan in VLANS:
                port = "va-w%da" % vlan
                run(["ovs-vsctl", "--timeout=10", "add-port", BRIDGE, port, "tag=%d" % vlan])
                run(["ip", "link", "set", port, "up"])
        run(["ip", "addr", "add", h["addr"] + "/24", "dev", BRIDGE])
        # libvirtd binds listen_addr when it starts: the address comes first
        lv = Libvirt(hooks={"50-record": RECORD_HOOK}, libvirtd_conf=libvirtd_conf(h["addr"], h["uuid"]),
                     qemu_conf=qemu_conf(h["addr"]), listen=True)
        lv.start()
        print("READY %d" % os.getpid(), flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            try:
                if cmd == "stop-libvirtd":
                    lv.stop_libvirtd()
                elif cmd == "start-libvirtd":
                    lv.start_libvirtd()
                else:
                    raise ValueError("unknown command %r" % cmd)
                print("OK", flush=True)
            except Exception as e:
                print("ERR %s" % str(e).replace("\n", " | ")[:2000], flush=True)
    finally:
        if lv:
            lv.stop()
        ovs.stop()


# --- the watcher's pinger ---------------------------------------------------

def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def pinger(addrs, interval, max_seconds):
    """Echo requests to each address every interval seconds until SIGINT or
    max_seconds; prints a JSON document: per address the requests sent, the
    replies and their CLOCK_MONOTONIC times (shared with the test
    process)."""
    stop = []
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    out = {a: {"sent": 0, "replies": []} for a in addrs}
    seen = set()
    t0 = time.monotonic()
    next_send = t0
    seq = 0
    print("PINGING", flush=True)
    while not stop and time.monotonic() - t0 < max_seconds:
        now = time.monotonic()
        if now >= next_send:
            seq = (seq + 1) & 0xFFFF
            for a in addrs:
                payload = struct.pack("!d", now)
                hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
                pkt = struct.pack("!BBHHH", 8, 0, _checksum(hdr + payload), ident, seq) + payload
                try:
                    sock.sendto(pkt, (a, 0))
                    out[a]["sent"] += 1
                except OSError:
                    out[a]["sent"] += 1  # no route or no ARP answer yet: a loss
            next_send += interval
            continue
        try:
            r, _, _ = select.select([sock], [], [], max(0.0, next_send - now))
        except InterruptedError:
            continue
        if not r:
            continue
        data, (src, _) = sock.recvfrom(2048)
        ihl = (data[0] & 0x0F) * 4
        typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ == 0 and rid == ident and src in out and (src, rseq) not in seen:
            seen.add((src, rseq))
            out[src]["replies"].append(time.monotonic())
    end = time.monotonic()
    print(json.dumps({"start": t0, "end": end, "interval": interval, "targets": out}), flush=True)


class Pinger:
    """twohosts.py ping in the watcher's namespace, in the background."""

    def __init__(self, addrs, interval=0.05, max_seconds=300):
        self.proc = subprocess.Popen(["ip", "netns", "exec", WATCHER_NS] + SELF + ["ping",
                                      "%g" % interval, "%g" % max_seconds] + list(addrs),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "PINGING":
            raise RuntimeError("pinger did not start: %s%s" % (line, self.proc.stderr.read()))

    def finish(self):
        """Stops it; returns {addr: stats} with sent, received, max_gap (the
        longest time between two replies, or from the last reply to the
        end: seconds), gap_from/gap_to (monotonic times) and last_reply."""
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=30)
        if self.proc.returncode != 0 or not out.strip():
            raise RuntimeError("pinger failed (%s): %s" % (self.proc.returncode, err[-2000:]))
        doc = json.loads(out.strip().splitlines()[-1])
        stats = {}
        for a, t in doc["targets"].items():
            r = t["replies"]
            s = {"sent": t["sent"], "received": len(r), "max_gap": None, "gap_from": None, "gap_to": None,
                 "last_reply": r[-1] if r else None}
            points = r + [doc["end"]]
            for x, y in zip(points, points[1:]):
                if s["max_gap"] is None or y - x > s["max_gap"]:
                    s.update(max_gap=y - x, gap_from=x, gap_to=y)
            stats[a] = s
        return stats

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# --- the test's side --------------------------------------------------------

class TwoHosts:
    def __init__(self):
        self.agents = {}
        self.netns = []
        self.mounts = []

    def start(self, timeout=120):
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout):
        # ip netns keeps its names under /run/netns: ours, privately
        os.makedirs("/run/netns", exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", "mode=0755", "va-netns", "/run/netns"])
        self.mounts.append("/run/netns")
        for ns in (HOSTS["a"]["netns"], HOSTS["b"]["netns"], WATCHER_NS):
            run(["ip", "netns", "add", ns])
            self.netns.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "add", "va-ab", "netns", HOSTS["a"]["netns"], "type", "veth", "peer", "name", "va-ba",
             "netns", HOSTS["b"]["netns"]])
        for vlan in VLANS:
            w = "w%d" % vlan
            run(["ip", "link", "add", "va-w%da" % vlan, "netns", HOSTS["a"]["netns"], "type", "veth", "peer", "name", w,
                 "netns", WATCHER_NS])
            run(["ip", "-n", WATCHER_NS, "addr", "add", watcher_addr(vlan) + "/24", "dev", w])
            run(["ip", "-n", WATCHER_NS, "link", "set", w, "up"])
        self.logs = {}
        for name in ("a", "b"):
            self.logs[name] = tempfile.NamedTemporaryFile(mode="w+", prefix="va-host-%s-" % name, suffix=".log")
            self.agents[name] = subprocess.Popen(
                ["ip", "netns", "exec", HOSTS[name]["netns"], "unshare", "--mount", "--uts", "--propagation", "private",
                 "--"] + SELF + ["host", name],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logs[name], text=True)
        self.pids = {}
        for name, p in self.agents.items():
            line = p.stdout.readline()
            if not line.startswith("READY "):
                p.stdin.close()
                p.wait(60)
                raise RuntimeError("host %s did not start: %s%s" % (name, line, self.log(name)[-5000:]))
            self.pids[name] = int(line.split()[1])
        # the trunk carries the hosts' own traffic
        r = self.exec("a", ["busybox", "ping", "-c", "1", "-W", "10", HOSTS["b"]["addr"]], check=False, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("host A cannot reach host B over the trunk: %s%s" % (r.stdout, r.stderr))

    def stop(self):
        for name in list(getattr(self, "daemons", {})):
            self.stop_daemon(name)
        for name, p in self.agents.items():
            try:
                p.stdin.close()
            except OSError:
                pass
        for name, p in self.agents.items():
            try:
                p.wait(90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
            p.stdout.close()
        self.agents = {}
        for f in getattr(self, "logs", {}).values():
            f.close()
        self.logs = {}
        for ns in reversed(self.netns):
            run(["ip", "netns", "del", ns], check=False)
        self.netns = []
        for m in reversed(self.mounts):
            run(["umount", "--lazy", m], check=False)
        self.mounts = []

    def command(self, name, cmd):
        """stop-libvirtd or start-libvirtd on host NAME."""
        p = self.agents[name]
        p.stdin.write(cmd + "\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        if line != "OK":
            raise RuntimeError("host %s: %s: %s" % (name, cmd, line or self.log(name)[-3000:]))

    def log(self, name):
        """What host NAME's agent wrote to its stderr."""
        f = self.logs[name]
        f.flush()
        with open(f.name, errors="replace") as r:
            return r.read()

    def exec(self, name, argv, check=True, timeout=120, input=None):
        """Runs argv on host NAME (its mount, network and UTS namespaces)."""
        r = subprocess.run(["nsenter", "-t", str(self.pids[name]), "-m", "-n", "-u", "--"] + list(argv),
                           capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise RuntimeError("host %s: %s failed (%d): %s%s" % (name, " ".join(argv), r.returncode, r.stdout, r.stderr))
        return r

    # --- the allocator on a host: vdpa-allocatord on the host's private
    # bus (the simulated NIC), vdpactl as an operator runs it there

    def start_daemon(self, name, config):
        """Starts vdpa-allocatord on host NAME with config (the text of
        vdpa-allocator.conf), its state and port links in the host's own
        /var/lib/libvirt; waits until vdpactl status answers there."""
        self.stop_daemon(name)
        base = "/var/lib/libvirt/va-allocator"
        for d in ("etc", "state", "run"):
            os.makedirs(self.path(name, "%s/%s" % (base, d)), exist_ok=True)
        self.write(name, base + "/etc/vdpa-allocator.conf", config)
        log = open(self.path(name, base + "/daemon.log"), "a")
        self.daemons = getattr(self, "daemons", {})
        self.daemons[name] = subprocess.Popen(
            ["nsenter", "-t", str(self.pids[name]), "-m", "-n", "-u", "--", DAEMON, "--config", base + "/etc", "--state-dir",
             base + "/state", "--run-dir", base + "/run"], stdout=log, stderr=subprocess.STDOUT, env=self._bus_env(name))
        log.close()
        deadline = time.monotonic() + 30
        while self.vdpactl(name, "status", check=False).returncode != 0:
            if self.daemons[name].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("vdpa-allocatord on host %s did not come up: %s" % (name, self.daemon_log(name)[-3000:]))
            time.sleep(0.1)

    def stop_daemon(self, name):
        p = getattr(self, "daemons", {}).pop(name, None)
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def daemon_log(self, name):
        try:
            with open(self.path(name, "/var/lib/libvirt/va-allocator/daemon.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _bus_env(self, name):
        # the host's own system bus at the standard path, its port links
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_")}
        env["VDPA_ALLOCATOR_RUN_DIR"] = "/var/lib/libvirt/va-allocator/run"
        env["VDPA_ALLOCATOR_CONFIG_DIR"] = "/var/lib/libvirt/va-allocator/etc"
        return env

    def vdpactl(self, name, *args, check=True, timeout=300):
        """vdpactl on host NAME (its bus, its libvirtd): vatest.ctl's, in
        the host's namespaces."""
        return ctl.vdpactl(*args, check=check, timeout=timeout, env=self._bus_env(name),
                           wrapper=["nsenter", "-t", str(self.pids[name]), "-m", "-n", "-u", "--"])

    def virsh(self, name, *args, check=True, timeout=120):
        return self.exec(name, ["virsh", "-q", "-c", "qemu:///system"] + list(args), check=check, timeout=timeout)

    def uri(self, name):
        return "qemu+tcp://%s/system" % HOSTS[name]["addr"]

    def path(self, name, path):
        """A path of host NAME's private tree, as the test process sees it."""
        return "/proc/%d/root%s" % (self.pids[name], path)

    def hook_ops(self, name, domain):
        """[(operation, sub-operation)] record-hook.sh saw on host NAME."""
        return [tuple(argv[1:3]) for argv, _ in hook_calls(self.path(name, HOOK_RECORD_DIR), domain)]

    def clear_hook_calls(self, name):
        d = self.path(name, HOOK_RECORD_DIR)
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))

    def write(self, name, path, text):
        with open(self.path(name, path), "w") as f:
            f.write(text)

    def watcher(self, argv, check=True, timeout=60):
        return run(["ip", "netns", "exec", WATCHER_NS] + list(argv), check=check, timeout=timeout)

    def pinger(self, addrs, **kw):
        return Pinger(addrs, **kw)

    def wait_answers(self, addr, timeout=30):
        """True once addr answers the watcher's ping."""
        return guest.answers(addr, timeout, WATCHER_NS).returncode == 0

    def diagnose(self, domain):
        """What to look at when a guest does not answer: the domain's state
        and NICs on each host, each bridge's ports and learned MACs, the
        watcher's neighbours, the end of the guest's console on each host."""
        out = []
        for h in sorted(HOSTS):
            for argv in (["virsh", "-q", "-c", "qemu:///system", "domstate", "--reason", domain],
                         ["virsh", "-q", "-c", "qemu:///system", "domiflist", domain],
                         ["ovs-vsctl", "--timeout=10", "--columns=name,tag,trunks", "list", "port"],
                         ["ovs-appctl", "--timeout=10", "fdb/show", BRIDGE]):
                try:
                    r = self.exec(h, argv, check=False, timeout=30)
                    shown = ["virsh"] + argv[4:] if argv[0] == "virsh" else argv
                    out.append("%s$ %s\n%s%s" % (h, " ".join(shown), r.stdout, r.stderr))
                except (OSError, subprocess.SubprocessError) as e:
                    out.append("%s$ %s: %s" % (h, " ".join(argv), e))
            out.append("%s console tail:\n%s" % (h, self.read_console(h, domain)[-1500:]))
        r = self.watcher(["ip", "neigh"], check=False)
        out.append("watcher$ ip neigh\n" + r.stdout)
        return "\n".join(out)

    def console(self, name, domain, marker, timeout=90):
        return wait_for_console(self.path(name, guest.serial_path(domain)), marker, timeout)

    def read_console(self, name, domain):
        try:
            with open(self.path(name, guest.serial_path(domain)), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


def domain_xml(name, kernel, initrd, nics, uuid=None, machine="pc", cmdline=""):
    """A guest of tests/guest with no disk (vatest.guest.domain_xml). nics:
    [(mac, vlan, ip/prefix, pci address)], each on br-va through OVS with
    libvirt's <vlan> tag, at a fixed PCI address (pci()). machine: pc or
    q35; cmdline: more kernel arguments."""
    ifaces = "".join(portable_nic(mac, vlan, slot) for mac, vlan, _, slot in nics)
    cmdline = "%s %s" % (guest.guest_cmdline(name, ip=",".join(ip for _, _, ip, _ in nics)), cmdline)
    return guest.domain_xml(name, kernel, initrd, cmdline, [], machine=machine, uuid=uuid, interfaces=ifaces)


def pci(slot):
    """slot: a slot on bus 0 (pc), or (bus, slot): a pcie-root-port's
    bus on q35 is (N, 0)."""
    bus, slot = slot if isinstance(slot, tuple) else (0, slot)
    return "<address type='pci' domain='0x0000' bus='0x%02x' slot='0x%02x' function='0x0'/>" % (bus, slot)


def portable_nic(mac, vlan, slot, bridge=BRIDGE):
    """The portable form: a tap on the OVS bridge, tagged by libvirt."""
    return """
    <interface type='bridge'>
      <mac address='%s'/>
      <source bridge='%s'/>
      <virtualport type='openvswitch'/>
      <vlan><tag id='%d'/></vlan>
      <model type='virtio'/>
      %s
    </interface>""" % (mac, bridge, vlan, pci(slot))


def ethernet_nic(mac, tap, slot):
    """Another type of NIC on the same VLAN: a tap made beforehand
    (managed='no'), put on its VLAN by whoever made it, as a vdpa NIC's
    device comes from the allocator."""
    return """
    <interface type='ethernet'>
      <mac address='%s'/>
      <target dev='%s' managed='no'/>
      <model type='virtio'/>
      %s
    </interface>""" % (mac, tap, pci(slot))


if __name__ == "__main__":
    if sys.argv[1] == "host":
        agent(sys.argv[2])
    elif sys.argv[1] == "ping":
        pinger(sys.argv[4:], float(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit("usage: python3 -m vatest.twohosts host a|b | ping INTERVAL MAX_SECONDS ADDR...")
