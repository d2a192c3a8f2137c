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
/* A pool is of kind vdpa until set otherwise. */
gboolean va_host_view_set_pool_kind (VaHostView *self, const char *name, VaPoolKind kind, GError **error);
VaPoolKind va_host_view_get_pool_kind (const VaHostView *self, const char *name);
/* A kind=sriov pool on a switchdev eswitch (vlan-method=bridge or ovs):
 * the VF's VLAN goes on its representor, since mlx5 refuses VF VLANs
 * there, so the form gives libvirt no <vlan>. FALSE until set. */
gboolean va_host_view_set_pool_representor_vlan (VaHostView *self, const char *name, gboolean representor_vlan, GError **error);
gboolean va_host_view_get_pool_representor_vlan (const VaHostView *self, const char *name);

VA_ENUM_DECL (va_mode, VaMode)
VA_ENUM_DECL (va_pool_kind, VaPoolKind)
VA_ENUM_DECL (va_bridge_kind, VaBridgeKind)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaHostView, va_host_view_unref)

G_END_DECLS
