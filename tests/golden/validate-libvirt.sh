#!/bin/sh
# Every golden output.xml, and the input of every case that has one, must be
# a valid libvirt domain: runs libvirt's virt-xml-validate on each.
# Usage: validate-libvirt.sh CASES_DIR
set -u

cases=${1:?usage: validate-libvirt.sh CASES_DIR}
checked=0
failed=0

for out in "$cases"/*/output.xml; do
    [ -e "$out" ] || continue
    for f in "$out" "$(dirname "$out")/input.xml"; do
        checked=$((checked + 1))
        if ! msg=$(virt-xml-validate "$f" domain 2>&1); then
            echo "INVALID: $f" >&2
            echo "$msg" >&2
            failed=$((failed + 1))
        fi
    done
done

echo "validate-libvirt: $checked files checked, $failed invalid"
[ "$checked" -gt 0 ] && [ "$failed" -eq 0 ]
