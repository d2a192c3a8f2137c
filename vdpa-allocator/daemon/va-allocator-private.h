/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "va-allocator.h"

#include "va-error.h"
#include "va-paths.h"
#include "va-pool.h"

G_BEGIN_DECLS

/* The allocator's own view of itself, shared by its files and by nothing
 * else (not installed). One file per role:
 *
 *   va-allocator.c            construction, reload, the public glue, status
 *   va-allocator-reconcile.c  devices, port links, libvirt's domains
 *   va-allocator-lease.c      allocate, release, release-domain, claim
 *   va-allocator-pf.c         PFs arriving, leaving, repaired; broken leases
 *   va-allocator-commit.c     the group commit: batches, worker, settling
 *   va-allocator-entry.c      entries, keys, port links, watermarks, signals
 *
 * Who calls whom. A file calls only the files of the layers below it, so
 * the graph has no cycle:
 *
 *   3  va-allocator.c  -> pf, commit, entry
 *   3  reconcile       -> lease, commit, entry
 *   2  lease           -> commit, entry
 *   1  commit          -> entry
 *   1  pf              -> entry
 *   0  entry           -> (none)
 *
 * (Lines are calls and references of symbols; nm on the objects shows
 * them. The one exception is va_allocator_get_type(), which every type
 * check calls (VA_IS_ALLOCATOR in the guards, VA_ALLOCATOR casts): it
 * runs class_init only, which calls no role.)
 *
 * The structs below are the whole shared state; Pending, Job and PfState
 * stay private to the file that owns them. */

typedef enum
{
  ENTRY_PENDING,   /* provisioned, insert queued */
  ENTRY_COMMITTED, /* in the store */
  ENTRY_RELEASING, /* delete queued */
} EntryState;

typedef struct
{
  char *key; /* "uuid/mac" */
  VaLease *lease;
  EntryState state;
  gboolean broken;     /* its slot is not on this host now */
  char *broken_reason; /* why, while broken */
  GPtrArray *waiters;  /* GTask*, answered when the queued operation is done */
} Entry;

typedef enum
{
  PENDING_INSERT,
  PENDING_DELETE,
  PENDING_DELETE_DOMAIN,
} PendingKind;

typedef struct _Pending Pending; /* va-allocator-commit.c */
typedef struct _Job Job;         /* va-allocator-commit.c */
/* the retries of a failed network sync: first, then doubling to max */
#define NETWORK_RETRY_FIRST_MS 5000
#define NETWORK_RETRY_MAX_MS 300000

typedef struct _PfState PfState;           /* va-allocator-pf.c */
typedef struct _NetworkState NetworkState; /* va-allocator-pf.c */

struct _VaAllocator
{
  GObject parent;

  VaConfig *config;
  VaBackend *backend;
  VaStore *store;
  char *run_dir;
  char *ports_dir;
  VaHostView *view; /* networks and pools, capacity unlimited: pools decide */
  VaPools *pools;
  GHashTable *entries; /* key → Entry* */
  /* the entries a pool's tallies look at, so that they cost what the few
   * software and broken leases number, not every lease held: kept by
   * va_allocator_insert_entry(), _remove_entry() and _set_broken() */
  GHashTable *software_entries; /* Entry* whose lease is software */
  GHashTable *broken_entries;   /* Entry* with broken set */
  GHashTable *stored_slots;     /* while starting: the slots of the stored leases, not yet entries */
  GPtrArray *pending;           /* Pending* */
  guint commit_source;
  Job *inflight; /* the batch a worker thread is writing, or NULL */
  GMutex lock;
  GCond cond;
  GHashTable *below_watermark; /* pool names */
  VaDomainLister lister;
  gpointer lister_data;
  GHashTable *pf_states;  /* PCI address → PfState*, the PFs in pools */
  GPtrArray *seen_pfs;    /* VaPfInfo*, every PF of the last discovery as sync_pfs left it: what vdpactl dev list shows */
  GHashTable *held_slots; /* slot addresses whose leaseless device a process holds: never leased */
  gulong pfs_changed_id;
  gulong software_stalled_id;
  GHashTable *pool_warnings; /* pool name → char*: the backend's warning about it */
  VaNetworkSyncer syncer;
  gpointer syncer_data;
  GHashTable *networks; /* pool name → NetworkState*: the libvirt networks of kind=sriov pools */
  guint network_retry_first_ms;
  guint network_retry_max_ms;
};

