#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# trixie-checks.sh DEB: run inside the Debian 13 root (in-root.sh, an
# overlay: nothing stays) by test_package_trixie.py. Installs DEB with dpkg
# as on a booted 13 host whose libvirtd runs (a stand-in systemctl and
# deb-systemd-invoke record what the maintainer scripts ask of systemd),
# then prints what the test asserts, one "name: value" a line: what 13's
# packages ship (libvirt's daemons, AppArmor profiles, polkit's rules
# directories, the hook directory), what the postinst did, and whether 13's
# apparmor_parser and systemd-analyze accept our files in place.
set -u
deb=$1
calls=/tmp/systemd-calls
say() { printf '%s: %s\n' "$1" "$2"; }

say libvirt-daemons "$(ls /usr/sbin | grep -E '^(libvirtd|virt[a-z]*d)$' | tr '\n' ' ')"
say libvirt-units "$(ls /usr/lib/systemd/system | grep -E '^(libvirtd|virtqemud)\.(service|socket)$' | tr '\n' ' ')"
say libvirt-enabled "$(find /etc/systemd/system -name 'libvirtd*' -o -name 'virtqemud*' | sed 's|.*/||' | sort -u | tr '\n' ' ')"
say libvirtd-profile-local "$(grep -c 'include if exists <local/usr.sbin.libvirtd>' /etc/apparmor.d/usr.sbin.libvirtd)"
say libvirtd-profile-hooks "$(grep -c '^ */etc/libvirt/hooks/\*\* rmix,' /etc/apparmor.d/usr.sbin.libvirtd)"
say qemu-abstraction-dropin "$(grep -c 'include if exists <abstractions/libvirt-qemu.d>' /etc/apparmor.d/abstractions/libvirt-qemu)"
say polkit-rules-dirs "$(ls -d /etc/polkit-1/rules.d /usr/share/polkit-1/rules.d 2>/dev/null | tr '\n' ' ')"
say polkit-libvirt-rule "$(ls /usr/share/polkit-1/rules.d/*libvirt* 2>/dev/null | tr '\n' ' ')"
say libvirt-hooks-path "$(grep -c -a '/etc/libvirt/hooks' /usr/sbin/libvirtd /usr/lib/x86_64-linux-gnu/libvirt.so.0 2>/dev/null | awk -F: '{ n += $2 } END { print n + 0 }')"

# a booted host: /run/systemd/system, libvirtd.service active
mkdir -p /run/systemd/system
for tool in /usr/bin/systemctl /usr/bin/deb-systemd-invoke; do
    mv "$tool" "$tool.real"
    cat >"$tool" <<STUB
#!/bin/sh
echo "\${0##*/} \$*" >>$calls
case "\$*" in
*"is-active --quiet libvirtd.service") exit 0 ;;
*is-active*) exit 3 ;;
esac
exit 0
STUB
    chmod 0755 "$tool"
done
: >"$calls"
dpkg -i "$deb" >/tmp/dpkg.log 2>&1
say dpkg-install "$?"
sed 's/^/dpkg-output: /' /tmp/dpkg.log
sed 's/^/systemd-call: /' "$calls"

say local-qemu-include "$(grep -c 'vdpa-allocator' /etc/apparmor.d/local/abstractions/libvirt-qemu 2>/dev/null || echo 0)"
say local-libvirtd-include "$(grep -c 'include if exists <vdpa-allocator/usr.sbin.libvirtd>' /etc/apparmor.d/local/usr.sbin.libvirtd 2>/dev/null || echo 0)"
say hook-target "$(readlink -f /etc/libvirt/hooks/qemu.d/50-vdpa-allocator)"

# AppArmor 4's parser on libvirt 11's profiles with our rules in place:
# compiled, not loaded (-Q), against the features of the ABI they name
for p in /etc/apparmor.d/usr.sbin.libvirtd /etc/apparmor.d/libvirt/TEMPLATE.qemu; do
    out=$(apparmor_parser -Q -K -T "$p" 2>&1)
    say "aa-parse $p" "$? $(echo "$out" | tr '\n' ' ')"
    # the profile as the parser reads it, includes expanded
    apparmor_parser -p "$p" >/tmp/expanded 2>/dev/null
    say "aa-vhost-vdpa $p" "$(grep -c '^ */dev/vhost-vdpa-\[0-9\]\* rw,' /tmp/expanded)"
    say "aa-hook $p" "$(grep -c '^ */usr/libexec/vdpa-allocator-hook rix,' /tmp/expanded)"
done

# systemd 257 on our unit, the daemon in place
out=$(systemd-analyze verify --man=no /usr/lib/systemd/system/vdpa-allocatord.service 2>&1)
say unit-verify "$? $(echo "$out" | grep vdpa-allocatord | tr '\n' ' ')"
out=$(systemd-analyze security --offline=yes --threshold=29 /usr/lib/systemd/system/vdpa-allocatord.service 2>&1)
say unit-exposure "$? $(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')"
say check-config "$(/usr/sbin/vdpa-allocatord --check-config 2>&1 | tr '\n' ' ')"
