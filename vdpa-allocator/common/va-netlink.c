/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Netlink messages of the kernel backend, built as iproute2's vdpa,
 * devlink, ip and bridge tools build them (attribute order included), and
 * sent with libmnl. */
#define G_LOG_DOMAIN "va-netlink"

#include "va-netlink.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/devlink.h>
#include <linux/genetlink.h>
#include <linux/if_bridge.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/vdpa.h>
#include <net/if.h>
#include <string.h>
#include <time.h>

#include "va-error.h"

/* libmnl 1.0.4 leaves attribute padding as the buffer had it: start from
 * zeros so that the bytes are the same every time */
static struct nlmsghdr *
put_header (void *buf)
{
  memset (buf, 0, VA_NL_BUF_SIZE);
  return mnl_nlmsg_put_header (buf);
}

/* iproute2 6.1's vdpa and devlink put version 0 in the generic netlink
 * header, not VDPA_GENL_VERSION/DEVLINK_GENL_VERSION (1): captured in the
 * lab host (tests/kernel/netlink/capture-genl.sh). Neither family checks the
 * version; we send what iproute2 sends. */
#define IPROUTE2_GENL_VERSION 0

static struct nlmsghdr *
genl_header (void *buf, guint16 family, guint8 cmd, guint8 version, guint16 flags, guint32 seq)
{
  struct nlmsghdr *nlh = put_header (buf);
  struct genlmsghdr *genl;

  nlh->nlmsg_type = family;
  nlh->nlmsg_flags = flags;
  nlh->nlmsg_seq = seq;
  genl = mnl_nlmsg_put_extra_header (nlh, sizeof *genl);
  genl->cmd = cmd;
  genl->version = version;
  return nlh;
}

struct nlmsghdr *
va_nl_build_getfamily (void *buf, guint32 seq, const char *family)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (family != NULL, NULL);

  nlh = genl_header (buf, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, NLM_F_REQUEST | NLM_F_ACK, seq);
  mnl_attr_put_strz (nlh, CTRL_ATTR_FAMILY_NAME, family);
  return nlh;
}

struct nlmsghdr *
va_nl_build_vdpa_dev_new (void *buf, guint16 family, guint32 seq, const char *mgmt_bus, const char *mgmt_dev, const char *name,
                          const guint8 mac[6], guint16 max_vqp, guint16 mtu)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (mgmt_dev != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  nlh = genl_header (buf, family, VDPA_CMD_DEV_NEW, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK, seq);
  /* vdpa dev add name NAME mgmtdev BUS/DEV mac M mtu U max_vqp Q */
  if (mgmt_bus)
    mnl_attr_put_strz (nlh, VDPA_ATTR_MGMTDEV_BUS_NAME, mgmt_bus);
  mnl_attr_put_strz (nlh, VDPA_ATTR_MGMTDEV_DEV_NAME, mgmt_dev);
  mnl_attr_put_strz (nlh, VDPA_ATTR_DEV_NAME, name);
  if (mac)
    mnl_attr_put (nlh, VDPA_ATTR_DEV_NET_CFG_MACADDR, 6, mac);
  if (mtu)
    mnl_attr_put_u16 (nlh, VDPA_ATTR_DEV_NET_CFG_MTU, mtu);
  if (max_vqp)
    mnl_attr_put_u16 (nlh, VDPA_ATTR_DEV_NET_CFG_MAX_VQP, max_vqp);
  return nlh;
}

struct nlmsghdr *
va_nl_build_vdpa_dev_del (void *buf, guint16 family, guint32 seq, const char *name)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  nlh = genl_header (buf, family, VDPA_CMD_DEV_DEL, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK, seq);
  mnl_attr_put_strz (nlh, VDPA_ATTR_DEV_NAME, name);
  return nlh;
}

struct nlmsghdr *
va_nl_build_vdpa_mgmtdev_dump (void *buf, guint16 family, guint32 seq)
{
  g_return_val_if_fail (buf != NULL, NULL);

  return genl_header (buf, family, VDPA_CMD_MGMTDEV_GET, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq);
}

struct nlmsghdr *
va_nl_build_eswitch_set (void *buf, guint16 family, guint32 seq, const char *bus, const char *dev, guint16 mode)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (bus != NULL && dev != NULL, NULL);

  nlh = genl_header (buf, family, DEVLINK_CMD_ESWITCH_SET, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK, seq);
  /* devlink dev eswitch set BUS/DEV mode legacy|switchdev */
  mnl_attr_put_strz (nlh, DEVLINK_ATTR_BUS_NAME, bus);
  mnl_attr_put_strz (nlh, DEVLINK_ATTR_DEV_NAME, dev);
  mnl_attr_put_u16 (nlh, DEVLINK_ATTR_ESWITCH_MODE, mode);
  return nlh;
}

struct nlmsghdr *
va_nl_build_eswitch_get (void *buf, guint16 family, guint32 seq, const char *bus, const char *dev)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (bus != NULL && dev != NULL, NULL);

  nlh = genl_header (buf, family, DEVLINK_CMD_ESWITCH_GET, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK, seq);
  mnl_attr_put_strz (nlh, DEVLINK_ATTR_BUS_NAME, bus);
  mnl_attr_put_strz (nlh, DEVLINK_ATTR_DEV_NAME, dev);
  return nlh;
}

struct nlmsghdr *
va_nl_build_devlink_port_dump (void *buf, guint16 family, guint32 seq)
{
  g_return_val_if_fail (buf != NULL, NULL);

  return genl_header (buf, family, DEVLINK_CMD_PORT_GET, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq);
}

struct nlmsghdr *
va_nl_build_vdpa_dev_dump (void *buf, guint16 family, guint32 seq)
{
  g_return_val_if_fail (buf != NULL, NULL);

  return genl_header (buf, family, VDPA_CMD_DEV_GET, IPROUTE2_GENL_VERSION, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq);
}

