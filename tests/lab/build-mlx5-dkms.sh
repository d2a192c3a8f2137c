#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# build-mlx5-dkms.sh [CACHE_DIR]
#
# Builds the modules of vdpa-allocator-mlx5-dkms (issue 29) for the lab
# kernel, with the make line the package's dkms.conf runs: DKMS's MAKE is
# `sh ./build.sh ${kernelver} ${kernel_source_dir}` in a copy of
# contrib/mlx5-dkms, and so is this, against the headers of exactly the
# release build-lab-kernel.sh boots (its KREL=). What DKMS would find on a
# host is given by the variables build.sh reads for tests:
#   VA_MLX5_KERNEL_VERSION   the lab kernel package's Debian version
#   VA_MLX5_SOURCE_VERSION   linux-source-X.Y's, fetched at that version
#   VA_MLX5_SOURCE_TARBALL   its /usr/src/linux-source-X.Y.tar.xz
#   VA_MLX5_KERNEL_CONFIG    the kernel package's own /boot/config-KREL
# (linux-headers-KREL, its -common and linux-kbuild fetched and unpacked as
# build-sim-modules.sh does: tests/lib/kernel-headers.sh; never installed).
#
# The .ko files land in CACHE_DIR/lab/mlx5-dkms/ko; the lab test
# (lab-mlx5-dkms.sh) installs them under updates/dkms inside the lab host,
# as DKMS would. A stamp of the inputs (this script, build.sh, the package
# versions, the compiler): unchanged, no rebuild.
# Then, each run, what `depmod -a` writes once they are there: depmod run
# here on the lab kernel's tree as it is now with updates/dkms added
# (symlinks, the tree untouched), its modules.* files into
# CACHE_DIR/lab/mlx5-dkms/depmod. DKMS runs depmod at install; the lab host
# would take over two minutes for it under TCG (it reads every .ko.xz), the
# same depmod here 6 s.
#
# Prints MLX5_DKMS=<dir of .ko files>, MLX5_DKMS_DEPMOD=<dir of modules.*>
# and MLX5_DKMS_KREL= on stdout, the time taken on stderr.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
die() {
    echo "build-mlx5-dkms: $*" >&2
    exit 1
}
va_test_lib=$here/../lib
dkms_src=$here/../../contrib/mlx5-dkms
. "$va_test_lib/kernel-deb.sh"
. "$va_test_lib/kernel-headers.sh"
. "$va_test_lib/test-cache.sh"
va_cache_open lab/mlx5-dkms "${1:-}"
out=$cache/lab/mlx5-dkms
debs=$out/debs
mkdir -p "$out" "$debs"

now() { date +%s.%N; }
t0=$(now)
since() { awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

for tool in apt-cache apt-get dpkg-deb depmod make modinfo nm xz tar; do
    command -v "$tool" >/dev/null 2>&1 || die "missing $tool"
done

kh_lab_kernel "$here" "$cache"
want="mlx5_core mlx5_vdpa vringh"

key="script=$(cat "$0" "$va_test_lib/kernel-deb.sh" "$va_test_lib/kernel-headers.sh" "$dkms_src/build.sh" \
    "$dkms_src/dkms.conf" | sha256sum | cut -d' ' -f1)
krel=$krel
pkgs=$kh_spkg $kh_hpkg $kh_cpkg $kh_bpkg=$kh_ver
cc=$kh_ccver"

# the lab tree with updates/dkms, as links: depmod's inputs (the modules,
# modules.order and modules.builtin*) linked, its outputs written fresh
depmod_installed() {
    base=$(mktemp -d "$out/depmod.XXXXXX")
    t=$base/lib/modules/$krel
    mkdir -p "$t/updates"
    for e in "$mods"/* "$mods"/updates/*; do
        [ -e "$e" ] || continue
        case "${e#"$mods"/}" in
        updates | modules.dep* | modules.alias* | modules.symbols* | modules.softdep | modules.devname | \
            modules.weakdep | modules.builtin.alias.bin | modules.builtin.bin) ;;
        updates/*) ln -s "$e" "$t/updates/" ;;
        *) ln -s "$e" "$t/" ;;
        esac
    done
    ln -s "$out/ko" "$t/updates/dkms"
    depmod -b "$base" "$krel" || { rm -rf "$base"; die "depmod failed"; }
    rm -rf "$out/depmod"
    mkdir "$out/depmod"
    find "$t" -maxdepth 1 -name 'modules.*' -type f -exec mv {} "$out/depmod/" \;
    rm -rf "$base"
    grep -q '^updates/dkms/mlx5_vdpa.ko:' "$out/depmod/modules.dep" || die "depmod left mlx5_vdpa out"
}

done_paths() {
    depmod_installed
    echo "MLX5_DKMS=$out/ko"
    echo "MLX5_DKMS_DEPMOD=$out/depmod"
    echo "MLX5_DKMS_KREL=$krel"
}

if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$key" ]; then
    va_cache_used "$out"
    done_paths
    echo "build-mlx5-dkms: up to date in $out/ko, depmod done ($(since) s)" >&2
    exit 0
fi

work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

kh_fetch "$debs"
hdir=$(kh_unpack "$work/hdr")
tarball=$(kh_tarball "$work")
# the kernel package's own config, which build.sh compares with the
# headers' (the image .deb that build-lab-kernel.sh keeps)
kdeb=$(ls "$cache/lab/kernel/debs/linux-image-"*"_$(echo "$kh_ver" | sed 's/:/%3a/')_"*.deb 2>/dev/null | head -n1)
[ -n "$kdeb" ] || die "no linux-image .deb at $kh_ver in $cache/lab/kernel/debs"
dpkg-deb --fsys-tarfile "$kdeb" | tar -xO "./boot/config-$krel" >"$work/config-$krel" ||
    die "no /boot/config-$krel in $kdeb"
t_fetch=$(since)

# DKMS's build folder: a copy of the package's source (dkms.conf, build.sh)
mkdir -p "$work/dkms"
cp "$dkms_src/build.sh" "$dkms_src/dkms.conf" "$work/dkms/"
(cd "$work/dkms" && VA_MLX5_KERNEL_VERSION=$kh_ver VA_MLX5_SOURCE_VERSION=$kh_ver \
    VA_MLX5_SOURCE_TARBALL=$tarball VA_MLX5_KERNEL_CONFIG=$work/config-$krel \
    sh ./build.sh "$krel" "$hdir") >"$work/make.log" 2>&1 || {
    tail -n 40 "$work/make.log" >&2
    die "build.sh $krel $hdir failed"
}
t_make=$(since)

mkdir -p "$work/ko"
for m in $want; do
    [ -f "$work/dkms/out/$m.ko" ] || die "build.sh left no out/$m.ko"
    # DKMS strips at install too (its STRIP default)
    strip --strip-debug -o "$work/ko/$m.ko" "$work/dkms/out/$m.ko" 2>/dev/null || cp "$work/dkms/out/$m.ko" "$work/ko/$m.ko"
done
cp "$work/make.log" "$work/ko/build.log"
rm -rf "$out/ko" "$out/stamp"
mv "$work/ko" "$out/ko"
printf '%s\n' "$key" >"$out/stamp"
rm -rf "$work"
grep '^vdpa-allocator-mlx5:' "$out/ko/build.log" | sed 's/^/build-mlx5-dkms: /' >&2 || true
done_paths
echo "build-mlx5-dkms: cold build $(since) s (at ${t_fetch} s fetched and unpacked, ${t_make} s built), depmod done" >&2
