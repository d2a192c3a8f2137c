/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-enum.h"
#include "va-ids.h"

G_BEGIN_DECLS

/* What a VM NIC may become. */
typedef enum
{
  VA_MODE_VDPA,   /* accelerated; portable only if the network has a fallback bridge */
  VA_MODE_VIRTIO, /* always portable */
  VA_MODE_AUTO,   /* accelerated while the pool has room, else portable */
  VA_MODE_SRIOV,  /* a VF passed through; portable only if the network has a fallback bridge */
} VaMode;

#define VA_MODE_LAST (VA_MODE_SRIOV + 1)

/* What a pool offers: vDPA devices on its VFs, or the VFs themselves (a
 * VF is never offered both ways). */
typedef enum
{
  VA_POOL_KIND_VDPA,
  VA_POOL_KIND_SRIOV,
} VaPoolKind;

#define VA_POOL_KIND_LAST (VA_POOL_KIND_SRIOV + 1)

typedef enum
{
  VA_BRIDGE_LINUX,
  VA_BRIDGE_OVS,
} VaBridgeKind;

#define VA_BRIDGE_LAST (VA_BRIDGE_OVS + 1)

/* A network as the configuration defines it: what a NIC asks for. */
typedef struct
{
  char *name;
  VaMode mode;
  char *pool;   /* NULL when mode is virtio */
  guint16 vlan; /* 0: untagged */
  char *bridge; /* the portable (fallback) bridge; NULL: none */
  VaBridgeKind bridge_kind;
  /* mode=sriov only, with a bridge: the accelerated form is the virtio
   * standby of a failover pair (<teaming type='persistent'/>) on the
   * bridge, and the VF is plugged beside it at run time */
  gboolean failover;
} VaNetwork;

/* The host as the intent engine sees it: networks, pools and their free
 * capacity, and where port paths live. Plain data; no I/O. */
typedef struct _VaHostView VaHostView;

VaHostView *va_host_view_new (const char *port_root);
VaHostView *va_host_view_ref (VaHostView *self);
void va_host_view_unref (VaHostView *self);

const char *va_host_view_get_port_root (const VaHostView *self);

/* Copies @network. A second network of the same name replaces the first. */
void va_host_view_add_network (VaHostView *self, const VaNetwork *network);
const VaNetwork *va_host_view_lookup_network (const VaHostView *self, const char *name);

/* @free < 0 means unknown, taken as unlimited. */
void va_host_view_add_pool (VaHostView *self, const char *name, guint max_vqp, gint64 free);
gboolean va_host_view_has_pool (const VaHostView *self, const char *name);
guint va_host_view_get_pool_max_vqp (const VaHostView *self, const char *name);
gint64 va_host_view_get_pool_free (const VaHostView *self, const char *name);
gboolean va_host_view_set_pool_free (VaHostView *self, const char *name, gint64 free, GError **error);
/* Why the pool has no room, when it is not just full (draining, no PF
 * matches it) and what helps, in the daemon's words; the rewrite's
 * refusal quotes it. NULL: full, or unknown (offline). */
gboolean va_host_view_set_pool_why_full (VaHostView *self, const char *name, const char *why, GError **error);
const char *va_host_view_get_pool_why_full (const VaHostView *self, const char *name);
/* A pool is of kind vdpa until set otherwise. */
gboolean va_host_view_set_pool_kind (VaHostView *self, const char *name, VaPoolKind kind, GError **error);
VaPoolKind va_host_view_get_pool_kind (const VaHostView *self, const char *name);
/* A kind=sriov pool on a switchdev eswitch (vlan-method=bridge or ovs):
 * the VF's VLAN goes on its representor, since mlx5 refuses VF VLANs
 * there, so the form gives libvirt no <vlan>. FALSE until set. */
gboolean va_host_view_set_pool_representor_vlan (VaHostView *self, const char *name, gboolean representor_vlan, GError **error);
gboolean va_host_view_get_pool_representor_vlan (const VaHostView *self, const char *name);
/* A kind=vdpa pool that makes software vDPA devices (software-slots, or
 * type=software: issue 28) when it has no free hardware slot. FALSE until
 * set. */
gboolean va_host_view_set_pool_software (VaHostView *self, const char *name, gboolean software, GError **error);
gboolean va_host_view_get_pool_software (const VaHostView *self, const char *name);

typedef enum
{
  /* type='vdpa' on the NIC's port path; on a pool of kind sriov, a VF of
   * the pool's hostdev network (type='network', or type='hostdev' as
   * libvirt shows a started domain) */
  VA_FORM_ACCELERATED,
  VA_FORM_PORTABLE, /* virtio on the network's bridge and VLAN */
} VaForm;

#define VA_FORM_LAST (VA_FORM_PORTABLE + 1)

/* One vdpa:nic of the metadata, and what the document makes of it (the
 * intent engine, libvirt-xml/va-domain.h, fills it in; the daemon fills
 * only the intent from an Allocate request). */
