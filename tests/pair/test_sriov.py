# SPDX-License-Identifier: LGPL-2.1-or-later
"""vatest/pairsriov.py: the decision whether the paired-guest benchmark runs
its SR-IOV path, fed with configurations, `vdpactl status -j` documents, libvirt
network XML and a fake sysfs root (a temporary directory), one case per
reason. No root, no daemon."""

import os
import tempfile
import unittest

from vatest import pairsriov as sriov

CONF = """# an igb PF's VFs for the benchmark's third network
[pool accel]
match-vendor=15b3

[pool vfs]
kind=sriov
match-vendor=8086
vfs=2

[network vpc2]
mode=vdpa
pool=accel
vlan=2334

[network vpc3]
mode=sriov
pool=vfs
vlan=2400
"""

NETXML = """<network>
  <name>vdpa-allocator-vfs</name>
  <forward mode='hostdev' managed='yes'>
    <driver name='vfio'/>
    <address type='pci' domain='0x0000' bus='0x01' slot='0x10' function='0x0'/>
    <address type='pci' domain='0x0000' bus='0x01' slot='0x10' function='0x2'/>
  </forward>
</network>
"""
VF0, VF1 = "0000:01:10.0", "0000:01:10.2"


def status(free=2, name="vfs"):
    return {"version": 1, "backend": "kernel", "lease_count": 0,
            "pools": [{"name": "accel", "total": 4, "free": 4}, {"name": name, "total": 2, "free": free}]}


class Decide(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sysfs = self.tmp.name
        self.device("0000:01:00.0", vf=False)  # the PF
        for addr in (VF0, VF1):
            self.device(addr, vf=True)

    def tearDown(self):
        self.tmp.cleanup()

    def device(self, addr, vf):
        d = os.path.join(self.sysfs, "bus", "pci", "devices", addr)
        os.makedirs(d, exist_ok=True)
        if vf:
            os.symlink("../0000:01:00.0", os.path.join(d, "physfn"))

    def decide(self, conf=CONF, st=None, vfs="default", **kw):
        return sriov.decide(conf, status() if st is None else st, sriov.hostdev_vfs(NETXML) if vfs == "default" else vfs,
                            sysfs=self.sysfs, **kw)

    def test_available(self):
        ok, why, check = self.decide()
        self.assertEqual((ok, why), (True, None))
        self.assertEqual(check, {"network": "vpc3", "pool": "vfs", "free": 2, "vfs": [VF0, VF1]})

    def test_hostdev_vfs_reads_libvirts_addresses(self):
        self.assertEqual(sriov.hostdev_vfs(NETXML), [VF0, VF1])
        self.assertEqual(sriov.hostdev_vfs('<network><forward mode="hostdev"><address type="pci" domain="0x0001" '
                                           'bus="0xaf" slot="0x1f" function="0x7"/></forward></network>'), ["0001:af:1f.7"])
        self.assertEqual(sriov.hostdev_vfs("<network><forward mode='bridge'/></network>"), [])

    def test_the_simulated_config_has_no_network3(self):
        conf = CONF.split("[network vpc3]")[0]
        ok, why, _ = self.decide(conf=conf)
        self.assertFalse(ok)
        self.assertEqual(why, "unavailable: no kind=sriov pool on this host (the configuration has no network vpc3)")
        self.assertTrue(why.startswith(sriov.UNAVAILABLE))

    def test_network3_not_sriov(self):
        ok, why, _ = self.decide(conf=CONF.replace("mode=sriov", "mode=auto"))
        self.assertEqual((ok, why), (False, "unavailable: network vpc3 is mode=auto, not mode=sriov"))

    def test_network3_on_a_vdpa_pool(self):
        ok, why, _ = self.decide(conf=CONF.replace("pool=vfs", "pool=accel"))
        self.assertEqual((ok, why), (False, "unavailable: no kind=sriov pool on this host (network vpc3's pool accel is kind=vdpa)"))

    def test_network3_pool_missing(self):
        ok, why, _ = self.decide(conf=CONF.replace("pool=vfs", "pool=nosuch"))
        self.assertEqual((ok, why), (False, "unavailable: no kind=sriov pool on this host (network vpc3's pool nosuch is not configured)"))
        ok, why, _ = self.decide(conf=CONF.replace("pool=vfs\n", ""))
        self.assertEqual((ok, why), (False, "unavailable: no kind=sriov pool on this host (network vpc3 names no pool)"))

    def test_daemon_refused_the_pool(self):
        ok, why, _ = self.decide(st={}, daemon_error="[pool vfs] kind=sriov: not served yet")
        self.assertEqual((ok, why), (False, "unavailable: vdpa-allocatord does not serve kind=sriov pool vfs "
                                            "([pool vfs] kind=sriov: not served yet)"))

    def test_status_lacks_the_pool(self):
        ok, why, _ = self.decide(st=status(name="other"))
        self.assertEqual((ok, why), (False, "unavailable: vdpactl status lists no pool vfs"))

    def test_too_few_free_slots(self):
        ok, why, check = self.decide(st=status(free=1))
        self.assertEqual((ok, why), (False, "unavailable: pool vfs has 1 free slot(s); the two guests need 2"))
        self.assertEqual(check["free"], 1)

    def test_no_hostdev_network(self):
        ok, why, _ = self.decide(vfs=None)
        self.assertEqual((ok, why), (False, "unavailable: no libvirt network vdpa-allocator-vfs lists the pool's VFs"))
        st = status()
        st["pools"][1]["warning"] = "network vdpa-allocator-vfs: libvirt is out of reach"
        ok, why, _ = self.decide(st=st, vfs=None)
        self.assertEqual((ok, why), (False, "unavailable: no libvirt network vdpa-allocator-vfs lists the pool's VFs "
                                            "(the pool's warning: network vdpa-allocator-vfs: libvirt is out of reach)"))

    def test_network_lists_one_vf(self):
        ok, why, _ = self.decide(vfs=[VF0])
        self.assertEqual((ok, why), (False, "unavailable: libvirt network vdpa-allocator-vfs lists 1 VF(s); the two guests need 2"))

    def test_a_slot_that_is_no_vf(self):
        os.unlink(os.path.join(self.sysfs, "bus", "pci", "devices", VF1, "physfn"))
        ok, why, _ = self.decide()
        self.assertFalse(ok)
        self.assertEqual(why, "unavailable: slot %s of pool vfs is no VF in sysfs (no %s)" % (
            VF1, os.path.join(self.sysfs, "bus", "pci", "devices", VF1, "physfn")))
        # a slot the sysfs does not have at all
        ok, why, _ = self.decide(vfs=[VF0, "0000:02:00.1"])
        self.assertFalse(ok)
        self.assertIn("slot 0000:02:00.1 of pool vfs is no VF in sysfs", why)


class Config(unittest.TestCase):
    def test_without_sriov_drops_the_pool_and_its_networks(self):
        self.assertEqual(sriov.sriov_pools(CONF), ["vfs"])
        out = sriov.without_sriov(CONF)
        conf = sriov.parse_config(out)
        self.assertEqual(sorted(conf["pool"]), ["accel"])
        self.assertEqual(sorted(conf["network"]), ["vpc2"])
        self.assertIn("# an igb PF's VFs", out, "the rest stays as written")
        self.assertEqual(sriov.without_sriov(out), out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
