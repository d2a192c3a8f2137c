# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=sh
#
# test-cache.sh: the test cache for the scripts that build test inputs from
# downloads (tests/lib/vatest/cache.py says what it is and where). Source it
# after `set -eu`, die() and va_test_lib (the path of tests/lib); then
#
#   va_cache_open ENTRY [DIR]
#
# sets $cache (DIR, else VA_TEST_CACHE, else cache.py's default) and holds
# the lock of the entry ENTRY (a path in the cache, e.g. lab/kernel) on fd 9
# until the script exits, waiting while another run holds it.
#   va_cache_used DIR   marks the entry in DIR as used now (for eviction)

va_cache_open() {
    cache=${2:-${VA_TEST_CACHE:-}}
    if [ -z "$cache" ]; then
        cache=$(/usr/bin/python3 "$va_test_lib/vatest/cache.py" dir) || die "no test cache folder"
    fi
    mkdir -p "$cache"
    cache=$(cd "$cache" && pwd)
    _lock=$cache/.lock-$(echo "$1" | tr / _)
    _said=0
    while :; do
        exec 9>>"$_lock"
        if ! flock -n 9; then
            [ "$_said" = 1 ] || echo "test cache: waiting for $_lock (another run builds it)" >&2
            _said=1
            flock -w 3600 9 || die "$_lock stayed locked for an hour"
        fi
        # cache.py removes a lock file with its entry while holding it: the
        # file locked here must still be the one at that path
        [ "$(stat -L -c %d:%i "$_lock" 2>/dev/null)" != "$(stat -L -c %d:%i /dev/fd/9)" ] || break
    done
}

va_cache_used() {
    touch -c "$1/stamp"
}