enum
{
  SIGNAL_LEASE_ADDED,
  SIGNAL_LEASE_REMOVED,
  SIGNAL_LOW_WATERMARK,
  SIGNAL_POOLS_CHANGED,
  SIGNAL_PF_EVENT,
  SIGNAL_LEASE_BROKEN,
  SIGNAL_LEASE_REPAIRED,
  SIGNAL_DEVICE_MADE,
  SIGNAL_POOL_WARNING,
  N_SIGNALS
};

/* ---- va-allocator-pf.c --------------------------------------------------- */

/* Asks the backend (and the network syncer) again what each pool lacks. */
void va_allocator_update_pool_warnings (VaAllocator *self);

/* ---- va-allocator-entry.c ------------------------------------------------ */

/* Filled by va_allocator_class_init(); here, at the bottom, so that every
 * role emits without calling up. */
extern guint va_allocator_signals[N_SIGNALS];

/* Takes @key and @lease; no waiters. */
Entry *va_allocator_entry_new (char *key, VaLease *lease, EntryState state);
void va_allocator_entry_free (Entry *e);
char *va_allocator_make_key (const char *uuid, const char *mac);
/* By "uuid/mac" key, or NULL. */
Entry *va_allocator_lookup_entry (VaAllocator *self, const char *key);
void va_allocator_insert_entry (VaAllocator *self, Entry *e);
void va_allocator_remove_entry (VaAllocator *self, const char *key);
void va_allocator_entry_set_broken (VaAllocator *self, Entry *e, const char *reason);
/* How many software devices (issue 28) the leases of @pool, on
 * @network, hold (NULL: any pool, any network). */
guint va_allocator_software_leases (VaAllocator *self, const char *pool, const char *network);
/* The one home of what a software device is made from: the NIC's plan on
 * this configuration, the pool's MTU, the [relay] group. */
void va_allocator_software_request (VaAllocator *self, const char *mac, guint16 mtu, const VaNicPlan *plan, const VaPoolConfig *pc,
                                    VaSoftwareRequest *sreq);
/* The plan of @lease's NIC on the current configuration. */
gboolean va_allocator_resolve_lease (VaAllocator *self, const VaLease *lease, VaNicPlan *plan, GError **error);

gboolean va_allocator_make_port_link (VaAllocator *self, const VaLease *lease, GError **error);
void va_allocator_remove_port_link (VaAllocator *self, const char *uuid, const char *mac, gboolean domain_gone);

void va_allocator_check_watermark (VaAllocator *self, const char *pool);
/* "match-pf=a,b match-vendor=15b3": the keys of @pc that pick its PFs. */
char *va_allocator_pool_match_keys (const VaPoolConfig *pc);
void va_allocator_check_watermarks (VaAllocator *self);

/* ---- va-allocator-commit.c ----------------------------------------------- */

void va_allocator_pending_free (Pending *p);
/* Queues @op (taking it and @keys, the entries it settles) for the next
 * batch; @task, if any, is answered with the count of @keys. */
void va_allocator_queue_pending (VaAllocator *self, PendingKind kind, VaStoreOp *op, GPtrArray *keys, GTask *task);
/* Commits everything queued now, in this thread, after the batch in flight. */
gboolean va_allocator_commit_now (VaAllocator *self, GError **error);
void va_allocator_finish_inflight (VaAllocator *self);

/* ---- va-allocator-lease.c ------------------------------------------------ */

gboolean va_allocator_in_use (VaAllocator *self, const Entry *e, GError **error);
/* "VF SLOT is bound to host driver DRIVER: in use by the host, not offered" */
char *va_allocator_host_held_line (const char *slot, const char *driver);
gboolean va_allocator_queue_release_domain (VaAllocator *self, const char *uuid, GTask *task, GError **error);

/* ---- va-allocator-pf.c --------------------------------------------------- */

void va_allocator_pf_state_free (PfState *st);
void va_allocator_network_state_free (NetworkState *st);
gboolean va_allocator_add_pools (VaAllocator *self, GError **error);
void va_allocator_on_pfs_changed (VaBackend *backend, VaAllocator *self);

G_END_DECLS
