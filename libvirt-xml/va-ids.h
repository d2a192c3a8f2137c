/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Every identifier rule of the suite, for the engine, the configuration,
 * the store and the D-Bus adapter alike. */

#define VA_VLAN_MIN 1
#define VA_VLAN_MAX 4094
#define VA_QUEUES_MIN 1
#define VA_QUEUES_MAX 256
#define VA_NAME_MAX 64
/* the kernel's ETH_MIN_MTU, and the largest frame ConnectX takes */
#define VA_MTU_MIN 68
#define VA_MTU_MAX 9216
/* the least MTU of a vdpa pool: libvirt 9.0 refuses <mtu> on a vdpa
 * interface, so QEMU offers the guest no VIRTIO_NET_F_MTU and the guest
 * sends 1500-byte frames whatever the VF's MTU */
#define VA_MTU_VDPA_MIN 1500
#define VA_IFNAME_MAX 15 /* IFNAMSIZ - 1 */

#define VA_UUID_STRING_LEN 37 /* 8-4-4-4-12 and NUL */
#define VA_MAC_STRING_LEN 18  /* xx:xx:xx:xx:xx:xx and NUL */

/* A lease's other fields: what the store's schema holds (its CHECKs). */
#define VA_DOMAIN_NAME_MAX 256
#define VA_SLOT_MAX 32  /* a PCI address, e.g. 0000:b3:00.2 */
#define VA_PATH_MAX 512 /* a chardev or port path */

/* A libvirt UUID (32 hex digits, bare or 8-4-4-4-12) in lower-case
 * 8-4-4-4-12 form into @out. */
gboolean va_uuid_normalize (const char *uuid, char out[VA_UUID_STRING_LEN]);

/* A unicast, non-zero MAC address in lower case into @out. */
gboolean va_mac_normalize (const char *mac, char out[VA_MAC_STRING_LEN]);
/* The MAC's 12 hex digits in lower case, or NULL when it is no unicast
 * MAC: the stable part of names made from a NIC (its software device and
 * tap, its failover aliases). */
char *va_mac_digits (const char *mac);

/* The two above for hostile input (@uuid, @mac may be NULL), with the one
 * wording of their refusal: VA_ERROR_INVALID_ARGUMENT "'X' is not a
 * domain UUID" or "'X' is not a unicast MAC address". */
gboolean va_uuid_check (const char *uuid, char out[VA_UUID_STRING_LEN], GError **error);
gboolean va_mac_check (const char *mac, char out[VA_MAC_STRING_LEN], GError **error);

/* A pool or network name: 1 to VA_NAME_MAX letters, digits, '-', '_', '.'. */
gboolean va_name_is_valid (const char *name);

/* A domain's name as the suite stores and shows it. libvirt accepts any
 * name (UTF-8, tabs, thousands of bytes) and ours is informational, so no
 * name is ever refused: control, format and separator characters become
 * escapes (\t, \n, \xNN, \uXXXX), bytes that are not UTF-8 \xNN, and a
 * result over VA_DOMAIN_NAME_MAX bytes is cut on a whole character and
 * escape, ending in "...". Idempotent: a name already in this form is
 * returned as it is. NULL gives "". */
char *va_domain_name_display (const char *name);
/* Whether @name is in that form (what a lease's domain_name holds):
 * valid UTF-8 of at most VA_DOMAIN_NAME_MAX bytes with no character the
 * form escapes. */
gboolean va_domain_name_is_display (const char *name);

/* The libvirt network of <forward mode='hostdev'> that lists an sriov
 * pool's VFs: VA_SRIOV_NETWORK_PREFIX and the pool's name. */
#define VA_SRIOV_NETWORK_PREFIX "vdpa-allocator-"
char *va_sriov_network_name (const char *pool);

/* The alias the failover form gives a NIC's virtio standby when its
 * interface has no user alias of its own: "ua-vdpa-" and the MAC's 12 hex
 * digits (libvirt keeps only aliases that start with "ua-" in a defined
 * domain). Stable: the transient member names it in <teaming persistent>.
 * The transient member itself is "ua-vdpa-vf-" and the same digits. */
#define VA_STANDBY_ALIAS_PREFIX "ua-vdpa-"
#define VA_MEMBER_ALIAS_PREFIX "ua-vdpa-vf-"
#define VA_USER_ALIAS_MAX 64
char *va_standby_alias (const char *mac);
char *va_member_alias (const char *mac);
/* A user alias libvirt keeps: "ua-" then 1 to VA_USER_ALIAS_MAX - 3
 * letters, digits, '-' or '_' (libvirt's own set). */
gboolean va_user_alias_is_valid (const char *alias);

/* A network interface name as the kernel takes it. */
gboolean va_ifname_is_valid (const char *name);

/* A PCI address in the dddd:bb:dd.f form. */
gboolean va_pci_address_is_valid (const char *s);

G_END_DECLS
