#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every C file git tracks is as clang-format writes it with the tree's
# .clang-format: clang-format --dry-run --Werror prints each difference.
# Excluded: nothing. Outside a git checkout (a release tarball) the list of
# files is unknown, so the test skips.
#
#   check-format.sh CLANG_FORMAT     (VA_SRCDIR: the source tree)
set -eu
clang_format=${1:?usage: check-format.sh CLANG_FORMAT}
cd "${VA_SRCDIR:?}"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "not a git checkout: no list of files to check"
    exit 77
fi
n=$(git ls-files '*.c' '*.h' | wc -l)
if [ "$n" -eq 0 ]; then
    echo "git ls-files finds no C file in $PWD"
    exit 1
fi
if ! git ls-files -z '*.c' '*.h' | xargs -0 "$clang_format" --dry-run --Werror; then
    echo "not formatted as .clang-format says; fix with: clang-format -i FILE..."
    exit 1
fi
echo "$n C files formatted as .clang-format says ($("$clang_format" --version))"
