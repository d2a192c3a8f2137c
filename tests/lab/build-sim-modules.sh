#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-sim-modules.sh [CACHE_DIR]
#
# Builds the kernel's own simulated drivers for the lab host (issue 17), which
# Debian's kernel does not ship: netdevsim (drivers/net/netdevsim: devlink,
# SR-IOV VFs, eswitch modes, representors), vdpa_sim and vdpa_sim_net
# (drivers/vdpa/vdpa_sim), and vringh (drivers/vhost/vringh.c), which
# vdpa_sim needs and Debian does not build either (CONFIG_VHOST_RING is
# unset: nothing in its config selects it; no mlx5_vdpa, no vp_vdpa).
#
# They are built out of tree, at test time, against the headers of exactly
# the release build-lab-kernel.sh boots (its KREL=):
#   linux-source-X.Y, linux-headers-KREL, its -common headers and its
#   linux-kbuild, all at the lab kernel's version, fetched with
#   `apt-get download` into CACHE_DIR/lab/sim/debs and unpacked with
#   dpkg-deb -x (never installed);
#   `make -C <headers> M=<tree>` with the drivers' Kconfig symbols on the make
#   line; no BTF for the modules (it needs pahole and nothing here reads
#   it); no signing: `modules` does not sign (Debian signs at
#   modules_install, with a key it does not ship), and the lab kernel has
#   CONFIG_MODULE_SIG=y without MODULE_SIG_FORCE, so it loads them and
#   taints itself.
# The .ko files land in CACHE_DIR/lab/sim/ko and are copied into the lab
# kernel's module tree (build-lab-kernel.sh's MODULES=) under updates/va-sim
# with a fresh depmod, so `modprobe netdevsim` and `modprobe vdpa_sim_net`
# work in the lab host as for any module of the kernel.
# A stamp of the inputs: unchanged, no rebuild (the install into MODULES is
# checked each run: build-lab-kernel.sh replaces that tree when it rebuilds).
#
# Prints SIM_MODULES=<dir of .ko files> and SIM_KREL= on stdout, the time
# taken on stderr. Needs what build-lab-kernel.sh needs, make and gcc-12 (the
# compiler Debian's 6.12 is built with).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-sim-modules: $*" >&2
    exit 1
}
va_test_lib=$here/../lib
. "$va_test_lib/kernel-deb.sh"
. "$va_test_lib/kernel-headers.sh"
. "$va_test_lib/test-cache.sh"
va_cache_open lab/sim "${1:-}"
out=$cache/lab/sim
debs=$out/debs
mkdir -p "$out" "$debs"

now() { date +%s.%N; }
t0=$(now)
since() { awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

for tool in apt-cache apt-get dpkg-deb make depmod modinfo xz tar; do
    command -v "$tool" >/dev/null 2>&1 || die "missing $tool"
done

kh_lab_kernel "$here" "$cache"

# the drivers' Kconfig symbols; every other symbol of the Makefiles they sit
# in stays as Debian's config has it, except drivers/vhost's, where only
# vringh is ours to build (the rest are Debian's modules already)
kconf="CONFIG_NETDEVSIM=m CONFIG_VDPA_SIM=m CONFIG_VDPA_SIM_NET=m CONFIG_VHOST_RING=m CONFIG_DEBUG_INFO_BTF_MODULES="
subdirs="drivers/net/netdevsim drivers/vdpa/vdpa_sim drivers/vhost"
want="netdevsim vringh vdpa_sim vdpa_sim_net"

key="script=$(cat "$0" "$here/../lib/kernel-deb.sh" "$here/../lib/kernel-headers.sh" | sha256sum | cut -d' ' -f1)
krel=$krel
pkgs=$kh_spkg $kh_hpkg $kh_cpkg $kh_bpkg=$kh_ver
cc=$kh_ccver
kconf=$kconf"

install_mods() {
    # into the lab kernel's tree, with its own depmod; skipped when in place
    dest=$mods/updates/va-sim
    inplace=1
    for m in $want; do
        cmp -s "$out/ko/$m.ko" "$dest/$m.ko" || inplace=
    done
    grep -q '^updates/va-sim/netdevsim.ko:' "$mods/modules.dep" 2>/dev/null || inplace=
    [ -n "$inplace" ] && return 0
    rm -rf "$dest"
    mkdir -p "$dest"
    for m in $want; do
        cp "$out/ko/$m.ko" "$dest/$m.ko"
    done
    base=$(mktemp -d "$out/depmod.XXXXXX")
    mkdir -p "$base/lib/modules"
    ln -s "$mods" "$base/lib/modules/$krel"
    depmod -b "$base" "$krel" || { rm -rf "$base"; die "depmod failed"; }
    rm -rf "$base"
    echo "build-sim-modules: installed into $dest, depmod done" >&2
}

if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ]; then
    install_mods
    va_cache_used "$out"
    echo "build-sim-modules: up to date in $out/ko ($(since) s)" >&2
    echo "SIM_MODULES=$out/ko"
    echo "SIM_KREL=$krel"
    exit 0
fi

work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

kh_fetch "$debs"
t_fetch=$(since)
hdir=$(kh_unpack "$work/hdr")
t_hdr=$(since)
tree=$work/tree
# shellcheck disable=SC2086
kh_source "$tree" $subdirs
t_src=$(since)
# one M= tree, one modpost: vdpa_sim's calls into vringh resolve there
printf 'obj-y += %s/\n' $subdirs >"$tree/Kbuild"
# drivers/vhost's other modules are Debian's: their symbols off
vhost_off=$(grep -o 'CONFIG_VHOST[A-Z0-9_]*' "$tree/drivers/vhost/Makefile" | sort -u |
    grep -vx CONFIG_VHOST_RING | sed 's/$/=/' | tr '\n' ' ')

# shellcheck disable=SC2086
make -C "$hdir" M="$tree" -j"$(nproc)" $kconf $vhost_off modules >"$work/make.log" 2>&1 || {
    tail -n 40 "$work/make.log" >&2
    die "make -C $hdir M=$tree modules failed"
}
t_make=$(since)

# each module's vermagic is the lab kernel's (its vdpa.ko's)
kdeb_copy_mod "$mods" vdpa "$work/vdpa.ko"
lab_magic=$(modinfo -F vermagic "$work/vdpa.ko")
case "$lab_magic" in "$krel "*) ;; *) die "lab vdpa.ko has vermagic '$lab_magic', not $krel" ;; esac
mkdir -p "$work/ko"
for m in $want; do
    f=$(find "$tree" -name "$m.ko" | head -n1)
    [ -n "$f" ] || die "make built no $m.ko"
    magic=$(modinfo -F vermagic "$f")
    [ "$magic" = "$lab_magic" ] || die "$m.ko has vermagic '$magic', the lab kernel '$lab_magic'"
    # debug info is most of their size and nothing here reads it
    strip --strip-debug -o "$work/ko/$m.ko" "$f" 2>/dev/null || cp "$f" "$work/ko/$m.ko"
done

rm -rf "$out/ko" "$out/stamp"
mv "$work/ko" "$out/ko"
printf '%s\n' "$key" >"$out/stamp"
install_mods
rm -rf "$work"
echo "build-sim-modules: $want for $krel ($kh_hpkg $kh_ver, $kh_ccver), vermagic '$lab_magic'" >&2
echo "build-sim-modules: cold build $(since) s (at ${t_fetch} s downloaded, ${t_hdr} s headers unpacked, ${t_src} s source unpacked, ${t_make} s make done)" >&2
echo "SIM_MODULES=$out/ko"
echo "SIM_KREL=$krel"
