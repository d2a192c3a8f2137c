#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-guest.sh [CACHE_DIR]
#
# Builds the tiny test guest of docs/pairbench.md from Debian packages, at
# run time, into CACHE_DIR/guest (default: the test cache, tests/lib/vatest/cache.py):
#
#   vmlinuz     Debian's kernel, taken with `apt-get download` and
#               `dpkg-deb -x` (nothing is installed into the host's /boot)
#   vmlinux     the same kernel decompressed out of the bzImage: QEMU boots
#               this ELF directly through its PVH entry point, which saves
#               the ~5 s the xz decompressor costs under TCG
#   initrd.gz   a gzip'd newc cpio: busybox-static, iperf3 with the shared
#               libraries ldd names, the virtio modules the kernel builds as
#               modules (with their dependencies, in load order), the SR-IOV
#               VF drivers of docs/pairbench.md's third path (igbvf,
#               ixgbevf, iavf, mlx5_core, where built as modules; loaded only
#               for a device they match) and guest-init.sh as /init
#   stamp       what the two files were built from; a rebuild with the same
#               inputs does nothing
#
# Prints the two paths (KERNEL=..., INITRD=...) on stdout when done.
# Needs: apt-get (with package lists), dpkg-deb, cpio, gzip, ldd, and the
# packages busybox-static and iperf3 installed (contrib/install-deps.sh).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-guest: $*" >&2
    exit 1
}
va_test_lib=$here/../lib
. "$va_test_lib/kernel-deb.sh"
. "$va_test_lib/test-cache.sh"
va_cache_open guest "${1:-}"
out=$cache/guest
debs=$out/debs
mkdir -p "$out" "$debs"

for tool in apt-cache apt-get dpkg-deb cpio gzip xz ldd; do
    command -v "$tool" >/dev/null 2>&1 || die "missing $tool"
done
busybox=/bin/busybox
[ -x "$busybox" ] || die "no $busybox: install busybox-static"
"$busybox" --list | grep -qx insmod || die "$busybox has no insmod applet"
iperf3=$(command -v iperf3) || die "no iperf3: install iperf3"

