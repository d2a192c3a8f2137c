#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The kernel backend against the kernel's own simulators (issue 17), run
INSIDE the lab host with netdevsim and vdpa_sim_net loaded (lab_host.py
--sim-modules): pools of type netdevsim-test, whose PFs are netdevsim
devices (devlink netdevsim/netdevsimN) and whose vdpa devices are made on
vdpa_sim_net, through the paths a ConnectX host takes: devlink ESWITCH_GET
and ESWITCH_SET, sriov_numvfs, the devlink port dump for representors,
rtnetlink VF settings, vdpa DEV_NEW/DEV_DEL, vhost_vdpa binding.

- pool leg: netdevsim7 booted legacy with 2 VFs, eswitch=legacy, vfs=2,
  vlan-method=vst. netdevsim shows a phys_switch_id in legacy mode: the
  daemon must leave the PF alone (it used to take the switch id for
  switchdev and drop the VFs to 0).
- pool sw: netdevsim8 booted legacy with no VF, eswitch=switchdev, vfs=2,
  vlan-method=bridge: the daemon switches it and makes the VFs; a lease's
  representor is the netdev of the pcivf port with its VF number.
- a restart asking another VF count (leg, whose vdpa device is deleted
  by hand first: only its stored lease guards it) and eswitch mode (sw,
  its lease's vdpa device alive): refused, one line in each pool's health,
  the PFs untouched.
- reloads (SIGHUP, as systemctl reload): a refused PF prepared again; a
  new VF count applied, refused under a live device, applied once it is
  released; the bridge warning cleared when the uplink joins.
One daemon start and one restart; every process costs about a second in
the TCG guest."""

import functools
import json
import os
import re
import sys
import time
import unittest

import vatest.bus as busfixture
from vatest import ctl
from vatest.lab import eswitch, link, link_peers, pcivf_ports, read, run, wait_for, write

# vdpactl with its output merged, no time bound of its own
vdpactl = functools.partial(ctl.vdpactl, merge=True, timeout=None)
leases = functools.partial(ctl.leases, merge=True, timeout=None)
BRIDGE = "br-sim"
UUID = "5e1f0000-0000-4000-8000-%012d"
MAC = "52:54:00:5e:00:%02x"

CONFIG = """[pool leg]
type=netdevsim-test
match-pf=nsim7
eswitch=legacy
vfs=%d
vlan-method=vst
device-group=disk
device-mode=0660

[pool sw]
type=netdevsim-test
match-pf=nsim8
eswitch=%s
vfs=2
vlan-method=bridge
uplink-bridge=%s
device-group=disk
device-mode=0660
""" 


class SimulatedConnectX(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/sys/bus/netdevsim") and run("modprobe", "netdevsim", check=False).returncode:
            raise unittest.SkipTest("no netdevsim: run under lab_host.py --sim-modules")
        if not os.path.isdir("/sys/kernel/debug/netdevsim"):
            run("mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug", check=False)
        run("modprobe", "-a", "netdevsim", "vdpa_sim_net", "vhost_vdpa", "bridge")
        cls.bus = cls.daemon = None
        try:
            cls._set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _set_up(cls):
        ifindex = {}
        for n in (7, 8):
            write("/sys/bus/netdevsim/new_device", "%d 1" % n)
            net = "/sys/bus/netdevsim/devices/netdevsim%d/net" % n
            wait_for(net)
            old = os.listdir(net)[0]
            run("ip", "link", "set", old, "name", "nsim%d" % n)
            run("ip", "link", "set", "nsim%d" % n, "up")
            ifindex[n] = link("nsim%d" % n)["ifindex"]
        if read("/sys/class/net/nsim7/carrier") != "1":
            link_peers([(ifindex[7], ifindex[8])])
        print("# nsim7 operstate %s carrier %s, phys_switch_id %s (legacy)"
              % (read("/sys/class/net/nsim7/operstate"), read("/sys/class/net/nsim7/carrier"),
                 read("/sys/class/net/nsim7/phys_switch_id")), file=sys.stderr)
        # netdevsim7 booted legacy with 2 VFs, netdevsim8 legacy with none
        write("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs", "2")
        run("ip", "link", "add", BRIDGE, "type", "bridge", "vlan_filtering", "1")
        run("ip", "link", "set", BRIDGE, "up")
        cls.bus = busfixture.Bus()
        cls.daemon = busfixture.Daemon(cls.bus, config=CONFIG % (2, "switchdev", BRIDGE))
        t0 = time.monotonic()
        cls.daemon.start()
        print("# daemon up in %.1f s" % (time.monotonic() - t0), file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        rc = cls.daemon.stop() if cls.daemon else 0
        log = cls.daemon.read_log() if cls.daemon else ""
        if cls.bus:
            cls.bus.close()
        run("ip", "link", "del", BRIDGE, check=False)
        for d in os.listdir("/sys/bus/vdpa/devices") if os.path.isdir("/sys/bus/vdpa/devices") else []:
            if d.startswith("va-"):
                run("vdpa", "dev", "del", d, check=False)
        for n in (7, 8):
            if os.path.exists("/sys/bus/netdevsim/devices/netdevsim%d" % n):
                write("/sys/bus/netdevsim/del_device", "%d" % n)
        if rc:
            raise AssertionError("vdpa-allocatord exited %d:\n%s" % (rc, log[-6000:]))
        if log:
            print("# daemon log:\n" + "\n".join("#   " + l for l in log.splitlines()[-30:]), file=sys.stderr)

    def pools(self):
        return {p["name"]: p for p in json.loads(vdpactl("pool", "list", "-j").stdout)["pools"]}

    def reload(self, until):
        if not self.daemon.reload(lambda: until(self.pools())):
            raise AssertionError("reload did not take: %s" % self.pools())

    def step_counts(self, want):
        # the per-step histograms of the daemon's metrics file, written
        # from an idle callback after the lease
        deadline = time.monotonic() + 10
        while True:
            with open(os.path.join(self.daemon.run_dir, "metrics.prom")) as f:
                got = {m[0]: int(m[1]) for m in
                       re.findall(r'^vdpa_allocator_device_step_seconds_count\{step="(\w+)"\} (\d+)$', f.read(), re.M)}
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def allocate(self, n, pool, vlan):
        return json.loads(vdpactl("allocate", "-j", "-u", UUID % n, "-m", MAC % n, "-p", pool,
                                       "--vlan", str(vlan)).stdout)

    def test_1_start_leaves_legacy_pf_and_switches_the_other(self):
        pools = self.pools()
        self.assertEqual((pools["leg"]["total"], pools["leg"]["healthy"]), (2, True), pools["leg"])
        self.assertEqual((pools["sw"]["total"], pools["sw"]["healthy"]), (2, True), pools["sw"])
        # the legacy PF untouched: its mode, its VFs
        self.assertEqual(eswitch("netdevsim7"), "legacy")
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "2")
        # the other switched, with its VFs and their pcivf ports
        self.assertEqual(eswitch("netdevsim8"), "switchdev")
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim8/sriov_numvfs"), "2")
        self.assertEqual(sorted(pcivf_ports("netdevsim8")), [0, 1])
        # healthy but not offloaded: the bridge lacks the PF's uplink
        self.assertIsNone(pools["leg"]["warning"])
        self.assertEqual(pools["sw"]["warning"],
                         "vlan-method=bridge: the uplink nsim8 of PF netdevsim8 is not a port of %s, so traffic between its "
                         "VFs and the wire is not offloaded: ip link set nsim8 master %s" % (BRIDGE, BRIDGE))

    def test_2_leases_on_both(self):
        leg = self.allocate(1, "leg", 10)
        self.assertRegex(leg["mgmtdev"], r"^netdevsim7v[01]$")
        vf = int(leg["mgmtdev"][-1])
        info = link("nsim7")["vfinfo_list"][vf]
        self.assertEqual((info["address"], info["vlan_list"][0]["vlan"], info["spoofchk"], info["trust"]),
                         (MAC % 1, 10, True, False))
        name = "va-" + leg["mgmtdev"]
        self.assertEqual(os.path.basename(os.readlink("/sys/bus/vdpa/devices/%s/driver" % name)), "vhost_vdpa")
        st = os.stat(leg["chardev"])
        self.assertEqual((st.st_mode & 0o7777, st.st_gid), (0o660, 6), leg["chardev"])
        config = json.loads(run("vdpa", "-j", "dev", "config", "show", name).stdout)["config"][name]
        self.assertEqual(config["mac"], MAC % 1)

        # each step of making the device timed, as the metrics show
        want = {"create": 1, "bind": 1, "node": 1, "vlan": 1}
        self.assertEqual(self.step_counts(want), want)
        sw = self.allocate(2, "sw", 20)
        want = {"create": 2, "bind": 2, "node": 2, "vlan": 2}
        self.assertEqual(self.step_counts(want), want)
        self.assertRegex(sw["mgmtdev"], r"^netdevsim8v[01]$")
        rep = pcivf_ports("netdevsim8")[int(sw["mgmtdev"][-1])]
        self.assertEqual(link(rep).get("master"), BRIDGE)
        vlans = json.loads(run("bridge", "-j", "vlan", "show", "dev", rep).stdout or "[]")
        self.assertEqual([(v["vlan"], v.get("flags")) for e in vlans for v in e.get("vlans", [])],
                         [(20, ["PVID", "Egress Untagged"])])

    def test_3_restart_refuses_changes_under_live_devices(self):
        held = leases()
        self.assertEqual(len(held), 2)
        slot7 = [l for l in held if l["mgmtdev"].startswith("netdevsim7")][0]["mgmtdev"]
        slot8 = [l for l in held if l["mgmtdev"].startswith("netdevsim8")][0]["mgmtdev"]
        self.daemon.stop()
        # leg: only the stored lease is left to guard its PF
        run("vdpa", "dev", "del", "va-" + slot7)
        with open(os.path.join(self.daemon.conf_dir, "vdpa-allocator.conf"), "w") as f:
            f.write(CONFIG % (3, "legacy", BRIDGE))
        t0 = time.monotonic()
        self.daemon.start()
        print("# daemon restarted in %.1f s" % (time.monotonic() - t0), file=sys.stderr)
        pools = self.pools()
        self.assertFalse(pools["leg"]["healthy"])
        self.assertIn("PF netdevsim7: refusing to change sriov_numvfs from 2 to 3: 1 lease(s) on its VFs",
                      pools["leg"]["health_reason"])
        self.assertFalse(pools["sw"]["healthy"])
        self.assertIn("PF netdevsim8: refusing to change its eswitch mode to legacy: vdpa device va-%s sits on VF %s"
                      % (slot8, slot8), pools["sw"]["health_reason"])
        self.assertEqual("\n" in pools["leg"]["health_reason"], False)
        # never attempted: the VFs, the mode and the devices are as they were
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "2")
        self.assertEqual(eswitch("netdevsim8"), "switchdev")
        self.assertTrue(os.path.exists("/sys/bus/vdpa/devices/va-" + slot8))
        self.assertEqual(len(leases()), 2)

    def test_4_release_resets(self):
        held = leases()
        for n in (1, 2):
            vdpactl("release", "-u", UUID % n, "-m", MAC % n)
        for l in held:
            self.assertFalse(os.path.exists("/sys/bus/vdpa/devices/va-" + l["mgmtdev"]))
        slot7 = [l for l in held if l["mgmtdev"].startswith("netdevsim7")][0]["mgmtdev"]
        info = link("nsim7")["vfinfo_list"][int(slot7[-1])]
        self.assertEqual((info["address"], info["vlan_list"][0].get("vlan", 0)), ("00:00:00:00:00:00", 0))
        slot8 = [l for l in held if l["mgmtdev"].startswith("netdevsim8")][0]["mgmtdev"]
        self.assertIsNone(link(pcivf_ports("netdevsim8")[int(slot8[-1])]).get("master"))

    def configure(self, leg_vfs):
        with open(os.path.join(self.daemon.conf_dir, "vdpa-allocator.conf"), "w") as f:
            f.write(CONFIG % (leg_vfs, "switchdev", BRIDGE))

    def test_5_the_uplink_in_the_bridge_clears_the_warning(self):
        # back to the first configuration: the PFs refused at the restart
        # are prepared again at the reload, and are as it asks already
        self.configure(2)
        run("ip", "link", "set", "nsim8", "master", BRIDGE)
        try:
            self.reload(lambda pools: pools["sw"]["warning"] is None and pools["leg"]["healthy"] and pools["sw"]["healthy"])
        finally:
            run("ip", "link", "set", "nsim8", "nomaster")
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "2")
        self.assertEqual(eswitch("netdevsim8"), "switchdev")

    def test_6_reload_applies_a_new_vf_count_or_refuses_it_under_a_lease(self):
        self.configure(3)
        self.reload(lambda pools: pools["leg"]["total"] == 3 and pools["leg"]["healthy"])
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "3")
        self.allocate(3, "leg", 30)
        self.configure(2)
        self.reload(lambda pools: not pools["leg"]["healthy"])
        self.assertIn("PF netdevsim7: refusing to change sriov_numvfs from 3 to 2: vdpa device va-netdevsim7v",
                      self.pools()["leg"]["health_reason"])
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "3")
        vdpactl("release", "-u", UUID % 3, "-m", MAC % 3)
        self.reload(lambda pools: pools["leg"]["total"] == 2 and pools["leg"]["healthy"])
        self.assertEqual(read("/sys/bus/netdevsim/devices/netdevsim7/sriov_numvfs"), "2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
