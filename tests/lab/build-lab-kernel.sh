#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-lab-kernel.sh [CACHE_DIR]
#
# Prepares the lab host's kernel (docs/test-tiers.md, issue 7) at run time
# into CACHE_DIR/lab/kernel (default: the test cache, tests/lib/vatest/cache.py):
#
#   vmlinux     Debian's 6.12 kernel (linux-image-6.12.*+deb12-amd64-unsigned,
#               from bookworm-security; LAB_KERNEL_PKG picks another), the ELF
#               out of the bzImage for a fast PVH boot under TCG
#   modules/    the package's /lib/modules/KREL tree with a modules.dep made by
#               depmod here; the lab host binds it over its /lib/modules/KREL
#               so modprobe works there
#   initrd.gz   busybox-static, the modules that mount the root (virtio-9p,
#               overlayfs) and lab-init.sh as /init
#   extra/      packages the lab host needs and the build machine lacks,
#               unpacked with dpkg-deb -x (never installed here); lab-init.sh
#               copies the tree into the lab host's overlay. Today: udev (its
#               systemd-udevd, udevadm and rules), at the version of the
#               installed libudev1, whose other dependencies systemd brings
#   stamp       what they were built from; same inputs, no rebuild
#
# Prints KERNEL=, INITRD=, MODULES= and KREL= lines on stdout.
# Needs: apt-get with bookworm-security in its lists, dpkg-deb, depmod, cpio,
# gzip, xz, busybox-static.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-lab-kernel: $*" >&2
    exit 1
}
va_test_lib=$here/../lib
. "$va_test_lib/kernel-deb.sh"
. "$va_test_lib/test-cache.sh"
va_cache_open lab/kernel "${1:-}"
out=$cache/lab/kernel
debs=$out/debs  # its own: build-guest.sh keeps another kernel .deb
mkdir -p "$out" "$debs"

for tool in apt-cache apt-get dpkg-deb depmod cpio gzip xz; do
    command -v "$tool" >/dev/null 2>&1 || die "missing $tool"
done
[ -x /bin/busybox ] && /bin/busybox --list | grep -qx switch_root ||
    die "no /bin/busybox with switch_root: install busybox-static"

newest_612() {
    apt-cache pkgnames linux-image-6.12. 2>/dev/null |
        grep -E '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | sort -V | tail -n1
}
kpkg=${LAB_KERNEL_PKG:-$(newest_612)}
if [ -z "$kpkg" ] && [ "$(id -u)" -eq 0 ]; then
    echo "build-lab-kernel: no 6.12 kernel in the package lists; apt-get update" >&2
    apt-get update -qq >&2 || true
    kpkg=$(newest_612)
fi
[ -n "$kpkg" ] || die "apt knows no linux-image-6.12.*+deb12-amd64-unsigned (bookworm-security in sources?)"
kver=$(kdeb_candidate "$kpkg")

# the modules /init loads to mount the root (virtio and virtio_pci are
# built in); the rest come from modprobe once the root is up
boot_mods="9pnet_virtio 9p overlay"

extra_pkgs=udev
udev_ver=$(dpkg-query -W -f='${Version}' libudev1 2>/dev/null || true)
[ -n "$udev_ver" ] || die "libudev1 is not installed"

key="script=$(cat "$0" "$here/lab-init.sh" "$here/../lib/kernel-deb.sh" | sha256sum | cut -d' ' -f1)
kernel=$kpkg=$kver
extra=$extra_pkgs=$udev_ver
busybox=$(dpkg-query -W -f='${Version}' busybox-static)"

if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ]; then
    echo "build-lab-kernel: up to date in $out" >&2
    va_cache_used "$out"
    cat "$out/paths"
    exit 0
fi

work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

krel=$(kdeb_extract "$(kdeb_download "$debs" "$kpkg" "$kver")" "$work/kpkg")
kvmlinuz=$work/kpkg/boot/vmlinuz-$krel
moddir=$work/kpkg/lib/modules/$krel
depmod -b "$work/kpkg" "$krel" || die "depmod failed"
grep -qx 'CONFIG_PVH=y' "$work/kpkg/boot/config-$krel" || die "$krel has no PVH entry point"
kdeb_vmlinux "$kvmlinuz" "$work/vmlinux" || die "no ELF kernel inside $kvmlinuz"

mkdir -p "$work/extra"
for p in $extra_pkgs; do
    d=$(ls "$debs/${p}_"*.deb 2>/dev/null | head -n1 || true)
    case "$d" in
    *"_$(echo "$udev_ver" | sed 's/:/%3a/')_"*) ;;
    *)
        rm -f "$debs/${p}_"*.deb
        (cd "$debs" && apt-get download -q "$p=$udev_ver" 2>&1 |
            grep -v '^W: Download is performed unsandboxed' >&2) || true
        d=$(ls "$debs/${p}_"*.deb 2>/dev/null | head -n1 || true)
        [ -n "$d" ] || die "apt-get download $p=$udev_ver failed"
        ;;
    esac
    dpkg-deb -x "$d" "$work/extra"
done
# merged /usr as on the build machine: /lib, /bin, /sbin are symlinks there,
# which cp -a will not write a directory over
for d in lib bin sbin; do
    if [ -L "/$d" ] && [ -d "$work/extra/$d" ]; then
        mkdir -p "$work/extra/usr/$d"
        cp -a "$work/extra/$d/." "$work/extra/usr/$d/"
        rm -rf "${work:?}/extra/$d"
    fi
done

root=$work/root
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/lib/modules" \
    "$root/lower" "$root/upper" "$root/newroot"
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount mkdir insmod switch_root cat echo poweroff sleep sync; do
    ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$here/lab-init.sh" "$root/init"
order=$(kdeb_mod_order "$moddir" $boot_mods)
for m in $order; do
    kdeb_copy_mod "$moddir" "$m" "$root/lib/modules/$m.ko"
    echo "$m" >>"$root/lib/modules/load-order"
done
[ -s "$root/lib/modules/load-order" ] || die "no boot modules found"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -6 >"$work/initrd.gz"

rm -rf "$out/stamp" "$out/modules" "$out/vmlinux" "$out/initrd.gz" "$out/extra"
mv "$work/extra" "$out/extra"
mv "$work/vmlinux" "$out/vmlinux"
mv "$work/initrd.gz" "$out/initrd.gz"
mv "$moddir" "$out/modules"
cat >"$out/paths" <<EOF
KERNEL=$out/vmlinux
INITRD=$out/initrd.gz
MODULES=$out/modules
EXTRA=$out/extra
KREL=$krel
EOF
printf '%s\n' "$key" >"$out/stamp"
echo "build-lab-kernel: $kpkg $kver, boot modules: $(tr '\n' ' ' <"$root/lib/modules/load-order")" >&2
cat "$out/paths"