typedef struct
{
  char *mac;     /* lower case */
  char *network; /* NULL: the intent is inline */
  gboolean mode_set;
  VaMode mode;
  char *pool;
  guint16 vlan; /* 0: none */
  char *bridge;
  gboolean bridge_kind_set;
  VaBridgeKind bridge_kind;
  guint16 queues; /* 0: the pool's max-vqp */

  char *target_dev;      /* the tap libvirt named in <target dev>, or NULL */
  char *source_dev;      /* an accelerated interface's <source dev>, or NULL */
  VaForm form;           /* the form of its <interface> in the document now */
  VaPoolKind accel_kind; /* of an accelerated form: a vdpa device or an sriov VF */
  gboolean fallback;     /* portable because the pool had no room */
  /* <interface type='hostdev'>, as libvirt shows a started domain's NIC of
   * a hostdev network: the VF it chose ("0000:01:10.0", from <source>'s
   * PCI <address>), or NULL; and the VLAN it applied (<vlan><tag>, 0:
   * none; G_MAXUINT16 for more than one tag, which no VF carries). */
  char *vf;
  guint16 vf_vlan;
  /* swap-back="accelerated": made portable for a move (migrate, save) and
   * wants its accelerated form back on the host it lands on. Kept by every
   * rewrite that leaves it portable, dropped by one that accelerates it. */
  gboolean swap_back;
  /* swap-back-outcome: why the host it landed on left it portable,
   * written there by vdpa-allocator-libvirt-swap: "no-room" and
   * "refused" are final there; "busy" (the daemon was at a bound, or
   * mid-way through the same operation, for the whole budget) is not:
   * the daemon's resume and the next started begin try again. NULL
   * while it has not tried. Dropped with swap-back, and by the rewrite
   * for a restore or an incoming migration (a new try). */
  char *swap_back_outcome;
  /* <teaming type='persistent'/>: the interface is the virtio standby of a
   * failover pair, the accelerated form on a network with failover=true
   * (form VA_FORM_ACCELERATED, accel_kind VA_POOL_KIND_SRIOV); its VF, the
   * transient member (<teaming type='transient'>, same MAC), is plugged at
   * run time, and when the document shows one, @vf and @vf_vlan are its */
  gboolean failover;
  char *alias; /* the interface's <alias name>, or NULL */
  /* vdpa:nic standby-alias: the alias (va_standby_alias()) the failover
   * form added, which a form without failover takes back; NULL: none */
  char *standby_alias;
} VaNic;

/* "no-room", "refused", "busy", or "lost": a swap cut short between its
 * unplug and its plug (libvirt failed there) left the NIC in no form; its
 * <interface> is gone from the live domain, and the next swap to the
 * accelerated form plugs it back first (va_swap_replug_lost()). */
gboolean va_swap_back_outcome_is_valid (const char *outcome);
/* Whether @nic waits for a swap back on this host: marked, portable, and
 * not tried, or tried while the daemon was busy. */
gboolean va_nic_swap_back_pending (const VaNic *nic);

/* The resolved intent of one NIC against a host view. */
typedef struct
{
  VaMode mode;
  const char *pool; /* NULL for virtio-only */
  guint16 vlan;
  const char *bridge; /* NULL: no portable form */
  VaBridgeKind bridge_kind;
  guint16 queues;  /* 0 on an sriov pool: the VF's driver has its own */
  VaPoolKind kind; /* the pool's; vdpa when there is none */
  /* sriov on a switchdev eswitch: the daemon sets the VLAN on the VF's
   * representor, and the form carries no <vlan> for libvirt */
  gboolean representor_vlan;
  /* a kind=vdpa pool that makes software devices, and a bridge for their
   * tap: the NIC may get a software vDPA device (VDUSE and the relay)
   * when the pool has no free hardware slot, whose relay reaches only
   * shared, file-backed guest memory */
  gboolean software;
  /* sriov on a network with failover=true: the accelerated form is the
   * virtio standby on the bridge (which such a network has), whatever the
   * pool's room, and the VF is plugged beside it at run time */
  gboolean failover;
} VaNicPlan;

/* The intent of @nic on @view, into @plan: its network's (which the NIC
 * may narrow, never widen) or its own inline one, checked against the
 * view's networks and pools. Reads only @view and the intent fields of
 * @nic: the engine resolves each vdpa:nic with it, the daemon each
 * Allocate request. */
gboolean va_nic_resolve (const VaNic *nic, const VaHostView *view, VaNicPlan *plan, GError **error);

/* The layout of port paths, PORT_ROOT/UUID/MAC (the daemon makes them,
 * the engine writes them into <source dev>): a domain's directory, and
 * the port path of one of its accelerated NICs. */
char *va_port_dir (const char *port_root, const char *uuid);
char *va_port_path (const char *port_root, const char *uuid, const char *mac);

VA_ENUM_DECL (va_mode, VaMode)
VA_ENUM_DECL (va_form, VaForm)
VA_ENUM_DECL (va_pool_kind, VaPoolKind)
VA_ENUM_DECL (va_bridge_kind, VaBridgeKind)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaHostView, va_host_view_unref)

G_END_DECLS
