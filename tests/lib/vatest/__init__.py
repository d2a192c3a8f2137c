# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fixtures the Python test tiers share. tests/meson.build puts tests/lib on
PYTHONPATH, and lab_host.py passes it into the lab host; by hand:

    PYTHONPATH=tests/lib /usr/bin/python3 tests/bus/test_bus.py

    paths    where the programs under test and the source tree are
    ctl      vdpactl as a test runs it, its -j form, the lease list
    simconf  vdpa-allocator.conf for the simulated NIC, from keywords
    bus      a private system bus, mocked polkit, the daemon on it
    libvirt  libvirtd, virtlogd and a bus in private namespaces
    guest    the tiny test guest's domain XML, command line and console
    twohosts two libvirt hosts on one machine, for migrations
    labhost  the lab host (tests/lab/lab_host.py is its command)
    lab      what the lab tier's cases share, inside the lab host
    pairreport, pairsriov  the paired-guest benchmark's report and its
             SR-IOV decision (tests/pair)
"""
