# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Debian package of this tree, as contrib/build-deb.sh builds it,
kept in the test cache (vatest.cache) under deb/KEY/ with its build log:
the package tier reads the log's lintian verdict and the package, the
installed-host lab tiers install it; one build serves both, and a later run
of the same tree none.

build("trixie") is the same for Debian 13: build-deb.sh runs inside the
trixie root of tests/package/build-trixie-root.sh (itself a cache entry,
keyed by its package list and script), through tests/package/in-root.sh,
on a copy of the tree; kept under deb-trixie/KEY/, KEY the tree's and the
root's stamp.

KEY is a hash of what build-deb.sh copies (the tree's tracked and
untracked, not ignored files, their paths, exec bits and contents, but
tests/, which the package's -Dtests=false build never reads) and of the
versions of the Debian packages it builds with. A failed build is never
kept."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

from vatest import cache
from vatest.paths import SRCDIR

# what the build runs with: a new version of one of these is a new package
BUILD_PACKAGES = ("debhelper", "dh-dkms", "dpkg-dev", "lintian", "gcc-12", "meson", "libglib2.0-dev", "libvirt-dev",
                  "libxml2-dev", "libsqlite3-dev", "libsystemd0")
# the trees kept: switching between a few branches rebuilds nothing
KEEP = 4


class Build:
    def __init__(self, rc, log, deb, cached):
        self.rc = rc          # build-deb.sh's status (lintian included)
        self.log = log        # what it printed
        self.deb = deb        # the .deb's path, None when there is not one
        self.cached = cached  # found in the cache, not built now


def _tree_hash():
    names = subprocess.run(["git", "-C", SRCDIR, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, stdout=subprocess.PIPE).stdout.split(b"\0")
    h = hashlib.sha256()
    for name in sorted(set(n for n in names if n and not n.startswith(b"tests/"))):
        path = os.path.join(SRCDIR.encode(), name)
        if os.path.islink(path):
            h.update(b"L" + name + b"\0" + os.readlink(path) + b"\0")
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            x = b"X" if os.access(path, os.X_OK) else b"F"
            h.update(x + name + b"\0" + str(len(data)).encode() + b"\0" + data)
        # a tracked file deleted from the work tree: build-deb.sh skips it too
    return h


def tree_key():
    h = _tree_hash()
    versions = subprocess.run(["dpkg-query", "-W", "-f", "${Package}=${Version}\n"] + list(BUILD_PACKAGES),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    h.update(b"\0packages\0" + versions.encode())
    return h.hexdigest()[:16]


def _the_deb(folder):
    debs = [d for d in os.listdir(folder) if d.startswith("vdpa-allocator_") and d.endswith(".deb")]
    return os.path.join(folder, debs[0]) if len(debs) == 1 else None


def trixie_root():
    """The Debian 13 build root (tests/package/build-trixie-root.sh), made
    now or found in the cache; (path, its stamp's text)."""
    script = os.path.join(SRCDIR, "tests", "package", "build-trixie-root.sh")
    r = subprocess.run(["nice", "-n", "10", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       text=True, timeout=3600)
    root = [l[5:] for l in r.stdout.splitlines() if l.startswith("ROOT=")]
    if r.returncode != 0 or len(root) != 1:
        raise RuntimeError("tests/package/build-trixie-root.sh failed (%d)" % r.returncode)
    folder = os.path.dirname(root[0])
    with open(os.path.join(folder, "stamp")) as f, open(os.path.join(folder, "packages")) as g:
        return root[0], f.read() + g.read()


def copy_tree(dest):
    """The files build-deb.sh copies (tracked and untracked, not ignored),
    into dest."""
    names = subprocess.run(["git", "-C", SRCDIR, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, stdout=subprocess.PIPE).stdout
    os.makedirs(dest)
    tar = subprocess.Popen(["tar", "-C", SRCDIR, "--null", "--no-recursion", "--ignore-failed-read", "-T", "-",
                            "-cf", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    untar = subprocess.Popen(["tar", "-xf", "-", "-C", dest], stdin=tar.stdout)
    tar.stdout.close()
    tar.stdin.write(names)
    tar.stdin.close()
    if tar.wait() != 0 or untar.wait() != 0:
        raise RuntimeError("copying the tree to %s failed" % dest)


def _build_cmd(suite, tmp):
    """The command that builds into tmp, and the cache key: on the build
    machine (bookworm), or in the root of suite."""
    if suite is None:
        return [os.path.join(SRCDIR, "contrib", "build-deb.sh"), tmp], tree_key()
    assert suite == "trixie"
    root, stamp = trixie_root()
    h = _tree_hash()
    h.update(b"\0root\0" + stamp.encode())
    key = h.hexdigest()[:16]
    # the copy has no .git: build-deb.sh inside takes all of it
    script = "cd /build/src && ./contrib/build-deb.sh /build/out && rm -rf /build/src"
    return ([os.path.join(SRCDIR, "tests", "package", "in-root.sh"), root, tmp, "sh", "-c", script], key)


def build(suite=None):
    """The package of this tree: found in the cache, else built there by
    contrib/build-deb.sh (the oldest trees beyond KEEP removed); on this
    machine's Debian, or in the root of suite ("trixie"). Prints the time
    taken."""
    t0 = time.monotonic()
    name = "deb" if suite is None else "deb-" + suite
    base = os.path.join(cache.cache_dir(), name)
    os.makedirs(base, exist_ok=True)
    # the root (cached or made) before the entry's lock: it has its own
    tmp = tempfile.mkdtemp(prefix="tmp.", dir=base)
    try:
        cmd, key = _build_cmd(suite, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    out = os.path.join(base, key)
    with cache.lock(name + "/" + key):
        if os.path.isfile(os.path.join(out, "stamp")) and _the_deb(out):
            shutil.rmtree(tmp, ignore_errors=True)
            cache.used(out)
            with open(os.path.join(out, "build-deb.log"), errors="replace") as f:
                log = f.read()
            print("package: %s cached (tree %s), %.1f s" % (_the_deb(out), key, time.monotonic() - t0),
                  file=sys.stderr)
            return Build(0, log, _the_deb(out), True)
        if suite is not None:
            copy_tree(os.path.join(tmp, "src"))
            os.makedirs(os.path.join(tmp, "out"))
        log_path = os.path.join(tmp, "build-deb.log")
        with open(log_path, "w") as f:
            r = subprocess.run(["nice", "-n", "10"] + cmd,
                               stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, timeout=1800)
        if suite is not None:
            # the entry holds what build-deb.sh put out, as on this machine
            shutil.rmtree(os.path.join(tmp, "src"), ignore_errors=True)
            for n in os.listdir(os.path.join(tmp, "out")):
                os.rename(os.path.join(tmp, "out", n), os.path.join(tmp, n))
            os.rmdir(os.path.join(tmp, "out"))
        with open(log_path, errors="replace") as f:
            log = f.read()
        if r.returncode != 0:
            keep = tempfile.mkdtemp(prefix="failed-deb.")
            deb = _the_deb(tmp)
            if deb:
                shutil.copy(deb, keep)
            shutil.rmtree(tmp, ignore_errors=True)
            print("package: contrib/build-deb.sh failed (%d) in %.1f s" % (r.returncode, time.monotonic() - t0),
                  file=sys.stderr)
            return Build(r.returncode, log, _the_deb(keep) if deb else None, False)
        with open(os.path.join(tmp, "stamp"), "w") as f:
            f.write(key + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.rename(tmp, out)
    cache.prune(base, KEEP)
    print("package: %s built (tree %s) in %.1f s" % (_the_deb(out), key, time.monotonic() - t0), file=sys.stderr)
    return Build(0, log, _the_deb(out), False)
