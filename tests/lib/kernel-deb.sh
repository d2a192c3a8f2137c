# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=sh
#
# kernel-deb.sh: shell functions shared by the scripts that boot a Debian
# kernel under QEMU (tests/guest/build-guest.sh, tests/lab/build-lab-kernel.sh).
# Source it; the caller sets -eu and defines die().
#
#   kdeb_candidate PKG            print the version apt would install of PKG
#   kdeb_extract DEB DIR          unpack the kernel package DEB into DIR and
#                                 print its release (DIR/boot/vmlinuz-REL)
#   kdeb_download DEBDIR PKG VER  fetch PKG=VER with `apt-get download` into
#                                 DEBDIR, print its path; DEBDIR keeps one kernel
#                                 .deb, so give each user its own
#   kdeb_vmlinux VMLINUZ OUT      write the ELF kernel inside an xz bzImage to
#                                 OUT; false if there is none. QEMU boots that
#                                 ELF through its PVH entry point, which saves the
#                                 ~5 s the xz decompressor costs under TCG
#   kdeb_mod_order MODDIR MOD...  print MODs with their dependencies first, in
#                                 load order (reads each module's depends=, so it
#                                 needs no modules.dep)
#   kdeb_copy_mod MODDIR MOD DEST write MOD's .ko, decompressed, to DEST

kdeb_candidate() {
    _ver=$(apt-cache policy "$1" | awk '/Candidate:/ { print $2 }')
    [ -n "$_ver" ] && [ "$_ver" != "(none)" ] || die "no candidate version of $1"
    echo "$_ver"
}

kdeb_extract() {
    echo "kernel-deb: extracting $(basename "$1")" >&2
    dpkg-deb -x "$1" "$2"
    _vmlinuz=$(ls "$2"/boot/vmlinuz-* | head -n1)
    [ -n "$_vmlinuz" ] || die "no kernel in $1"
    echo "${_vmlinuz##*/vmlinuz-}"
}

kdeb_download() {
    _dir=$1 _pkg=$2 _ver=$3
    _deb=$(ls "$_dir/${_pkg}_$(echo "$_ver" | sed 's/:/%3a/')_"*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$_deb" ]; then
        rm -f "$_dir"/linux-image-*.deb
        echo "kernel-deb: downloading $_pkg $_ver" >&2
        # apt's sandbox user may not write into the cache; the download is
        # verified against the package lists all the same.
        (cd "$_dir" && apt-get download -q "$_pkg=$_ver" 2>&1 |
            grep -v '^W: Download is performed unsandboxed' >&2) || true
        _deb=$(ls "$_dir/${_pkg}_"*.deb 2>/dev/null | head -n1 || true)
        [ -n "$_deb" ] || die "apt-get download $_pkg=$_ver failed"
    fi
    echo "$_deb"
}

kdeb_vmlinux() {
    # The bzImage's payload is one xz stream (bookworm's 6.1,
    # CONFIG_KERNEL_XZ) or one zstd frame (6.12, CONFIG_KERNEL_ZSTD): the
    # kernel ELF. What follows the frame makes zstd fail once it has written
    # it, so the ELF header is the test.
    rm -f "$2.tmp"
    _off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | head -n1 | cut -d: -f1)
    if [ -n "$_off" ]; then
        tail -c +$((_off + 1)) "$1" | xz -dc --single-stream >"$2.tmp" 2>/dev/null || true
    else
        _off=$(LC_ALL=C grep -obUaP '\x28\xb5\x2f\xfd' "$1" | head -n1 | cut -d: -f1)
        [ -n "$_off" ] || return 1
        command -v zstd >/dev/null 2>&1 || return 1
        tail -c +$((_off + 1)) "$1" | zstd -dcq >"$2.tmp" 2>/dev/null || true
    fi
    if [ "$(head -c 4 "$2.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
        mv "$2.tmp" "$2"
        return 0
    fi
    rm -f "$2.tmp"
    return 1
}

kdeb_find_mod() {
    _f=$(find "$1/kernel" -name "$2.ko" -o -name "$2.ko.xz" | head -n1)
    [ -n "$_f" ] || die "module $2 not found in $1"
    echo "$_f"
}

kdeb_mod_deps() {
    _f=$(kdeb_find_mod "$1" "$2")
    case "$_f" in
    *.xz) xz -dc "$_f" ;;
    *) cat "$_f" ;;
    esac | tr '\0' '\n' | grep -a '^depends=' | head -n1 | cut -d= -f2 | tr ',' ' '
}

kdeb_mod_order() {
    _kd_moddir=$1
    shift
    _kd_order=""
    for _m in "$@"; do
        _kdeb_add "$_m"
    done
    echo "$_kd_order"
}

_kdeb_add() {
    case " $_kd_order " in *" $1 "*) return 0 ;; esac
    # the word list is expanded before the loop runs and $1 is this call's
    # own, so the recursion needs no locals
    for _d in $(kdeb_mod_deps "$_kd_moddir" "$1"); do
        _kdeb_add "$_d"
    done
    _kd_order="$_kd_order $1"
}

kdeb_copy_mod() {
    _f=$(kdeb_find_mod "$1" "$2")
    case "$_f" in
    *.xz) xz -dc "$_f" >"$3" ;;
    *) cp "$_f" "$3" ;;
    esac
}
