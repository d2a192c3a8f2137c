/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-alloc-request.h"
#include "va-backend.h"
#include "va-config.h"
#include "va-host-view.h"
#include "va-store.h"

G_BEGIN_DECLS

/* The allocator: pools of slots discovered through a backend, durable
 * leases in a store, and the policy between them. It knows nothing of
 * D-Bus; the adapter translates.
 *
 * The store is the truth. Allocate provisions the device, then commits the
 * lease, then answers; Release commits the deletion, then tears the device
 * down, then answers. A crash between the two steps leaves a device without
 * a lease, which reconciliation removes. Requests of one main-loop turn are
 * committed in one transaction. */

#define VA_TYPE_ALLOCATOR (va_allocator_get_type ())
G_DECLARE_FINAL_TYPE (VaAllocator, va_allocator, VA, ALLOCATOR, GObject)

typedef struct
{
  char *name;
  guint total;
  guint free; /* what an allocation can get now */
  guint leased;
  gboolean healthy;
  char *health_reason; /* "" when healthy */
  gboolean draining;
  const char *vlan_method;
  char *warning;         /* "" or why the pool works but the NIC does not carry its traffic */
  guint software_slots;  /* software devices the pool may make (issue 28) */
  guint software_leased; /* NICs on one now */
  guint broken_leases;   /* leases that carry nothing (va_allocator_get_lease_broken) */
} VaPoolStatus;

void va_pool_status_free (VaPoolStatus *status);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaPoolStatus, va_pool_status_free)

typedef struct
{
  char *pci;  /* the PF's PCI address */
  char *pool; /* the pool it is in */
  char *name; /* its netdev */
  gboolean present;
  gboolean healthy;       /* present, link up, prepared */
  char *health_reason;    /* "" when healthy */
  VaPfHealth health_code; /* health_reason as a fixed word (the metrics' label); OK when healthy */
} VaPfStatus;

void va_pf_status_free (VaPfStatus *status);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaPfStatus, va_pf_status_free)

typedef struct
{
  guint released;
  GPtrArray *orphans;     /* char*, device names removed */
  GPtrArray *busy;        /* char*, devices left alone because a process holds them: orphans, and those of leases of gone domains */
  GPtrArray *missing;     /* char*, "uuid/mac" of leases whose device was re-made */
  GPtrArray *stale_links; /* char*, "uuid/mac" of port links no lease owns, removed */
  GPtrArray *repaired;    /* char*, a line for each kind=sriov VF no lease holds that was left with a VLAN or MAC, reset */
  GPtrArray *host_held;   /* char*, a line for each kind=sriov VF no lease holds that a host driver holds: not offered */
  gboolean libvirt_reachable;
  char *libvirt_error; /* why not, or NULL */
} VaReconcileReport;

void va_reconcile_report_free (VaReconcileReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaReconcileReport, va_reconcile_report_free)

/* Which domains libvirt has, by UUID → GINT_TO_POINTER (active). FALSE
 * with @error when libvirt cannot be reached. */
typedef gboolean (*VaDomainLister) (GHashTable **domains, gpointer user_data, GError **error);

/* Takes ownership of nothing; builds the pools from @backend's PFs and
 * restores @store's leases onto them. */
VaAllocator *va_allocator_new (VaConfig *config, VaBackend *backend, VaStore *store, const char *run_dir, GError **error);

void va_allocator_set_domain_lister (VaAllocator *self, VaDomainLister lister, gpointer user_data);

/* Defines, updates and starts the libvirt network of the kind=sriov pool
 * @pool so that it lists exactly @vfs (sorted; none: removes it). NULL
 * when done; else the one line that becomes the pool's warning. Called
 * from the main thread, so it must be bounded in time. */
typedef char *(*VaNetworkSyncer) (const char *pool, const char *const *vfs, gpointer user_data);

/* Syncs every kind=sriov pool's network now, and again whenever the
 * pool's VFs change (discovery, reload). @syncer runs in a worker thread,
 * one call per pool at a time; a failure is the pool's warning and is
 * retried after 5 s, doubling up to 5 min, until a sync succeeds. Set it
 * once, before any sync. */
void va_allocator_set_network_syncer (VaAllocator *self, VaNetworkSyncer syncer, gpointer user_data);
/* For tests: the retry delays, in ms. */
void va_allocator_set_network_retry (VaAllocator *self, guint first_ms, guint max_ms);
/* Whether a network sync is in flight (tests wait for it to finish). */
gboolean va_allocator_is_syncing_networks (VaAllocator *self);

/* The allocator follows the backend's "pfs-changed" signal: a PF that
 * appears joins the first pool that selects it; one that leaves the host
 * has its slots marked lost, its health set, and its leases broken
 * ("lease-broken"); one that returns is prepared again, its slots come
 * back, and its leases get their devices re-made ("lease-repaired").
 * "pf-event" carries a line for the log for each such change.
 *
 * Replaces the configuration (SIGHUP). Pools and networks are re-read; a
 * pool that disappears keeps its leases until released. */