/* iproute2's addattr_nest sets no NLA_F_NESTED; libmnl's does */
static struct nlattr *
nest_start (struct nlmsghdr *nlh, guint16 type)
{
  struct nlattr *nest = mnl_attr_nest_start (nlh, type);

  nest->nla_type &= ~NLA_F_NESTED;
  return nest;
}

static struct nlmsghdr *
link_header (void *buf, guint16 type, guint32 seq, guint8 family, int ifindex)
{
  struct nlmsghdr *nlh = put_header (buf);
  struct ifinfomsg *ifi;

  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = seq;
  ifi = mnl_nlmsg_put_extra_header (nlh, sizeof *ifi);
  ifi->ifi_family = family;
  ifi->ifi_index = ifindex;
  return nlh;
}

/* RTM_NEWLINK on the PF with one IFLA_VF_INFO for @vf: its MAC and VLAN
 * where @mac is given, its spoofchk and trust where @flags is. iproute2's
 * "ip link set" sends IFLA_VF_VLAN for an 802.1Q VLAN, which the kernel
 * applies exactly as a one-entry IFLA_VF_VLAN_LIST of protocol 802.1Q. */
static struct nlmsghdr *
build_vf (void *buf, guint32 seq, int pf_ifindex, guint32 vf, const guint8 *mac, guint16 vlan, gboolean flags, gboolean spoofchk,
          gboolean trust)
{
  struct nlmsghdr *nlh = link_header (buf, RTM_NEWLINK, seq, AF_UNSPEC, pf_ifindex);
  struct nlattr *list = nest_start (nlh, IFLA_VFINFO_LIST);
  struct nlattr *info = nest_start (nlh, IFLA_VF_INFO);

  if (mac)
    {
      struct ifla_vf_mac ivm = { .vf = vf };
      struct ifla_vf_vlan ivv = { .vf = vf, .vlan = vlan };

      memcpy (ivm.mac, mac, 6);
      mnl_attr_put (nlh, IFLA_VF_MAC, sizeof ivm, &ivm);
      mnl_attr_put (nlh, IFLA_VF_VLAN, sizeof ivv, &ivv);
    }
  if (flags)
    {
      struct ifla_vf_spoofchk ivs = { .vf = vf, .setting = spoofchk ? 1 : 0 };
      struct ifla_vf_trust ivt = { .vf = vf, .setting = trust ? 1 : 0 };

      mnl_attr_put (nlh, IFLA_VF_SPOOFCHK, sizeof ivs, &ivs);
      mnl_attr_put (nlh, IFLA_VF_TRUST, sizeof ivt, &ivt);
    }
  mnl_attr_nest_end (nlh, info);
  mnl_attr_nest_end (nlh, list);
  return nlh;
}

struct nlmsghdr *
va_nl_build_vf_set (void *buf, guint32 seq, int pf_ifindex, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean spoofchk,
                    gboolean trust)
{
  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  return build_vf (buf, seq, pf_ifindex, vf, mac, vlan, TRUE, spoofchk, trust);
}

struct nlmsghdr *
va_nl_build_vf_flags (void *buf, guint32 seq, int pf_ifindex, guint32 vf, gboolean spoofchk, gboolean trust)
{
  g_return_val_if_fail (buf != NULL, NULL);

  return build_vf (buf, seq, pf_ifindex, vf, NULL, 0, TRUE, spoofchk, trust);
}

struct nlmsghdr *
va_nl_build_vf_mac_vlan (void *buf, guint32 seq, int pf_ifindex, guint32 vf, const guint8 mac[6], guint16 vlan)
{
  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (mac != NULL, NULL);

  return build_vf (buf, seq, pf_ifindex, vf, mac, vlan, FALSE, FALSE, FALSE);
}

gboolean
va_nl_parse_vf_flags (const struct nlmsghdr *nlh, guint32 vf, gboolean *spoofchk, gboolean *trust)
{
  const struct nlattr *attr, *info, *a;

  g_return_val_if_fail (nlh != NULL && spoofchk != NULL && trust != NULL, FALSE);

  if (nlh->nlmsg_type != RTM_NEWLINK || nlh->nlmsg_len < mnl_nlmsg_size (sizeof (struct ifinfomsg)))
    return FALSE;
  mnl_attr_for_each (attr, nlh, sizeof (struct ifinfomsg))
  {
    if (mnl_attr_get_type (attr) != IFLA_VFINFO_LIST)
      continue;
    mnl_attr_for_each_nested (info, attr)
    {
      gboolean have_s = FALSE, have_t = FALSE, s = FALSE, t = FALSE;

      if (mnl_attr_get_type (info) != IFLA_VF_INFO)
        continue;
      mnl_attr_for_each_nested (a, info)
      {
        if (mnl_attr_get_type (a) == IFLA_VF_SPOOFCHK && mnl_attr_get_payload_len (a) >= sizeof (struct ifla_vf_spoofchk))
          {
            const struct ifla_vf_spoofchk *ivs = mnl_attr_get_payload (a);
            if (ivs->vf != vf)
              break;
            s = ivs->setting == 1;
            have_s = TRUE;
          }
        else if (mnl_attr_get_type (a) == IFLA_VF_TRUST && mnl_attr_get_payload_len (a) >= sizeof (struct ifla_vf_trust))
          {
            const struct ifla_vf_trust *ivt = mnl_attr_get_payload (a);
            if (ivt->vf != vf)
              break;
            t = ivt->setting == 1;
            have_t = TRUE;
          }
      }
      if (have_s && have_t)
        {
          *spoofchk = s;
          *trust = t;
          return TRUE;
        }
    }
  }
  return FALSE;
}

struct nlmsghdr *
va_nl_build_link_get_vfs (void *buf, guint32 seq, int ifindex)
{
  struct nlmsghdr *nlh;

  g_return_val_if_fail (buf != NULL, NULL);

  nlh = link_header (buf, RTM_GETLINK, seq, AF_UNSPEC, ifindex);
  /* without the VFs' counters, so that more VFs fit in one reply */
  mnl_attr_put_u32 (nlh, IFLA_EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS);
  return nlh;
}

