#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build.sh KERNELRELEASE [KERNEL_BUILD_DIR]
#
# vdpa-allocator-mlx5-dkms: builds mlx5_core with CONFIG_MLX5_VDPA_NET, and
# mlx5_vdpa and vringh (which mlx5_vdpa needs and Debian does not build),
# for the Debian kernel KERNELRELEASE, from that kernel's own Debian source
# (linux-source-X.Y at the kernel's version) against its headers
# (KERNEL_BUILD_DIR, default /lib/modules/KERNELRELEASE/build). DKMS runs it
# (dkms.conf's MAKE) in its build folder; the modules land in ./out/.
#
# mlx5_core checks CONFIG_MLX5_VDPA_NET before it creates the "vnet"
# auxiliary device each VF's mlx5_vdpa binds to (core/dev.c,
# mlx5_vnet_supported): mlx5_vdpa alone would never see a device, so
# mlx5_core is rebuilt too. Every other option is the kernel's own: the
# headers' include/config/auto.conf and autoconf.h, which must be the
# running kernel's config (/boot/config-KERNELRELEASE) line for line; the
# make line adds only the three symbols below, as Kconfig would have set
# them with CONFIG_MLX5_VDPA_NET=m.
#
# Refuses, with one line on stderr and status 1: a kernel other than 6.12.x
# (the only series this has been built for), a kernel that does not have
# mlx5_core as a module, that has CONFIG_MLX5_VDPA_NET already, whose
# headers' config differs from its own, or whose Debian version is not the
# version of the linux-source-X.Y installed.
#
# For tests only (no host has these set): VA_MLX5_KERNEL_VERSION (the
# kernel's Debian version, else dpkg's linux-image-KERNELRELEASE or
# linux-headers-KERNELRELEASE), VA_MLX5_SOURCE_VERSION and
# VA_MLX5_SOURCE_TARBALL (else dpkg's linux-source-X.Y and
# /usr/src/linux-source-X.Y.tar.xz), VA_MLX5_KERNEL_CONFIG (else
# /boot/config-KERNELRELEASE), VA_MLX5_JOBS (else nproc).
set -eu

refuse() {
    echo "vdpa-allocator-mlx5: $*" >&2
    exit 1
}

krel=${1:?usage: build.sh KERNELRELEASE [KERNEL_BUILD_DIR]}
ksrc=${2:-/lib/modules/$krel/build}
here=$(pwd)

case "$krel" in
6.12.*) series=6.12 ;;
*) refuse "kernel $krel is not 6.12.x: only Debian's 6.12 kernels are known to build; use a kernel with CONFIG_MLX5_VDPA_NET (docs/connectx-hosts.md)" ;;
esac
spkg=linux-source-$series

[ -f "$ksrc/Makefile" ] && [ -f "$ksrc/.config" ] && [ -f "$ksrc/Module.symvers" ] ||
    refuse "no headers for $krel in $ksrc: apt install linux-headers-$krel"

# the running kernel's config, and the headers' the same
kconfig=${VA_MLX5_KERNEL_CONFIG:-/boot/config-$krel}
[ -f "$kconfig" ] || refuse "no $kconfig: cannot compare the headers' config with the kernel's"
# Debian's build adds four lines to the headers' .config that
# /boot/config-KREL lacks (seen on 6.12.118-1~deb12u1): the build salt and
# the signing key's settings, which change no module's code
build_only='^CONFIG_(BUILD_SALT|MODULE_SIG_ALL|MODULE_SIG_KEY|SYSTEM_TRUSTED_KEYS)='
grep '^CONFIG_' "$kconfig" | grep -Ev "$build_only" | LC_ALL=C sort >"$here/config.kernel"
grep '^CONFIG_' "$ksrc/.config" | grep -Ev "$build_only" | LC_ALL=C sort >"$here/config.headers"
cmp -s "$here/config.kernel" "$here/config.headers" ||
    refuse "the config of $ksrc differs from $kconfig ($(diff "$here/config.kernel" "$here/config.headers" | grep -c '^[<>]') lines): headers of another build"
opt() { sed -n "s/^$1=//p" "$here/config.kernel"; }
[ "$(opt CONFIG_MLX5_CORE)" = m ] || refuse "kernel $krel has CONFIG_MLX5_CORE='$(opt CONFIG_MLX5_CORE)', not a module: nothing to replace"
[ -z "$(opt CONFIG_MLX5_VDPA_NET)" ] || refuse "kernel $krel has CONFIG_MLX5_VDPA_NET=$(opt CONFIG_MLX5_VDPA_NET) already: this package is not needed"
case "$(opt CONFIG_VDPA)$(opt CONFIG_VHOST_IOTLB)" in
mm | yy | my | ym) ;;
*) refuse "kernel $krel lacks CONFIG_VDPA or CONFIG_VHOST_IOTLB, which mlx5_vdpa needs" ;;
esac
case "$(opt CONFIG_VHOST_RING)" in
"") build_vringh=1 ;;
m | y) build_vringh= ;;
*) refuse "kernel $krel has CONFIG_VHOST_RING='$(opt CONFIG_VHOST_RING)'" ;;
esac

