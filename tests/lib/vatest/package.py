# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Debian package of this tree, as contrib/build-deb.sh builds it,
kept in the test cache (vatest.cache) under deb/KEY/ with its build log:
the package tier reads the log's lintian verdict and the package, the
installed-host lab tiers install it; one build serves both, and a later run
of the same tree none.

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


def tree_key():
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
    versions = subprocess.run(["dpkg-query", "-W", "-f", "${Package}=${Version}\n"] + list(BUILD_PACKAGES),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    h.update(b"\0packages\0" + versions.encode())
    return h.hexdigest()[:16]


def _the_deb(folder):
    debs = [d for d in os.listdir(folder) if d.startswith("vdpa-allocator_") and d.endswith(".deb")]
    return os.path.join(folder, debs[0]) if len(debs) == 1 else None


def build():
    """The package of this tree: found in the cache, else built there by
    contrib/build-deb.sh (the oldest trees beyond KEEP removed). Prints the
    time taken."""
    t0 = time.monotonic()
    key = tree_key()
    base = os.path.join(cache.cache_dir(), "deb")
    out = os.path.join(base, key)
    with cache.lock("deb/" + key):
        if os.path.isfile(os.path.join(out, "stamp")) and _the_deb(out):
            cache.used(out)
            with open(os.path.join(out, "build-deb.log"), errors="replace") as f:
                log = f.read()
            print("package: %s cached (tree %s), %.1f s" % (_the_deb(out), key, time.monotonic() - t0),
                  file=sys.stderr)
            return Build(0, log, _the_deb(out), True)
        os.makedirs(base, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="tmp.", dir=base)
        log_path = os.path.join(tmp, "build-deb.log")
        with open(log_path, "w") as f:
            r = subprocess.run(["nice", "-n", "10", os.path.join(SRCDIR, "contrib", "build-deb.sh"), tmp],
                               stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, timeout=1800)
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