gboolean
va_nl_parse_vf_state (const struct nlmsghdr *nlh, guint32 vf, guint8 mac[6], guint16 *vlan)
{
  const struct nlattr *attr, *info, *a;

  g_return_val_if_fail (nlh != NULL, FALSE);

  if (nlh->nlmsg_type != RTM_NEWLINK || nlh->nlmsg_len < mnl_nlmsg_size (sizeof (struct ifinfomsg)))
    return FALSE;
  mnl_attr_for_each (attr, nlh, sizeof (struct ifinfomsg))
  {
    if (mnl_attr_get_type (attr) != IFLA_VFINFO_LIST)
      continue;
    mnl_attr_for_each_nested (info, attr)
    {
      gboolean have_mac = FALSE, have_vlan = FALSE;
      guint8 m[6] = { 0 };
      guint16 v = 0;

      if (mnl_attr_get_type (info) != IFLA_VF_INFO)
        continue;
      mnl_attr_for_each_nested (a, info)
      {
        if (mnl_attr_get_type (a) == IFLA_VF_MAC && mnl_attr_get_payload_len (a) >= sizeof (struct ifla_vf_mac))
          {
            const struct ifla_vf_mac *ivm = mnl_attr_get_payload (a);
            if (ivm->vf != vf)
              break;
            memcpy (m, ivm->mac, 6);
            have_mac = TRUE;
          }
        else if (mnl_attr_get_type (a) == IFLA_VF_VLAN && mnl_attr_get_payload_len (a) >= sizeof (struct ifla_vf_vlan))
          {
            const struct ifla_vf_vlan *ivv = mnl_attr_get_payload (a);
            if (ivv->vf != vf)
              break;
            v = (guint16) MIN (ivv->vlan, G_MAXUINT16);
            have_vlan = TRUE;
          }
      }
      if (have_mac && have_vlan)
        {
          memcpy (mac, m, 6);
          *vlan = v;
          return TRUE;
        }
    }
  }
  return FALSE;
}

struct nlmsghdr *
va_nl_build_bridge_vlan (void *buf, guint32 seq, int port_ifindex, gboolean add, guint16 vid, guint16 flags)
{
  struct nlmsghdr *nlh;
  struct bridge_vlan_info vinfo = { .flags = flags, .vid = vid };
  struct nlattr *spec;

  g_return_val_if_fail (buf != NULL, NULL);

  nlh = link_header (buf, add ? RTM_SETLINK : RTM_DELLINK, seq, AF_BRIDGE, port_ifindex);
  spec = nest_start (nlh, IFLA_AF_SPEC);
  mnl_attr_put (nlh, IFLA_BRIDGE_VLAN_INFO, sizeof vinfo, &vinfo);
  mnl_attr_nest_end (nlh, spec);
  return nlh;
}

struct nlmsghdr *
va_nl_build_link_up (void *buf, guint32 seq, int ifindex)
{
  struct nlmsghdr *nlh;
  struct ifinfomsg *ifi;

  g_return_val_if_fail (buf != NULL, NULL);

  nlh = link_header (buf, RTM_NEWLINK, seq, AF_UNSPEC, ifindex);
  ifi = mnl_nlmsg_get_payload (nlh);
  ifi->ifi_flags = IFF_UP;
  ifi->ifi_change = IFF_UP;
  return nlh;
}

struct nlmsghdr *
va_nl_build_link_master (void *buf, guint32 seq, int port_ifindex, int master_ifindex, gboolean up)
{
  struct nlmsghdr *nlh;
  struct ifinfomsg *ifi;

  g_return_val_if_fail (buf != NULL, NULL);

  nlh = link_header (buf, RTM_NEWLINK, seq, AF_UNSPEC, port_ifindex);
  ifi = mnl_nlmsg_get_payload (nlh);
  if (up)
    {
      ifi->ifi_flags = IFF_UP;
      ifi->ifi_change = IFF_UP;
    }
  mnl_attr_put_u32 (nlh, IFLA_MASTER, (guint32) master_ifindex);
  return nlh;
}

void
va_vdpa_mgmtdev_free (VaVdpaMgmtdev *m)
{
  if (!m)
    return;
  g_free (m->bus);
  g_free (m->dev);
  g_free (m);
}

typedef struct
{
  const struct nlattr *tb[VDPA_ATTR_MAX + 1];
} VdpaAttrs;

static int
vdpa_attr_cb (const struct nlattr *attr, void *data)
{
  VdpaAttrs *a = data;
  int type = mnl_attr_get_type (attr);

  if (mnl_attr_type_valid (attr, VDPA_ATTR_MAX) < 0)
    return MNL_CB_OK;
  if ((type == VDPA_ATTR_MGMTDEV_BUS_NAME || type == VDPA_ATTR_MGMTDEV_DEV_NAME) && mnl_attr_validate (attr, MNL_TYPE_NUL_STRING) < 0)
    return MNL_CB_OK;
  a->tb[type] = attr;
  return MNL_CB_OK;
}

VaVdpaMgmtdev *
va_nl_parse_vdpa_mgmtdev (const struct nlmsghdr *nlh)
{
  VdpaAttrs a = { { 0 } };
  VaVdpaMgmtdev *m;

  g_return_val_if_fail (nlh != NULL, NULL);

  if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof (struct genlmsghdr))
    return NULL;
  mnl_attr_parse (nlh, sizeof (struct genlmsghdr), vdpa_attr_cb, &a);
  if (!a.tb[VDPA_ATTR_MGMTDEV_DEV_NAME])
    return NULL;
  m = g_new0 (VaVdpaMgmtdev, 1);
  if (a.tb[VDPA_ATTR_MGMTDEV_BUS_NAME])
    m->bus = g_strdup (mnl_attr_get_str (a.tb[VDPA_ATTR_MGMTDEV_BUS_NAME]));
  m->dev = g_strdup (mnl_attr_get_str (a.tb[VDPA_ATTR_MGMTDEV_DEV_NAME]));
  return m;
}

typedef struct
{
  const struct nlattr *tb[DEVLINK_ATTR_MAX + 1];
} DevlinkAttrs;

