# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=sh
#
# debian-mirror.sh: va_debian_mirror prints the Debian archive apt uses here
# (the first URI serving bookworm in /etc/apt/sources.list*, deb822 URIs:/
# Suites: or one-line sources), or LAB_DEBIAN_MIRROR when set; false when
# there is none. For the scripts that fetch another suite (trixie) from it.

va_debian_mirror() {
    if [ -n "${LAB_DEBIAN_MIRROR:-}" ]; then
        echo "$LAB_DEBIAN_MIRROR"
        return 0
    fi
    _m=$(for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            /^[ \t]*#/ { next }
            /^deb[ \t]/ { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /=/ && $i !~ /\]$/) break
                          if ($(i + 1) ~ /^bookworm(-updates)?$/) { print $i; exit } next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print uri; exit } }
            /^[ \t]*$/ { uri = "" }
        ' "$f"
    done | head -n1)
    [ -n "$_m" ] || return 1
    echo "$_m"
}
