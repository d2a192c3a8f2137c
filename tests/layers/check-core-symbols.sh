#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# "The core knows no D-Bus and no XML" as a fact of the archives, not of
# the include lines: nm -u of the allocator core's static archive names
# no GDBus or polkit call and nothing of the D-Bus adapter (vadaemon); nm
# -u of the core and of every archive of ours it links (vacommon, vahost)
# names no libxml2 symbol (xml*) and nothing of the XML engine (vaxml).
#
#   check-core-symbols.sh NM libvacore.a libvacommon.a libvahost.a libvaxml.a libvadaemon.a
set -eu
[ $# -eq 6 ] || { echo "usage: check-core-symbols.sh NM CORE COMMON HOST XML DAEMON" >&2; exit 2; }
nm=$1 core=$2 common=$3 host=$4 xml=$5 daemon=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the undefined symbols of archives, and the global ones they define
undefined() { "$nm" -u "$@" >"$tmp/nm"; awk '$1 == "U" { print $2 }' "$tmp/nm" | sort -u; }
defined() { "$nm" --defined-only "$@" >"$tmp/nm"; awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ { print $3 }' "$tmp/nm" | sort -u; }

undefined "$core" >"$tmp/core"
undefined "$core" "$common" "$host" >"$tmp/below"
defined "$daemon" >"$tmp/daemon"
defined "$xml" >"$tmp/xml"
# an nm that read nothing must not pass
grep -qx g_free "$tmp/core" || { echo "nm -u $core names no g_free: not the core's archive?"; exit 1; }
grep -qx va_domain_parse "$tmp/xml" || { echo "nm $xml defines no va_domain_parse: not the engine's archive?"; exit 1; }

status=0
{ grep -E '^(g_dbus_|polkit_)' "$tmp/core" || true; comm -12 "$tmp/core" "$tmp/daemon"; } | sort -u >"$tmp/dbus"
if [ -s "$tmp/dbus" ]; then
    echo "the core ($core) calls D-Bus, polkit or the D-Bus adapter:"
    sed 's/^/  /' "$tmp/dbus"
    status=1
fi
{ grep -E '^xml' "$tmp/below" || true; comm -12 "$tmp/below" "$tmp/xml"; } | sort -u >"$tmp/xmlcalls"
if [ -s "$tmp/xmlcalls" ]; then
    echo "the core or an archive it links (vacommon, vahost) calls libxml2 or the XML engine:"
    sed 's/^/  /' "$tmp/xmlcalls"
    status=1
fi
[ $status -ne 0 ] || echo "the core calls no D-Bus, polkit or adapter symbol ($(wc -l <"$tmp/core") undefined); with vacommon and vahost, no libxml2 or engine symbol ($(wc -l <"$tmp/below") undefined)"
exit $status
