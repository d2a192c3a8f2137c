# SPDX-License-Identifier: LGPL-2.1-or-later
"""The test cache: what the tiers build from downloads (the lab kernel, the
simulated drivers, Debian 13's QEMU, the test guest, the package), kept
between runs and clones of the tree.

Where: VA_TEST_CACHE, else /var/cache/vdpa-allocator-tests where it can be
written (a fresh clone on the same machine finds what the last run built),
else tests/cache in the tree (ignored by git).

An entry is a folder that holds a file named `stamp`: the inputs it was
built from (package versions, the building script's own hash). Whoever
builds one compares its stamp with the inputs of now and rebuilds on any
difference, so nothing is trusted without its key. Each builder takes the
entry's lock (`.lock-NAME` in the cache, NAME the entry's path with `_`
for `/`; flock(2); build-*.sh through tests/lib/test-cache.sh) for as long
as it reads or builds it, so two runs at once wait for each other instead
of building over each other, and evict passes over an entry in use. A lock
file goes with its entry (and so does one whose entry is gone), so a
locker checks, once it holds the lock, that the file it holds is still the
one at that path, and starts again if not. The whole
is bounded (VA_TEST_CACHE_MAX_MB, default 16384): `evict` removes the
entries used longest ago (a use touches the stamp) until it fits.

    python3 tests/lib/vatest/cache.py dir|du|evict|clear
"""

import contextlib
import fcntl
import os
import shutil
import sys
import time

SYSTEM_DIR = "/var/cache/vdpa-allocator-tests"
DEFAULT_MAX_MB = 16384
_SRCDIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def cache_dir():
    """The cache folder, made if missing."""
    env = os.environ.get("VA_TEST_CACHE")
    if env:
        path = os.path.abspath(env)
    elif _writable(SYSTEM_DIR):
        path = SYSTEM_DIR
    else:
        path = os.path.join(os.environ.get("VA_SRCDIR") or _SRCDIR, "tests", "cache")
    os.makedirs(path, exist_ok=True)
    return path


def _lock_path(root, entry):
    return os.path.join(root, ".lock-" + entry.strip("/").replace("/", "_"))


def _held_is_current(f, path):
    """Whether the lock file F, flocked, is still the file at PATH: a
    remover unlinks a lock file while holding it, and whoever opened it
    before that holds a lock nobody else can see."""
    try:
        return os.path.samestat(os.fstat(f.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def _try_lock(path):
    """The lock file PATH opened and flocked, or None while a run holds it."""
    while True:
        f = open(path, "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return None
        if _held_is_current(f, path):
            return f
        f.close()


@contextlib.contextmanager
def lock(entry, timeout=3600):
    """Holds the lock of the entry ENTRY (a path in the cache: the same
    file test-cache.sh locks)."""
    path = _lock_path(cache_dir(), entry)
    deadline = time.monotonic() + timeout
    said = False
    while (f := _try_lock(path)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("test cache: %s stayed locked for %d s" % (path, timeout))
        if not said:
            print("test cache: waiting for %s (another run builds it)" % path, file=sys.stderr)
            said = True
        time.sleep(1)
    with f:
        yield


def entries(root=None):
    """(folder, last use, bytes) for every entry, oldest use first."""
    root = root or cache_dir()
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        if "stamp" in filenames and dirpath != root:
            size = 0
            for d, _, files in os.walk(dirpath):
                for name in files:
                    try:
                        size += os.lstat(os.path.join(d, name)).st_size
                    except OSError:
                        pass
            out.append((dirpath, os.stat(os.path.join(dirpath, "stamp")).st_mtime, size))
            dirnames[:] = []  # an entry's own folders are its
    return sorted(out, key=lambda e: e[1])


def used(folder):
    """Marks an entry as used now (its stamp's time), for evict()."""
    with contextlib.suppress(OSError):
        os.utime(os.path.join(folder, "stamp"))


def evict(max_bytes=None):
    """Removes the entries used longest ago until the rest fit in
    max_bytes, and the lock files of entries gone; returns the folders
    removed."""
    if max_bytes is None:
        max_bytes = int(os.environ.get("VA_TEST_CACHE_MAX_MB", DEFAULT_MAX_MB)) * 1024 * 1024
    ents = entries()
    total = sum(e[2] for e in ents)
    gone = []
    for folder, _, size in ents:
        if total <= max_bytes:
            break
        if _remove_unless_locked(folder):
            total -= size
            gone.append(folder)
    _sweep_locks([e[0] for e in ents if e[0] not in gone])
    return gone


def prune(folder, keep):
    """Removes the entries below FOLDER used longest ago, beyond KEEP."""
    ents = entries(folder)
    for f, _, _ in ents[:max(0, len(ents) - keep)]:
        _remove_unless_locked(f)


def _remove_unless_locked(folder):
    """Removes the entry FOLDER and its lock file unless a run holds its
    lock now."""
    root = cache_dir()
    path = _lock_path(root, os.path.relpath(folder, root))
    f = _try_lock(path)
    if f is None:
        return False
    with f:
        shutil.rmtree(folder, ignore_errors=True)
        os.unlink(path)
    return True


def _sweep_locks(folders):
    """Removes the lock files no run holds but those of the entries in
    FOLDERS (builders that failed, entries removed before their locks went
    with them)."""
    root = cache_dir()
    kept = {_lock_path(root, os.path.relpath(f, root)) for f in folders}
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not name.startswith(".lock-") or path in kept:
            continue
        with contextlib.suppress(OSError):
            f = _try_lock(path)
            if f is not None:
                with f:
                    os.unlink(path)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "dir"
    if cmd == "dir":
        print(cache_dir())
    elif cmd == "du":
        ents = entries()
        for folder, t, size in ents:
            print("%8.1f MiB  %s  %s" % (size / 1048576, time.strftime("%Y-%m-%d %H:%M", time.localtime(t)),
                                        os.path.relpath(folder, cache_dir())))
        print("%8.1f MiB  in %s" % (sum(e[2] for e in ents) / 1048576, cache_dir()))
    elif cmd == "evict":
        for folder in evict():
            print("test cache: evicted %s" % folder)
    elif cmd == "clear":
        # not while a test run uses it
        root = cache_dir()
        for name in os.listdir(root):
            if not name.startswith(".lock-"):
                p = os.path.join(root, name)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        print("test cache: cleared %s" % root)
    else:
        print("usage: cache.py dir|du|evict|clear", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
