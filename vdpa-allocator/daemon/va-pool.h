/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-enum.h"

G_BEGIN_DECLS

/* The pool model and the allocation policy: plain data, no I/O, no clock.
 *
 * A pool holds PFs; a PF holds slots (one VF each, later SFs). A lease binds
 * the key (domain UUID, MAC) to one slot. The policy for a new lease:
 *  1. the pool must exist (VA_ERROR_NO_SUCH_POOL) and not be draining
 *     (VA_ERROR_BUSY);
 *  2. the network's quota, when set, must not be reached by its slots'
 *     leases and the others it holds (software devices, which hold no
 *     slot) (VA_ERROR_POOL_EXHAUSTED, so "auto" networks fall back to
 *     virtio);
 *  3. unhealthy PFs are skipped;
 *  4. when a NUMA node is requested and one of its healthy PFs has a free
 *     slot, only PFs on that node are considered, else all healthy PFs;
 *  5. the least-loaded of those PFs wins (fewest leased slots, ties by PF
 *     name), and its free slot that has been free longest is taken;
 *  6. nothing free: VA_ERROR_POOL_EXHAUSTED naming the pool.
 * Allocating a key that already holds a lease returns that lease without
 * applying 1-6, so a retried Allocate succeeds even in a draining pool.
 *
 * Costs: lookups by pool, PF, slot address and key are hash lookups; an
 * allocation scans the pool's PFs (a handful), never its slots. */

typedef enum
{
  VA_SLOT_FREE,
  VA_SLOT_LEASED,
  VA_SLOT_LOST, /* the VF vanished or cannot be provisioned */
} VaSlotState;

#define VA_SLOT_STATE_LAST (VA_SLOT_LOST + 1)

typedef struct _VaPools VaPools;
typedef struct _VaSlot VaSlot;

typedef struct
{
  guint total;
  guint free; /* free slots, healthy PFs or not */
  guint leased;
  guint lost;
  guint usable; /* free slots on healthy PFs: what an allocation can get */
  guint pfs;    /* the PFs in the pool: 0 when none matches its keys */
} VaPoolCounts;

/* What a new lease asks for. */
typedef struct
{
  const char *uuid;
  const char *mac;
  const char *pool;
  const char *network;  /* NULL or "": inline intent, no quota applies */
  guint network_others; /* leases on @network that hold no slot (software devices), for its quota */
  int numa_node;        /* < 0: no preference */
  /* NULL: the policy picks. Else exactly this slot, or an error: one that
   * libvirt chose already (a VF of a kind=sriov pool's hostdev network).
   * It must be in @pool (VA_ERROR_INVALID_ARGUMENT), free
   * (VA_ERROR_BUSY naming its holder), and on a healthy PF; drain and
   * quota apply as above. */
  const char *slot;
} VaPoolRequest;

VaPools *va_pools_new (void);
void va_pools_free (VaPools *self);

/* Building the model (discovery). Names are unique: a second pool of a
 * name, a second PF of a name in a pool, or a second slot of an address
 * anywhere is VA_ERROR_INVALID_ARGUMENT. A new PF is healthy; a new slot
 * is free. @numa_node < 0: unknown. */
gboolean va_pools_add_pool (VaPools *self, const char *name, GError **error);
gboolean va_pools_add_pf (VaPools *self, const char *pool, const char *pf, const char *pci_address, int numa_node, GError **error);
gboolean va_pools_add_slot (VaPools *self, const char *pool, const char *pf, const char *address, GError **error);

gboolean va_pools_has_pool (const VaPools *self, const char *name);
/* The pool and name of the PF at @pci_address, in whichever pool it is; FALSE
 * when no pool has it. PFs are known by address: a netdev name can change,
 * and a PF with no VFs has no slot to be found by. */
gboolean va_pools_find_pf (const VaPools *self, const char *pci_address, const char **pool, const char **pf);
/* The addresses of a PF's slots, in the order they were added; free with
 * g_strfreev(). NULL with VA_ERROR_NOT_FOUND for an unknown PF. */