static int
devlink_attr_cb (const struct nlattr *attr, void *data)
{
  DevlinkAttrs *a = data;
  int type = mnl_attr_get_type (attr);
  enum mnl_attr_data_type want = MNL_TYPE_UNSPEC;

  if (mnl_attr_type_valid (attr, DEVLINK_ATTR_MAX) < 0)
    return MNL_CB_OK;
  switch (type)
    {
      case DEVLINK_ATTR_BUS_NAME:
      case DEVLINK_ATTR_DEV_NAME:
      case DEVLINK_ATTR_PORT_NETDEV_NAME:
        want = MNL_TYPE_NUL_STRING;
        break;
      case DEVLINK_ATTR_PORT_INDEX:
        want = MNL_TYPE_U32;
        break;
      case DEVLINK_ATTR_ESWITCH_MODE:
      case DEVLINK_ATTR_PORT_FLAVOUR:
      case DEVLINK_ATTR_PORT_PCI_PF_NUMBER:
      case DEVLINK_ATTR_PORT_PCI_VF_NUMBER:
        want = MNL_TYPE_U16;
        break;
      case DEVLINK_ATTR_PORT_EXTERNAL:
        want = MNL_TYPE_U8;
        break;
      default:
        break;
    }
  if (want != MNL_TYPE_UNSPEC && mnl_attr_validate (attr, want) < 0)
    return MNL_CB_OK; /* malformed: as if absent */
  a->tb[type] = attr;
  return MNL_CB_OK;
}

static gboolean
parse_devlink (const struct nlmsghdr *nlh, DevlinkAttrs *a)
{
  memset (a, 0, sizeof *a);
  if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof (struct genlmsghdr))
    return FALSE;
  mnl_attr_parse (nlh, sizeof (struct genlmsghdr), devlink_attr_cb, a);
  return TRUE;
}

gboolean
va_nl_parse_eswitch_mode (const struct nlmsghdr *nlh, guint16 *mode)
{
  DevlinkAttrs a;

  g_return_val_if_fail (nlh != NULL, FALSE);
  g_return_val_if_fail (mode != NULL, FALSE);

  if (!parse_devlink (nlh, &a) || !a.tb[DEVLINK_ATTR_ESWITCH_MODE])
    return FALSE;
  *mode = mnl_attr_get_u16 (a.tb[DEVLINK_ATTR_ESWITCH_MODE]);
  return TRUE;
}

void
va_devlink_port_free (VaDevlinkPort *p)
{
  if (!p)
    return;
  g_free (p->bus);
  g_free (p->dev);
  g_free (p->netdev);
  g_free (p);
}

VaDevlinkPort *
va_nl_parse_devlink_port (const struct nlmsghdr *nlh)
{
  DevlinkAttrs a;
  VaDevlinkPort *p;

  g_return_val_if_fail (nlh != NULL, NULL);

  if (!parse_devlink (nlh, &a) || !a.tb[DEVLINK_ATTR_BUS_NAME] || !a.tb[DEVLINK_ATTR_DEV_NAME] || !a.tb[DEVLINK_ATTR_PORT_INDEX])
    return NULL;
  p = g_new0 (VaDevlinkPort, 1);
  p->bus = g_strdup (mnl_attr_get_str (a.tb[DEVLINK_ATTR_BUS_NAME]));
  p->dev = g_strdup (mnl_attr_get_str (a.tb[DEVLINK_ATTR_DEV_NAME]));
  p->index = mnl_attr_get_u32 (a.tb[DEVLINK_ATTR_PORT_INDEX]);
  p->flavour = a.tb[DEVLINK_ATTR_PORT_FLAVOUR] ? mnl_attr_get_u16 (a.tb[DEVLINK_ATTR_PORT_FLAVOUR]) : G_MAXUINT16;
  p->pfnum = a.tb[DEVLINK_ATTR_PORT_PCI_PF_NUMBER] ? mnl_attr_get_u16 (a.tb[DEVLINK_ATTR_PORT_PCI_PF_NUMBER]) : -1;
  p->vfnum = a.tb[DEVLINK_ATTR_PORT_PCI_VF_NUMBER] ? mnl_attr_get_u16 (a.tb[DEVLINK_ATTR_PORT_PCI_VF_NUMBER]) : -1;
  p->external = a.tb[DEVLINK_ATTR_PORT_EXTERNAL] && mnl_attr_get_u8 (a.tb[DEVLINK_ATTR_PORT_EXTERNAL]) != 0;
  if (a.tb[DEVLINK_ATTR_PORT_NETDEV_NAME])
    p->netdev = g_strdup (mnl_attr_get_str (a.tb[DEVLINK_ATTR_PORT_NETDEV_NAME]));
  return p;
}

void
va_vdpa_dev_free (VaVdpaDev *d)
{
  if (!d)
    return;
  g_free (d->name);
  g_free (d->mgmt_bus);
  g_free (d->mgmt_dev);
  g_free (d);
}

static int
vdpa_dev_attr_cb (const struct nlattr *attr, void *data)
{
  VdpaAttrs *a = data;
  int type = mnl_attr_get_type (attr);

  if (mnl_attr_type_valid (attr, VDPA_ATTR_MAX) < 0)
    return MNL_CB_OK;
  if ((type == VDPA_ATTR_MGMTDEV_BUS_NAME || type == VDPA_ATTR_MGMTDEV_DEV_NAME || type == VDPA_ATTR_DEV_NAME)
      && mnl_attr_validate (attr, MNL_TYPE_NUL_STRING) < 0)
    return MNL_CB_OK;
  a->tb[type] = attr;
  return MNL_CB_OK;
}

