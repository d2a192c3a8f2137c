#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds the libFuzzer targets in their own build directory and runs them:
# fuzz-rewrite for SECONDS, then fuzz-codec and fuzz-relay (the relay's
# ring walker) for an eighth of it each.
#
#   tests/fuzz/run-fuzz.sh [SECONDS]
#
# SECONDS defaults to 60. The build directory is $VA_FUZZ_BUILDDIR, by
# default build-fuzz at the top of the source tree (CC=clang,
# -Dfuzzing=true, -Db_lundef=false). The fuzzer runs on a scratch corpus in
# that build directory: the committed seeds of tests/fuzz/corpus, the golden
# inputs tests/golden/cases/*/input.xml when there are any, and the files of
# the directories named in $VA_FUZZ_EXTRA_SEEDS (colon separated). The
# committed corpus is never written to.
#
# Exits non-zero on any crash, broken invariant, leak, timeout, out of
# memory, or sanitizer report; the input that caused it is left in
# $VA_FUZZ_BUILDDIR/fuzz-artifacts/.
set -eu

seconds=${1:-60}
case $seconds in
    '' | *[!0-9]*)
        echo "usage: $0 [SECONDS]" >&2
        exit 2
        ;;
esac

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VA_FUZZ_BUILDDIR:-$srcdir/build-fuzz}
fuzzdir=$srcdir/tests/fuzz

if [ ! -f "$builddir/build.ninja" ]; then
    CC=${CC:-clang} meson setup "$builddir" "$srcdir" -Dfuzzing=true -Db_lundef=false
else
    meson configure "$builddir" -Dfuzzing=true -Db_lundef=false
fi
ninja -C "$builddir" tests/fuzz/fuzz-rewrite tests/fuzz/fuzz-codec tests/fuzz/fuzz-relay

corpus=$builddir/fuzz-corpus
artifacts=$builddir/fuzz-artifacts
log=$builddir/fuzz-rewrite.log
rm -rf "$corpus" "$artifacts"
mkdir -p "$corpus" "$artifacts"

cp "$fuzzdir"/corpus/* "$corpus"/
golden=0
for input in "$srcdir"/tests/golden/cases/*/input.xml; do
    [ -f "$input" ] || continue
    name=$(basename "$(dirname "$input")")
    cp "$input" "$corpus/golden-$name.xml"
    golden=$((golden + 1))
done
extra=0
old_ifs=$IFS
IFS=:
for dir in ${VA_FUZZ_EXTRA_SEEDS:-}; do
    for f in "$dir"/*; do
        [ -f "$f" ] || continue
        cp "$f" "$corpus/extra-$extra-$(basename "$f")"
        extra=$((extra + 1))
    done
done
IFS=$old_ifs
echo "seeds: $(ls "$corpus" | wc -l) ($golden golden, $extra extra)"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:fast_unwind_on_malloc=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export G_DEBUG=${G_DEBUG:-fatal-criticals}

status=0
"$builddir/tests/fuzz/fuzz-rewrite" \
    -max_total_time="$seconds" \
    -max_len=65536 \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -dict="$fuzzdir/domain.dict" \
    -artifact_prefix="$artifacts/" \
    -print_final_stats=1 \
    "$corpus" >"$log" 2>&1 || status=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
tail -n 30 "$log"
echo "executions: ${runs:-unknown} in ${seconds} s ($(( ${runs:-0} / (seconds > 0 ? seconds : 1) )) exec/s)"
echo "log: $log"

if grep -q -E 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|INVARIANT BROKEN|ERROR: libFuzzer' "$log"; then
    echo "FAIL: sanitizer, libFuzzer or invariant report in $log" >&2
    [ "$status" -ne 0 ] || status=1
fi
if [ -n "$(ls -A "$artifacts")" ]; then
    echo "FAIL: artifacts left in $artifacts:" >&2
    ls -l "$artifacts" >&2
    [ "$status" -ne 0 ] || status=1
fi
if [ "$status" -ne 0 ]; then
    echo "FAIL: fuzz-rewrite exited with status $status" >&2
    exit "$status"
fi

# then a quarter of the time, shared, from nothing: the bus codecs
# (fuzz-codec.c) and the relay's ring walker (fuzz-relay.c)
small_seconds=$(( seconds / 8 > 0 ? seconds / 8 : 1 ))
for target in codec relay; do
    small_corpus=$builddir/fuzz-$target-corpus
    small_log=$builddir/fuzz-$target.log
    max_len=4096
    [ "$target" = codec ] || max_len=24576 # a ring image: 8 bytes, 16 KiB and 4 KiB
    rm -rf "$small_corpus"
    mkdir -p "$small_corpus"
    "$builddir/tests/fuzz/fuzz-$target" -max_total_time="$small_seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "$small_corpus" >"$small_log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$small_log" | tail -n 1)
    echo "fuzz-$target: ${runs:-unknown} executions in ${small_seconds} s; log: $small_log"
    if [ "$status" -ne 0 ] || [ -n "$(ls -A "$artifacts")" ] ||
        grep -q -E 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|INVARIANT BROKEN|ERROR: libFuzzer' "$small_log"; then
        tail -n 30 "$small_log" >&2
        echo "FAIL: fuzz-$target (status $status)" >&2
        exit $(( status ? status : 1 ))
    fi
done
echo "PASS"