# the kernel's Debian version, and the source's: the same
dpkg_ver() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || true; }
kver=${VA_MLX5_KERNEL_VERSION:-$(dpkg_ver "linux-image-$krel")}
[ -n "$kver" ] || kver=$(dpkg_ver "linux-image-$krel-unsigned")
[ -n "$kver" ] || kver=$(dpkg_ver "linux-headers-$krel")
[ -n "$kver" ] || refuse "no Debian package of kernel $krel (linux-image-$krel): only Debian's kernels are supported"
sver=${VA_MLX5_SOURCE_VERSION:-$(dpkg_ver "$spkg")}
tarball=${VA_MLX5_SOURCE_TARBALL:-/usr/src/$spkg.tar.xz}
[ "$sver" = "$kver" ] && [ -f "$tarball" ] ||
    refuse "kernel $krel is Debian's linux $kver but $spkg is ${sver:-not installed}: apt install $spkg=$kver (remove this package if that version is gone from the archive)"

# the drivers' folders out of the source, and the headers mlx5_core reaches
# by relative path (mlxfw)
rm -rf "$here/src" "$here/out"
mkdir -p "$here/src" "$here/out"
subdirs="drivers/net/ethernet/mellanox/mlx5/core drivers/vdpa/mlx5"
[ -z "$build_vringh" ] || subdirs="$subdirs drivers/vhost"
members=
for d in $subdirs drivers/net/ethernet/mellanox/mlxfw; do
    members="$members $spkg/$d"
done
# shellcheck disable=SC2086
xz -dc "$tarball" | tar -x -C "$here/src" --strip-components=1 $members ||
    refuse "unpacking $members from $tarball failed"
printf 'obj-y += %s/\n' $subdirs >"$here/src/Kbuild"

# Kconfig's effect of CONFIG_MLX5_VDPA_NET=m: on the make line for the
# Makefiles, as C macros for mlx5_core's IS_ENABLED(CONFIG_MLX5_VDPA_NET);
# drivers/vhost's other modules are the kernel's own: off here
kconf="CONFIG_MLX5_VDPA=y CONFIG_MLX5_VDPA_NET=m"
kcflags="-DCONFIG_MLX5_VDPA=1 -DCONFIG_MLX5_VDPA_NET_MODULE=1"
# drivers/vdpa/mlx5/Makefile finds its headers under $(srctree), the
# kernel's tree, which headers packages do not carry: ours instead
kcflags="$kcflags -I$here/src/drivers/vdpa/mlx5/core"
if [ -n "$build_vringh" ]; then
    kconf="$kconf CONFIG_VHOST_RING=m"
    kconf="$kconf $(grep -o 'CONFIG_VHOST[A-Z0-9_]*' "$here/src/drivers/vhost/Makefile" | sort -u |
        grep -vx CONFIG_VHOST_RING | sed 's/$/=/' | tr '\n' ' ')"
fi
# no BTF for out-of-tree modules (needs pahole and the vmlinux), and no
# debug info: DKMS strips it at install, and it is half the build time
kconf="$kconf CONFIG_DEBUG_INFO_BTF_MODULES= CONFIG_DEBUG_INFO="

# the compiler the kernel was built with, when the headers name it
cc=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\([^ ]*gcc-[0-9]*\) .*/\1/p' "$here/config.kernel")
[ -n "$cc" ] && command -v "$cc" >/dev/null 2>&1 || cc=gcc

echo "vdpa-allocator-mlx5: building mlx5_core, mlx5_vdpa${build_vringh:+, vringh} for $krel from $spkg $sver with $cc"
# shellcheck disable=SC2086
make -C "$ksrc" M="$here/src" CC="$cc" -j"${VA_MLX5_JOBS:-$(nproc)}" $kconf KCFLAGS="$kcflags" modules

for m in mlx5_core mlx5_vdpa ${build_vringh:+vringh}; do
    f=$(find "$here/src" -name "$m.ko" | head -n1)
    [ -n "$f" ] || refuse "make built no $m.ko"
    cp "$f" "$here/out/"
done
# mlx5_core must create the vnet auxiliary device now: without the option
# mlx5_vnet_supported() is "return false", 16 bytes (Debian's 6.12)
size=$(nm -S "$here/out/mlx5_core.ko" | awk '$4 == "mlx5_vnet_supported" { print $2 }')
[ -n "$size" ] && [ $((0x$size)) -gt 32 ] ||
    refuse "the built mlx5_core.ko's mlx5_vnet_supported is ${size:-absent} bytes (hex): CONFIG_MLX5_VDPA_NET did not take"
echo "vdpa-allocator-mlx5: built $(cd "$here/out" && echo *.ko), vermagic '$(modinfo -F vermagic "$here/out/mlx5_core.ko")'"
