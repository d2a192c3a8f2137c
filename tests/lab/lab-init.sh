#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The lab host's init, in two stages (lab-host.py boots it):
#
# stage 1 (no argument): /init of the initramfs, busybox only. Loads the
#   virtio-9p and overlayfs modules, mounts the build machine's root (9p tag
#   "hostroot", read-only) under an overlayfs whose upper layer is a tmpfs,
#   with the unpacked extra packages (lab.extra=, udev: 9p tag "extra",
#   read-only) as a second lower layer above it, mounts the run's shared folder
#   (9p tag "lab", writable) at /lab there and switch_roots into
#   "sh /lab/lab-init.sh stage2". With lab.root=PATH (lab_host.py --root),
#   the lower layer is PATH in the build machine's root instead (another
#   Debian's), and the folders of lab.binds= (comma-separated) are bound
#   into it from the build machine's root at the same paths, read-only.
#
# stage 2: runs in that root with the build machine's own userspace. Puts
#   fresh tmpfs on /run and /var/tmp (the lower layer holds the build
#   machine's live /run); /tmp stays the overlay's, writable in memory,
#   because the tree under test may live there (CI clones anywhere), binds the kernel package's module tree (lab.modules=
#   on the command line, a path in the shared root) over /lib/modules/KREL,
#   then runs /lab/cmd with /lab/env, its output to the console and to
#   /lab/output, its status to /lab/rc, and powers off.
#
# With lab.systemd=1 on the command line (lab_host.py --systemd), stage 2
#   does the same preparation and then execs /lib/systemd/systemd as PID 1
#   instead of running the command: lab_host.py's units in /lab/systemd/
#   (lab.target, the kernel command line's systemd.unit=) run
#   "sh /lab/lab-init.sh command" once multi-user.target is up, which runs
#   /lab/cmd as stage 2 would and powers off. What a fresh root would pay
#   at each boot and an installed host does not (AppArmor's compiled
#   profiles, apt's caches: labhost.py) it gets from the test cache.
#
# Console markers: LAB-READY uptime=S (the moment the command starts), then
# LAB-DONE rc=N.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

param() {
    for w in $(cat /proc/cmdline); do
        case "$w" in
        "lab.$1="*) echo "${w#lab.$1=}" ;;
        esac
    done
}

halt_now() {
    echo "LAB-DONE rc=$1"
    sync
    # busybox's, not the build machine's systemctl in stage 2
    busybox poweroff -f
    while :; do sleep 3600; done  # init must never exit
}

run_command() {
    [ -f /lab/env ] && . /lab/env
    # the nested guests' libvirt domain type (vatest/guest.py): kvm when
    # lab.kvm=1 brought /dev/kvm, else qemu (TCG)
    LAB_DOMAIN_TYPE=qemu
    [ "$(param kvm)" = 1 ] && [ -c /dev/kvm ] && LAB_DOMAIN_TYPE=kvm
    export LAB_DOMAIN_TYPE
    cd "${LAB_CWD:-/}" || halt_now 124
    echo "LAB-READY uptime=$(cut -d' ' -f1 /proc/uptime)"
    # the status goes through a file: a pipeline's status is its last command's
    (
        sh /lab/cmd </dev/null
        echo $? >/lab/rc
    ) 2>&1 | tee /lab/output
    rc=$(cat /lab/rc 2>/dev/null || echo 125)
    cd /
    halt_now "$rc"
}

# under systemd: lab-command.service runs this once the system is up
if [ "${1:-}" = command ]; then
    # AppArmor's profiles as apparmor.service compiled them at this boot,
    # before the command can change one: labhost.py keeps them for the
    # next boots (lab.aacache). A tar: pax keeps the files' times to the
    # nanosecond, which apparmor_parser compares with the profiles'; a
    # copy through 9p keeps whole seconds, and the cache counts as stale.
    if [ "$(param aasave)" = 1 ] && [ -d /var/cache/apparmor ]; then
        tar -C /var/cache --format=posix -cf /lab/apparmor-cache.tar apparmor || rm -f /lab/apparmor-cache.tar
    fi
    run_command
fi

