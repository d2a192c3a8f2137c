# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=sh
#
# kernel-headers.sh: a Debian kernel's headers and source, for the scripts
# that build modules out of tree against the lab kernel
# (tests/lab/build-sim-modules.sh, tests/lab/build-mlx5-dkms.sh). Source it
# after kernel-deb.sh; the caller sets -eu and defines die().
#
#   kh_lab_kernel LABDIR CACHE
#                       the lab kernel (LABDIR/build-lab-kernel.sh: cached,
#                       or built now): sets krel and mods (its release and
#                       module tree), then kh_pkgs for it, and dies when
#                       apt's headers are not at the lab kernel's version
#   kh_pkgs KREL        sets kh_ver (apt's version of linux-headers-KREL),
#                       kh_hpkg (that package), kh_cpkg (its -common
#                       headers), kh_bpkg (its linux-kbuild), kh_spkg
#                       (linux-source-X.Y), kh_cc (the compiler the
#                       headers name, else gcc) and kh_ccver (its version)
#   kh_fetch DEBDIR     downloads the four at kh_ver into DEBDIR, keeping
#                       one version of each there; sets kh_src_deb and
#                       kh_hdr_debs
#   kh_unpack DIR       unpacks the headers into DIR and prints their build
#                       folder (the flavour's, whose Makefile is pointed at
#                       the unpacked -common tree)
#   kh_source DIR SUBDIR...
#                       unpacks only SUBDIRs of the kernel source into DIR
#   kh_tarball DIR      writes the source's own linux-source-X.Y.tar.xz
#                       into DIR (as the package installs it under
#                       /usr/src) and prints its path

kh_lab_kernel() {
    _kh_paths=$(sh "$1/build-lab-kernel.sh" "$2") || die "build-lab-kernel.sh failed"
    krel=$(printf '%s\n' "$_kh_paths" | sed -n 's/^KREL=//p')
    mods=$(printf '%s\n' "$_kh_paths" | sed -n 's/^MODULES=//p')
    [ -n "$krel" ] && [ -d "$mods" ] || die "build-lab-kernel.sh gave no KREL= or MODULES="
    kh_pkgs "$krel"
    # build-lab-kernel.sh records the kernel package's version in its stamp
    _kh_lab_ver=$(sed -n 's/^kernel=.*=//p' "$2/lab/kernel/stamp" 2>/dev/null || true)
    [ -z "$_kh_lab_ver" ] || [ "$_kh_lab_ver" = "$kh_ver" ] ||
        die "lab kernel is $_kh_lab_ver but apt offers $kh_hpkg $kh_ver"
}

kh_pkgs() {
    kh_hpkg=linux-headers-$1
    kh_ver=$(kdeb_candidate "$kh_hpkg")
    _kh_deps=$(apt-cache show "$kh_hpkg=$kh_ver" | sed -n 's/^Depends: //p' | head -n1)
    kh_cpkg=$(printf '%s\n' "$_kh_deps" | grep -o 'linux-headers-[^ ,]*-common' | head -n1)
    kh_bpkg=$(printf '%s\n' "$_kh_deps" | grep -o 'linux-kbuild-[^ ,]*' | head -n1)
    kh_cc=$(printf '%s\n' "$_kh_deps" | grep -o 'gcc-[0-9][0-9]*' | head -n1)
    [ -n "$kh_cpkg" ] && [ -n "$kh_bpkg" ] ||
        die "$kh_hpkg $kh_ver: no -common or kbuild package in Depends: $_kh_deps"
    kh_spkg=linux-source-$(echo "$1" | cut -d. -f1,2)
    kh_cc=${kh_cc:-gcc}
    command -v "$kh_cc" >/dev/null 2>&1 || die "missing $kh_cc (the compiler $kh_hpkg names)"
    kh_ccver=$("$kh_cc" --version | head -n1)
}

kh_fetch() {
    kh_hdr_debs=
    for _kh_p in "$kh_spkg" "$kh_hpkg" "$kh_cpkg" "$kh_bpkg"; do
        for _kh_d in "$1/${_kh_p}_"*.deb; do
            case "$_kh_d" in
            *"_$(echo "$kh_ver" | sed 's/:/%3a/')_"*) ;;
            *) rm -f "$_kh_d" ;;
            esac
        done
        _kh_deb=$(kdeb_download "$1" "$_kh_p" "$kh_ver")
        if [ "$_kh_p" = "$kh_spkg" ]; then
            kh_src_deb=$_kh_deb
        else
            kh_hdr_debs="$kh_hdr_debs $_kh_deb"
        fi
    done
}

kh_unpack() {
    for _kh_d in $kh_hdr_debs; do
        dpkg-deb -x "$_kh_d" "$1"
    done
    _kh_dir=$1/usr/src/$kh_hpkg
    [ -f "$_kh_dir/Makefile" ] && [ -f "$_kh_dir/Module.symvers" ] || die "$kh_hpkg: no Makefile or Module.symvers"
    # the flavour's Makefile includes the -common tree by its absolute path
    # under /usr/src
    printf 'include %s/Makefile\n' "$1/usr/src/$kh_cpkg" >"$_kh_dir/Makefile"
    [ -d "$_kh_dir/scripts" ] || die "$kh_hpkg: scripts/ does not resolve into $kh_bpkg"
    echo "$_kh_dir"
}

kh_source() {
    _kh_into=$1
    shift
    mkdir -p "$_kh_into"
    _kh_members=
    for _kh_s in "$@"; do
        _kh_members="$_kh_members $kh_spkg/$_kh_s"
    done
    # streamed: only the members, never the whole tarball on disk
    # shellcheck disable=SC2086
    dpkg-deb --fsys-tarfile "$kh_src_deb" | tar -xO "./usr/src/$kh_spkg.tar.xz" | xz -dc |
        tar -x -C "$_kh_into" --strip-components=1 $_kh_members || die "unpacking $_kh_members from $kh_spkg failed"
}

kh_tarball() {
    dpkg-deb --fsys-tarfile "$kh_src_deb" | tar -xO "./usr/src/$kh_spkg.tar.xz" >"$1/$kh_spkg.tar.xz" ||
        die "no $kh_spkg.tar.xz in $kh_src_deb"
    echo "$1/$kh_spkg.tar.xz"
}