gboolean va_allocator_reload (VaAllocator *self, VaConfig *config, GError **error);
/* The configuration the allocator reads now: the one it was made with or
 * last reloaded with (a reload that fails part way may have switched).
 * Nothing in the allocator keeps a pointer into any other: its owner may
 * free the rest. */
const VaConfig *va_allocator_get_config (VaAllocator *self);

const char *va_allocator_get_backend_name (VaAllocator *self);

void va_allocator_allocate_async (VaAllocator *self, const VaAllocRequest *req, GAsyncReadyCallback callback, gpointer user_data);
VaLease *va_allocator_allocate_finish (VaAllocator *self, GAsyncResult *result, GError **error);

void va_allocator_release_async (VaAllocator *self, const char *uuid, const char *mac, GAsyncReadyCallback callback, gpointer user_data);
gboolean va_allocator_release_finish (VaAllocator *self, GAsyncResult *result, GError **error);

void va_allocator_release_domain_async (VaAllocator *self, const char *uuid, GAsyncReadyCallback callback, gpointer user_data);
/* How many leases were released; -1 with @error. */
gint va_allocator_release_domain_finish (VaAllocator *self, GAsyncResult *result, GError **error);

/* Re-makes missing port links of the domain's leases; returns their count. */
gint va_allocator_claim (VaAllocator *self, const char *uuid, GError **error);

/* VaLease*, committed leases only, ordered by creation. */
GPtrArray *va_allocator_list_leases (VaAllocator *self);
/* How many leases are held or being made (those va_allocator_list_leases()
 * lists, and the ones whose commit is under way), in O(1). */
guint va_allocator_get_n_leases (VaAllocator *self);

/* Why the lease of (@uuid, @mac) carries nothing, or NULL when it
 * carries its NIC's packets, or there is none: its slot left the host (or
 * came back without its device), or its software device's relay died too
 * often and was given up on (reconciliation or release ends that). The
 * one answer for lease list, the metrics and the pools' BrokenLeases;
 * "lease-broken" is sent when either begins. */
char *va_allocator_get_lease_broken (VaAllocator *self, const char *uuid, const char *mac);

/* VaPoolStatus* by pool name. */
GPtrArray *va_allocator_list_pools (VaAllocator *self);
VaPoolStatus *va_allocator_get_pool (VaAllocator *self, const char *name, GError **error);

/* VaPfStatus*, the PFs in pools (those gone included), by PCI address. */
GPtrArray *va_allocator_list_pfs (VaAllocator *self);

/* A VF as vdpactl dev list shows it. */
typedef struct
{
  char *pci;
  char *mgmtdev; /* its vdpa management device, or NULL: none */
  char *state;   /* its slot's: "free", "leased", "lost"; "unpooled" when its PF is in no pool */
  char *uuid;    /* the lease's, while leased; else NULL */
  char *mac;
  char *domain_name;
  char *reason; /* why it takes no lease, or NULL */
} VaDevVf;

/* A PF the daemon's last discovery saw, in a pool or not. */
typedef struct
{
  char *pci;
  char *name; /* its netdev, or its address when it has none */
  char *model;
  guint16 vendor;
  guint16 device;
  int numa_node;
  char *eswitch; /* "legacy", "switchdev", or NULL: not known */
  guint n_vfs;
  char *pool;        /* the pool it is in, or NULL */
  char *why_no_pool; /* when in none: each pool and the key that leaves it out ("" with no pool configured) */
  gboolean healthy;
  char *health_reason; /* or NULL */
  GPtrArray *vfs;      /* VaDevVf* */
} VaDevPf;

void va_dev_vf_free (VaDevVf *vf);
void va_dev_pf_free (VaDevPf *pf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDevPf, va_dev_pf_free)

/* VaDevPf*, every PF of the last discovery in its order, from memory (no
 * sysfs, no netlink): at most @max_vfs VFs in all, *@left_out (may be
 * NULL) says how many more there were. A PF that left the host is listed
 * no more; its pool's health says so. */
GPtrArray *va_allocator_list_devices (VaAllocator *self, guint max_vfs, guint *left_out);

gboolean va_allocator_drain (VaAllocator *self, const char *pool, gboolean draining, GError **error);

/* This host as the engine sees it now, live free capacity included: a
 * snapshot, which RewriteDomain hands the engine off the main loop
 * (va-daemon-open.c); the core itself never parses a document. */
VaHostView *va_allocator_get_host_view (VaAllocator *self);

/* Devices without leases are removed (unless held open); leases whose device
 * is gone get it back; leases of domains libvirt no longer runs are
 * released, but only when libvirt answered; kind=sriov VFs no lease holds
 * and no one passes through get a VLAN or MAC left on them reset. Runs to
 * completion. */
void va_allocator_reconcile_async (VaAllocator *self, GAsyncReadyCallback callback, gpointer user_data);
VaReconcileReport *va_allocator_reconcile_finish (VaAllocator *self, GAsyncResult *result, GError **error);

/* Commits whatever is queued now instead of at the end of the turn. */
gboolean va_allocator_flush (VaAllocator *self, GError **error);

G_END_DECLS
