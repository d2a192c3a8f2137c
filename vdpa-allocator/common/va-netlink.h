/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>
#include <linux/netlink.h>

G_BEGIN_DECLS

/* Netlink for the kernel backend, with libmnl. Building is pure: each
 * va_nl_build_* writes one message into @buf (at least VA_NL_BUF_SIZE bytes)
 * and returns it, so tests compare it byte for byte with what iproute2 sends.
 * Sending is va_nl_transact. */

#define VA_NL_BUF_SIZE 8192

struct nlmsghdr *va_nl_build_getfamily (void *buf, guint32 seq, const char *family);
struct nlmsghdr *va_nl_build_vdpa_dev_new (void *buf, guint16 family, guint32 seq, const char *mgmt_bus, const char *mgmt_dev,
                                           const char *name, const guint8 mac[6], guint16 max_vqp, guint16 mtu);
struct nlmsghdr *va_nl_build_vdpa_dev_del (void *buf, guint16 family, guint32 seq, const char *name);
struct nlmsghdr *va_nl_build_vdpa_mgmtdev_dump (void *buf, guint16 family, guint32 seq);
struct nlmsghdr *va_nl_build_eswitch_set (void *buf, guint16 family, guint32 seq, const char *bus, const char *dev, guint16 mode);
/* devlink dev eswitch show BUS/DEV */
struct nlmsghdr *va_nl_build_eswitch_get (void *buf, guint16 family, guint32 seq, const char *bus, const char *dev);
/* devlink port show (every devlink instance's ports) */
struct nlmsghdr *va_nl_build_devlink_port_dump (void *buf, guint16 family, guint32 seq);
/* vdpa dev show (every vdpa device) */
struct nlmsghdr *va_nl_build_vdpa_dev_dump (void *buf, guint16 family, guint32 seq);
/* ip link set dev PF vf N mac M vlan V spoofchk on|off trust on|off */
struct nlmsghdr *va_nl_build_vf_set (void *buf, guint32 seq, int pf_ifindex, guint32 vf, const guint8 mac[6], guint16 vlan,
                                     gboolean spoofchk, gboolean trust);
/* ip link set dev PF vf N spoofchk on|off trust on|off: a VF libvirt
 * passed through keeps the MAC and VLAN libvirt set */
struct nlmsghdr *va_nl_build_vf_flags (void *buf, guint32 seq, int pf_ifindex, guint32 vf, gboolean spoofchk, gboolean trust);
/* ip link set dev PF vf N mac M vlan V: what mlx5 takes in switchdev
 * mode, which refuses spoofchk and trust (esw/legacy.c) */
struct nlmsghdr *va_nl_build_vf_mac_vlan (void *buf, guint32 seq, int pf_ifindex, guint32 vf, const guint8 mac[6], guint16 vlan);
/* From a reply to va_nl_build_link_get_vfs: VF @vf's spoofchk and trust;
 * FALSE when the message has no entry for @vf with both. */
gboolean va_nl_parse_vf_flags (const struct nlmsghdr *nlh, guint32 vf, gboolean *spoofchk, gboolean *trust);
/* bridge vlan add|del dev PORT vid V [pvid untagged] */
/* RTM_GETLINK of one link with its VFs' settings (IFLA_EXT_MASK
 * RTEXT_FILTER_VF), as "ip -d link show PF" asks. */
struct nlmsghdr *va_nl_build_link_get_vfs (void *buf, guint32 seq, int ifindex);
/* From such a reply: VF @vf's administrative MAC and VLAN; FALSE when the
 * message has no entry for @vf. */
gboolean va_nl_parse_vf_state (const struct nlmsghdr *nlh, guint32 vf, guint8 mac[6], guint16 *vlan);
struct nlmsghdr *va_nl_build_bridge_vlan (void *buf, guint32 seq, int port_ifindex, gboolean add, guint16 vid, guint16 flags);

/* ip link set dev PORT master BR up; master 0: ip link set dev PORT nomaster */
struct nlmsghdr *va_nl_build_link_master (void *buf, guint32 seq, int port_ifindex, int master_ifindex, gboolean up);
struct nlmsghdr *va_nl_build_link_up (void *buf, guint32 seq, int ifindex);

/* A vdpa management device of a VDPA_CMD_MGMTDEV_GET reply. */
typedef struct
{
  char *bus; /* NULL for a device without a bus, like vdpasim */
  char *dev;
} VaVdpaMgmtdev;

void va_vdpa_mgmtdev_free (VaVdpaMgmtdev *m);
/* Parses one reply message (a dump is several); NULL if it names none. */
VaVdpaMgmtdev *va_nl_parse_vdpa_mgmtdev (const struct nlmsghdr *nlh);

/* DEVLINK_ATTR_ESWITCH_MODE of an ESWITCH_GET reply; FALSE when it has
 * none. */
gboolean va_nl_parse_eswitch_mode (const struct nlmsghdr *nlh, guint16 *mode);

/* A devlink port of a PORT_GET reply (a dump is several). */
typedef struct
{
  char *bus;
  char *dev;
  guint32 index;
  guint16 flavour; /* DEVLINK_PORT_FLAVOUR_* */
  int pfnum;       /* -1: not said */
  int vfnum;       /* -1: not said */
  gboolean external;
  char *netdev; /* NULL: no netdev */
} VaDevlinkPort;

void va_devlink_port_free (VaDevlinkPort *p);
VaDevlinkPort *va_nl_parse_devlink_port (const struct nlmsghdr *nlh);

