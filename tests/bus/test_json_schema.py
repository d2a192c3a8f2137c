# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every `vdpactl ... -j` document against its JSON Schema (docs/schemas/),
checked by python3-jsonschema: the daemon on the simulated NIC for the bus
commands, libvirt's test driver for `domain show`."""

import json
import os
import re
import shutil
import tempfile
import unittest

import jsonschema

from vatest.bus import Bus, Daemon, vdpactl
from vatest.paths import SRCDIR

SCHEMAS = os.path.join(SRCDIR, "docs", "schemas")
EXAMPLES = os.path.join(SRCDIR, "contrib", "examples")
UUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")

# the command's words before -j, and its schema; every -j command is here,
# which test_zz_every_json_command_is_covered proves from --help
COMMANDS = {
    ("status",): "status",
    ("pool", "list"): "pool-list",
    ("pool", "show"): "pool-show",
    ("lease", "list"): "lease-list",
    ("dev", "list"): "dev-list",
    ("network", "list"): "network-list",
    ("allocate",): "allocate",
    ("reconcile",): "reconcile",
    ("domain", "show"): "domain-show",
    ("domain", "migrate"): "domain-move",
    ("domain", "save"): "domain-move",
    ("domain", "managedsave"): "domain-move",
    ("domain", "restore"): "domain-move",
    ("domain", "accelerate"): "domain-swap",
    ("domain", "portable"): "domain-swap",
}
SUBCOMMANDS = {"pool": ["list", "show", "drain", "undrain"], "lease": ["list"], "dev": ["list"], "network": ["list"],
               "domain": ["show", "accelerate", "portable", "attach", "detach", "migrate", "save",
                                  "managedsave", "restore"]}


