# vdpa-allocator: Debian 13's libvirt abstraction for QEMU (libvirt 11)
# includes every file of abstractions/libvirt-qemu.d/ and calls its local/
# override deprecated; this file brings our rules in there. Debian 12's
# (libvirt 9) has no such directory: there the package's postinst adds the
# include to /etc/apparmor.d/local/abstractions/libvirt-qemu instead.
include if exists <vdpa-allocator/libvirt-qemu>
