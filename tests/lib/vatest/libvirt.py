# SPDX-License-Identifier: LGPL-2.1-or-later
"""The "libvirt" tier of docs/test-tiers.md: a real libvirtd and virtlogd,
QEMU under TCG, a private system bus and our own qemu.d hook directory, all
inside a private mount and network namespace that the test process itself
runs in.

Usage (see tests/libvirt/test_libvirt.py):

    from vatest.libvirt import enter_namespaces, Libvirt
    enter_namespaces()            # first thing: re-execs under unshare
    lv = Libvirt(hooks={"50-record": RECORD_HOOK})
    lv.start()                    # raises after tearing down what it made
    try:
        lv.virsh("define", path)
    finally:
        lv.stop()                 # every process, every mount, every file

libvirt 9.0 compiles in /etc/libvirt/hooks and /run/libvirt, so rather than
pointing libvirtd elsewhere the fixture binds private directories over the
real paths; that is only safe in a mount namespace of our own. Hooks run with
only LC_ALL, PATH and HOME, so the private dbus-daemon listens at the
standard system-bus socket path, in a private directory bound over /run/dbus.
"""

import atexit
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from vatest.bus import BUS_CONF as PERMISSIVE_BUS_CONF
from vatest.paths import SRCDIR, TEST_CACHE

RECORD_HOOK = os.path.join(SRCDIR, "tests", "libvirt", "record-hook.sh")
# where record-hook.sh writes, one file per call; inside the bound
# /var/lib/libvirt, so private to the namespace
HOOK_RECORD_DIR = "/var/lib/libvirt/va-hook-calls"
URI = "qemu:///system"
NS_ENV = "VA_LIBVIRT_NAMESPACED"
OUTER_NET_ENV = "VA_LIBVIRT_OUTER_NETNS_FD"

# real path -> name of the private directory bound over it
BOUND = [
    ("/etc/libvirt", "etc"),
    ("/run/libvirt", "run"),
    ("/var/lib/libvirt", "lib"),
    ("/var/log/libvirt", "log"),
    ("/var/cache/libvirt", "cache"),
    ("/run/dbus", "dbus"),
]

LIBVIRTD_CONF = """# written by tests/lib/vatest/libvirt.py
auth_unix_ro = "none"
auth_unix_rw = "none"
unix_sock_rw_perms = "0700"
log_level = 3
log_filters = "1:qemu 1:hook 3:object 3:json 3:event 3:util"
log_outputs = "3:stderr 1:file:/var/log/libvirt/libvirtd.log"
"""

VIRTLOGD_CONF = """# written by tests/lib/vatest/libvirt.py
log_outputs = "3:stderr"
"""

# No KVM, no cgroup delegation, no labels: QEMU runs as root under TCG.
QEMU_CONF = """# written by tests/lib/vatest/libvirt.py
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
"""

# the bus tier's permissive system bus, at the standard socket path
BUS_CONF = PERMISSIVE_BUS_CONF.format(socket="/run/dbus/system_bus_socket", extra_policy="")


class SkipTier(Exception):
    """This machine cannot run the tier (not root, no libvirtd, ...)."""


def missing_tools():
    need = ["unshare", "mount", "umount", "ip", "dbus-daemon", "virsh",
            "/usr/sbin/libvirtd", "/usr/sbin/virtlogd", "/usr/bin/qemu-system-x86_64"]
    return [t for t in need if shutil.which(t) is None]


def enter_namespaces():
    """Re-execs this test in new mount, network and PID namespaces, unless
    already there. Every later mount, libvirtd, QEMU, tap, bridge and virsh
    call is then private.

    The PID namespace is what makes teardown total: its pid 1 is a small
    reaper (below) whose only child is the test; when the test ends, however
    it ends, pid 1 exits and the kernel kills whatever is left in the
    namespace (QEMU is daemonized by libvirtd, so nothing else would), and
    the mounts go with the last process. unshare --kill-child does the same
    if unshare itself is killed."""
    if os.environ.get(NS_ENV) != "1":
        if os.geteuid() != 0 or missing_tools():
            return  # the tests skip themselves
        # the guest is built (and its kernel downloaded) out here: the
        # private network namespace has no way out
        build_guest()
        os.environ[NS_ENV] = "1"
        # a handle on the network namespace left behind, for what works
        # only in the initial one (the kernel's vdpa netlink family)
        fd = os.open("/proc/self/ns/net", os.O_RDONLY)
        os.set_inheritable(fd, True)
        os.environ[OUTER_NET_ENV] = str(fd)
        argv = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
                "--propagation", "private", "--", sys.executable] + sys.argv
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp("unshare", argv)
    if os.getpid() != 1:
        return
    # pid 1: reap every orphan (libvirtd double-forks QEMU), pass signals on
    # to the test, exit with its status
    child = os.fork()
    if child == 0:
        return

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            sys.stdout.flush()
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def outer_netns():
    """A path to the network namespace the test was started in (for
    nsenter --net=), or None outside enter_namespaces'."""
    fd = os.environ.get(OUTER_NET_ENV)
    # by pid: a child (nsenter) has its own fd table
    path = "/proc/%d/fd/%s" % (os.getpid(), fd) if fd and fd.isdigit() else None
    return path if path and os.path.exists(path) else None


