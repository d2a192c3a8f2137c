#!/bin/sh
# Installs what is missing, builds, and runs every test tier that this
# machine can run, each in the stage where it adds coverage
# (docs/test-tiers.md, "Which stage runs what"):
#
#   plain      the tiers whose programs are not ours or cannot be wrapped
#              (QEMU guests, libvirtd, the package, umockdev testbeds) and
#              the scripts that run no C of ours
#   lab        the lab-kernel tiers (QEMU TCG lab hosts), in one stream of
#              their own beside all the stages here, lines marked "[lab]",
#              with the larger share of the CPU: warm on a 2-core machine,
#              the lab stream 32.5 and 36.0 min of 33.5 and 36.1 min runs
#              (docs/test-tiers.md)
#   valgrind   our C unit and golden tests, vdpactl and the daemon, under
#              valgrind (the -O2 build)
#   release    the -O3 build (as distributions build) and its unit tests
#   sanitizers our C unit, golden, cli, bus and crash tiers built with
#              ASan+UBSan
#   fuzz       parse+rewrite for FUZZ_SECONDS (default 60)
#   bench      the benchmarks, which print their numbers
#
# then the time of each stage with the cores the machine kept busy in it,
# the CPU time of the whole run and the lab stream's share of it (a run on
# a machine kept busy is shortened only by cutting CPU work), the minutes
# each lab tier took, and one closing line over every test run. A failing stage does not stop the
# others; the run exits non-zero when any test failed.
#
#   contrib/run-tests.sh [--quick]
#
# --quick: the developer's loop: the plain build and every tier but the lab,
# the nested guests, valgrind, the sanitizers, fuzzing and the benchmarks.
# The test inputs built from downloads are kept in the test cache
# (tests/lib/vatest/cache.py; README says how to clear it), and so are the
# compiled objects (ccache, keyed by the preprocessed source, the flags and
# the compiler), so that the four builds of a fresh clone compile only what
# changed since the last run.
set -eu
quick=0
for arg in "$@"; do
    case "$arg" in
    --quick) quick=1 ;;
    -h | --help)
        sed -n '2,/^set /{/^set /!p}' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "run-tests: unknown option '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

