# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every JSON schema in docs/schemas is installed, to the directory
vdpactl(8) names: a schema added there and forgotten in docs/meson.build
fails here. Reads meson's own install plan (meson-info/intro-installed.json,
what `meson introspect --installed` prints), not a list of ours."""

import glob
import json
import os
import sys
import unittest

SRC = os.environ["VA_SRCDIR"]
BUILD = os.environ["VA_BUILDDIR"]
DEST = sys.argv.pop(1)  # datadir/vdpa-allocator/schemas


class SchemasInstalled(unittest.TestCase):
    def test_every_schema_is_installed(self):
        schemas = sorted(glob.glob(os.path.join(SRC, "docs", "schemas", "*.json")))
        # never vacuous: the glob finds the schemas vdpactl -j is checked against
        self.assertIn(os.path.join(SRC, "docs", "schemas", "status.schema.json"), schemas)
        with open(os.path.join(BUILD, "meson-info", "intro-installed.json")) as f:
            plan = {os.path.realpath(src): dest for src, dest in json.load(f).items()}
        missing = [os.path.basename(s) for s in schemas
                   if plan.get(os.path.realpath(s)) != os.path.join(DEST, os.path.basename(s))]
        self.assertEqual(missing, [], "not installed to %s (docs/meson.build)" % DEST)
        # and nothing installed there that docs/schemas lacks, beside the
        # metadata's RELAX NG schema
        there = sorted(os.path.basename(d) for d in plan.values() if os.path.dirname(d) == DEST)
        self.assertEqual(there, sorted([os.path.basename(s) for s in schemas] + ["vdpa-metadata.rng"]))

    def test_not_documentation(self):
        # /usr/share/doc is documentation, which minimal images and
        # containers drop (dpkg path-exclude): a script's schemas are data
        self.assertNotIn(os.sep + "doc" + os.sep, DEST)


if __name__ == "__main__":
    unittest.main(verbosity=2)
