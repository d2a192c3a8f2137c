# SPDX-License-Identifier: LGPL-2.1-or-later
"""vatest/pairsoftware.py: whether the paired-guest benchmark's software
vDPA path runs, and the one reason it does not, a case per reason, on
facts fed in (no kernel, no daemon)."""

import unittest

from vatest import pairsoftware as sw

FATAL = "modprobe: FATAL: Module vduse not found in directory /lib/modules/6.1.0-28-amd64"


def facts(present=(), loads=(), fails=None):
    """exists() and load() over a fake host: paths present, modules whose
    load makes their node appear, and {module: error}."""
    have = set(present)
    loaded = []

    def exists(path):
        return path in have

    def load(module):
        loaded.append(module)
        if module in (fails or {}):
            return fails[module]
        if module in loads:
            have.add({"vduse": sw.CONTROL, "vhost_vdpa": sw.VHOST_VDPA}[module])
        return None
    return exists, load, loaded


def status(backend="kernel", **pool):
    p = dict(name=sw.POOL, total=0, free=0, software_slots=2, software_leased=0, warning=None)
    p.update(pool)
    return {"backend": backend, "pools": [p]}


class Host(unittest.TestCase):
    def test_an_operators_configuration(self):
        exists, load, loaded = facts()
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, config="/etc/vdpa-allocator")[:2],
                         (False, "unavailable: --config /etc/vdpa-allocator given; the software path runs on the "
                                 "benchmark's own configuration only"))
        self.assertEqual(loaded, [], "nothing loaded for a path that does not run")

    def test_not_root(self):
        exists, load, loaded = facts()
        self.assertEqual(sw.host(euid=1000, exists=exists, load=load)[:2],
                         (False, "unavailable: not root (only root may create a VDUSE device)"))
        self.assertEqual(loaded, [])

    def test_no_vduse_module(self):
        exists, load, loaded = facts(fails={"vduse": FATAL})
        ok, why, check = sw.host(euid=0, exists=exists, load=load)
        self.assertEqual((ok, why), (False, "unavailable: no /dev/vduse/control, and modprobe vduse failed (%s)" % FATAL))
        self.assertEqual((check["vduse_control"], check["modprobe"]), (False, {"vduse": FATAL}))

    def test_vduse_loaded_but_no_node(self):
        exists, load, _ = facts(loads=())
        self.assertEqual(sw.host(euid=0, exists=exists, load=load)[:2],
                         (False, "unavailable: modprobe vduse succeeded, but there is no /dev/vduse/control"))

    def test_no_vhost_vdpa(self):
        exists, load, loaded = facts(loads=("vduse",), fails={"vhost_vdpa": "modprobe: FATAL: Module vhost_vdpa not found"})
        ok, why, check = sw.host(euid=0, exists=exists, load=load)
        self.assertFalse(ok)
        self.assertEqual(why, "unavailable: modprobe vhost_vdpa failed (modprobe: FATAL: Module vhost_vdpa not found): "
                              "QEMU reaches a vDPA device only through it")
        self.assertEqual(loaded, ["vduse", "vhost_vdpa"])
        self.assertTrue(check["vduse_control"])

    def test_no_initial_netns_handle(self):
        exists, load, _ = facts(present=(sw.CONTROL, sw.VHOST_VDPA))
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, outer_netns=None, others=[])[:2],
                         (False, "unavailable: no handle on the initial network namespace, where alone the kernel's vdpa "
                                 "netlink answers"))

    def test_another_daemons_devices(self):
        exists, load, _ = facts(present=(sw.CONTROL, sw.VHOST_VDPA))
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, outer_netns="/proc/1/fd/3",
                                 others=["vasw-525400aabbcc"])[:2],
                         (False, "unavailable: software vDPA devices of another vdpa-allocatord exist (vasw-525400aabbcc): "
                                 "the benchmark's daemon would reconcile them away"))
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, outer_netns="/proc/1/fd/3", others=[])[:2], (True, None))

    def test_loaded_on_demand_or_present(self):
        exists, load, loaded = facts(loads=("vduse", "vhost_vdpa"))
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, others=[])[:2], (True, None))
        self.assertEqual(loaded, ["vduse", "vhost_vdpa"])
        exists, load, loaded = facts(present=(sw.CONTROL, sw.VHOST_VDPA))
        self.assertEqual(sw.host(euid=0, exists=exists, load=load, others=[])[:2], (True, None))
        self.assertEqual(loaded, [], "nothing loaded that was there")


class Daemon(unittest.TestCase):
    check = {"network": sw.NETWORK, "pool": sw.POOL, "vduse_control": True, "modprobe": {}, "free": None}

    def test_daemon_did_not_start(self):
        self.assertEqual(sw.daemon(None, self.check, daemon_error="it exited 1")[:2],
                         (False, "unavailable: vdpa-allocatord did not start on the kernel backend (it exited 1)"))

    def test_simulated_backend(self):
        self.assertEqual(sw.daemon(status(backend="sim"), self.check)[:2],
                         (False, "unavailable: vdpa-allocatord runs the sim backend, not the kernel's"))

    def test_no_pool(self):
        self.assertEqual(sw.daemon({"backend": "kernel", "pools": []}, self.check)[:2],
                         (False, "unavailable: vdpactl status lists no pool soft"))

    def test_the_pools_warning_is_the_reason(self):
        warning = "software-slots=2: this kernel has no VDUSE loaded (...): a NIC past the pool's hardware slots is refused"
        self.assertEqual(sw.daemon(status(warning=warning), self.check)[:2],
                         (False, "unavailable: the daemon's pool soft: " + warning))

    def test_too_few_slots(self):
        self.assertEqual(sw.daemon(status(software_leased=1), self.check)[:2],
                         (False, "unavailable: pool soft has 1 free software slot(s); the two guests need 2"))

    def test_available(self):
        ok, why, check = sw.daemon(status(), self.check)
        self.assertEqual((ok, why, check["free"]), (True, None, 2))
        self.assertIsNone(self.check["free"], "the caller's check is not changed")


if __name__ == "__main__":
    unittest.main(verbosity=2)