stages=$(mktemp "${TMPDIR:-/tmp}/run-tests-stages.XXXXXX")
trap 'rm -f "$stages"' EXIT INT TERM
# one line per stage: when it began, the machine's busy CPU time until then
# (/proc/stat: user, nice, system, irq, softirq, steal; in clock ticks) and
# its name; "end" closes the last
busy() {
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
step() {
    printf '%s %s %s\n' "$(date +%s)" "$(busy)" "$*" >>"$stages"
    printf '\n==> %s\n' "$*"
}

step "Installing build and test dependencies (Debian packages)"
./contrib/install-deps.sh
PYTHONPATH=tests/lib /usr/bin/python3 tests/lib/vatest/cache.py evict

# the objects of the four builds below, kept in the test cache: meson
# compiles through ccache when it is installed; paths below the tree are
# made relative, so a clone elsewhere hits too
if command -v ccache >/dev/null 2>&1; then
    CCACHE_DIR=$(PYTHONPATH=tests/lib /usr/bin/python3 tests/lib/vatest/cache.py dir)/ccache
    mkdir -p "$CCACHE_DIR"
    # the entry's stamp, for cache.py's eviction; ccache bounds itself
    ccache --version | head -n 1 >"$CCACHE_DIR/stamp"
    export CCACHE_DIR CCACHE_BASEDIR="$top" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
fi

step "Building (build/, -O2)"
# warnings fail the project's own builds, never a packager's (meson.build)
./contrib/build.sh build -Dwerror=true

failed=0
# the suites no other stage runs (a suite's tests run under valgrind or the
# sanitizers when they run C of ours that those can wrap)
plain="--suite style --suite scripts --suite testbed --suite package --suite guest --suite libvirt --suite pair"
if [ "$quick" = 1 ]; then
    step "Tests (quick: no lab, nested guests, valgrind or sanitizers)"
    meson test -C build --print-errorlogs --no-suite lab --no-suite lab-slow --no-suite guest --no-suite libvirt \
        --no-suite pair || failed=1
else
    # the lab stream: its own session, so that an interrupted run takes it
    # down whole
    lab="--suite lab"
    # lab-slow (lab-installed and lab-installed-trixie: an installed lab
    # host on Debian 12 and 13 whose nested TCG guest carries traffic and
    # is saved, 5 to 12 min each; lab-failover-guest, a nested guest with a
    # VF beside its failover standby, then one whose VF is swapped, about 5
    # min) runs here; VA_LAB_SLOW=0 leaves it out. One stream, not two: two
    # lab hosts at once stretch each other (docs/test-tiers.md)
    [ "${VA_LAB_SLOW:-1}" = 0 ] || lab="$lab --suite lab-slow"
    labtimes=$(mktemp "${TMPDIR:-/tmp}/run-tests-lab.XXXXXX")
    # the CPU time the lab stream's processes (its QEMU lab hosts) used
    labcpu=$(mktemp "${TMPDIR:-/tmp}/run-tests-labcpu.XXXXXX")
    rm -f build/meson-logs/testlog-lab.json
    printf '%s\n' "$(date +%s)" >"$labtimes"
    # the lab hosts' sessions get the larger CPU share, or each gets a third
    # of the machine beside the other stages' tests (labhost.claim_cpu())
    export VA_LAB_AUTOGROUP_NICE="${VA_LAB_AUTOGROUP_NICE:--5}"
    # shellcheck disable=SC2086
    setsid sh -c '/usr/bin/python3 tests/lib/vatest/cputime.py "$2" \
        meson test -C build --no-rebuild --print-errorlogs --logbase testlog-lab '"$lab"' 2>&1 \
        | sed -u "s/^/[lab] /"; date +%s >>"$1"' lab-stream "$labtimes" "$labcpu" &
    labpid=$!
    # shellcheck disable=SC2154
    trap 'rc=$?; kill -TERM -"$labpid" 2>/dev/null || true; rm -f "$stages" "$labtimes" "$labcpu"; exit $rc' EXIT
    trap 'exit 130' INT TERM

    step "Tests (plain)"
    # shellcheck disable=SC2086
    meson test -C build --no-rebuild --print-errorlogs $plain || failed=1

    step "Tests under valgrind"
    meson test -C build --no-rebuild --setup=valgrind --print-errorlogs || failed=1
    VDPACTL_WRAPPER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --quiet" \
        meson test -C build --no-rebuild --suite cli --print-errorlogs --logbase testlog-cli-valgrind || failed=1
    VA_DAEMON_WRAPPER="valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --quiet --suppressions=/usr/share/glib-2.0/valgrind/glib.supp" \
        meson test -C build --no-rebuild --suite bus --print-errorlogs --logbase testlog-bus-valgrind \
        --timeout-multiplier 5 || failed=1

    step "Building as distributions build (build-release/, -O3) and its unit tests"
    ./contrib/build.sh build-release --buildtype=release -Dwerror=true
    meson test -C build-release --suite unit --suite golden --no-suite style --no-suite scripts --no-suite schema \
        --print-errorlogs || failed=1

    step "Building with ASan+UBSan (build-asan/)"
    ./contrib/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true
    step "Tests under ASan+UBSan"
    meson test -C build-asan --setup=sanitizers --print-errorlogs || failed=1

    if [ -x tests/fuzz/run-fuzz.sh ]; then
        step "Fuzzing parse+rewrite for ${FUZZ_SECONDS:-60} s under ASan+UBSan"
        tests/fuzz/run-fuzz.sh "${FUZZ_SECONDS:-60}" || failed=1
    fi

    if [ -n "$(meson introspect --benchmarks build 2>/dev/null | grep -v '^\[\]$')" ]; then
        step "Benchmarks"
        meson test -C build --no-rebuild --benchmark --suite bench --verbose --logbase testlog-bench || failed=1
    fi

    step "Waiting for the lab stream"
    wait "$labpid" || true
    # the summary counts the lab's failures from its log; no log, no pass
    [ -s build/meson-logs/testlog-lab.json ] || failed=1
fi

step "Summary"
printf '%s %s end\n' "$(date +%s)" "$(busy)" >>"$stages"
# the stages' times, the lab tiers' minutes, and one closing line over every
# run above, in the form CI reads
python3 "$top/contrib/run-tests-summary.py" "$stages" "${labtimes:-}" "${labcpu:-}" "$(getconf CLK_TCK)" "$(nproc)" "$failed" \
    build/meson-logs/testlog*.json build-release/meson-logs/testlog*.json build-asan/meson-logs/testlog*.json
