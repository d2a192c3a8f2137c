#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""No Python file under tests/ imports another test file: what two tiers
share lives in tests/lib/vatest. A test file is any module under
tests/<tier>/ (not tests/lib): one named test_* or bench_*, or one that
lives beside the importer in its folder. Prints each import found and
exits 1.

    check_test_imports.py [TESTS_DIR]"""

import ast
import os
import sys

# imports let through, each with its excuse ((file, module): why); an
# entry that no longer matches is reported too. None today: keep it so.
KNOWN = {}


def python_files(tests):
    for root, dirs, files in os.walk(tests):
        rel = os.path.relpath(root, tests)
        if rel == ".":
            dirs[:] = sorted(d for d in dirs if d not in ("lib", "cache"))
        else:
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(root, f)


def imported(path):
    """(line, top-level module name) of each absolute import in path."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def main():
    tests = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__)))
    found = []
    seen_known = set()
    for path in python_files(tests):
        rel = os.path.relpath(path, tests)
        beside = {f[:-3] for f in os.listdir(os.path.dirname(path)) if f.endswith(".py")}
        for line, name in imported(path):
            if not (name.startswith(("test_", "bench_")) or name in beside):
                continue
            if (rel, name) in KNOWN:
                seen_known.add((rel, name))
                continue
            found.append("tests/%s:%d: imports %s, a test file: move what it shares into tests/lib/vatest"
                         % (rel, line, name))
    for rel, name in sorted(set(KNOWN) - seen_known):
        found.append("tests/%s: no longer imports %s: remove its entry from KNOWN in %s"
                     % (rel, name, os.path.basename(__file__)))
    for f in found:
        print(f)
    if not found:
        print("no test file imports another (%d known: %s)"
              % (len(KNOWN), ", ".join(sorted("tests/" + r for r, _ in KNOWN))))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