if [ "${1:-}" != stage2 ]; then
    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev
    for m in $(cat /lib/modules/load-order); do
        insmod "/lib/modules/$m.ko" || { echo "lab-init: insmod $m failed"; halt_now 120; }
    done
    o=trans=virtio,version=9p2000.L,msize=512000
    mount -t 9p -o "$o,ro,cache=loose" hostroot /lower || { echo "lab-init: no hostroot"; halt_now 121; }
    mount -t tmpfs -o mode=0755 upper /upper
    mkdir -p /upper/data /upper/work
    # the unpacked extra packages (lab.extra=, udev) as a layer above the
    # build machine's root: copying them in cost ~6 s of every boot
    lower=/lower
    root=$(param root)
    [ -z "$root" ] || lower=/lower$root
    extra=$(param extra)
    case "$extra" in
    /*:* | *:*) ;;
    /*)
        # its own 9p device, tag "extra" (labhost.py): a layer inside
        # another overlaps it (ELOOP), and a second mount of hostroot gets
        # no channel (one mount per virtio-9p device)
        mkdir -p /extra
        mount -t 9p -o "$o,ro,cache=loose" extra /extra || { echo "lab-init: no extra share ($extra)"; halt_now 124; }
        lower="/extra:$lower"
        ;;
    esac
    mount -t overlay -o "lowerdir=$lower,upperdir=/upper/data,workdir=/upper/work" overlay /newroot ||
        { echo "lab-init: overlayfs failed"; halt_now 122; }
    if [ -n "$root" ]; then
        for b in $(param binds | tr , ' '); do
            mkdir -p "/newroot$b" && mount -o bind "/lower$b" "/newroot$b" ||
                { echo "lab-init: cannot bind $b"; halt_now 127; }
        done
    fi
    mkdir -p /newroot/lab
    mount -t 9p -o "$o,cache=none" lab /newroot/lab || { echo "lab-init: no lab share"; halt_now 123; }
    mount --move /dev /newroot/dev
    mount --move /proc /newroot/proc
    mount --move /sys /newroot/sys
    exec switch_root /newroot /bin/sh /lab/lab-init.sh stage2
fi

# --- stage 2 ---------------------------------------------------------------
# lab.keep: folders under /run or /var/tmp (a test cache there, a clone)
# that the fresh tmpfs below would hide: bound aside first, then back
i=0
for k in $(param keep | tr , ' '); do
    mkdir -p "/lab/keep/$i" && mount --bind "$k" "/lab/keep/$i"
    i=$((i + 1))
done
for d in /run /var/tmp; do
    mount -t tmpfs -o mode=1777 tmpfs "$d"
done
i=0
for k in $(param keep | tr , ' '); do
    mkdir -p "$k" && mount --bind "/lab/keep/$i" "$k"
    i=$((i + 1))
done
chmod 0755 /run
mkdir -p /run/lock /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || true
krel=$(uname -r)
mods=$(param modules)
if [ -n "$mods" ] && [ -d "$mods" ]; then
    mkdir -p "/lib/modules/$krel"
    mount --bind "$mods" "/lib/modules/$krel"
fi
# a host with systemd has /dev/net/tun from kmod's static nodes, which load
# tun on first open; here nothing makes those nodes, so load it (QEMU's
# tap networking, libvirt's <interface type='bridge'|'network'>)
modprobe -q tun 2>/dev/null || true
# lab.kvm=1 (lab_host.py --kvm; labhost.py says why): kvm_amd on the SVM
# that TCG emulates, /dev/kvm as Debian's udev rule makes it
# (50-udev-default.rules: group kvm, 0660) for QEMU as libvirt-qemu where
# no udevd runs; run_command names the domain type
if [ "$(param kvm)" = 1 ]; then
    if modprobe -q kvm_amd 2>/dev/null && [ -c /dev/kvm ]; then
        chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
    else
        echo "lab-init: lab.kvm=1 but no /dev/kvm (kvm_amd: svm in /proc/cpuinfo?); nested guests on TCG" >&2
    fi
fi
hostname lab 2>/dev/null || echo lab >/proc/sys/kernel/hostname
ip link set lo up 2>/dev/null || true
echo 4 >/proc/sys/kernel/printk


if [ "$(param systemd)" = 1 ]; then
    # a host of its own: its name, and no container's policy-rc.d (the
    # build machine's refuses every start, which a postinst's
    # deb-systemd-invoke would obey), nor its mark
    echo lab >/etc/hostname
    rm -f /usr/sbin/policy-rc.d
    # a container's mark, for which systemd would take itself for a
    # container's init: no kernel command line, no udevd, no AppArmor
    rm -f /.dockerenv /run/.containerenv
    cp -P /lab/systemd/* /etc/systemd/system/ || halt_now 126
    # Debian's tmp.conf empties /tmp at boot ("D"): here that is the build
    # machine's /tmp, whiteouts by the thousand (90 s under TCG), and the
    # tree under test when it lives there
    mkdir -p /etc/tmpfiles.d
    echo 'd /tmp 1777 root root -' >/etc/tmpfiles.d/tmp.conf
    # an installed host keeps AppArmor's compiled profiles from its last
    # boot; this root is new at each (labhost.py: lab.aacache=, made by an
    # earlier boot with the same profiles, parser and kernel)
    aacache=$(param aacache)
    if [ -n "$aacache" ] && [ -f "$aacache" ]; then
        tar -C /var/cache -xf "$aacache" || echo "lab-init: AppArmor's cache not unpacked" >&2
    fi
    # apt's caches (labhost.py apt_caches()), which the container's
    # docker-clean turns off and an installed host keeps; and no
    # PackageKit hook: packagekit.service is masked (labhost.py), a KVM
    # host without a desktop has none, and its hook then only fails, ~10 s
    # per apt run under TCG
    [ -f /lab/apt.conf ] && cp /lab/apt.conf /etc/apt/apt.conf.d/zz-lab-caches
    # systemd-update-done's marks, which an installed host has from its
    # first boot: without them ldconfig.service and friends run at each
    # (ConditionNeedsUpdate=), ~17 s under TCG in the trixie root
    [ -e /etc/.updated ] || touch /etc/.updated /var/.updated
    # Debian 13 mounts a tmpfs on /tmp (tmp.mount), which would hide the
    # folders bound there (lab.binds: a clone under /tmp, as CI's may be)
    case ",$(param binds)," in
    *,/tmp/*) ln -sf /dev/null /etc/systemd/system/tmp.mount ;;
    esac
    rm -f /etc/apt/apt.conf.d/20packagekit
    exec /lib/systemd/systemd
fi
run_command
