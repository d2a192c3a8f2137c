#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# "The core knows no D-Bus and no XML" as a fact of the archives, not of
# the include lines: nm -u of the allocator core's static archive names
# no GDBus or polkit call and nothing of the D-Bus adapter (vadaemon); nm
# -u of the core and of every archive of ours it links (vacommon, vahost)
# names no libxml2 symbol (xml*) and nothing of the XML engine (vaxml).
# No temporary files and no trap: valgrind's setup runs this under
# valgrind, and dash's trap leaks.
#
#   check-core-symbols.sh NM libvacore.a libvacommon.a libvahost.a libvaxml.a libvadaemon.a
set -eu
[ $# -eq 6 ] || { echo "usage: check-core-symbols.sh NM CORE COMMON HOST XML DAEMON" >&2; exit 2; }
nm=$1 core=$2 common=$3 host=$4 xml=$5 daemon=$6

# "D symbol" for each global symbol @1 defines, "U symbol" for each one
# the archives after it leave undefined; then the undefined ones that @1
# defines or whose name matches $pattern
calls() {
    pattern=$1 defining=$2
    shift 2
    {
        "$nm" --defined-only "$defining" | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ { print "D", $3 }'
        "$nm" -u "$@" | awk '$1 == "U" { print "U", $2 }'
    } | awk -v pattern="$pattern" '$1 == "D" { d[$2] = 1; next } $2 in d || $2 ~ pattern { print "  " $2 }' | sort -u
}

# an nm that read nothing must not pass
"$nm" -u "$core" | grep -q ' U g_free$' || { echo "nm -u $core names no g_free: not the core's archive?"; exit 1; }
"$nm" --defined-only "$xml" | grep -q ' T va_domain_parse$' || { echo "nm $xml defines no va_domain_parse: not the engine's archive?"; exit 1; }

status=0
dbus=$(calls '^(g_dbus_|polkit_)' "$daemon" "$core")
if [ -n "$dbus" ]; then
    echo "the core ($core) calls D-Bus, polkit or the D-Bus adapter:"
    echo "$dbus"
    status=1
fi
xmlcalls=$(calls '^xml' "$xml" "$core" "$common" "$host")
if [ -n "$xmlcalls" ]; then
    echo "the core or an archive it links (vacommon, vahost) calls libxml2 or the XML engine:"
    echo "$xmlcalls"
    status=1
fi
[ $status -ne 0 ] || echo "the core calls no D-Bus, polkit or adapter function; with vacommon and vahost, no libxml2 or engine function"
exit $status
