# SPDX-License-Identifier: LGPL-2.1-or-later
"""contrib/vdpactl.bash-completion in a real bash with Debian's
bash-completion: COMP_WORDS drives _vdpactl as a Tab would. Every
command and option --help names is offered, and pool, network, domain and
UUID names come from vdpactl's JSON with the daemon on the simulated NIC."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from vatest.bus import Bus, Daemon, vdpactl
from vatest.paths import SRCDIR, VDPACTL

COMPLETION = os.path.join(SRCDIR, "contrib", "vdpactl.bash-completion")
UUID = "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"

# COMP_WORDS and the rest as bash sets them, then _vdpactl by the name
# `complete -p` gives
DRIVER = r'''
set -u
. /usr/share/bash-completion/bash_completion
. "$COMPLETION"
spec=$(complete -p vdpactl)
fn=${spec#*-F }; fn=${fn%% *}
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
"$fn" vdpactl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''


def complete(*words, env=None, cwd=None):
    # libvirt's domains come from virsh at vdpactl's URI: none here unless
    # a case gives --connect (never this host's libvirtd)
    e = dict(os.environ, COMPLETION=COMPLETION, PATH=os.path.dirname(VDPACTL) + ":" + os.environ["PATH"],
             VDPA_ALLOCATOR_LIBVIRT_URI="test:///nonexistent-so-unreachable")
    e.update(env or {})
    r = subprocess.run(["bash", "-c", DRIVER, "bash"] + list(words), capture_output=True, text=True, env=e, timeout=60,
                       cwd=cwd)
    assert r.returncode == 0, r.stderr
    return sorted(x for x in r.stdout.splitlines() if x)


def help_options(words):
    out = vdpactl(*(list(words) + ["--help"]), check=True).stdout
    opts = set()
    for line in out.splitlines():
        m = re.match(r"^  (?:-\w, )?(--[\w-]+)(?:=\S+)?\s", line)
        if m and m.group(1) != "--help":
            opts.add(m.group(1))
    return opts


class CompletionTest(unittest.TestCase):
    def test_registered_for_vdpactl(self):
        r = subprocess.run(["bash", "-c", ". /usr/share/bash-completion/bash_completion; . \"$0\"; complete -p vdpactl",
                            COMPLETION], capture_output=True, text=True)
        self.assertEqual(r.stdout.strip(), "complete -F _vdpactl vdpactl")

    def test_no_sed_on_json(self):
        with open(COMPLETION) as f:
            text = f.read()
        self.assertNotRegex(text, r"\bsed\b")
        self.assertIn("json.load", text)

    def test_commands_and_options_are_those_of_help(self):
        top = re.findall(r"^  ([a-z]+) ", vdpactl("--help", check=True).stdout, re.M)
        self.assertIn("domain", top)
        self.assertEqual(complete("vdpactl", ""), sorted(top + ["--help", "--version"]))
        for words in (["status"], ["reconcile"], ["allocate"], ["release"], ["rewrite"], ["pool", "list"],
                      ["pool", "show", "x"], ["lease", "list"], ["dev", "list"], ["network", "list"], ["domain", "show", "vm1"],
                      ["domain", "accelerate", "vm1"], ["domain", "portable", "vm1"], ["domain", "attach", "vm1"],
                      ["domain", "detach", "vm1"], ["domain", "migrate", "vm1"], ["domain", "save", "vm1"],
                      ["domain", "managedsave", "vm1"], ["domain", "restore", "vm1"]):
            with self.subTest(cmd=" ".join(words)):
                want = help_options([w for w in words if w not in ("x", "vm1")])
                got = set(complete("vdpactl", *words, "--")) - {"list"}
                self.assertEqual(got, want)
        self.assertEqual(complete("vdpactl", "domain", ""), ["--connect", "accelerate", "attach", "detach", "managedsave", "migrate",
                                                             "portable", "restore", "save", "show"])
        self.assertEqual(complete("vdpactl", "domain", "--connect", "test:///default", "a"), ["accelerate", "attach"])
        self.assertEqual(complete("vdpactl", "domain", "--connect", "test:///default", "m"), ["managedsave", "migrate"])
        self.assertEqual(complete("vdpactl", "pool", ""), ["drain", "list", "show", "undrain"])
        self.assertEqual(complete("vdpactl", "rewrite", "--to", ""), ["accelerated", "portable"])

    def test_names_from_the_daemon(self):
        # no daemon: no names and no noise
        bus = Bus()
        try:
            self.assertEqual(complete("vdpactl", "pool", "show", ""), [])
            daemon = Daemon(bus)
            daemon.start()
            try:
                vdpactl("allocate", "-u", UUID, "-d", "vm-one", "-m", "52:54:00:00:00:01", "-n", "vpc2", check=True)
                env = {"VDPA_ALLOCATOR_CONFIG_DIR": daemon.conf_dir}
                self.assertEqual(complete("vdpactl", "pool", "show", ""), ["accel"])
                self.assertEqual(complete("vdpactl", "pool", "drain", "a"), ["accel"])
                self.assertEqual(complete("vdpactl", "allocate", "--pool", ""), ["accel"])
                self.assertEqual(complete("vdpactl", "allocate", "--network", "", env=env), ["capped", "vpc1", "vpc2"])
                self.assertEqual(complete("vdpactl", "domain", "attach", "vm-one", "-n", "vpc", env=env), ["vpc1", "vpc2"])
                self.assertEqual(complete("vdpactl", "lease", "list", "--domain", ""), ["vm-one"])
                self.assertEqual(complete("vdpactl", "release", "--uuid", ""), [UUID])
                self.assertEqual(complete("vdpactl", "domain", "show", ""), ["vm-one"])
                self.assertEqual(complete("vdpactl", "domain", "--connect", "test:///default", "show", "vm"), ["vm-one"])
                # issue 26, point 9: libvirt's own domains too (the test
                # driver's "test", which holds no lease), each name once
                self.assertEqual(complete("vdpactl", "domain", "--connect", "test:///default", "show", ""), ["test", "vm-one"])
                self.assertEqual(complete("vdpactl", "domain", "show", "", env={"VDPA_ALLOCATOR_LIBVIRT_URI": "test:///default"}),
                                 ["test", "vm-one"])
            finally:
                daemon.stop()
                daemon.remove()
        finally:
            bus.close()

    def test_hostile_names_are_data(self):
        # issue 25 (2): libvirt lets whoever may define a domain name it, and
        # the lease keeps the name; compgen -W expanded $(...), backquotes
        # and variables in it, and the unquoted reply was globbed, as root
        work = tempfile.mkdtemp(prefix="va-compl-")
        self.addCleanup(shutil.rmtree, work)
        for f in ("vm-file", "vm1x", "vmA"):
            open(os.path.join(work, f), "w").close()
        names = ["$(touch pwned-subst) vm", "`touch pwned-bq` vm", "vm*", "vm?[1A]x", "$HOME-vm", "vm; touch pwned-semi",
                 "vm'\"quote"]
        bus = Bus()
        self.addCleanup(bus.close)
        daemon = Daemon(bus)
        daemon.start()
        self.addCleanup(daemon.remove)
        self.addCleanup(daemon.stop)
        for i, name in enumerate(names):
            vdpactl("allocate", "-u", "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a%02x" % i, "-d", name, "-m",
                    "52:54:00:00:00:%02x" % (i + 1), "-n", "vpc2", check=True)
        listed = [x["domain_name"] for x in json.loads(vdpactl("lease", "list", "-j", check=True).stdout)["leases"]]
        self.assertEqual(sorted(listed), sorted(names), "the daemon keeps these names as given")

        def offered(*words):
            got = complete("vdpactl", *words, cwd=work)
            self.assertEqual(sorted(f for f in os.listdir(work) if f.startswith("pwned")), [], "a name ran")
            return got

        def as_run(words):
            # what the shell makes of each offered word when the line runs
            out = subprocess.run(["bash", "-c", "printf '%s\\0' " + " ".join(words)], capture_output=True, text=True,
                                 cwd=work, env=dict(os.environ, HOME="/home/nobody"), check=True).stdout
            self.assertEqual(sorted(f for f in os.listdir(work) if f.startswith("pwned")), [], "a name ran")
            return sorted(out.split("\0")[:-1])

        for words in (["domain", "show", ""], ["lease", "list", "--domain", ""], ["domain", "--connect", "test:///default",
                                                                                  "accelerate", ""]):
            with self.subTest(words=" ".join(words)):
                got = offered(*words)
                want = sorted(names + (["test"] if "test:///default" in words else []))
                self.assertEqual(len(got), len(want), got)
                self.assertEqual(as_run(got), want)
        # the names libvirt gives (virsh list) are data as well
        lv = ["$(touch pwned-lv) lv", "`touch pwned-lvbq` lv", "lv*", "vm*"]
        node = os.path.join(work, "node.xml")
        with open(node, "w") as f:
            f.write("<node>" + "".join(
                "<domain type='test'><name>%s</name><memory>1024</memory><os><type>hvm</type></os></domain>"
                % n.replace("&", "&amp;").replace("<", "&lt;") for n in lv) + "</node>")
        got = offered("domain", "--connect", "test://" + node, "show", "")
        self.assertEqual(as_run(got), sorted(set(names + lv)), "libvirt's and the leases' names, each once")
        # a prefix is matched as text, never as a pattern: vm* is not a glob
        self.assertEqual(as_run(offered("domain", "show", "vm")), sorted(n for n in names if n.startswith("vm")))
        self.assertEqual(as_run(offered("domain", "show", "vm*")), ["vm*"])
        self.assertEqual(as_run(offered("domain", "show", "vm?")), ["vm?[1A]x"])
        # typed escaped, as readline shows the offer
        self.assertEqual(as_run(offered("domain", "show", "\\$\\(touch")), ["$(touch pwned-subst) vm"])
        self.assertEqual(as_run(offered("domain", "show", "$(touch")), ["$(touch pwned-subst) vm"])
        # (a bare $WORD is bash-completion's own: it offers variables)
        self.assertEqual(as_run(offered("domain", "show", "\\$HOME")), ["$HOME-vm"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
