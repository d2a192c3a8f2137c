# SPDX-License-Identifier: LGPL-2.1-or-later
"""Where the programs under test are. tests/meson.build sets each variable
from the executable itself; without them (a test run by hand) the paths are
those of the build directory SRCDIR/build, or VA_BUILDDIR."""

import os

from vatest.cache import cache_dir


def _env(name, default):
    return os.path.abspath(os.environ.get(name) or default)


SRCDIR = _env("VA_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
BUILDDIR = _env("VA_BUILDDIR", os.path.join(SRCDIR, "build"))
# the cache of built guests, kernels and packages (vatest/cache.py)
TEST_CACHE = cache_dir()
# meson's sysconfdir: the hook reads its compiled-in configuration below it
SYSCONFDIR = _env("VA_SYSCONFDIR", "/usr/local/etc")

DAEMON = _env("VA_DAEMON", os.path.join(BUILDDIR, "vdpa-allocator", "daemon", "vdpa-allocatord"))
DOMAINS_HELPER = _env("VA_DOMAINS_HELPER",
                      os.path.join(BUILDDIR, "vdpa-allocator", "daemon", "vdpa-allocator-libvirt-domains"))
NETWORK_HELPER = _env("VA_NETWORK_HELPER",
                      os.path.join(BUILDDIR, "vdpa-allocator", "daemon", "vdpa-allocator-libvirt-network"))
SWAP_HELPER = _env("VA_SWAP_HELPER",
                   os.path.join(BUILDDIR, "vdpa-allocator", "daemon", "vdpa-allocator-libvirt-swap"))
VDPACTL = _env("VDPACTL", os.path.join(BUILDDIR, "vdpa-allocator", "ctl", "vdpactl"))
HOOK = _env("VA_HOOK", os.path.join(BUILDDIR, "hooks", "vdpa-allocator-hook"))
# the hook runs the helper it finds beside its own binary
HOOK_HELPER = _env("VA_HOOK_HELPER", os.path.join(BUILDDIR, "hooks", "vdpa-allocator-hook-helper"))
VDUSE_NET = _env("VA_VDUSE_NET", os.path.join(BUILDDIR, "tests", "lab", "vduse-net"))
BENCH_LOAD = _env("VA_BENCH_LOAD", os.path.join(BUILDDIR, "tests", "bench", "bench-load"))