VaVdpaDev *
va_nl_parse_vdpa_dev (const struct nlmsghdr *nlh)
{
  VdpaAttrs a = { { 0 } };
  VaVdpaDev *d;

  g_return_val_if_fail (nlh != NULL, NULL);

  if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof (struct genlmsghdr))
    return NULL;
  mnl_attr_parse (nlh, sizeof (struct genlmsghdr), vdpa_dev_attr_cb, &a);
  if (!a.tb[VDPA_ATTR_DEV_NAME] || !a.tb[VDPA_ATTR_MGMTDEV_DEV_NAME])
    return NULL;
  d = g_new0 (VaVdpaDev, 1);
  d->name = g_strdup (mnl_attr_get_str (a.tb[VDPA_ATTR_DEV_NAME]));
  if (a.tb[VDPA_ATTR_MGMTDEV_BUS_NAME])
    d->mgmt_bus = g_strdup (mnl_attr_get_str (a.tb[VDPA_ATTR_MGMTDEV_BUS_NAME]));
  d->mgmt_dev = g_strdup (mnl_attr_get_str (a.tb[VDPA_ATTR_MGMTDEV_DEV_NAME]));
  return d;
}

static const char *
extack_message (const struct nlmsghdr *nlh)
{
  const struct nlmsgerr *err = mnl_nlmsg_get_payload (nlh);
  gsize off = sizeof *err;
  const struct nlattr *attr;

  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
    return NULL;
  /* uncapped, the whole request is echoed before the TLVs */
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
    off = sizeof *err + err->msg.nlmsg_len - sizeof (struct nlmsghdr);
  mnl_attr_for_each (attr, nlh, off) if (mnl_attr_get_type (attr) == NLMSGERR_ATTR_MSG
                                         && mnl_attr_validate (attr, MNL_TYPE_NUL_STRING) == 0) return mnl_attr_get_str (attr);
  return NULL;
}

gboolean
va_nl_transact (int protocol, struct nlmsghdr *nlh, VaNlReplyFunc cb, gpointer user_data, const char *what, int *kernel_errno,
                GError **error)
{
  struct mnl_socket *nl;
  char buf[VA_NL_BUF_SIZE];
  int one = 1;
  guint32 portid;
  gboolean done = FALSE;

  g_return_val_if_fail (nlh != NULL, FALSE);
  g_return_val_if_fail (what != NULL, FALSE);

  nl = mnl_socket_open2 (protocol, SOCK_CLOEXEC);
  if (kernel_errno)
    *kernel_errno = 0;
  if (!nl)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: opening a netlink socket: %s", what, g_strerror (errno));
      return FALSE;
    }
  mnl_socket_setsockopt (nl, NETLINK_EXT_ACK, &one, sizeof one);
  if (mnl_socket_bind (nl, 0, MNL_SOCKET_AUTOPID) < 0)
    {
      int e = errno;
      mnl_socket_close (nl);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: binding a netlink socket: %s", what, g_strerror (e));
      return FALSE;
    }
  portid = mnl_socket_get_portid (nl);
  if (mnl_socket_sendto (nl, nlh, nlh->nlmsg_len) < 0)
    {
      int e = errno;
      mnl_socket_close (nl);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: sending: %s", what, g_strerror (e));
      return FALSE;
    }
  while (!done)
    {
      ssize_t n = mnl_socket_recvfrom (nl, buf, sizeof buf);
      const struct nlmsghdr *r;
      int len;

      if (n < 0)
        {
          int e = errno;
          mnl_socket_close (nl);
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: receiving: %s", what, g_strerror (e));
          return FALSE;
        }
      len = (int) n;
      for (r = (const struct nlmsghdr *) buf; mnl_nlmsg_ok (r, len); r = mnl_nlmsg_next (r, &len))
        {
          if (r->nlmsg_seq != nlh->nlmsg_seq || (r->nlmsg_pid && r->nlmsg_pid != portid))
            continue;
          if (r->nlmsg_type == NLMSG_ERROR)
            {
              const struct nlmsgerr *err = mnl_nlmsg_get_payload (r);
              const char *msg;

              if (err->error == 0)
                {
                  done = TRUE;
                  break;
                }
              msg = extack_message (r);
              if (kernel_errno)
                *kernel_errno = -err->error;
              g_set_error (error, VA_ERROR, -err->error == EBUSY ? VA_ERROR_BUSY : VA_ERROR_PROVISIONING_FAILED,
                           "%s: the kernel refused: %s%s%s", what, g_strerror (-err->error), msg ? ": " : "", msg ? msg : "");
              mnl_socket_close (nl);
              return FALSE;
            }
          if (r->nlmsg_type == NLMSG_DONE)
            {
              done = TRUE;
              break;
            }
          if (cb)
            cb (r, user_data);
        }
    }
  mnl_socket_close (nl);
  return TRUE;
}

static guint32
next_seq (void)
{
  static guint32 seq;

  if (!seq)
    seq = (guint32) time (NULL);
  return ++seq;
}

static int
family_attr_cb (const struct nlattr *attr, void *data)
{
  guint16 *id = data;

  if (mnl_attr_get_type (attr) == CTRL_ATTR_FAMILY_ID && mnl_attr_validate (attr, MNL_TYPE_U16) == 0)
    *id = mnl_attr_get_u16 (attr);
  return MNL_CB_OK;
}

static void
family_reply (const struct nlmsghdr *nlh, gpointer user_data)
{
  mnl_attr_parse (nlh, sizeof (struct genlmsghdr), family_attr_cb, user_data);
}

gboolean
va_nl_genl_family (const char *name, const char *module, guint16 *id, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("looking up the %s netlink family", name);
  g_autoptr (GError) local = NULL;
  int kerr = 0;

  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (module != NULL, FALSE);
  g_return_val_if_fail (id != NULL, FALSE);

  *id = 0;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_getfamily (buf, next_seq (), name), family_reply, id, what, &kerr, &local))
    {
      if (kerr == ENOENT)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND,
                       "the kernel has no %s netlink family (module %s not loaded, or kernel built without it)", name, module);
          return FALSE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (!*id)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: the reply carried no family id", what);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_nl_vdpa_dev_new (const char *mgmt_bus, const char *mgmt_dev, const char *name, const guint8 mac[6], guint16 max_vqp, guint16 mtu,
                    GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strcmp0 (mgmt_bus, "pci") == 0
                            ? g_strdup_printf ("vdpa device %s on VF %s: creating it", name, mgmt_dev)
                            : g_strdup_printf ("vdpa device %s on management device %s%s%s: creating it", name, mgmt_bus ? mgmt_bus : "",
                                               mgmt_bus ? "/" : "", mgmt_dev);
  guint16 family;

  g_return_val_if_fail (mgmt_dev != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  if (!va_nl_genl_family (VDPA_GENL_NAME, "vdpa", &family, error))
    return FALSE;
  return va_nl_transact (NETLINK_GENERIC, va_nl_build_vdpa_dev_new (buf, family, next_seq (), mgmt_bus, mgmt_dev, name, mac, max_vqp, mtu),
                         NULL, NULL, what, NULL, error);
}