# The kernel package linux-image-amd64 points at today.
kernel_pkg() {
    apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
kpkg=$(kernel_pkg)
if [ -z "$kpkg" ] && [ "$(id -u)" -eq 0 ]; then
    # a machine whose packages were all installed before its lists went
    echo "build-guest: no package lists; apt-get update" >&2
    apt-get update -qq >&2 || true
    kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || die "apt-cache knows no linux-image-amd64 (run apt-get update)"
kver=$(kdeb_candidate "$kpkg")

pkgver() {
    dpkg-query -W -f='${Version}' "$1"
}

key="script=$(cat "$0" "$here/guest-init.sh" "$here/load-optional.sh" "$here/../lib/kernel-deb.sh" | sha256sum | cut -d' ' -f1)
kernel=$kpkg=$kver
busybox=$(pkgver busybox-static)
iperf3=$(pkgver iperf3)
libiperf0=$(pkgver libiperf0 2>/dev/null || echo none)"

if [ -f "$out/stamp" ] && [ -f "$out/kernel-name" ] && [ -f "$out/initrd.gz" ] &&
    [ "$(cat "$out/stamp")" = "$key" ]; then
    echo "build-guest: up to date in $out" >&2
    va_cache_used "$out"
    echo "KERNEL=$out/$(cat "$out/kernel-name")"
    echo "INITRD=$out/initrd.gz"
    exit 0
fi

work=$(mktemp -d "$cache/guest-build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# --- kernel ---------------------------------------------------------------
krel=$(kdeb_extract "$(kdeb_download "$debs" "$kpkg" "$kver")" "$work/kpkg")
kvmlinuz=$work/kpkg/boot/vmlinuz-$krel
moddir=$work/kpkg/lib/modules/$krel

# --- initramfs tree -------------------------------------------------------
root=$work/root
mkdir -p "$root/bin" "$root/sbin" "$root/dev" "$root/proc" "$root/sys" \
    "$root/tmp" "$root/etc" "$root/lib/modules" "$root/usr/bin" "$root/usr/sbin"
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
install -m 0755 "$here/guest-init.sh" "$root/init"
install -m 0755 "$here/load-optional.sh" "$root/sbin/va-load-optional"
echo "root:x:0:0:root:/:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

# iperf3 and every shared library ldd names, at the same paths
cp "$iperf3" "$root/usr/bin/iperf3"
ldd "$iperf3" | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
# the interpreter is asked for by its canonical path
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || die "ldd named no /lib64/ld-linux-x86-64.so.2"

# modules: what the kernel builds as =m among the drivers the guest needs,
# with their dependencies first (Debian ships no modules.dep; depmod makes it
# at install time, so read each module's own depends= field)
config=$(ls "$work"/kpkg/boot/config-*)
mods=""
for pair in VIRTIO:virtio VIRTIO_PCI:virtio_pci VIRTIO_NET:virtio_net VIRTIO_CONSOLE:virtio_console; do
    opt=${pair%%:*}
    mod=${pair#*:}
    if grep -qx "CONFIG_$opt=m" "$config"; then
        mods="$mods $mod"
    elif ! grep -qx "CONFIG_$opt=y" "$config"; then
        die "kernel $krel has neither CONFIG_$opt=y nor =m"
    fi
done
: >"$root/lib/modules/load-order"
order=$(kdeb_mod_order "$moddir" $mods)
for m in $order; do
    kdeb_copy_mod "$moddir" "$m" "$root/lib/modules/$m.ko"
    echo "$m" >>"$root/lib/modules/load-order"
done

# optional modules: the VF drivers a guest needs when a VF is passed through
# to it (Intel 82576/igb, 82599/X540, X710/E810 through iavf, ConnectX-4 and
# later), where the kernel builds them as modules. One line each in
# lib/modules/optional: its load order (dependencies first, commas), then
# the PCI aliases it serves; load-optional.sh (at boot) loads a line only
# when a PCI device's modalias matches, so a virtio-only guest pays only
# their bytes.
mod_aliases() {
    _f=$(kdeb_find_mod "$1" "$2")
    case "$_f" in
    *.xz) xz -dc "$_f" ;;
    *) cat "$_f" ;;
    esac | tr '\0' '\n' | grep -a '^alias=pci:' | cut -d= -f2 | tr '\n' ' '
}
: >"$root/lib/modules/optional"
optional=""
for pair in IGBVF:igbvf IXGBEVF:ixgbevf IAVF:iavf MLX5_CORE:mlx5_core; do
    opt=${pair%%:*}
    mod=${pair#*:}
    grep -qx "CONFIG_$opt=m" "$config" || continue
    chain=$(kdeb_mod_order "$moddir" "$mod")
    for m in $chain; do
        [ -e "$root/lib/modules/$m.ko" ] || kdeb_copy_mod "$moddir" "$m" "$root/lib/modules/$m.ko"
    done
    aliases=$(mod_aliases "$moddir" "$mod")
    [ -n "$aliases" ] || die "module $mod serves no PCI alias"
    echo "$(echo $chain | tr ' ' ',') $aliases" >>"$root/lib/modules/optional"
    optional="$optional $(echo $chain | tr ' ' ',')"
done

# --- pack -----------------------------------------------------------------
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -6 >"$work/initrd.gz"
cp "$kvmlinuz" "$work/vmlinuz"
# QEMU boots the ELF inside the bzImage through its PVH entry point; a
# kernel without PVH boots as the bzImage.
kname=vmlinuz
if grep -qx 'CONFIG_PVH=y' "$config" && kdeb_vmlinux "$kvmlinuz" "$work/vmlinux"; then
    kname=vmlinux
    mv "$work/vmlinux" "$out/vmlinux"
fi
rm -f "$out/stamp"
mv "$work/vmlinuz" "$out/vmlinuz"
mv "$work/initrd.gz" "$out/initrd.gz"
echo "$kname" >"$out/kernel-name"
printf '%s\n' "$key" >"$out/stamp"
echo "build-guest: kernel $krel ($kname), modules:$order; optional:${optional:- none}; initrd $(du -k "$out/initrd.gz" | cut -f1) KiB" >&2
echo "KERNEL=$out/$kname"
echo "INITRD=$out/initrd.gz"
