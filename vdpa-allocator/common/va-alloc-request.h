/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What Allocate asks for, and its one form on the bus: the clients encode
 * it, the daemon's adapter decodes it, through this file. The option keys
 * are spelled once, in the table of va-alloc-request.c. */

typedef struct
{
  const char *uuid;
  const char *domain_name;
  const char *mac;
  const char *network; /* NULL or "": inline, from pool and vlan */
  const char *pool;
  guint16 vlan;
  guint16 queues;   /* 0: the pool's max-vqp */
  guint16 mtu;      /* 0: the pool's */
  int numa_node;    /* < 0: no preference */
  const char *port; /* NULL: unchecked; else the path the caller's QEMU opens, refused unless it is the port path */
  /* Required on a kind=sriov pool, refused on a kind=vdpa one: the VF
   * libvirt passed through from the pool's hostdev network (its PCI
   * address), and the VLAN libvirt applied to it (vf_vlan, 0: none),
   * which must be the NIC's. The lease is then only a record: nothing is
   * made on the VF. NULL for a failover NIC (its network says
   * failover=true): the daemon picks a free VF, the lease's slot, which
   * the transient member is then plugged on. */
  const char *vf;
  guint16 vf_vlan;
  /* "hardware": a device on a VF only, never a software one (VDUSE and
   * the relay, issue 28), whose relay could not reach the guest's memory:
   * a domain without shared, file-backed memory asks so. NULL: either. */
  const char *form;
} VaAllocRequest;

/* A request that asks for nothing yet: numa_node -1, the rest 0/NULL. */
#define VA_ALLOC_REQUEST_INIT                                                                                                              \
  {                                                                                                                                        \
    .numa_node = -1                                                                                                                        \
  }

/* Allocate's arguments, (ssss@a{sv}): uuid, domain_name, mac, network and
 * the options; floating. An option is sent when it is set: a string not
 * NULL, a number not 0, numa_node >= 0, vf_vlan with vf. */
GVariant *va_alloc_request_to_variant (const VaAllocRequest *req);

/* The options alone, a{sv}; floating. */
GVariant *va_alloc_request_options_to_variant (const VaAllocRequest *req);

/* Allocate's arguments into @req, whose strings then point into @params
 * (valid while it lives). VA_ERROR_INVALID_ARGUMENT for an unknown option,
 * one of the wrong type, or a number outside its bounds. */
gboolean va_alloc_request_from_variant (GVariant *params, VaAllocRequest *req, GError **error);

/* The options alone into @req, its other fields untouched. */
gboolean va_alloc_request_options_from_variant (GVariant *options, VaAllocRequest *req, GError **error);

G_END_DECLS