gboolean
va_nl_vdpa_dev_del (const char *name, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("vdpa device %s: deleting it", name);
  g_autoptr (GError) local = NULL;
  guint16 family;
  int kerr = 0;

  g_return_val_if_fail (name != NULL, FALSE);

  if (!va_nl_genl_family (VDPA_GENL_NAME, "vdpa", &family, error))
    return FALSE;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_vdpa_dev_del (buf, family, next_seq (), name), NULL, NULL, what, &kerr, &local))
    {
      if (kerr == ENODEV)
        return TRUE; /* gone already */
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

static void
mgmtdev_reply (const struct nlmsghdr *nlh, gpointer user_data)
{
  VaVdpaMgmtdev *m = va_nl_parse_vdpa_mgmtdev (nlh);

  if (m)
    g_ptr_array_add (user_data, m);
}

GPtrArray *
va_nl_vdpa_mgmtdevs (GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_vdpa_mgmtdev_free);
  guint16 family;

  if (!va_nl_genl_family (VDPA_GENL_NAME, "vdpa", &family, error))
    return NULL;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_vdpa_mgmtdev_dump (buf, family, next_seq ()), mgmtdev_reply, out,
                       "listing vdpa management devices", NULL, error))
    return NULL;
  return g_steal_pointer (&out);
}

static void
eswitch_reply (const struct nlmsghdr *nlh, gpointer user_data)
{
  guint16 *mode = user_data;

  va_nl_parse_eswitch_mode (nlh, mode);
}

gboolean
va_nl_eswitch_get (const char *bus, const char *dev, gboolean *switchdev, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("devlink %s/%s: reading the eswitch mode", bus, dev);
  g_autoptr (GError) local = NULL;
  guint16 family;
  guint16 mode = G_MAXUINT16;
  int kerr = 0;

  g_return_val_if_fail (bus != NULL && dev != NULL, FALSE);
  g_return_val_if_fail (switchdev != NULL, FALSE);

  if (!va_nl_genl_family (DEVLINK_GENL_NAME, "devlink", &family, error))
    return FALSE;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_eswitch_get (buf, family, next_seq (), bus, dev), eswitch_reply, &mode, what, &kerr,
                       &local))
    {
      /* igb and other legacy SR-IOV drivers register no devlink instance
       * (net/devlink/netlink.c: devlink_get_from_attrs_lock) */
      if (kerr == ENODEV)
        g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "%s: %s has no devlink instance (its driver offers legacy SR-IOV only)", what,
                     dev);
      /* mlx5 answers EOPNOTSUPP where the function is no eswitch manager
       * (eswitch_offloads.c, mlx5_devlink_eswitch_get): the host PF of a
       * BlueField in DPU mode, whose Arm cores own the eswitch */
      else if (kerr == EOPNOTSUPP)
        g_set_error (error, VA_ERROR, VA_ERROR_PERMISSION_DENIED,
                     "%s: %s is not its eswitch manager (EOPNOTSUPP: a BlueField in DPU mode, whose Arm side owns the eswitch)", what, dev);
      else
        g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (mode != DEVLINK_ESWITCH_MODE_LEGACY && mode != DEVLINK_ESWITCH_MODE_SWITCHDEV)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: the reply carried %s", what,
                   mode == G_MAXUINT16 ? "no mode" : "an unknown mode");
      return FALSE;
    }
  *switchdev = mode == DEVLINK_ESWITCH_MODE_SWITCHDEV;
  return TRUE;
}

gboolean
va_nl_eswitch_set (const char *bus, const char *dev, gboolean switchdev, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("devlink %s/%s: setting eswitch mode %s", bus, dev, switchdev ? "switchdev" : "legacy");
  guint16 family;

  g_return_val_if_fail (bus != NULL && dev != NULL, FALSE);

  if (!va_nl_genl_family (DEVLINK_GENL_NAME, "devlink", &family, error))
    return FALSE;
  return va_nl_transact (
    NETLINK_GENERIC,
    va_nl_build_eswitch_set (buf, family, next_seq (), bus, dev, switchdev ? DEVLINK_ESWITCH_MODE_SWITCHDEV : DEVLINK_ESWITCH_MODE_LEGACY),
    NULL, NULL, what, NULL, error);
}

static void
port_reply (const struct nlmsghdr *nlh, gpointer user_data)
{
  VaDevlinkPort *p = va_nl_parse_devlink_port (nlh);

  if (p)
    g_ptr_array_add (user_data, p);
}

GPtrArray *
va_nl_devlink_ports (GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_devlink_port_free);
  guint16 family;

  if (!va_nl_genl_family (DEVLINK_GENL_NAME, "devlink", &family, error))
    return NULL;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_devlink_port_dump (buf, family, next_seq ()), port_reply, out, "listing devlink ports",
                       NULL, error))
    return NULL;
  return g_steal_pointer (&out);
}

static void
vdpa_dev_reply (const struct nlmsghdr *nlh, gpointer user_data)
{
  VaVdpaDev *d = va_nl_parse_vdpa_dev (nlh);

  if (d)
    g_ptr_array_add (user_data, d);
}

GPtrArray *
va_nl_vdpa_devs (GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_vdpa_dev_free);
  guint16 family;

  if (!va_nl_genl_family (VDPA_GENL_NAME, "vdpa", &family, error))
    return NULL;
  if (!va_nl_transact (NETLINK_GENERIC, va_nl_build_vdpa_dev_dump (buf, family, next_seq ()), vdpa_dev_reply, out, "listing vdpa devices",
                       NULL, error))
    return NULL;
  return g_steal_pointer (&out);
}