def in_namespaces():
    return os.environ.get(NS_ENV) == "1"


def skip_reason():
    if os.geteuid() != 0:
        return "the libvirt tier needs root (private mounts, taps, libvirtd)"
    missing = missing_tools()
    if missing:
        return "missing %s (contrib/install-deps.sh)" % ", ".join(missing)
    if not in_namespaces():
        return "not in private namespaces (call enter_namespaces() first)"
    return None


def run(cmd, check=True, timeout=60, **kw):
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


def virsh(*args, check=True, timeout=120, input=None):
    """virsh -q on qemu:///system (a Libvirt's, or the host's); a
    CompletedProcess. check: a non-zero status raises RuntimeError."""
    r = subprocess.run(["virsh", "-q", "-c", URI] + list(args), capture_output=True, text=True,
                       timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise RuntimeError("virsh %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def _sigterm_to_interrupt(signum, frame):
    # meson's timeout sends SIGTERM: unittest lets KeyboardInterrupt (and
    # nothing else) end the whole run, and the atexit hook then tears down
    raise KeyboardInterrupt("signal %d" % signum)


class Libvirt:
    """libvirtd + virtlogd + a private system bus in the current (private)
    namespaces. hooks: {file name in qemu.d: executable path}. system_bus:
    the bus runs with the distribution's system configuration
    (dbus-daemon --system: deny by default, the policies installed in
    /etc/dbus-1/system.d allow) instead of the bus tier's permissive one."""

    def __init__(self, hooks=None, system_bus=False, libvirtd_conf="", qemu_conf="", listen=False):
        """libvirtd_conf, qemu_conf: lines appended to the private
        libvirtd.conf and qemu.conf; listen: libvirtd --listen (its TCP or
        TLS sockets, as libvirtd.conf configures them)."""
        self.hooks = dict(hooks or {})
        self.system_bus = system_bus
        self.libvirtd_conf = libvirtd_conf
        self.qemu_conf = qemu_conf
        self.listen = listen
        self.root = None
        self.mounts = []
        self.procs = {}  # name -> Popen, in start order
        self.logs = {}

    # --- life cycle ------------------------------------------------------

    def start(self, timeout=90):
        reason = skip_reason()
        if reason:
            raise SkipTier(reason)
        signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
        atexit.register(self._stop_quietly)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout):
        self.root = tempfile.mkdtemp(prefix="va-libvirt-")
        # a tmpfs, so that nothing of ours outlives a killed namespace but
        # this empty directory
        run(["mount", "-t", "tmpfs", "-o", "mode=0755", "va-libvirt", self.root])
        self.mounts.append(self.root)
        for target, name in BOUND:
            src = os.path.join(self.root, name)
            os.makedirs(src)
            # the mount points themselves: libvirt-daemon without
            # libvirt-daemon-system ships none of them
            os.makedirs(target, exist_ok=True)
            run(["mount", "--bind", src, target])
            self.mounts.append(target)
        os.makedirs("/etc/libvirt/hooks/qemu.d")
        os.makedirs("/etc/libvirt/qemu")
        os.makedirs("/var/log/libvirt/qemu")  # serial and console files go here
        os.makedirs(HOOK_RECORD_DIR)
        self._write("/etc/libvirt/libvirtd.conf", LIBVIRTD_CONF + self.libvirtd_conf)
        self._write("/etc/libvirt/virtlogd.conf", VIRTLOGD_CONF)
        self._write("/etc/libvirt/qemu.conf", QEMU_CONF + self.qemu_conf)
        self._write("/etc/libvirt/bus.conf", BUS_CONF)
        for name, path in self.hooks.items():
            # a link, as the install makes: the real hook finds its helper
            # beside the binary the link points to
            os.symlink(os.path.abspath(path), os.path.join("/etc/libvirt/hooks/qemu.d", name))

        self._add_qemu_user()
        run(["ip", "link", "set", "lo", "up"])

        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DBUS_") and not k.startswith("LIBVIRT_")}
        env["LC_ALL"] = "C.UTF-8"
        bus = ["--system"] if self.system_bus else ["--config-file=/etc/libvirt/bus.conf"]
        self._spawn("dbus-daemon", ["dbus-daemon", "--nofork"] + bus, env)
        self._wait(lambda: os.path.exists("/run/dbus/system_bus_socket"), 10, "dbus-daemon", "dbus-daemon")
        self._spawn("virtlogd", ["/usr/sbin/virtlogd", "-f", "/etc/libvirt/virtlogd.conf",
                                 "-p", "/run/libvirt/virtlogd.pid"], env)
        self._wait(lambda: os.path.exists("/run/libvirt/virtlogd-sock"), 10, "virtlogd", "virtlogd")
        self._spawn("libvirtd", self._libvirtd_argv(), env)
        self._wait(lambda: self.virsh("version", check=False).returncode == 0, timeout,
                   "libvirtd", "virsh -c %s version" % URI)

    def _libvirtd_argv(self):
        return (["/usr/sbin/libvirtd", "-f", "/etc/libvirt/libvirtd.conf", "-p", "/run/libvirt/libvirtd.pid"]
                + (["--listen"] if self.listen else []))

    def stop_libvirtd(self):
        """Stops libvirtd alone: running guests stay (QEMU is not its
        child), and start_libvirtd() brings it back."""
        p = self.procs.pop("libvirtd")
        p.terminate()
        p.wait(30)
        self.logs.pop("libvirtd").close()

    def start_libvirtd(self, timeout=90):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBUS_") and not k.startswith("LIBVIRT_")}
        env["LC_ALL"] = "C.UTF-8"
        self._spawn("libvirtd", self._libvirtd_argv(), env)
        self._wait(lambda: self.virsh("version", check=False).returncode == 0, timeout, "libvirtd", "virsh -c %s version" % URI)

    def restart_libvirtd(self, timeout=90):
        """Stops libvirtd and starts it again: running guests stay, and
        libvirtd reconnects to them (calling 'reconnect begin' hooks)."""
        self.stop_libvirtd()
        self.start_libvirtd(timeout)

    def stop(self):
        """Tears down everything start() made, whatever state it is in."""
        errors = []
        if "libvirtd" in self.procs and self.procs["libvirtd"].poll() is None:
            try:
                for dom in self.virsh("list", "--all", "--name", check=False, timeout=20).stdout.split():
                    self.virsh("destroy", dom, check=False, timeout=30)
                    self.virsh("undefine", dom, "--nvram", check=False, timeout=30)
            except Exception as e:  # keep tearing down
                errors.append("domains: %s" % e)
        # QEMU is libvirtd's grandchild: it survives libvirtd
        for pidfile in glob.glob("/run/libvirt/qemu/*.pid"):
            try:
                with open(pidfile) as f:
                    os.kill(int(f.read().strip()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
        self.procs = {}
        for f in self.logs.values():
            f.close()
        self.logs = {}
        for target in reversed(self.mounts):
            if run(["umount", target], check=False).returncode != 0:
                r = run(["umount", "--lazy", target], check=False)
                if r.returncode != 0:
                    errors.append("umount %s: %s" % (target, r.stderr.strip()))
        self.mounts = []
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        if errors:
            raise RuntimeError("teardown: " + "; ".join(errors))

    def _stop_quietly(self):
        try:
            self.stop()
        except Exception as e:
            sys.stderr.write("libvirt fixture: %s\n" % e)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # --- helpers ---------------------------------------------------------

    def _add_qemu_user(self):
        """Debian's QEMU driver resolves its compiled-in user libvirt-qemu
        before it reads qemu.conf's user = "root", and only
        libvirt-daemon-system's postinst creates it. Rather than touch the
        host's accounts, give the namespace copies of /etc/passwd and
        /etc/group that have it."""
        for path, lines in (("/etc/passwd", ["libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin"]),
                            ("/etc/group", ["libvirt-qemu:x:64055:", "kvm:x:64056:", "libvirt:x:64057:"])):
            with open(path) as f:
                text = f.read()
            names = {line.split(":", 1)[0] for line in text.splitlines()}
            extra = [line for line in lines if line.split(":", 1)[0] not in names]
            if not extra:
                continue
            copy = os.path.join(self.root, os.path.basename(path))
            self._write(copy, text.rstrip("\n") + "\n" + "\n".join(extra) + "\n")
            run(["mount", "--bind", copy, path])
            self.mounts.append(path)

    def _write(self, path, text):
        with open(path, "w") as f:
            f.write(text)

    def _spawn(self, name, argv, env):
        log = open(os.path.join(self.root, name + ".out"), "w")
        self.logs[name] = log
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=env)

    def _wait(self, ready, timeout, name, what):
        deadline = time.monotonic() + timeout
        while not ready():
            p = self.procs[name]
            if p.poll() is not None:
                raise RuntimeError("%s exited %d before %s worked:\n%s" %
                                   (name, p.returncode, what, self.read_log(name)))
            if time.monotonic() > deadline:
                raise TimeoutError("%s did not come up within %d s (%s):\n%s" %
                                   (name, timeout, what, self.read_log(name)))
            time.sleep(0.1)

    def read_log(self, name):
        """name: dbus-daemon, virtlogd, libvirtd (their stdout/stderr), or a
        path under /var/log/libvirt."""
        path = name if name.startswith("/") else os.path.join(self.root or "/nonexistent", name + ".out")
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError as e:
            return "(%s)" % e

    def virsh(self, *args, **kw):
        """virsh() on this libvirtd."""
        return virsh(*args, **kw)

    def define(self, xml):
        path = os.path.join(self.root, "define-%d.xml" % time.monotonic_ns())
        self._write(path, xml)
        return self.virsh("define", path)

    # --- the recording hook ----------------------------------------------

    def hook_calls(self, domain=None):
        """Calls record-hook.sh saw, oldest first: [(argv, stdin)], argv
        without the program name (domain, operation, sub-operation, extra)."""
        return hook_calls(HOOK_RECORD_DIR, domain)

    def hook_ops(self, domain=None):
        """[(operation, sub-operation)] of the recorded calls."""
        return [tuple(argv[1:3]) for argv, _ in self.hook_calls(domain)]


def hook_calls(record_dir, domain=None):
    """Libvirt.hook_calls() of the record-hook.sh files in record_dir."""
    calls = []
    for path in sorted(glob.glob(os.path.join(record_dir, "*.call"))):
        with open(path, errors="replace") as f:
            head, _, stdin = f.read().partition("\n")
        argv = head.split("\t")[1:]
        if domain is None or (argv and argv[0] == domain):
            calls.append((argv, stdin))
    return calls


def wait_for_console(path, marker, timeout, proc_alive=None):
    """Waits until a whole line (newline included: the guest may be mid-way
    through writing it) of the file at path contains marker; returns the
    file's text. proc_alive: a callable saying whether to keep waiting."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        if re.search(re.escape(marker) + ".*\n", text):
            return text
        if proc_alive is not None and not proc_alive():
            break
        time.sleep(0.1)
    raise TimeoutError("no %r in %s after %d s; it says:\n%s" % (marker, path, timeout, text[-3000:]))


def build_guest():
    """Builds (or finds in the cache) the tiny guest; returns (kernel,
    initrd)."""
    r = run(["sh", os.path.join(SRCDIR, "tests", "guest", "build-guest.sh"), TEST_CACHE], timeout=600)
    vals = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return vals["KERNEL"], vals["INITRD"]


def serve(ready, hooks=True):
    """`python3 -m vatest.libvirt serve READY [--no-hooks]`, for the lab's
    shell tiers: a Libvirt (with the recording hook and the project's
    unless --no-hooks), running until SIGINT or SIGTERM; its root is
    written to READY once it is up."""
    from vatest.paths import HOOK
    lv = Libvirt(hooks={"40-record": RECORD_HOOK, "50-vdpa-allocator": HOOK} if hooks else None)
    lv.start(timeout=180)
    with open(ready, "w") as f:
        f.write(lv.root + "\n")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        lv.stop()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] != "serve" or sys.argv[3:] not in ([], ["--no-hooks"]):
        sys.exit("usage: python3 -m vatest.libvirt serve READY [--no-hooks]")
    serve(sys.argv[2], hooks=sys.argv[3:] == [])