/* A vdpa device of a VDPA_CMD_DEV_GET reply, with its management device. */
typedef struct
{
  char *name;
  char *mgmt_bus; /* NULL: a management device without a bus */
  char *mgmt_dev;
} VaVdpaDev;

void va_vdpa_dev_free (VaVdpaDev *d);
VaVdpaDev *va_nl_parse_vdpa_dev (const struct nlmsghdr *nlh);

/* What an RTM_NEWLINK or RTM_DELLINK of the link group says of a link. */
typedef struct
{
  const char *ifname;
  gboolean deleted;
  int oper_up; /* 1: operstate up, 0: another; -1: not said */
  int carrier; /* 0 or 1; -1: not said */
} VaNlLinkEvent;

/* Parses one message; FALSE if it is no link message with a name. */
gboolean va_nl_parse_link_event (const struct nlmsghdr *nlh, VaNlLinkEvent *ev);

/* A non-blocking rtnetlink socket on the link group: link state changes,
 * carrier included, which the kernel reports in no uevent. */
typedef struct _VaNlMonitor VaNlMonitor;
VaNlMonitor *va_nl_link_monitor_new (GError **error);
int va_nl_link_monitor_get_fd (VaNlMonitor *self);
/* Reads what is pending, handing each link message to @cb. FALSE when the
 * kernel dropped messages (the socket overran): the caller must look again
 * at everything. */
typedef void (*VaNlLinkFunc) (const VaNlLinkEvent *ev, gpointer user_data);
gboolean va_nl_link_monitor_read (VaNlMonitor *self, VaNlLinkFunc cb, gpointer user_data);
void va_nl_link_monitor_free (VaNlMonitor *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaNlMonitor, va_nl_link_monitor_free)

/* Sends @nlh on a new socket of @protocol and reads to the ACK or the end
 * of the dump, handing each reply to @cb. On a kernel error, sets errno-like
 * *kernel_errno and an error saying @what, with the kernel's extended ack
 * message when it gave one. */
typedef void (*VaNlReplyFunc) (const struct nlmsghdr *nlh, gpointer user_data);
gboolean va_nl_transact (int protocol, struct nlmsghdr *nlh, VaNlReplyFunc cb, gpointer user_data, const char *what, int *kernel_errno,
                         GError **error);

/* The id of generic netlink family @name. Missing is an error saying which
 * module is not loaded: @module. */
gboolean va_nl_genl_family (const char *name, const char *module, guint16 *id, GError **error);

/* Steps the backend takes, each sending one message. */
/* DEV_NEW on management device @mgmt_bus/@mgmt_dev: "pci" and a VF's
 * address, or NULL and "vduse" (which refuses MAC, MTU and queues: pass
 * NULL and 0). */
gboolean va_nl_vdpa_dev_new (const char *mgmt_bus, const char *mgmt_dev, const char *name, const guint8 mac[6], guint16 max_vqp,
                             guint16 mtu, GError **error);
gboolean va_nl_vdpa_dev_del (const char *name, GError **error); /* gone already: TRUE */
GPtrArray *va_nl_vdpa_mgmtdevs (GError **error);
/* The devlink instance @bus/@dev: "pci" and a PF's address on ConnectX,
 * "netdevsim" and "netdevsimN" on the kernel's simulator. */
gboolean va_nl_eswitch_get (const char *bus, const char *dev, gboolean *switchdev, GError **error);
gboolean va_nl_eswitch_set (const char *bus, const char *dev, gboolean switchdev, GError **error);
/* Every devlink port (VaDevlinkPort*) of every instance. */
GPtrArray *va_nl_devlink_ports (GError **error);
/* Every vdpa device (VaVdpaDev*). */
GPtrArray *va_nl_vdpa_devs (GError **error);
gboolean va_nl_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean spoofchk, gboolean trust, GError **error);
gboolean va_nl_vf_set_mac_vlan (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, GError **error);
/* Sets VF @vf's spoofchk and trust through PF @pf, then reads them back:
 * a driver that ignores one (an old igb without trust) is an error. */
gboolean va_nl_vf_set_flags (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error);
/* VF @vf's administrative MAC and VLAN, read through PF @pf. A PF whose
 * reply exceeds VA_NL_BUF_SIZE (some dozens of VFs) is an error. */
gboolean va_nl_vf_get (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error);
gboolean va_nl_bridge_vlan (const char *port, gboolean add, guint16 vid, gboolean pvid_untagged, GError **error);
/* bridge vlan del; a VLAN the port does not have (a bridge of default_pvid
 * 0 adds no VLAN 1) is no error. */
gboolean va_nl_bridge_vlan_del_absent_ok (const char *port, guint16 vid, GError **error);
/* A portable NIC's tap on a VLAN-filtering Linux bridge (libvirt refuses
 * <vlan> there): the port joins @vid as untagged PVID and leaves VLAN 1,
 * so that an untagged frame never lands on the bridge's default VLAN.
 * The one form of it: the hook's start and a software vDPA device's tap
 * (issue 28). */
gboolean va_nl_bridge_port_vlan (const char *port, guint16 vid, GError **error);
/* Puts @port up into bridge @bridge; @bridge NULL takes it out of its bridge
 * (a port that is gone is no error then). */
gboolean va_nl_link_set_master (const char *port, const char *bridge, GError **error);
gboolean va_nl_link_set_up (const char *port, GError **error);

G_END_DECLS
