/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-ids.h"

G_BEGIN_DECLS

/* The lease, the core's main record, and its one form on the bus: the
 * daemon stores it, the adapter sends it (Allocate's reply, ListLeases,
 * the lease signals) and the clients read it, all through this file. Its
 * bounds are va-ids' (VA_NAME_MAX, VA_DOMAIN_NAME_MAX, VA_SLOT_MAX,
 * VA_PATH_MAX, the VLAN and queue ranges), which the store's schema
 * repeats as CHECK constraints. */

typedef struct
{
  char *uuid;        /* libvirt domain UUID, canonical lower case */
  char *domain_name; /* informational */
  char *mac;         /* the NIC's MAC, lower case */
  char *network;     /* "" for inline intent */
  char *pool;
  char *slot;     /* VF PCI address */
  char *device;   /* vdpa device name; "" until provisioned, and for sriov */
  char *chardev;  /* /dev/vhost-vdpa-N; "" until provisioned, and for sriov */
  char *port;     /* port path; "" until provisioned, and for sriov */
  guint16 vlan;   /* 0: untagged, else 1..4094 */
  guint16 queues; /* queue pairs, 1..256; 0 for sriov (the VF's own driver) */
  gint64 created; /* seconds since the epoch; 0 when queued: now */
  /* kind sriov: the VF libvirt passed through from the pool's hostdev
   * network (slot); we made nothing on it, so device, chardev and port
   * are "" and queues 0. Else kind vdpa. */
  gboolean sriov;
  /* form software (issue 28): a VDUSE vDPA device served by the daemon's
   * relay, its tap on the network's fallback bridge, made because the
   * pool had no free hardware slot (or has none: a software-only pool).
   * Kind vdpa only. Else form hardware: a vDPA device on a VF, or a VF. */
  gboolean software;
} VaLease;

/* "sriov" or "vdpa", as the store, ListLeases and vdpactl spell it. */
#define VA_LEASE_KIND(lease) ((lease)->sriov ? "sriov" : "vdpa")
/* "software" or "hardware", likewise. */
#define VA_LEASE_FORM(lease) ((lease)->software ? "software" : "hardware")

VaLease *va_lease_new (void);
VaLease *va_lease_copy (const VaLease *lease);
void va_lease_free (VaLease *lease);
gboolean va_lease_equal (const VaLease *a, const VaLease *b);
/* Checks presence, syntax and bounds of every field; VA_ERROR_INVALID_ARGUMENT
 * naming the field otherwise. */
gboolean va_lease_validate (const VaLease *lease, GError **error);
/* A lease's key as the store holds it: @uuid and @mac (NULL: none) valid
 * and in their canonical lower-case form. */
gboolean va_lease_check_key (const char *uuid, const char *mac, GError **error);

/* @lease as a floating a{sv}: uuid, domain_name, mac, network, pool, slot,
 * device, chardev, port (s), vlan, queues (q), created (t), kind (s),
 * form (s). */
GVariant *va_lease_to_variant (const VaLease *lease);

/* The lease in @dict (a{sv}), as va_lease_to_variant() writes it, checked
 * by va_lease_validate(). A missing key or one of the wrong type is
 * VA_ERROR_INVALID_ARGUMENT; keys it does not know are left to the caller
 * (ListLeases adds broken and broken_reason). */
VaLease *va_lease_from_variant (GVariant *dict, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaLease, va_lease_free)

G_END_DECLS
