# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lab host (issue 7, docs/test-tiers.md): Debian's 6.12 kernel booted
under QEMU TCG with the build machine's own root filesystem, read-only over
virtio-9p under a tmpfs overlay, running one command and powering off.

    lab_host.py [--timeout S] [--env NAME]... [--keep] [--sim-modules] [--mlx5-dkms] [--qemu10] [--systemd] [--root trixie] [--deb] [--guest] [--igb N] -- COMMAND [ARG]...

runs COMMAND inside the lab host in the current directory (which must be on
the build machine's root filesystem: the lab host sees that, not the
caller's mount namespace), prints its output, and exits with its status; 124
when the lab host does not finish within --timeout seconds. The environment
passed in is PATH, every VA_* and LAB_* variable and the --env names, and
PYTHONPATH with tests/lib (the shared test fixtures, vatest) first.
Timings go to stderr as "lab-host: ..." lines. --sim-modules first builds
(or finds cached) netdevsim and vdpa_sim_net with build-sim-modules.sh,
which puts them into the lab kernel's module tree: `modprobe netdevsim`
works inside, and LAB_SIM_MODULES names the directory of their .ko files.
--mlx5-dkms first builds (or finds cached) the modules of
vdpa-allocator-mlx5-dkms for the lab kernel with build-mlx5-dkms.sh, and
names the directory of their .ko files in LAB_MLX5_DKMS and that of the
modules.* files depmod writes with them installed in LAB_MLX5_DKMS_DEPMOD
(not installed: the test inside installs them as DKMS does).

--qemu10 first builds (or finds cached) Debian 13's QEMU 10 (build-qemu10.sh)
and names its wrapper in LAB_QEMU10, for QEMU 10 inside the lab host (the
lab host itself still runs on the build machine's QEMU; --igb boots it on
QEMU 10).

--systemd boots the same root with systemd as PID 1 and AppArmor on (an
installed host: Debian's units, as the build machine has them enabled), and
runs COMMAND as the unit lab-command.service once multi-user.target is up;
its output and status come back the same way.

--root trixie boots a Debian 13 root instead of the build machine's: the
root of tests/package/build-trixie-root.sh (made or found in the test
cache; the package tier builds in the same one) is the overlay's lower
layer, and the source tree, the current directory, VA_BUILDDIR and the
test cache are bound into it from the build machine's root, read-only, at
the same paths (the command, vatest, the build's test programs, the
kernel's modules and the cached inputs). Same lab kernel (Debian's 6.12);
with --systemd, Debian 13's systemd 257 is PID 1 and AppArmor 4 confines.
Its apt has no package lists (the root's are dropped): apt install of a
local .deb resolves against what the root has installed.

--deb first builds the Debian package with contrib/build-deb.sh, or reuses
the one built from the same tree content (tests/lib/vatest/package.py, in
the test cache), and names its .deb in LAB_DEB; with --root trixie, the
package built for Debian 13 (in the same root).

--guest first builds (or finds cached) the tiny test guest of
tests/guest/build-guest.sh, for a guest nested in the lab host, and names
its kernel and initrd in LAB_GUEST_KERNEL and LAB_GUEST_INITRD.

--kvm has the lab host load kvm_amd (/dev/kvm group kvm, 0660, as
Debian's udev rule makes it) and sets LAB_DOMAIN_TYPE=kvm inside, which
vatest/guest.py's domain XML takes: QEMU's default CPU here offers AMD's
SVM, which TCG emulates, so a nested guest runs on KVM as on an
operator's host, and the test guest boots in ~10 s instead of ~63 s
under TCG inside TCG. Without it LAB_DOMAIN_TYPE=qemu. Not with a VF on
vfio-pci: a nested QEMU on KVM with one assigned printed nothing in 150 s.
With --kvm the lab host has one vCPU (boot_and_run()). No tier uses it
yet (docs/test-tiers.md says why).

--igb N (issue 15) boots it with Debian 13's QEMU 10 instead (built or
found cached by build-qemu10.sh) on q35 with an emulated Intel IOMMU
(interrupt remapping, caching mode: what vfio-pci inside needs) and N
Intel 82576 PFs with SR-IOV (-device igb, each behind a PCIe root port of
its own: its VFs take devfn 0x80 and up on the PF's bus, 0000:01:10.0 and
10.2 for the first, which a bus of its own leaves free), with
intel_iommu=on iommu=pt on the kernel command line; LAB_IGB=N inside. The
virtio-9p devices keep to guest-physical DMA (no iommu_platform, so the
IOMMU does not translate for them; iommu=pt gives them identity domains
anyway). Without --igb nothing changes.

As a module (vatest.labhost; tests/lab/lab_host.py is its command):
run(argv, timeout=..., env=...) returns a Result.

Build machine needs: qemu-system-x86_64, and what build-lab-kernel.sh needs.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from vatest import cache, package
from vatest.cache import cache_dir

# the source tree this module is in (not VA_SRCDIR: by hand, the tree whose
# tests/lab/lab_host.py was run), and the lab's scripts in it
SRCDIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HERE = os.path.join(SRCDIR, "tests", "lab")
QEMU = "/usr/bin/qemu-system-x86_64"

# --systemd: systemd.unit= on the kernel command line starts lab.target,
# which is multi-user.target plus the command. Debian's kernel has AppArmor
# built in but not first among the major LSMs; security= picks it
# (/sys/kernel/security/lsm says which came up).
SYSTEMD_CMDLINE = "apparmor=1 security=apparmor systemd.unit=lab.target"
# units the build machine has enabled that a lab host must not wait for;
# and PackageKit, which apt's DPkg::Post-Invoke hook (20packagekit) wakes
# over D-Bus at every dpkg run, to read the package lists under TCG
SYSTEMD_MASK = ("postgresql.service", "openvswitch-switch.service", "ovsdb-server.service", "ovs-vswitchd.service",
                "systemd-timesyncd.service", "e2scrub_reap.service", "packagekit.service")
SYSTEMD_UNITS = {
    "lab.target": """[Unit]
Description=Lab host: the multi-user system and the command
Requires=multi-user.target
After=multi-user.target
Wants=lab-command.service
AllowIsolate=yes
""",
    "lab-command.service": """[Unit]
Description=Lab host command (lab_host.py)
After=multi-user.target

[Service]
Type=exec
ExecStart=/bin/sh /lab/lab-init.sh command
StandardOutput=journal+console
StandardError=inherit
TimeoutStartSec=infinity
""",
}


class Result:
    def __init__(self, rc, output, console, timed_out, boot_s, guest_uptime_s, total_s, rundir):
        self.rc = rc                            # the command's status, None if it never ended
        self.output = output                    # what it printed (from the shared folder)
        self.console = console                  # the whole serial console
        self.timed_out = timed_out
        self.boot_s = boot_s                    # QEMU start to the command's start, wall clock
        self.guest_uptime_s = guest_uptime_s    # the same from the guest kernel's clock
        self.total_s = total_s
        self.rundir = rundir                    # kept only with keep=True

    def summary(self):
        f = lambda v: "?" if v is None else "%.1f s" % v
        return "boot-to-command %s (guest uptime %s), total %s, rc %s%s" % (
            f(self.boot_s), f(self.guest_uptime_s), f(self.total_s), self.rc,
            ", TIMED OUT" if self.timed_out else "")


# where a kernel report begins on the serial console (lib/bug.c, the
# x86 fault handlers, kernel/panic.c's warn_slowpath and lockdep)
OOPS_START = re.compile(r"\] (BUG: |Oops: |general protection fault|WARNING: |-+\[ cut here \]-+|"
                        r"Kernel panic - not syncing)")
# the prefix of the kernel's report in what lab-host prints
KERNEL_PREFIX = "lab-host: kernel: "
# what lab-host prints when the lab kernel panicked and it runs the command
# again (run-tests-summary.py lists the tiers that print it)
PANIC_RETRY = "lab-host: the lab kernel panicked before the command ended;"
# the register dump and code bytes, which a summary can do without
REGISTERS = re.compile(r"\] (R(?!IP)[A-Z0-9]{2}: |R1[0-5]: |R[89]: |FS: |CS: |CR2: |DR[0-7]: |Code: )")


def kernel_report(console, limit=60):
    """The first kernel report on the console (BUG, oops, WARNING, panic)
    up to limit lines, each prefixed "lab-host: kernel: ", so that a
    summary that keeps only a failure's tail still shows where it
    faulted (the RIP line and the call trace); [] when there is none."""
    lines = console.splitlines()
    for i, line in enumerate(lines):
        if OOPS_START.search(line):
            keep = [l.rstrip() for l in lines[i:] if not REGISTERS.search(l)][:limit]
            return [KERNEL_PREFIX + l for l in keep]
    return []


def apt_caches():
    """apt's binary caches of the build machine's package lists, built here
    at native speed into the test cache (lab/apt/); their paths. The build
    machine's container image keeps none (its apt.conf.d/docker-clean), so
    every apt run in the lab host would parse all the lists again, 15 to 25
    s under TCG; an operator's host keeps them from its last apt update.
    apt checks them itself against the lists and the dpkg status (sizes and
    times): it rebuilds what is stale, here as in the lab host, so the
    stamp only marks the entry's use."""
    folder = os.path.join(cache_dir(), "lab", "apt")
    paths = {"srcpkgcache": os.path.join(folder, "srcpkgcache.bin"), "pkgcache": os.path.join(folder, "pkgcache.bin")}
    with cache.lock("lab/apt"):
        os.makedirs(folder, exist_ok=True)
        r = subprocess.run(["apt-cache", "-q", "-o", "Dir::Cache::srcpkgcache=" + paths["srcpkgcache"],
                            "-o", "Dir::Cache::pkgcache=" + paths["pkgcache"], "gencaches"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=300)
        if r.returncode != 0 or not all(os.path.isfile(p) for p in paths.values()):
            print("lab-host: apt-cache gencaches failed (%d), apt in the lab host parses the lists: %s"
                  % (r.returncode, r.stderr.strip()), file=sys.stderr)
            return None
        with open(os.path.join(folder, "stamp"), "w") as f:
            f.write("apt's own caches: apt validates them against the lists and the dpkg status\n")
    return paths


def apparmor_key(kernel, root="/"):
    """The inputs of the AppArmor profiles compiled at a --systemd boot of
    ROOT: the parser's version (another root's: its binary) and
    configuration, the policy features it compiles for, every file under
    /etc/apparmor.d, and the lab kernel (whose features name the cache's
    folder). A hash of them, and their text."""
    h = hashlib.sha256()
    if root == "/":
        ver = subprocess.run(["apparmor_parser", "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout.splitlines()[:1]
    else:
        with open(os.path.join(root, "usr/sbin/apparmor_parser"), "rb") as f:
            ver = ["sha256 " + hashlib.sha256(f.read()).hexdigest()]
    text = "root=%s\nparser=%s\n" % (root, ver[0] if ver else "?")
    # the kernel's package and version, from its entry's stamp
    # (build-lab-kernel.sh): what its AppArmor features come from
    with open(os.path.join(os.path.dirname(kernel["KERNEL"]), "stamp")) as f:
        text += "".join(l for l in f if l.startswith("kernel="))
    for top in ("/etc/apparmor", "/etc/apparmor.d", "/usr/share/apparmor-features"):
        for d, dirs, files in os.walk(os.path.join(root, top.lstrip("/"))):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(d, name)
                h.update(path.encode() + b"\0")
                if os.path.islink(path):
                    h.update(b"L" + os.readlink(path).encode() + b"\0")
                    continue
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                h.update(b"%o\0%d\0" % (os.stat(path).st_mode, len(data)) + data)
    text += "profiles=%s\n" % h.hexdigest()
    return hashlib.sha256(text.encode()).hexdigest()[:16], text


def save_apparmor_cache(saved, entry, stamp):
    """Keeps the lab host's /var/cache/apparmor as lab-init.sh packed it
    (SAVED, a tar) in the test cache entry ENTRY, whose inputs are STAMP."""
    if not os.path.isfile(saved) or os.path.getsize(saved) == 0:
        return
    parent = os.path.dirname(entry)
    with cache.lock("lab/apparmor"):
        if os.path.isdir(entry):
            return
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".new.", dir=parent)
        shutil.copy(saved, os.path.join(tmp, "cache.tar"))
        with open(os.path.join(tmp, "stamp"), "w") as f:
            f.write(stamp)
        os.rename(tmp, entry)
        cache.prune(parent, 2)
    print("lab-host: AppArmor's compiled profiles kept in %s" % entry, file=sys.stderr)


def _build(script, timeout, what=None):
    """Runs a build script of tests/lab with the test cache; returns the
    KEY=value lines it printed as a dict, and prints the time taken as
    "WHAT ready" when what is given."""
    t0 = time.monotonic()
    r = subprocess.run(["sh", os.path.join(HERE, script), cache_dir()],
                       stdout=subprocess.PIPE, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d)" % (script, r.returncode))
    if what:
        print("lab-host: %s ready in %.1f s" % (what, time.monotonic() - t0), file=sys.stderr)
    return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)


def build_kernel():
    """Builds (or finds in the cache) the lab kernel; returns its paths."""
    return _build("build-lab-kernel.sh", 900)


def build_sim_modules():
    """Builds (or finds in the cache) the simulated drivers for the lab
    kernel (issue 17); returns their paths, prints the time taken."""
    return _build("build-sim-modules.sh", 1800, "simulated drivers")


def build_mlx5_dkms():
    """Builds (or finds in the cache) vdpa-allocator-mlx5-dkms's modules for
    the lab kernel (issue 29); returns build-mlx5-dkms.sh's paths, prints
    the time taken."""
    return _build("build-mlx5-dkms.sh", 2400, "mlx5 DKMS modules")


def build_deb(suite=None):
    """The package of this tree (vatest.package: built, or found in the
    test cache), for this machine's Debian or suite; returns the .deb's
    path."""
    b = package.build(suite)
    if b.rc != 0 or not b.deb:
        raise RuntimeError("contrib/build-deb.sh failed (%d):\n%s" % (b.rc, b.log[-4000:]))
    return b.deb


def build_guest():
    """The tiny test guest (tests/guest/build-guest.sh, cached in the test
    cache): {"KERNEL": path, "INITRD": path}; prints the time taken."""
    t0 = time.monotonic()
    r = subprocess.run(["nice", "-n", "10", "sh", os.path.join(SRCDIR, "tests", "guest", "build-guest.sh"), cache_dir()],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError("build-guest.sh failed (%d)" % r.returncode)
    vals = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    print("lab-host: test guest %s ready in %.1f s" % (vals["INITRD"], time.monotonic() - t0), file=sys.stderr)
    return vals


def build_qemu10():
    """Builds (or finds in the cache) Debian 13's QEMU 10 for --igb;
    returns the path of its wrapper (its caller prints the time taken)."""
    return _build("build-qemu10.sh", 900)["QEMU"]


def igb_machine(n):
    """QEMU 10's arguments for q35, the emulated IOMMU and n igb PFs."""
    # intel-iommu first: QEMU wants it created before the PCI devices
    args = ["-machine", "q35,kernel-irqchip=split",
            "-device", "intel-iommu,intremap=on,caching-mode=on"]
    for i in range(n):
        args += ["-device", "pcie-root-port,id=igbport%d,chassis=%d,slot=%d" % (i, i + 1, i + 1),
                 "-device", "igb,bus=igbport%d,mac=52:54:00:15:00:%02x" % (i, i + 1)]
    return args


def missing_tools():
    need = [QEMU, "/bin/busybox"]
    return [t for t in need if not os.access(t, os.X_OK)] + \
        [t for t in ("apt-get", "dpkg-deb", "depmod", "cpio", "zstd", "xz") if not shutil.which(t)]


def run(argv, timeout=600, sim_modules=False, deb=False, guest=False, mlx5_dkms=False, qemu10=False, root=None, **kw):
    """Boots the lab host and runs argv in it. A kernel that dies before the
    command starts (seen once in many runs: an int3 oops while it patches
    its own text, under TCG with 2 vCPUs) is no result of the command: that
    boot is tried once more. sim_modules=True: build-sim-modules.sh first;
    mlx5_dkms=True: build-mlx5-dkms.sh first, its folders in LAB_MLX5_DKMS
    and LAB_MLX5_DKMS_DEPMOD; qemu10=True: build_qemu10() first, its
    wrapper in LAB_QEMU10;
    deb=True: build_deb() first, its path in LAB_DEB; guest=True:
    build_guest() first, its files in LAB_GUEST_KERNEL and LAB_GUEST_INITRD;
    root="trixie": the Debian 13 root (package.trixie_root()), and with
    deb=True its package."""
    kw["extra_env"] = dict(kw.get("extra_env") or {})
    if sim_modules:
        kw["extra_env"]["LAB_SIM_MODULES"] = build_sim_modules()["SIM_MODULES"]
    if mlx5_dkms:
        d = build_mlx5_dkms()
        kw["extra_env"].update(LAB_MLX5_DKMS=d["MLX5_DKMS"], LAB_MLX5_DKMS_DEPMOD=d["MLX5_DKMS_DEPMOD"])
    if qemu10:
        kw["extra_env"]["LAB_QEMU10"] = build_qemu10()
    if root is not None:
        if root != "trixie":
            raise ValueError("no lab root %r: trixie is the one" % root)
        t0 = time.monotonic()
        kw["root"] = package.trixie_root()[0]
        # the test inside knows which Debian it was meant to boot
        kw["extra_env"]["LAB_ROOT"] = root
        print("lab-host: Debian 13 root %s ready in %.1f s" % (kw["root"], time.monotonic() - t0), file=sys.stderr)
    if deb:
        kw["extra_env"]["LAB_DEB"] = build_deb(root)
    if guest:
        g = build_guest()
        kw["extra_env"].update(LAB_GUEST_KERNEL=g["KERNEL"], LAB_GUEST_INITRD=g["INITRD"])
    r = boot_and_run(argv, timeout=timeout, **kw)
    if r.boot_s is None and not r.timed_out:
        tail = [l for l in r.console.splitlines() if l.strip()][-3:] or ["(nothing)"]
        print("lab-host: the lab kernel died before the command started; booting again. Console tail:\n  %s"
              % "\n  ".join(tail), file=sys.stderr)
        r = boot_and_run(argv, timeout=timeout, **kw)
    return r


def claim_cpu():
    """Raises the CPU share of this lab host when VA_LAB_AUTOGROUP_NICE asks.

    With autogroup scheduling (Debian's default) the kernel shares the CPU
    between sessions before processes, and meson starts each test in a
    session of its own: beside two other tests a lab host had a third of a
    2-core machine, under half of what it uses alone, whatever its
    processes' nice. contrib/run-tests.sh sets it for its lab stream, the
    run's longest; a negative value needs CAP_SYS_NICE, and without it the
    share stays as it was."""
    nice = os.environ.get("VA_LAB_AUTOGROUP_NICE")
    if not nice:
        return
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("%d\n" % int(nice))
    except (OSError, ValueError) as e:
        print("lab-host: VA_LAB_AUTOGROUP_NICE=%s not applied: %s" % (nice, e), file=sys.stderr)


def boot_and_run(argv, timeout=600, env=(), cwd=None, keep=False, mem="2048", smp=None, echo=False, systemd=False,
                 extra_env=None, igb=0, root=None, kvm=False):
    extra_env = dict(extra_env or {})
    # tests inside find the same cache
    extra_env.setdefault("VA_TEST_CACHE", cache_dir())
    k = build_kernel()
    qemu_bin = QEMU
    if igb:
        t0 = time.monotonic()
        qemu_bin = build_qemu10()
        print("lab-host: QEMU 10 ready in %.1f s" % (time.monotonic() - t0), file=sys.stderr)
        extra_env["LAB_IGB"] = str(igb)
    cwd = os.path.abspath(cwd or os.getcwd())
    base = os.path.join(cache_dir(), "lab", "runs")
    os.makedirs(base, exist_ok=True)
    rundir = tempfile.mkdtemp(prefix="run.", dir=base)
    os.chmod(rundir, 0o755)
    shutil.copy(os.path.join(HERE, "lab-init.sh"), os.path.join(rundir, "lab-init.sh"))
    with open(os.path.join(rundir, "cmd"), "w") as f:
        f.write("exec %s\n" % shlex.join(argv))
    names = ({"PATH"} | {n for n in os.environ if n.startswith(("VA_", "LAB_"))} | set(env)) - {"PYTHONPATH"}
    # the tests in the lab host import vatest, whether meson or a person started this
    pythonpath = [os.path.join(SRCDIR, "tests", "lib")] + os.environ.get("PYTHONPATH", "").split(os.pathsep)
    with open(os.path.join(rundir, "env"), "w") as f:
        for n in sorted(names):
            if n in os.environ:
                f.write("export %s=%s\n" % (n, shlex.quote(os.environ[n])))
        for n, v in sorted(extra_env.items()):
            f.write("export %s=%s\n" % (n, shlex.quote(v)))
        f.write("export PYTHONPATH=%s\n" % shlex.quote(os.pathsep.join(dict.fromkeys(p for p in pythonpath if p))))
        f.write("export LAB_CWD=%s\n" % shlex.quote(cwd))
    append = "console=ttyS0 quiet no_timer_check panic=-1 lab.modules=%s" % k["MODULES"]
    # the folders the lab host reads from the build machine's root: the
    # tree, the test cache, the build (one kernel command line word each)
    shared = sorted(set(os.path.realpath(p) for p in [SRCDIR, cwd, cache_dir()] + [os.environ[n] for n in ("VA_BUILDDIR",)
                                                                                   if os.environ.get(n)]))
    if any("," in p or " " in p for p in shared + [root or ""]):
        raise ValueError("lab-host: a path with a comma or a space cannot go on the kernel command line: %s" % shared)
    # lab-init.sh keeps those under /run or /var/tmp in sight under the
    # fresh tmpfs it mounts there (VA_TEST_CACHE=/var/tmp/...)
    keep = [p for p in shared if p.startswith(("/run/", "/var/tmp/"))]
    if keep:
        append += " lab.keep=" + ",".join(keep)
    # the extra packages' layer (lab-init.sh): a 9p device of its own; the
    # build machine's (udev, which its container image lacks), not another
    # root's
    extra = k["EXTRA"] if os.path.isdir(k["EXTRA"]) and not root else None
    if extra:
        append += " lab.extra=" + extra
    if root:
        # lab-init.sh binds them from the build machine's root into it
        append += " lab.root=%s lab.binds=%s" % (root, ",".join(shared))
    if systemd:
        append += " lab.systemd=1 " + SYSTEMD_CMDLINE
        units = os.path.join(rundir, "systemd")
        os.mkdir(units)
        for name, text in SYSTEMD_UNITS.items():
            with open(os.path.join(units, name), "w") as f:
                f.write(text)
        for name in SYSTEMD_MASK:
            os.symlink("/dev/null", os.path.join(units, name))
        # apt's caches (apt_caches()): lab-init.sh puts this in apt.conf.d;
        # another root has no package lists to cache
        apt = apt_caches() if not root else None
        if apt:
            with open(os.path.join(rundir, "apt.conf"), "w") as f:
                f.write("".join('Dir::Cache::%s "%s";\n' % kv for kv in sorted(apt.items())))
        # AppArmor's compiled profiles: apparmor.service compiles every
        # profile at each boot of the lab host (its root is new each time,
        # and the build machine's kernel is not the lab's), ~15 s under TCG
        # on the boot's critical path, where an installed host loads them
        # from /var/cache/apparmor. The first boot with these inputs keeps
        # them (lab.aasave: lab-init.sh copies them out before the command
        # runs, so before any test changes a profile); later boots start
        # with them (lab.aacache), and apparmor_parser still checks each
        # against its profile's files (their times).
        aa_key, aa_text = apparmor_key(k, root or "/")
        aa_entry = os.path.join(cache_dir(), "lab", "apparmor", aa_key)
        if os.path.isfile(os.path.join(aa_entry, "stamp")) and os.path.isfile(os.path.join(aa_entry, "cache.tar")):
            cache.used(aa_entry)
            append += " lab.aacache=" + os.path.join(aa_entry, "cache.tar")
        else:
            append += " lab.aasave=1"
    if igb:
        append += " intel_iommu=on iommu=pt"
    if kvm:
        append += " lab.kvm=1"
    if smp is None:
        # one vCPU with KVM: the lab kernel patches KVM's static keys as
        # nested guests start and stop, and with two a vCPU under TCG ran
        # a patch's int3 after it was gone (an int3 oops in
        # kvm_arch_vcpu_ioctl_run, the lab kernel's panic, in one of the
        # first two runs of lab-installed)
        smp = "1" if kvm else "2"

    qemu = [qemu_bin, "-accel", "tcg", "-smp", smp, "-m", mem, "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", "stdio", "-monitor", "none",
            "-kernel", k["KERNEL"], "-initrd", k["INITRD"],
            "-append", append,
            # multidevs=remap: / spans several host filesystems
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", "local,path=%s,mount_tag=lab,security_model=none,multidevs=remap" % rundir]
    if extra:
        qemu += ["-virtfs", "local,path=%s,mount_tag=extra,security_model=none,readonly=on,multidevs=remap" % extra]
    if igb:
        qemu[1:1] = igb_machine(igb)
    console = []
    marks = {}
    claim_cpu()
    t0 = time.monotonic()
    p = subprocess.Popen(qemu, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)

    def reader():
        for raw in p.stdout:
            line = raw.decode(errors="replace")
            console.append(line)
            if echo:
                sys.stderr.write(line)
            # under systemd the line comes through journald, behind a prefix
            if "LAB-READY uptime=" in line and "ready" not in marks:
                marks["ready"] = time.monotonic() - t0
                try:
                    marks["uptime"] = float(line.split("uptime=")[1].split()[0])
                except (IndexError, ValueError):
                    pass
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    timed_out = False
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        p.kill()
        p.wait()
    except BaseException:
        p.kill()
        p.wait()
        raise
    th.join(5)
    p.stdout.close()
    total = time.monotonic() - t0
    rc = None
    try:
        with open(os.path.join(rundir, "rc")) as f:
            rc = int(f.read().strip())
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(rundir, "output"), errors="replace") as f:
            output = f.read()
    except OSError:
        output = ""
    if systemd and " lab.aasave=1" in append:
        save_apparmor_cache(os.path.join(rundir, "apparmor-cache.tar"), aa_entry, aa_text)
    if keep:
        with open(os.path.join(rundir, "console"), "w") as f:
            f.write("".join(console))
    else:
        shutil.rmtree(rundir, ignore_errors=True)
    return Result(rc, output, "".join(console), timed_out, marks.get("ready"), marks.get("uptime"),
                  total, rundir if keep else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--env", action="append", default=[], metavar="NAME")
    ap.add_argument("--keep", action="store_true", help="keep the run's shared folder")
    ap.add_argument("--console", action="store_true", help="echo the serial console to stderr")
    ap.add_argument("--mem", default="2048")
    ap.add_argument("--sim-modules", action="store_true",
                    help="build netdevsim and vdpa_sim_net for the lab kernel first (build-sim-modules.sh)")
    ap.add_argument("--mlx5-dkms", action="store_true",
                    help="build vdpa-allocator-mlx5-dkms's modules for the lab kernel first (build-mlx5-dkms.sh)")
    ap.add_argument("--qemu10", action="store_true",
                    help="build (or find cached) Debian 13's QEMU 10 first; its wrapper in LAB_QEMU10")
    ap.add_argument("--systemd", action="store_true", help="boot with systemd as PID 1 and AppArmor on")
    ap.add_argument("--root", choices=("trixie",),
                    help="boot Debian 13's root (build-trixie-root.sh) instead of the build machine's")
    ap.add_argument("--deb", action="store_true",
                    help="build (or find cached) the Debian package of this tree first; its path in LAB_DEB")
    ap.add_argument("--guest", action="store_true",
                    help="build (or find cached) the tiny test guest first; its files in LAB_GUEST_KERNEL/INITRD")
    ap.add_argument("--kvm", action="store_true",
                    help="load kvm_amd in the lab host (SVM, which TCG emulates): nested guests run on KVM "
                    "(LAB_DOMAIN_TYPE=kvm)")
    ap.add_argument("--igb", type=int, default=0, metavar="N",
                    help="QEMU 10 (build-qemu10.sh) on q35 with an emulated IOMMU and N igb SR-IOV PFs")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    miss = missing_tools()
    if miss:
        sys.exit("lab-host: missing %s" % " ".join(miss))
    for boot in (1, 2):
        r = run(cmd, timeout=a.timeout, env=a.env, keep=a.keep, mem=a.mem, echo=a.console, sim_modules=a.sim_modules,
                mlx5_dkms=a.mlx5_dkms, qemu10=a.qemu10, systemd=a.systemd, deb=a.deb, guest=a.guest, igb=a.igb,
                root=a.root, kvm=a.kvm)
        if not a.console:
            sys.stdout.write(r.output)
        sys.stdout.flush()
        print("lab-host: %s" % r.summary(), file=sys.stderr)
        if r.rundir:
            print("lab-host: shared folder kept in %s" % r.rundir, file=sys.stderr)
        if r.rc is not None and not r.timed_out:
            sys.exit(r.rc)
        if r.timed_out:
            print("lab-host: did not finish within %d s; console tail:" % a.timeout, file=sys.stderr)
        else:
            print("lab-host: the command left no status; console tail:", file=sys.stderr)
        print(r.console[-3000:], file=sys.stderr)
        print("\n".join(kernel_report(r.console)), file=sys.stderr)
        # Debian's kernel under TCG panicked under the command (stop 39's
        # CI: once in lab-daemon, in interrupt context): the command runs
        # once more on a fresh boot, and the run's summary names the tier
        if r.timed_out or boot == 2 or "Kernel panic - not syncing" not in r.console:
            break
        print("%s booting the lab host again, once" % PANIC_RETRY, file=sys.stderr)
    sys.exit(124 if r.timed_out else 125)