static gboolean
ifindex_of (const char *name, const char *what, int *ifindex, GError **error)
{
  *ifindex = (int) if_nametoindex (name);
  if (*ifindex == 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "%s: no network interface %s", what, name);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_nl_vf_set (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, gboolean spoofchk, gboolean trust, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("PF %s VF %u: setting MAC, VLAN %u, spoofchk %s, trust %s", pf, vf, vlan,
                                           spoofchk ? "on" : "off", trust ? "on" : "off");
  int ifindex;

  g_return_val_if_fail (pf != NULL, FALSE);
  g_return_val_if_fail (mac != NULL, FALSE);

  if (!ifindex_of (pf, what, &ifindex, error))
    return FALSE;
  return va_nl_transact (NETLINK_ROUTE, va_nl_build_vf_set (buf, next_seq (), ifindex, vf, mac, vlan, spoofchk, trust), NULL, NULL, what,
                         NULL, error);
}

gboolean
va_nl_vf_set_mac_vlan (const char *pf, guint32 vf, const guint8 mac[6], guint16 vlan, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("PF %s VF %u: setting MAC and VLAN %u", pf, vf, vlan);
  int ifindex;

  g_return_val_if_fail (pf != NULL && mac != NULL, FALSE);

  if (!ifindex_of (pf, what, &ifindex, error))
    return FALSE;
  return va_nl_transact (NETLINK_ROUTE, va_nl_build_vf_mac_vlan (buf, next_seq (), ifindex, vf, mac, vlan), NULL, NULL, what, NULL, error);
}

typedef struct
{
  guint32 vf;
  gboolean found;
  gboolean spoofchk;
  gboolean trust;
} VfFlags;

static void
vf_flags_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  VfFlags *g = user_data;

  if (!g->found)
    g->found = va_nl_parse_vf_flags (nlh, g->vf, &g->spoofchk, &g->trust);
}

gboolean
va_nl_vf_set_flags (const char *pf, guint32 vf, gboolean spoofchk, gboolean trust, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what
    = g_strdup_printf ("PF %s VF %u: setting spoofchk %s, trust %s", pf, vf, spoofchk ? "on" : "off", trust ? "on" : "off");
  VfFlags g = { .vf = vf };
  int ifindex;

  g_return_val_if_fail (pf != NULL, FALSE);

  if (!ifindex_of (pf, what, &ifindex, error)
      || !va_nl_transact (NETLINK_ROUTE, va_nl_build_vf_flags (buf, next_seq (), ifindex, vf, spoofchk, trust), NULL, NULL, what, NULL,
                          error)
      || !va_nl_transact (NETLINK_ROUTE, va_nl_build_link_get_vfs (buf, next_seq (), ifindex), vf_flags_cb, &g, what, NULL, error))
    return FALSE;
  if (!g.found)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: the kernel's answer has no spoofchk and trust for it", what);
      return FALSE;
    }
  if (g.spoofchk != spoofchk || g.trust != trust)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: read back spoofchk %s, trust %s", what, g.spoofchk ? "on" : "off",
                   g.trust ? "on" : "off");
      return FALSE;
    }
  return TRUE;
}

typedef struct
{
  guint32 vf;
  guint8 *mac;
  guint16 *vlan;
  gboolean found;
} VfGet;

static void
vf_get_cb (const struct nlmsghdr *nlh, gpointer user_data)
{
  VfGet *g = user_data;

  if (!g->found)
    g->found = va_nl_parse_vf_state (nlh, g->vf, g->mac, g->vlan);
}

