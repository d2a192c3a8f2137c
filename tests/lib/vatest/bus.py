# SPDX-License-Identifier: LGPL-2.1-or-later
"""A private system bus, the real vdpa-allocatord on the simulated NIC, and a
mocked polkit authority (python3-dbusmock): the "bus" tier of docs/test-tiers.md."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

from vatest import ctl  # noqa: E402
from vatest.paths import DAEMON  # noqa: E402
from vatest.simconf import ACCEL, sim_config  # noqa: E402

NAME = "org.vdpa_allocator.Allocator1"
PATH = "/org/vdpa_allocator/Allocator1"
IFACE = "org.vdpa_allocator.Allocator1"

BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_type="method_return"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="signal"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
  </policy>
{extra_policy}
</busconfig>
"""

CONFIG = sim_config(
    pfs=2, vfs=4, numa_nodes=2, pools={"accel": dict(ACCEL, max_vqp=4, low_watermark=3)},
    networks={"vpc2": dict(mode="vdpa", pool="accel", vlan=2334),
              "capped": dict(mode="vdpa", pool="accel", vlan=100, quota=1),
              "vpc1": dict(mode="virtio", vlan=2200, fallback_bridge="br-bond0", fallback_bridge_type="ovs")})


class Bus:
    """A private dbus-daemon of type system, with polkitd mocked on it."""

    def __init__(self, extra_policy=""):
        """extra_policy: more <policy> elements, e.g. a mandatory deny."""
        self.dir = tempfile.mkdtemp(prefix="va-bus-")
        os.chmod(self.dir, 0o755)  # clients run as nobody too
        self.socket = os.path.join(self.dir, "system_bus_socket")
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            f.write(BUS_CONF.format(socket=self.socket, extra_policy=extra_policy))
        self.proc = subprocess.Popen(["dbus-daemon", "--nofork", "--config-file=" + conf, "--print-address"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.address = self.proc.stdout.readline().decode().strip()
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=" + self.socket
        self.polkit = subprocess.Popen(["/usr/bin/python3", "-m", "dbusmock", "--system", "--template", "polkitd"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.conn = Gio.DBusConnection.new_for_address_sync(
            self.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
        self.wait_for_name("org.freedesktop.PolicyKit1")

    def has_name(self, name):
        ret = self.conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "NameHasOwner", GLib.Variant("(s)", (name,)), None, 0, -1, None)
        return ret.unpack()[0]

    def wait_for_name(self, name, timeout=60):
        # python3-dbusmock takes over 10 s to start in the TCG lab host under load
        deadline = time.monotonic() + timeout
        while not self.has_name(name):
            if time.monotonic() > deadline:
                raise TimeoutError("%s did not appear on the bus" % name)
            time.sleep(0.02)

    def polkit_allow(self, actions):
        self.conn.call_sync("org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                            "org.freedesktop.DBus.Mock", "SetAllowed", GLib.Variant("(as)", (actions,)),
                            None, 0, -1, None)

    def close(self):
        for p in (self.polkit, self.proc):
            p.terminate()
            p.wait(5)
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Daemon:
    """vdpa-allocatord with its own config, state and run directories."""

    def __init__(self, bus, config=CONFIG, root=None, run_on_tmpfs=False):
        """run_on_tmpfs: the run directory on /dev/shm, as /run is a tmpfs
        on a real host (the state directory stays on disk)."""
        self.bus = bus
        self.root = root or tempfile.mkdtemp(prefix="va-daemon-")
        os.chmod(self.root, 0o755)
        self.conf_dir = os.path.join(self.root, "etc")
        self.state_dir = os.path.join(self.root, "state")
        self.run_dir = os.path.join(self.root, "run")
        self.tmpfs_run = None
        if run_on_tmpfs and os.path.isdir("/dev/shm"):
            self.tmpfs_run = tempfile.mkdtemp(prefix="va-run-", dir="/dev/shm")
            self.run_dir = self.tmpfs_run
        os.makedirs(self.conf_dir, exist_ok=True)
        with open(os.path.join(self.conf_dir, "vdpa-allocator.conf"), "w") as f:
            f.write(config)
        self.proc = None
        self.log = os.path.join(self.root, "daemon.log")

    def start(self, wrapper=None, libvirt_uri="test:///nonexistent-so-unreachable", stderr=None):
        """libvirt_uri: the default one names no file, so libvirt is
        unreachable; "test:///default" is libvirt's own test driver.
        VA_DAEMON_WRAPPER (e.g. valgrind) wraps the daemon. stderr: a file
        or socket for the daemon's stderr instead of the log (a journal
        stream: test_observe.py)."""
        if wrapper is None:
            wrapper = os.environ.get("VA_DAEMON_WRAPPER", "").split()
        env = dict(os.environ)
        env["VDPA_ALLOCATOR_LIBVIRT_URI"] = libvirt_uri
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(list(wrapper) + [DAEMON, "--config", self.conf_dir, "--state-dir", self.state_dir,
                                                          "--run-dir", self.run_dir],
                                         stdout=log, stderr=stderr if stderr is not None else subprocess.STDOUT, env=env)
        # valgrind inside the TCG lab host on a loaded machine took over 60 s
        deadline = time.monotonic() + (300 if wrapper else 60)
        while not self.bus.has_name(NAME):
            if self.proc.poll() is not None:
                raise RuntimeError("daemon exited %d: %s" % (self.proc.returncode, self.read_log()))
            if time.monotonic() > deadline:
                raise TimeoutError("daemon did not take its name")
            time.sleep(0.01)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        deadline = time.monotonic() + 10
        while self.bus.has_name(NAME) and time.monotonic() < deadline:
            time.sleep(0.01)
        rc = self.proc.returncode if self.proc else 0
        self.proc = None
        return rc

    def reload(self, until, timeout=30):
        """SIGHUP, as systemctl reload sends (the unit's ExecReload=), then
        polls until() until it is true; False if it never is."""
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def read_log(self):
        with open(self.log) as f:
            return f.read()

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)
        if self.tmpfs_run:
            shutil.rmtree(self.tmpfs_run, ignore_errors=True)


def call(bus, method, args=None, signature=None, timeout=30000):
    """Calls the manager; returns the unpacked reply or raises GLib.Error."""
    params = GLib.Variant(signature, args) if signature else None
    ret = bus.conn.call_sync(NAME, PATH, IFACE, method, params, None, 0, timeout, None)
    return ret.unpack() if ret else None


def dbus_error_name(err):
    return Gio.DBusError.get_remote_error(err)


def vdpactl(*args, user=None, check=False):
    """vatest.ctl.vdpactl as the bus tier calls it: a failure is the
    case's to read (check off), and as uid @user when given."""
    wrapper = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] if user is not None else ()
    return ctl.vdpactl(*args, check=check, timeout=60, wrapper=wrapper)


def leases(bus):
    """ListLeases's records, straight off the bus."""
    return call(bus, "ListLeases")[0]


def own_daemon(config=None, start=True):
    """Marks a case of a SharedDaemonTest class that needs a daemon of its
    own: it restarts or kills it, or changes its configuration, or asserts
    what it logged or counted since its start (per-uid bounds, signals,
    reloads). config: its configuration, else the class's; start False:
    the case starts it itself (e.g. with an environment of its own)."""
    def mark(func):
        func.own_daemon = (config, start)
        return func
    return mark


class SharedDaemonTest(unittest.TestCase):
    """Cases that share one daemon per class (issue 24: under valgrind a
    daemon's start costs seconds of CPU). A case gets the shared daemon
    unless marked @own_daemon; after it, its leases are released and its
    drains ended, then the daemon must be alive and its state back to what
    it was after its start (no lease, every pool's counts and flags, the
    run directory's files, the configuration), or the case fails and the
    next case gets a new daemon: no case passes on another's leftovers.
    The shared daemon is stopped at the end of the class, where its exit
    status (valgrind's, under VA_DAEMON_WRAPPER) must be 0.

    A case marked @own_daemon gets its daemon on a bus of its own (self.bus
    for that case), as the shared one holds the name on the class's.

    Subclasses: CONFIG (the daemon's configuration), setUpClass making
    cls.bus, and they call super().setUp/tearDown/tearDownClass."""

    CONFIG = CONFIG
    maxDiff = None
    _shared = None
    _baseline = None

    def _own(self):
        return getattr(getattr(self, self._testMethodName), "own_daemon", None)

    def setUp(self):
        own = self._own()
        if own is not None:
            # and a bus of its own, where the shared daemon does not own
            # the name this one waits for
            config, start = own
            self.bus = Bus()
            self.addCleanup(self._close_own_bus)
            self.daemon = Daemon(self.bus, config=config or self.CONFIG)
            if start:
                self.daemon.start()
            return
        cls = type(self)
        if cls._shared is None:
            cls._shared = Daemon(self.bus, config=self.CONFIG)
            cls._shared.start()
            self.settle(cls._shared)
            cls._baseline = daemon_state(cls._shared)
        self.daemon = cls._shared

    def settle(self, daemon):
        """Waits before the shared daemon's state is taken as the one each
        case must leave: until it has reconciled (settled())."""
        settled(daemon)

    def tearDown(self):
        if self._own() is not None:
            rc = self.daemon.stop()
            self.assertEqual(rc, 0, self.daemon.read_log()[-8000:])
            self.daemon.remove()
            return
        cls = type(self)
        try:
            self.assertIsNone(self.daemon.proc.poll(), "the shared daemon died: " + self.daemon.read_log()[-8000:])
            restore(self.daemon)
            self.assertEqual(daemon_state(self.daemon), cls._baseline, "the case left the shared daemon changed")
        except BaseException:
            cls._retire()
            raise

    def _close_own_bus(self):
        self.bus.close()
        del self.bus  # the class's again
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=" + self.bus.socket

    @classmethod
    def _retire(cls):
        """Stops the shared daemon; its exit status, or None if none ran."""
        d, cls._shared, cls._baseline = cls._shared, None, None
        if d is None:
            return None
        rc = d.stop()
        log = d.read_log()
        d.remove()
        if rc != 0:
            raise AssertionError("the shared daemon exited %d: %s" % (rc, log[-8000:]))
        return rc

    @classmethod
    def tearDownClass(cls):
        cls._retire()


def pump_until(done, timeout):
    """Runs the default main context (where signal subscriptions deliver)
    until done() or @timeout seconds, then whatever is pending; returns
    done()."""
    ctx = GLib.MainContext.default()
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        ctx.iteration(False)
        time.sleep(0.01)
    while ctx.iteration(False):
        pass
    return done()


def settled(daemon, timeout=300):
    """Waits for the end of what the daemon does in the background after
    its start: its reconciliation, after which the pools' warnings of a
    libvirt network it could not define are set too."""
    deadline = time.monotonic() + timeout
    while not any(w in daemon.read_log() for w in ("reconciled:", "reconciliation failed")):
        if daemon.proc.poll() is not None or time.monotonic() > deadline:
            raise TimeoutError("the daemon did not reconcile: " + daemon.read_log()[-8000:])
        time.sleep(0.05)


def restore(daemon):
    """Undoes what a case may leave on a shared daemon: its leases, by
    domain, and its drains."""
    bus = daemon.bus
    for uuid in sorted({x["uuid"] for x in leases(bus)}):
        call(bus, "ReleaseDomain", (uuid,), "(s)")
    for path in pool_paths(bus):
        props = pool_props(bus, path)
        if props["Draining"]:
            call(bus, "Drain", (props["Name"], False), "(sb)")


def pool_paths(bus):
    return bus.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Properties", "Get", GLib.Variant("(ss)", (IFACE, "Pools")),
                              None, 0, 30000, None).unpack()[0]


def pool_props(bus, path):
    return bus.conn.call_sync(NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                              GLib.Variant("(s)", ("org.vdpa_allocator.Pool1",)), None, 0, 30000, None).unpack()[0]


def daemon_state(daemon):
    """What a case may change and the next may rely on: the leases, each
    pool's properties, the run directory's files and links (a file's
    content, a link's target; not the metrics file, whose counters only
    grow; not the directories, made when first needed: ports/, and
    ports/UUID/ which Release of a domain's last NIC leaves, ReleaseDomain
    not) and the configuration directory's files. Its calls are also a
    round trip after the last release, whose signals are thus sent before
    the next case listens."""
    bus = daemon.bus
    state = {"leases": leases(bus), "pools": {path: pool_props(bus, path) for path in pool_paths(bus)}}
    for name, top in (("run", daemon.run_dir), ("conf", daemon.conf_dir)):
        files = {}
        for d, dirs, names in os.walk(top):
            for n in dirs + names:
                path = os.path.join(d, n)
                rel = os.path.relpath(path, top)
                if rel == "metrics.prom":
                    continue
                if os.path.islink(path):
                    files[rel] = "-> " + os.readlink(path)
                elif os.path.isfile(path):
                    with open(path, "rb") as f:
                        files[rel] = f.read(65536)
        state[name] = files
    return state
