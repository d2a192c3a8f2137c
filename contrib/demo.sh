#!/bin/sh
# The main job: installs what is missing, builds, and shows what the
# allocator does to a VM: the example domain (two NICs, like the reference's
# VPC network1 and network2) rewritten to its accelerated form, to its
# portable form, and with the vDPA pool full.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

step() { printf '\n==> %s\n' "$*"; }

step "Installing build and test dependencies (Debian packages)"
./contrib/install-deps.sh

step "Building"
./contrib/build.sh build >/dev/null
vdpactl=build/vdpa-allocator/vdpactl
out=build/demo
mkdir -p "$out"

step "Example domain contrib/examples/vm1.xml, networks in contrib/examples/vdpa-allocator.conf"
grep -E '<vdpa:nic ' contrib/examples/vm1.xml

step "vdpactl rewrite --to accelerated (what 'virsh define' should get on a host with room)"
"$vdpactl" rewrite -v --config contrib/examples contrib/examples/vm1.xml >"$out/vm1-accelerated.xml"
# libxml2 writes attributes in double quotes; compare past that
sed "s/'/\"/g" contrib/examples/vm1.xml | diff -u - "$out/vm1-accelerated.xml" | grep -E '^[-+] ' || true

step "vdpactl rewrite --to portable (virtio on the same VLANs, for hosts without vDPA)"
"$vdpactl" rewrite -v --to portable --config contrib/examples "$out/vm1-accelerated.xml" >"$out/vm1-portable.xml"
diff -u "$out/vm1-accelerated.xml" "$out/vm1-portable.xml" | grep -E '^[-+] ' || true

step "The pool full (--capacity cx6-p1=0): the vDPA network falls back to virtio"
"$vdpactl" rewrite -v --capacity cx6-p1=0 --config contrib/examples contrib/examples/vm1.xml >"$out/vm1-full.xml"

step "Round trip: accelerated -> portable -> accelerated gives the same document"
"$vdpactl" rewrite --config contrib/examples "$out/vm1-portable.xml" | cmp - "$out/vm1-accelerated.xml"
echo "identical"

if command -v virt-xml-validate >/dev/null; then
    step "libvirt's schema accepts every form"
    for f in "$out"/vm1-*.xml; do virt-xml-validate "$f" domain; done
fi

step "Done: the rewritten documents are in $out/"