gboolean
va_nl_vf_get (const char *pf, guint32 vf, guint8 mac[6], guint16 *vlan, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("PF %s VF %u: reading its MAC and VLAN", pf, vf);
  VfGet g = { .vf = vf, .mac = mac, .vlan = vlan };
  int ifindex;

  g_return_val_if_fail (pf != NULL && mac != NULL && vlan != NULL, FALSE);

  if (!ifindex_of (pf, what, &ifindex, error)
      || !va_nl_transact (NETLINK_ROUTE, va_nl_build_link_get_vfs (buf, next_seq (), ifindex), vf_get_cb, &g, what, NULL, error))
    return FALSE;
  if (!g.found)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "%s: the kernel's answer has no entry for it", what);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_nl_bridge_vlan (const char *port, gboolean add, guint16 vid, gboolean pvid_untagged, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what
    = g_strdup_printf ("bridge port %s: %s VLAN %u%s", port, add ? "adding" : "removing", vid, pvid_untagged ? " as untagged PVID" : "");
  g_autoptr (GError) local = NULL;
  guint16 flags = pvid_untagged ? BRIDGE_VLAN_INFO_PVID | BRIDGE_VLAN_INFO_UNTAGGED : 0;
  int ifindex;
  int kerr = 0;

  g_return_val_if_fail (port != NULL, FALSE);

  if (!ifindex_of (port, what, &ifindex, error))
    return FALSE;
  if (!va_nl_transact (NETLINK_ROUTE, va_nl_build_bridge_vlan (buf, next_seq (), ifindex, add, vid, flags), NULL, NULL, what, &kerr,
                       &local))
    {
      if (kerr == EOPNOTSUPP)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED,
                       "%s: the kernel refused: %s (is %s in a bridge with vlan_filtering 1, and does the kernel have "
                       "CONFIG_BRIDGE_VLAN_FILTERING?)",
                       what, g_strerror (kerr), port);
          return FALSE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

gboolean
va_nl_bridge_port_vlan (const char *port, guint16 vid, GError **error)
{
  g_return_val_if_fail (port != NULL, FALSE);
  g_return_val_if_fail (vid >= 1 && vid <= 4094, FALSE);

  return va_nl_bridge_vlan (port, TRUE, vid, TRUE, error) && (vid == 1 || va_nl_bridge_vlan_del_absent_ok (port, 1, error));
}

gboolean
va_nl_bridge_vlan_del_absent_ok (const char *port, guint16 vid, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("bridge port %s: removing VLAN %u", port, vid);
  int ifindex;
  int kerr = 0;
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (port != NULL, FALSE);

  if (!ifindex_of (port, what, &ifindex, error))
    return FALSE;
  if (!va_nl_transact (NETLINK_ROUTE, va_nl_build_bridge_vlan (buf, next_seq (), ifindex, FALSE, vid, 0), NULL, NULL, what, &kerr, &local))
    {
      if (kerr == ENOENT)
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

gboolean
va_nl_link_set_master (const char *port, const char *bridge, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what
    = bridge ? g_strdup_printf ("port %s: joining bridge %s", port, bridge) : g_strdup_printf ("port %s: leaving its bridge", port);
  int ifindex;
  int master = 0;

  g_return_val_if_fail (port != NULL, FALSE);

  if (!bridge && if_nametoindex (port) == 0)
    return TRUE; /* gone with its VF: out of every bridge */
  if (!ifindex_of (port, what, &ifindex, error))
    return FALSE;
  if (bridge && !ifindex_of (bridge, what, &master, error))
    return FALSE;
  return va_nl_transact (NETLINK_ROUTE, va_nl_build_link_master (buf, next_seq (), ifindex, master, bridge != NULL), NULL, NULL, what, NULL,
                         error);
}

gboolean
va_nl_link_set_up (const char *port, GError **error)
{
  char buf[VA_NL_BUF_SIZE];
  g_autofree char *what = g_strdup_printf ("port %s: setting it up", port);
  int ifindex;

  g_return_val_if_fail (port != NULL, FALSE);

  if (!ifindex_of (port, what, &ifindex, error))
    return FALSE;
  return va_nl_transact (NETLINK_ROUTE, va_nl_build_link_up (buf, next_seq (), ifindex), NULL, NULL, what, NULL, error);
}

/* ---- link monitor -------------------------------------------------------- */

/* <linux/if.h>'s, which clashes with <net/if.h>: RFC 2863's "up" */
#ifndef IF_OPER_UP
#define IF_OPER_UP 6
#endif

static int
link_attr_cb (const struct nlattr *attr, void *data)
{
  const struct nlattr **tb = data;
  int type = mnl_attr_get_type (attr);

  if (mnl_attr_type_valid (attr, IFLA_MAX) < 0)
    return MNL_CB_OK;
  if ((type == IFLA_IFNAME && mnl_attr_validate (attr, MNL_TYPE_NUL_STRING) < 0)
      || ((type == IFLA_OPERSTATE || type == IFLA_CARRIER) && mnl_attr_validate (attr, MNL_TYPE_U8) < 0))
    return MNL_CB_OK; /* malformed: as if absent */
  tb[type] = attr;
  return MNL_CB_OK;
}

gboolean
va_nl_parse_link_event (const struct nlmsghdr *nlh, VaNlLinkEvent *ev)
{
  const struct nlattr *tb[IFLA_MAX + 1] = { NULL };

  g_return_val_if_fail (nlh != NULL, FALSE);
  g_return_val_if_fail (ev != NULL, FALSE);

  if ((nlh->nlmsg_type != RTM_NEWLINK && nlh->nlmsg_type != RTM_DELLINK) || nlh->nlmsg_len < mnl_nlmsg_size (sizeof (struct ifinfomsg)))
    return FALSE;
  mnl_attr_parse (nlh, sizeof (struct ifinfomsg), link_attr_cb, tb);
  if (!tb[IFLA_IFNAME])
    return FALSE;
  ev->ifname = mnl_attr_get_str (tb[IFLA_IFNAME]);
  ev->deleted = nlh->nlmsg_type == RTM_DELLINK;
  ev->oper_up = tb[IFLA_OPERSTATE] ? mnl_attr_get_u8 (tb[IFLA_OPERSTATE]) == IF_OPER_UP : -1;
  ev->carrier = tb[IFLA_CARRIER] ? mnl_attr_get_u8 (tb[IFLA_CARRIER]) != 0 : -1;
  return TRUE;
}

struct _VaNlMonitor
{
  struct mnl_socket *nl;
  char buf[32768]; /* a link message with every attribute is a few KiB */
};

VaNlMonitor *
va_nl_link_monitor_new (GError **error)
{
  g_autoptr (VaNlMonitor) self = g_new0 (VaNlMonitor, 1);

  self->nl = mnl_socket_open2 (NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (!self->nl)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "following link changes: opening a netlink socket: %s",
                   g_strerror (errno));
      return NULL;
    }
  if (mnl_socket_bind (self->nl, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "following link changes: joining the link group: %s", g_strerror (errno));
      return NULL;
    }
  return g_steal_pointer (&self);
}

int
va_nl_link_monitor_get_fd (VaNlMonitor *self)
{
  g_return_val_if_fail (self != NULL, -1);

  return mnl_socket_get_fd (self->nl);
}

gboolean
va_nl_link_monitor_read (VaNlMonitor *self, VaNlLinkFunc cb, gpointer user_data)
{
  gboolean complete = TRUE;
  ssize_t n;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (cb != NULL, FALSE);

  while ((n = mnl_socket_recvfrom (self->nl, self->buf, sizeof self->buf)) != 0)
    {
      int len = (int) n;

      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          if (errno == ENOBUFS)
            {
              complete = FALSE;
              continue;
            }
          break; /* EAGAIN: drained */
        }
      for (const struct nlmsghdr *r = (const struct nlmsghdr *) self->buf; mnl_nlmsg_ok (r, len); r = mnl_nlmsg_next (r, &len))
        {
          VaNlLinkEvent ev;

          if (va_nl_parse_link_event (r, &ev))
            cb (&ev, user_data);
        }
    }
  return complete;
}

void
va_nl_link_monitor_free (VaNlMonitor *self)
{
  if (!self)
    return;
  if (self->nl)
    mnl_socket_close (self->nl);
  g_free (self);
}
