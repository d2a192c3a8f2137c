# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every option `--help` prints is in the man page, and the man page names
no option `--help` does not: vdpactl and each of its (sub)commands,
vdpa-allocatord and the hook. Each command's options sit in the man page
under a comment `.\\" options: COMMAND`, in the .RS block after it."""

import os
import re
import subprocess
import unittest

from vatest.paths import DAEMON, HOOK, SRCDIR, VDPACTL

DOCS = os.path.join(SRCDIR, "docs")
OPT = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)")
UNIVERSAL = {"-h", "--help"}  # every GOption command has them; the man page says so once


def unroff(line):
    return re.sub(r"\\f[BIRP]", "", line.replace("\\-", "-")).replace('"', " ")


def man_blocks(page):
    """{command: set of options} from the page's `.\\" options:` blocks."""
    with open(os.path.join(DOCS, page)) as f:
        lines = f.read().splitlines()
    blocks = {}
    for i, line in enumerate(lines):
        m = re.match(r'^\.\\" options: (.+)$', line)
        if not m:
            continue
        opts = set()
        j = i + 1
        while j < len(lines) and lines[j].startswith('.\\" options:'):
            j += 1  # several commands sharing one block
        if j < len(lines) and lines[j].startswith(".RS"):
            depth, j = 1, j + 1
            while depth:
                if lines[j].startswith(".RS"):
                    depth += 1
                elif lines[j].startswith(".RE"):
                    depth -= 1
                elif lines[j - 1] == ".TP" and depth == 1:
                    opts |= set(OPT.findall(unroff(lines[j])))  # the label of an item, never prose
                j += 1
        blocks[m.group(1)] = opts
    return blocks


def help_options(argv):
    """The options `argv --help` names: GOption's listing, or for a
    dispatcher its usage line's options before the subcommand."""
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (argv, r.stderr)
    if "Help Options:" in r.stdout:
        opts = set()
        for line in r.stdout.splitlines():
            m = re.match(r"^  (?:(-\w), )?(--[\w-]+)(?:=\S+)?\s", line)
            if m:
                opts |= {o for o in m.groups() if o}
        return opts - UNIVERSAL - {"--help-all"}
    usage = re.search(r"^Usage: (.*)$", r.stdout, re.M).group(1).split()
    words = len(argv)  # "vdpactl domain" is two words
    opts = set()
    for tok in usage[words:]:
        if not tok.startswith("[-"):
            break
        opts |= set(OPT.findall(tok))
    return opts


def vdpactl_commands():
    out = subprocess.run([VDPACTL, "--help"], capture_output=True, text=True, check=True).stdout
    top = re.findall(r"^  ([a-z]+) ", out, re.M)
    subs = {"pool": ["list", "show", "drain", "undrain"], "lease": ["list"], "dev": ["list"], "network": ["list"],
            "domain": ["show", "accelerate", "portable", "attach", "detach", "migrate", "save", "managedsave", "restore"]}
    cmds = [[]]
    for c in top:
        if c in ("pool", "domain"):
            cmds.append([c])  # a dispatcher with a usage line of its own
        cmds += [[c, s] for s in subs[c]] if c in subs else [[c]]
    return cmds


class ManOptionsTest(unittest.TestCase):
    def compare(self, page, name, argv):
        blocks = man_blocks(page)
        self.assertIn(name, blocks, "%s has no options block for '%s'" % (page, name))
        documented = blocks[name] if name == "vdpactl" else blocks[name] - UNIVERSAL
        self.assertEqual(help_options(argv), documented, "%s: --help (first) and %s (second) differ" % (name, page))

    def test_vdpactl(self):
        cmds = vdpactl_commands()
        self.assertIn(["domain", "show"], cmds)
        for words in cmds:
            with self.subTest(cmd=" ".join(words)):
                self.compare("vdpactl.8", " ".join(["vdpactl"] + words), [VDPACTL] + words)
        # and no block names a command that is not there
        named = {" ".join(["vdpactl"] + w) for w in cmds}
        self.assertEqual(set(man_blocks("vdpactl.8")) - named, set())

    def test_top_level_help_forms(self):
        # -h and help as --help does, and --version as version
        out = subprocess.run([VDPACTL, "--help"], capture_output=True, text=True).stdout
        for alias in ("-h", "help"):
            self.assertEqual(subprocess.run([VDPACTL, alias], capture_output=True, text=True).stdout, out)
        self.assertEqual(subprocess.run([VDPACTL, "--version"], capture_output=True, text=True).stdout,
                         subprocess.run([VDPACTL, "version"], capture_output=True, text=True).stdout)

    def test_daemon(self):
        self.compare("vdpa-allocatord.8", "vdpa-allocatord", [DAEMON])
        self.assertIn("-c", help_options([DAEMON]))

    def test_hook(self):
        # the hook has no options: every argument is libvirt's, and
        # "--help" is a domain name to it, with nothing to do
        self.assertEqual(man_blocks("vdpa-allocator-hook.8"), {"vdpa-allocator-hook": set()})
        r = subprocess.run([HOOK, "--help", "prepare", "begin", "-"], input="<domain/>", capture_output=True, text=True,
                           timeout=30)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))

    def test_each_page_has_exit_status_and_files(self):
        for page in ("vdpactl.8", "vdpa-allocatord.8", "vdpa-allocator-hook.8"):
            with open(os.path.join(DOCS, page)) as f:
                text = f.read()
            for section in ("EXIT STATUS", "FILES", "ENVIRONMENT"):
                self.assertIn("\n.SH %s\n" % section, text, page)

    def test_the_comparison_can_fail(self):
        # a block missing an option is caught
        blocks = man_blocks("vdpactl.8")
        self.assertIn("--domain", blocks["vdpactl allocate"])
        self.assertNotEqual(help_options([VDPACTL, "allocate"]), blocks["vdpactl allocate"] - {"--domain"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
