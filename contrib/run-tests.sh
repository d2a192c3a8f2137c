#!/bin/sh
# Installs what is missing, builds, and runs every test tier that this
# machine can run: unit, golden and property tests; the same under valgrind
# and under ASan+UBSan; the fuzz target for FUZZ_SECONDS (default 60);
# and the benchmarks, which print their numbers.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

step() { printf '\n==> %s\n' "$*"; }

step "Installing build and test dependencies (Debian packages)"
./contrib/install-deps.sh

step "Building (build/)"
./contrib/build.sh build

step "Tests"
# lab-slow (lab-installed: an installed lab host whose nested TCG guest
# swaps its NIC, 8 to 12 min) runs here, once; VA_LAB_SLOW=0 leaves it out
if [ "${VA_LAB_SLOW:-1}" = 0 ]; then
    meson test -C build --print-errorlogs --no-suite lab-slow
else
    meson test -C build --print-errorlogs
fi

step "Tests under valgrind"
meson test -C build --setup=valgrind --print-errorlogs
VDPACTL_WRAPPER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --quiet" \
    meson test -C build --suite cli --print-errorlogs --logbase testlog-cli-valgrind
VA_DAEMON_WRAPPER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --quiet --suppressions=/usr/share/glib-2.0/valgrind/glib.supp" \
    meson test -C build --suite bus --print-errorlogs --logbase testlog-bus-valgrind --timeout-multiplier 5

step "Building with ASan+UBSan (build-asan/)"
./contrib/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false
step "Tests under ASan+UBSan"
meson test -C build-asan --setup=sanitizers --print-errorlogs

if [ -x tests/fuzz/run-fuzz.sh ]; then
    step "Fuzzing parse+rewrite for ${FUZZ_SECONDS:-60} s under ASan+UBSan"
    tests/fuzz/run-fuzz.sh "${FUZZ_SECONDS:-60}"
fi

if [ -n "$(meson introspect --benchmarks build 2>/dev/null | grep -v '^\[\]$')" ]; then
    step "Benchmarks"
    meson test -C build --benchmark --suite bench --verbose --logbase testlog-bench
fi

step "Summary"
# one closing line over every run above, in the form CI reads
python3 - build/meson-logs/testlog*.json build-asan/meson-logs/testlog*.json <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
