#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's bus contract is spelled once on each end (issue 23).

- Each method of the introspection XML, as a C string literal outside
  tests/, is in the daemon's adapter and the client library only.
- Allocate's option keys are spelled in the codec's table only: the
  adapter and the client spell none of them, and no file builds or reads
  a key that is only an option (not also a lease field) as an a{sv} entry.

Reads the files git tracks (VA_SRCDIR); outside a git checkout, skips."""

import os
import re
import subprocess
import sys

SRC = os.environ.get("VA_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INTERFACE = "vdpa-allocator/daemon/dbus/org.vdpa_allocator.Allocator1.xml"
ADAPTER = "vdpa-allocator/daemon/va-daemon-dbus.c"
CLIENT = "vdpa-allocator/common/va-client.c"
CODEC = "vdpa-allocator/common/va-alloc-request.c"
LEASE = "vdpa-allocator/common/va-lease.c"


def read(path):
    with open(os.path.join(SRC, path), encoding="utf-8") as f:
        return f.read()


def main():
    try:
        files = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=SRC, check=True, capture_output=True,
                               text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        print("not a git checkout: no list of files to check")
        return 77
    files = [f for f in files if not f.startswith("tests/")]
    methods = re.findall(r'<method name="(\w+)"', read(INTERFACE))
    options = re.findall(r'\{ "(\w+)", "\w+", G_STRUCT_OFFSET \(VaAllocRequest,', read(CODEC))
    lease_keys = re.findall(r'\{ "(\w+)", \'\w\', G_STRUCT_OFFSET \(VaLease,', read(LEASE))
    if len(methods) < 9 or len(options) < 8 or len(lease_keys) < 13:
        print("cannot read the methods (%d), the codec's options (%d) or the lease's keys (%d)"
              % (len(methods), len(options), len(lease_keys)))
        return 1
    bad = []
    texts = {f: read(f) for f in files}
    for m in methods:
        for f, text in texts.items():
            if f not in (ADAPTER, CLIENT) and '"%s"' % m in text:
                bad.append('%s spells the method "%s": call it through va-client.h' % (f, m))
    for k in options:
        for f in (ADAPTER, CLIENT):
            if '"%s"' % k in texts[f]:
                bad.append('%s spells the option "%s": use the codec (va-alloc-request.h)' % (f, k))
        if k in lease_keys:
            continue
        entry = re.compile(r'("\{sv\}",\s*"%s")|((lookup|lookup_value|dict_insert|dict_insert_value)\s*\([^;]*"%s")'
                           % (k, k))
        for f, text in texts.items():
            if f != CODEC and entry.search(text):
                bad.append('%s builds or reads the option "%s" by hand: use the codec' % (f, k))
        if texts[CODEC].count('"%s"' % k) != 1:
            bad.append('%s spells the option "%s" more than once' % (CODEC, k))
    for line in bad:
        print(line)
    if bad:
        return 1
    print("%d methods in %s and %s only; %d options in %s's table only"
          % (len(methods), ADAPTER, CLIENT, len(options), CODEC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