def validator(name):
    with open(os.path.join(SCHEMAS, name + ".schema.json")) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def walk(value, path="$"):
    """Every key and every string value of a document, with its path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield ("key", path, k)
            yield from walk(v, path + "." + k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, "%s[%d]" % (path, i))
    elif isinstance(value, str):
        yield ("str", path, value)


class JsonSchemaTest(unittest.TestCase):
    seen = set()

    def check(self, words, *args, before=(), rc=0):
        # @before: the options of `domain` that go before its subcommand;
        # @rc: its exit status (a failed migration prints its document too)
        r = vdpactl(*([words[0]] + list(before) + list(words[1:]) + list(args) + ["-j"]))
        self.assertEqual(r.returncode, rc, (words, r.stderr))
        doc = json.loads(r.stdout)
        errors = sorted(validator(COMMANDS[words]).iter_errors(doc), key=lambda e: list(e.path))
        self.assertEqual([], ["%s: %s" % (list(e.path), e.message) for e in errors], " ".join(words))
        for kind, path, x in walk(doc):
            if kind == "key":
                self.assertRegex(x, SNAKE, "%s: key %r" % (path, x))
            else:
                self.assertNotEqual(x, "", "%s is \"\", not null" % path)
        JsonSchemaTest.seen.add(words)
        return doc

    def test_bus_commands(self):
        bus = Bus()
        daemon = Daemon(bus)
        try:
            daemon.start()
            self.assertEqual(self.check(("lease", "list"))["leases"], [])
            lease = self.check(("allocate",), "-u", UUID, "-d", "vm1", "-m", "52:54:00:00:00:01", "-n", "vpc2")
            self.assertRegex(lease["mgmtdev"], r"^pci/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
            inline = self.check(("allocate",), "-u", UUID, "-m", "52:54:00:00:00:02", "-p", "accel", "--vlan", "7")
            self.assertIsNone(inline["network"])
            self.assertIsNone(inline["domain_name"])
            self.assertIs(inline["broken"], False)
            leases = self.check(("lease", "list"))["leases"]
            self.assertEqual(sorted(x["mac"] for x in leases), ["52:54:00:00:00:01", "52:54:00:00:00:02"])
            self.assertEqual({x["mgmtdev"] for x in leases}, {lease["mgmtdev"], inline["mgmtdev"]})
            status = self.check(("status",))
            self.assertEqual((status["backend"], status["lease_count"]), ("sim", 2))
            self.assertEqual(self.check(("pool", "list"))["pools"], status["pools"])
            devs = self.check(("dev", "list"))
            vfs = [vf for pf in devs["pfs"] for vf in pf["vfs"]]
            self.assertEqual(sorted(vf["mac"] for vf in vfs if vf["state"] == "leased"),
                             ["52:54:00:00:00:01", "52:54:00:00:00:02"])
            self.assertIn(lease["mgmtdev"], [vf["mgmtdev"] for vf in vfs])
            pool = self.check(("pool", "show"), "accel")
            self.assertEqual((pool["leased"], pool["health_reason"]), (2, None))
            report = self.check(("reconcile",), rc=5)  # done in part: libvirt is down
            self.assertFalse(report["libvirt_reachable"])
            self.assertIsInstance(report["libvirt_error"], str)
            self.check(("network", "list"), "--config", daemon.conf_dir)
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_network_list_offline(self):
        nets = self.check(("network", "list"), "--config", EXAMPLES)["networks"]
        vpc1 = [n for n in nets if n["name"] == "vpc1"][0]
        self.assertIsNone(vpc1["pool"])
        self.assertIsNone(vpc1["quota"])

    def test_domain_show(self):
        d = tempfile.mkdtemp(prefix="va-schema-")
        self.addCleanup(shutil.rmtree, d)
        with open(os.path.join(EXAMPLES, "vm1.xml")) as f:
            xml = f.read().replace("<domain type='kvm'>", "<domain type='test'>")
        node = os.path.join(d, "node.xml")
        with open(node, "w") as f:
            f.write("<node>\n" + xml + "</node>\n")
        bus = Bus()
        with open(os.path.join(EXAMPLES, "sim", "vdpa-allocator.conf")) as f:
            daemon = Daemon(bus, config=f.read())
        try:
            shown = self.check(("domain", "show"), "vm1", before=("--connect", "test://" + node))
            self.assertFalse(shown["daemon_reachable"])
            self.assertEqual([(n["mac"], n["network"], n["device"]) for n in shown["nics"]],
                             [("52:54:00:6b:3c:58", "vpc2", None), ("52:54:00:6b:3c:59", "vpc1", None)])
            daemon.start()
            vdpactl("allocate", "-u", UUID, "-m", "52:54:00:6b:3c:58", "-n", "vpc2", check=True)
            shown = self.check(("domain", "show"), UUID, before=("--connect", "test://" + node))
            self.assertTrue(shown["daemon_reachable"])
            self.assertRegex(shown["nics"][0]["device"], "^vdpa")
            self.assertIsNone(shown["nics"][1]["device"])
        finally:
            daemon.stop()
            daemon.remove()
            bus.close()

    def test_domain_move(self):
        # libvirt's test driver: it saves and restores, but migrates not;
        # QEMU's blockers are unknown there (no QMP): null
        d = tempfile.mkdtemp(prefix="va-schema-")
        self.addCleanup(shutil.rmtree, d)
        node = os.path.join(d, "node.xml")
        # one NIC, portable by intent (mode virtio): a domain without
        # vdpa:nics is refused a swap (issue 26)
        mac = "52:54:00:00:00:61"
        dom = ("<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'><name>plain</name>"
               "<uuid>%s</uuid><metadata><vdpa:nics xmlns:vdpa='http://vdpa-allocator.org/xmlns/domain/1.0'>"
               "<vdpa:nic mac='%s' vlan='5' mode='virtio' bridge='br0'/></vdpa:nics></metadata>"
               "<memory>65536</memory><os><type>hvm</type></os>"
               "<devices><interface type='bridge'><mac address='%s'/><source bridge='br0'/><model type='virtio'/></interface>"
               "</devices>%%s</domain>" % (UUID, mac, mac))
        with open(node, "w") as f:
            f.write("<node>%s</node>\n" % (dom % ""))
        conn = ("--connect", "test://" + node)
        # the live swap of a domain whose one NIC stays portable by intent:
        # done, nothing swapped
        for words in (("domain", "accelerate"), ("domain", "portable")):
            swapped = self.check(words, "--live", "plain", before=conn)
            self.assertEqual((swapped["operation"], swapped["done"], swapped["partial"]), (words[1], True, False))
            self.assertEqual([(n["mac"], n["path"], n["form_after"]) for n in swapped["nics"]], [(mac, "as-is", "portable")])
        r = vdpactl("domain", "--connect", "test://" + node, "accelerate", "plain", "-j")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("-j needs --live", r.stderr)
        failed = self.check(("domain", "migrate"), "plain", "qemu+tcp://127.0.0.1:1/system", "--live", before=conn, rc=1)
        self.assertEqual((failed["done"], failed["blockers"], len(failed["nics"])), (False, None, 1))
        self.assertRegex(failed["error"], "migration failed")
        image = os.path.join(d, "plain.save")
        saved = self.check(("domain", "save"), "plain", image, before=conn)
        self.assertTrue(saved["done"])
        self.assertTrue(self.check(("domain", "managedsave"), "plain", before=conn)["done"])
        # a fresh test driver has it running: restore into a shut-off one
        with open(node, "w") as f:
            f.write("<node>%s</node>\n" % (dom % "<test:runstate>5</test:runstate>"))
        restored = self.check(("domain", "restore"), image, before=conn)
        self.assertEqual((restored["operation"], restored["done"], restored["uuid"]), ("restore", True, UUID))

    def test_the_schemas_refuse_the_old_spelling(self):
        # the validator is no rubber stamp: 0.1's pool record and bare
        # list fail
        old = {"version": 1, "Name": "accel", "Total": 8, "Free": 8, "Leased": 0, "Healthy": True,
               "HealthReason": "", "Draining": False, "VlanMethod": "none"}
        self.assertFalse(validator("pool-show").is_valid(old))
        self.assertFalse(validator("lease-list").is_valid([]))
        new = {k.lower(): v for k, v in old.items()}
        self.assertFalse(validator("pool-show").is_valid(new))  # "" and CamelCase keys
        new = {"version": 1, "name": "accel", "total": 8, "free": 8, "leased": 0, "healthy": True,
               "health_reason": None, "warning": None, "draining": False, "vlan_method": "none", "software_slots": 0,
               "software_leased": 0, "broken_leases": 0}
        self.assertTrue(validator("pool-show").is_valid(new))
        self.assertFalse(validator("pool-show").is_valid(dict(new, health_reason="")))

    def test_zz_every_json_command_is_covered(self):
        # runs last (unittest sorts by name): the commands whose --help
        # offers --json are exactly those this file validated
        offered = set()
        top = vdpactl("--help", check=True).stdout
        for cmd in re.findall(r"^  ([a-z]+) ", top, re.M):
            for words in ([(cmd, s) for s in SUBCOMMANDS[cmd]] if cmd in SUBCOMMANDS else [(cmd,)]):
                r = vdpactl(*(list(words) + ["--help"]))
                if re.search(r"^\s+-j, --json\b", r.stdout, re.M):
                    offered.add(words)
        self.assertEqual(offered, set(COMMANDS))
        self.assertEqual(JsonSchemaTest.seen, set(COMMANDS), "a -j command no test ran")


if __name__ == "__main__":
    unittest.main(verbosity=2)