char **va_pools_list_slots (const VaPools *self, const char *pool, const char *pf, GError **error);
/* Every PF's PCI address, in every pool; free with g_strfreev(). */
char **va_pools_list_pf_addresses (const VaPools *self);
/* Pool names, sorted; free with g_strfreev(). */
char **va_pools_list_pools (const VaPools *self);

/* A PF's health; @reason says why it is unhealthy ("link down"), ignored
 * when healthy. Its free slots stop counting as usable. */
gboolean va_pools_set_pf_health (VaPools *self, const char *pool, const char *pf, gboolean healthy, const char *reason, GError **error);
/* A pool is healthy when it has PFs and all are healthy; @reason (may be
 * NULL) gets "" or the first unhealthy PF and its reason. */
gboolean va_pools_get_health (const VaPools *self, const char *pool, gboolean *healthy, char **reason, GError **error);

/* Draining refuses new leases; release and lookups go on. */
gboolean va_pools_set_draining (VaPools *self, const char *pool, gboolean draining, GError **error);
gboolean va_pools_get_draining (const VaPools *self, const char *pool);

/* At most @quota leases on @network; 0 removes the quota. */
void va_pools_set_network_quota (VaPools *self, const char *network, guint quota);
guint va_pools_get_network_leases (const VaPools *self, const char *network);
/* The quota rule (2. above), the one home of it: @network (NULL or "":
 * none) may take one more lease in @pool while its slots' leases and
 * @others (its leases that hold no slot: software devices) are below its
 * quota; else VA_ERROR_POOL_EXHAUSTED. */
gboolean va_pools_check_quota (const VaPools *self, const char *network, guint others, const char *pool, GError **error);

gboolean va_pools_get_counts (const VaPools *self, const char *pool, VaPoolCounts *counts, GError **error);

/* Marks a slot lost (TRUE) or back (FALSE). A free slot leaves or rejoins
 * the free list at once; a leased slot keeps its lease and becomes lost
 * when released. VA_ERROR_NOT_FOUND for an unknown address. */
gboolean va_pools_set_slot_lost (VaPools *self, const char *address, gboolean lost, GError **error);

/* A new lease by the policy above, or the key's existing lease with
 * *existed set. The slot belongs to @self. */
const VaSlot *va_pools_allocate (VaPools *self, const VaPoolRequest *request, gboolean *existed, GError **error);

/* Re-creates a stored lease at start-up on exactly @slot, bypassing drain,
 * quota and health (the lease exists; reconciliation judges it).
 * VA_ERROR_NOT_FOUND when the slot is unknown, VA_ERROR_BUSY when it is not
 * free or the key holds another slot. Restoring the same lease twice is
 * fine. */
gboolean va_pools_restore (VaPools *self, const char *uuid, const char *mac, const char *network, const char *slot, GError **error);

/* Frees the key's slot. VA_ERROR_NOT_FOUND when the key holds no lease
 * (callers wanting an idempotent Release ignore that code). */
gboolean va_pools_release (VaPools *self, const char *uuid, const char *mac, GError **error);
/* Frees every lease of @uuid; returns how many. */
guint va_pools_release_domain (VaPools *self, const char *uuid);

const VaSlot *va_pools_lookup_lease (const VaPools *self, const char *uuid, const char *mac);
const VaSlot *va_pools_lookup_slot (const VaPools *self, const char *address);
guint va_pools_get_n_leases (const VaPools *self);

const char *va_slot_get_address (const VaSlot *slot);
const char *va_slot_get_pool (const VaSlot *slot);
const char *va_slot_get_pf (const VaSlot *slot);
const char *va_slot_get_pf_pci_address (const VaSlot *slot);
int va_slot_get_numa_node (const VaSlot *slot);
VaSlotState va_slot_get_state (const VaSlot *slot);
/* The leasing key and network while leased, else NULL. */
const char *va_slot_get_uuid (const VaSlot *slot);
const char *va_slot_get_mac (const VaSlot *slot);
const char *va_slot_get_network (const VaSlot *slot);

VA_ENUM_DECL (va_slot_state, VaSlotState)

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaPools, va_pools_free)

G_END_DECLS
