#!/bin/sh
# Installs every Debian 12 package vdpa-allocator builds, runs and tests with.
# Idempotent: packages already present are left alone, and the package lists
# are refreshed once per run only when something is missing.
set -eu

packages="
    build-essential clang libclang-rt-14-dev meson ninja-build pkg-config
    clang-format valgrind git ccache
    libglib2.0-dev libglib2.0-bin libxml2-dev libxml2-utils
    libudev-dev libmnl-dev libseccomp-dev libsqlite3-dev sqlite3 libjson-glib-dev libsmartcols-dev
    libpolkit-gobject-1-dev libvirt-dev libvirt-clients
    dbus-daemon python3 python3-dbus python3-gi python3-dbusmock python3-jsonschema
    umockdev libumockdev-dev gir1.2-umockdev-1.0
    iproute2 strace
    libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86
    busybox-static iperf3 cpio zstd kmod gcc-12 make
    openvswitch-switch
    debhelper dh-dkms dpkg-dev lintian udev bash-completion libdbus-1-dev
    python3-matplotlib python3-prometheus-client
    apparmor libvirt-daemon-system polkitd
    mmdebstrap
"

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: must run as root (apt-get install)" >&2
    exit 1
fi

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# libvirt-daemon-system and apparmor are for the lab host's installed-host
# case (tests/lab/test_lab_installed.py), which boots this root with systemd:
# here nothing of theirs must run. Without systemd as PID 1 their postinsts
# only enable units (deb-systemd-helper) and start nothing through
# deb-systemd-invoke; invoke-rc.d asks policy-rc.d, which containers set to
# refuse; on a host that runs systemd, libvirtd would be started.
apt-get -o DPkg::Lock::Timeout=900 update -qq
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends $missing
