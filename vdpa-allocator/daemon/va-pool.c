/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-pool"

#include "va-pool.h"

#include <string.h>

#include "va-error.h"

typedef struct _Pool Pool;
typedef struct _Pf Pf;

struct _VaSlot
{
  char *address;
  Pf *pf;
  VaSlotState state;
  gboolean lost_on_release;
  GList link; /* in pf->free while FREE; data is the slot */
  /* while leased */
  char *key; /* "uuid mac", the key of VaPools.leases */
  char *uuid;
  char *mac;
  char *network; /* NULL: none */
};

struct _Pf
{
  char *name;
  char *pci_address;
  int numa_node;
  gboolean healthy;
  char *reason;
  Pool *pool;
  GQueue free; /* VaSlot*, longest free first */
  guint n_slots;
  guint n_leased;
  guint n_lost;
  GPtrArray *slots; /* VaSlot*, not owned, in the order added */
};

struct _Pool
{
  char *name;
  gboolean draining;
  GPtrArray *pfs;          /* Pf*, owned, sorted by name */
  GHashTable *pfs_by_name; /* name → Pf* */
};

struct _VaPools
{
  GHashTable *pools;          /* name → Pool*, owned */
  GHashTable *slots;          /* address → VaSlot*, owned */
  GHashTable *leases;         /* slot->key → VaSlot* */
  GHashTable *domains;        /* uuid → GPtrArray of VaSlot* */
  GHashTable *quotas;         /* network → quota */
  GHashTable *network_leases; /* network → count */
  GHashTable *pfs_by_pci;     /* PCI address → Pf*, PFs that have one */
};

static void
slot_clear_lease (VaSlot *slot)
{
  g_clear_pointer (&slot->key, g_free);
  g_clear_pointer (&slot->uuid, g_free);
  g_clear_pointer (&slot->mac, g_free);
  g_clear_pointer (&slot->network, g_free);
}

static void
slot_free (VaSlot *slot)
{
  slot_clear_lease (slot);
  g_free (slot->address);
  g_free (slot);
}

static void
pf_free (Pf *pf)
{
  g_free (pf->name);
  g_free (pf->pci_address);
  g_free (pf->reason);
  g_ptr_array_unref (pf->slots);
  g_free (pf);
}

static void
pool_free (Pool *pool)
{
  g_free (pool->name);
  g_hash_table_unref (pool->pfs_by_name);
  g_ptr_array_unref (pool->pfs);
  g_free (pool);
}

VaPools *
va_pools_new (void)
{
  VaPools *self = g_new0 (VaPools, 1);

  self->pools = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) pool_free);
  self->slots = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) slot_free);
  self->leases = g_hash_table_new (g_str_hash, g_str_equal);
  self->domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_ptr_array_unref);
  self->quotas = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->network_leases = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pfs_by_pci = g_hash_table_new (g_str_hash, g_str_equal);
  return self;
}

void
va_pools_free (VaPools *self)
{
  if (!self)
    return;
  g_hash_table_unref (self->leases);
  g_hash_table_unref (self->domains);
  g_hash_table_unref (self->slots);
  g_hash_table_unref (self->pools);
  g_hash_table_unref (self->quotas);
  g_hash_table_unref (self->network_leases);
  g_hash_table_unref (self->pfs_by_pci);
  g_free (self);
}

static Pool *
lookup_pool (const VaPools *self, const char *name, GError **error)
{
  Pool *pool = name ? g_hash_table_lookup (self->pools, name) : NULL;

  if (!pool)
    g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "no pool named %.*s", VA_CUT (name ? name : "(null)", 64));
  return pool;
}

static Pf *
lookup_pf (const VaPools *self, const char *pool_name, const char *name, GError **error)
{
  Pool *pool = lookup_pool (self, pool_name, error);
  Pf *pf;

  if (!pool)
    return NULL;
  pf = name ? g_hash_table_lookup (pool->pfs_by_name, name) : NULL;
  if (!pf)
    g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "pool %s has no PF named %.*s", pool->name, VA_CUT (name ? name : "(null)", 64));
  return pf;
}

static gboolean
check_name (const char *what, const char *name, GError **error)
{
  if (!name || !*name)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s is empty", what);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_pools_add_pool (VaPools *self, const char *name, GError **error)
{
  Pool *pool;

  g_return_val_if_fail (self != NULL, FALSE);

  if (!check_name ("pool name", name, error))
    return FALSE;
  if (g_hash_table_contains (self->pools, name))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "pool %s exists already", name);
      return FALSE;
    }
  pool = g_new0 (Pool, 1);
  pool->name = g_strdup (name);
  pool->pfs = g_ptr_array_new_with_free_func ((GDestroyNotify) pf_free);
  pool->pfs_by_name = g_hash_table_new (g_str_hash, g_str_equal);
  g_hash_table_insert (self->pools, pool->name, pool);
  return TRUE;
}

static gint
pf_compare (gconstpointer a, gconstpointer b)
{
  const Pf *pa = *(const Pf *const *) a;
  const Pf *pb = *(const Pf *const *) b;

  return strcmp (pa->name, pb->name);
}

gboolean
va_pools_add_pf (VaPools *self, const char *pool_name, const char *name, const char *pci_address, int numa_node, GError **error)
{
  Pool *pool;
  Pf *pf;

  g_return_val_if_fail (self != NULL, FALSE);

  pool = lookup_pool (self, pool_name, error);
  if (!pool || !check_name ("PF name", name, error))
    return FALSE;
  if (g_hash_table_contains (pool->pfs_by_name, name))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "pool %s has a PF named %s already", pool->name, name);
      return FALSE;
    }
  if (pci_address && *pci_address && g_hash_table_contains (self->pfs_by_pci, pci_address))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "PF %s is in a pool already", pci_address);
      return FALSE;
    }
  pf = g_new0 (Pf, 1);
  pf->name = g_strdup (name);
  pf->pci_address = g_strdup (pci_address ? pci_address : "");
  pf->numa_node = numa_node < 0 ? -1 : numa_node;
  pf->healthy = TRUE;
  pf->reason = g_strdup ("");
  pf->pool = pool;
  g_queue_init (&pf->free);
  pf->slots = g_ptr_array_new ();
  g_ptr_array_add (pool->pfs, pf);
  if (*pf->pci_address)
    g_hash_table_insert (self->pfs_by_pci, pf->pci_address, pf);
  g_ptr_array_sort (pool->pfs, pf_compare);
  g_hash_table_insert (pool->pfs_by_name, pf->name, pf);
  return TRUE;
}

gboolean
va_pools_add_slot (VaPools *self, const char *pool_name, const char *pf_name, const char *address, GError **error)
{
  Pf *pf;
  VaSlot *slot;

  g_return_val_if_fail (self != NULL, FALSE);

  pf = lookup_pf (self, pool_name, pf_name, error);
  if (!pf || !check_name ("slot address", address, error))
    return FALSE;
  if (g_hash_table_contains (self->slots, address))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "slot %s exists already", address);
      return FALSE;
    }
  slot = g_new0 (VaSlot, 1);
  slot->address = g_strdup (address);
  slot->pf = pf;
  slot->state = VA_SLOT_FREE;
  slot->link.data = slot;
  g_queue_push_tail_link (&pf->free, &slot->link);
  pf->n_slots++;
  g_ptr_array_add (pf->slots, slot);
  g_hash_table_insert (self->slots, slot->address, slot);
  return TRUE;
}

gboolean
va_pools_has_pool (const VaPools *self, const char *name)
{
  g_return_val_if_fail (self != NULL, FALSE);

  return name && g_hash_table_contains (self->pools, name);
}

gboolean
va_pools_find_pf (const VaPools *self, const char *pci_address, const char **pool, const char **pf_name)
{
  Pf *pf;

  g_return_val_if_fail (self != NULL, FALSE);

  pf = pci_address && *pci_address ? g_hash_table_lookup (self->pfs_by_pci, pci_address) : NULL;
  if (!pf)
    return FALSE;
  if (pool)
    *pool = pf->pool->name;
  if (pf_name)
    *pf_name = pf->name;
  return TRUE;
}

char **
va_pools_list_slots (const VaPools *self, const char *pool, const char *pf_name, GError **error)
{
  Pf *pf;
  g_autoptr (GStrvBuilder) builder = NULL;

  g_return_val_if_fail (self != NULL, NULL);

  pf = lookup_pf (self, pool, pf_name, error);
  if (!pf)
    return NULL;
  builder = g_strv_builder_new ();
  for (guint i = 0; i < pf->slots->len; i++)
    g_strv_builder_add (builder, ((VaSlot *) g_ptr_array_index (pf->slots, i))->address);
  return g_strv_builder_end (builder);
}

static gint
str_ptr_compare (gconstpointer a, gconstpointer b, gpointer user_data)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

char **
va_pools_list_pools (const VaPools *self)
{
  g_autofree const char **names = NULL;
  g_autoptr (GStrvBuilder) builder = NULL;
  guint n;

  g_return_val_if_fail (self != NULL, NULL);

  names = (const char **) g_hash_table_get_keys_as_array (self->pools, NULL);
  builder = g_strv_builder_new ();
  n = g_hash_table_size (self->pools);
  g_qsort_with_data (names, (gint) n, sizeof (char *), str_ptr_compare, NULL);
  for (guint i = 0; i < n; i++)
    g_strv_builder_add (builder, names[i]);
  return g_strv_builder_end (builder);
}

char **
va_pools_list_pf_addresses (const VaPools *self)
{
  g_autofree const char **addrs = NULL;
  g_autoptr (GStrvBuilder) builder = NULL;
  guint n;

  g_return_val_if_fail (self != NULL, NULL);

  addrs = (const char **) g_hash_table_get_keys_as_array (self->pfs_by_pci, NULL);
  builder = g_strv_builder_new ();
  n = g_hash_table_size (self->pfs_by_pci);
  g_qsort_with_data (addrs, (gint) n, sizeof (char *), str_ptr_compare, NULL);
  for (guint i = 0; i < n; i++)
    g_strv_builder_add (builder, addrs[i]);
  return g_strv_builder_end (builder);
}

gboolean
va_pools_set_pf_health (VaPools *self, const char *pool, const char *pf_name, gboolean healthy, const char *reason, GError **error)
{
  Pf *pf;

  g_return_val_if_fail (self != NULL, FALSE);

  pf = lookup_pf (self, pool, pf_name, error);
  if (!pf)
    return FALSE;
  pf->healthy = healthy;
  g_free (pf->reason);
  pf->reason = g_strdup (healthy ? "" : (reason && *reason ? reason : "unhealthy"));
  return TRUE;
}

gboolean
va_pools_get_health (const VaPools *self, const char *pool_name, gboolean *healthy, char **reason, GError **error)
{
  Pool *pool;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (healthy != NULL, FALSE);

  pool = lookup_pool (self, pool_name, error);
  if (!pool)
    return FALSE;
  if (pool->pfs->len == 0)
    {
      *healthy = FALSE;
      if (reason)
        *reason = g_strdup ("no PF matches the pool");
      return TRUE;
    }
  for (guint i = 0; i < pool->pfs->len; i++)
    {
      Pf *pf = g_ptr_array_index (pool->pfs, i);

      if (!pf->healthy)
        {
          *healthy = FALSE;
          if (reason)
            *reason = g_strdup_printf ("%s: %s", pf->name, pf->reason);
          return TRUE;
        }
    }
  *healthy = TRUE;
  if (reason)
    *reason = g_strdup ("");
  return TRUE;
}

gboolean
va_pools_set_draining (VaPools *self, const char *pool_name, gboolean draining, GError **error)
{
  Pool *pool;

  g_return_val_if_fail (self != NULL, FALSE);

  pool = lookup_pool (self, pool_name, error);
  if (!pool)
    return FALSE;
  pool->draining = draining;
  return TRUE;
}

gboolean
va_pools_get_draining (const VaPools *self, const char *pool_name)
{
  Pool *pool;

  g_return_val_if_fail (self != NULL, FALSE);

  pool = lookup_pool (self, pool_name, NULL);
  return pool && pool->draining;
}

void
va_pools_set_network_quota (VaPools *self, const char *network, guint quota)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (network != NULL);

  if (quota == 0)
    g_hash_table_remove (self->quotas, network);
  else
    g_hash_table_insert (self->quotas, g_strdup (network), GUINT_TO_POINTER (quota));
}

guint
va_pools_get_network_leases (const VaPools *self, const char *network)
{
  g_return_val_if_fail (self != NULL, 0);

  return network ? GPOINTER_TO_UINT (g_hash_table_lookup (self->network_leases, network)) : 0;
}

gboolean
va_pools_check_quota (const VaPools *self, const char *network, guint others, const char *pool, GError **error)
{
  guint quota;

  g_return_val_if_fail (self != NULL, FALSE);

  if (!network || !*network)
    return TRUE;
  quota = GPOINTER_TO_UINT (g_hash_table_lookup (self->quotas, network));
  if (quota > 0 && (guint64) va_pools_get_network_leases (self, network) + others >= quota)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED, "network %s has reached its quota of %u leases in pool %s", network, quota,
                   pool);
      return FALSE;
    }
  return TRUE;
}

static void
network_leases_add (VaPools *self, const char *network, int delta)
{
  guint n;

  if (!network)
    return;
  n = va_pools_get_network_leases (self, network);
  g_assert (delta > 0 || n > 0);
  n += delta;
  if (n == 0)
    g_hash_table_remove (self->network_leases, network);
  else
    g_hash_table_insert (self->network_leases, g_strdup (network), GUINT_TO_POINTER (n));
}

static void
pool_counts (const Pool *pool, VaPoolCounts *c)
{
  memset (c, 0, sizeof *c);
  c->pfs = pool->pfs->len;
  for (guint i = 0; i < pool->pfs->len; i++)
    {
      const Pf *pf = g_ptr_array_index (pool->pfs, i);

      c->total += pf->n_slots;
      c->free += pf->free.length;
      c->leased += pf->n_leased;
      c->lost += pf->n_lost;
      if (pf->healthy)
        c->usable += pf->free.length;
    }
}

gboolean
va_pools_get_counts (const VaPools *self, const char *pool_name, VaPoolCounts *counts, GError **error)
{
  Pool *pool;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (counts != NULL, FALSE);

  pool = lookup_pool (self, pool_name, error);
  if (!pool)
    return FALSE;
  pool_counts (pool, counts);
  return TRUE;
}

gboolean
va_pools_set_slot_lost (VaPools *self, const char *address, gboolean lost, GError **error)
{
  VaSlot *slot;

  g_return_val_if_fail (self != NULL, FALSE);

  slot = address ? g_hash_table_lookup (self->slots, address) : NULL;
  if (!slot)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "no slot %.*s", VA_CUT (address ? address : "(null)", 64));
      return FALSE;
    }
  switch (slot->state)
    {
      case VA_SLOT_FREE:
        if (lost)
          {
            g_queue_unlink (&slot->pf->free, &slot->link);
            slot->state = VA_SLOT_LOST;
            slot->pf->n_lost++;
          }
        break;
      case VA_SLOT_LOST:
        if (!lost)
          {
            slot->state = VA_SLOT_FREE;
            slot->pf->n_lost--;
            g_queue_push_tail_link (&slot->pf->free, &slot->link);
          }
        break;
      case VA_SLOT_LEASED:
        slot->lost_on_release = lost;
        break;
      default:
        g_assert_not_reached ();
    }
  return TRUE;
}

/* Takes @slot (free) for the key. */
static void
lease_slot (VaPools *self, VaSlot *slot, const char *uuid, const char *mac, const char *network)
{
  GPtrArray *domain;

  g_assert (slot->state == VA_SLOT_FREE);
  g_queue_unlink (&slot->pf->free, &slot->link);
  slot->state = VA_SLOT_LEASED;
  slot->pf->n_leased++;
  slot->uuid = g_strdup (uuid);
  slot->mac = g_strdup (mac);
  slot->network = network && *network ? g_strdup (network) : NULL;
  slot->key = g_strconcat (uuid, " ", mac, NULL);
  g_hash_table_insert (self->leases, slot->key, slot);

  domain = g_hash_table_lookup (self->domains, uuid);
  if (!domain)
    {
      domain = g_ptr_array_new ();
      g_hash_table_insert (self->domains, g_strdup (uuid), domain);
    }
  g_ptr_array_add (domain, slot);
  network_leases_add (self, slot->network, +1);
}

static void
unlease_slot (VaPools *self, VaSlot *slot)
{
  GPtrArray *domain = g_hash_table_lookup (self->domains, slot->uuid);

  g_assert (slot->state == VA_SLOT_LEASED);
  g_hash_table_remove (self->leases, slot->key);
  g_ptr_array_remove_fast (domain, slot);
  if (domain->len == 0)
    g_hash_table_remove (self->domains, slot->uuid);
  network_leases_add (self, slot->network, -1);
  slot_clear_lease (slot);

  slot->pf->n_leased--;
  if (slot->lost_on_release)
    {
      slot->lost_on_release = FALSE;
      slot->state = VA_SLOT_LOST;
      slot->pf->n_lost++;
    }
  else
    {
      slot->state = VA_SLOT_FREE;
      /* To the tail: the slot most recently freed is reused last, giving
       * its VF time to settle. */
      g_queue_push_tail_link (&slot->pf->free, &slot->link);
    }
}

static VaSlot *
lookup_key (const VaPools *self, const char *uuid, const char *mac)
{
  g_autofree char *key = NULL;

  if (!uuid || !mac)
    return NULL;
  key = g_strconcat (uuid, " ", mac, NULL);
  return g_hash_table_lookup (self->leases, key);
}

static Pf *
pick_pf (const Pool *pool, int numa_node)
{
  Pf *best = NULL;

  for (int pass = numa_node >= 0 ? 0 : 1; pass < 2 && !best; pass++)
    for (guint i = 0; i < pool->pfs->len; i++)
      {
        Pf *pf = g_ptr_array_index (pool->pfs, i);

        if (!pf->healthy || pf->free.length == 0)
          continue;
        if (pass == 0 && pf->numa_node != numa_node)
          continue;
        /* Strictly fewer: PFs are sorted by name, so ties go to the first. */
        if (!best || pf->n_leased < best->n_leased)
          best = pf;
      }
  return best;
}

/* The slot a caller names (libvirt's pick), under the pool's rules. */
static const VaSlot *
take_slot (VaPools *self, Pool *pool, const VaPoolRequest *request, const char *network, GError **error)
{
  VaSlot *slot = g_hash_table_lookup (self->slots, request->slot);

  if (!slot || slot->pf->pool != pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "VF %.*s is not in pool %s", VA_CUT (request->slot, 64), pool->name);
      return NULL;
    }
  if (slot->state == VA_SLOT_LEASED)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "VF %s of pool %s is leased to NIC %s of domain %s", slot->address, pool->name,
                   slot->mac, slot->uuid);
      return NULL;
    }
  if (slot->state != VA_SLOT_FREE)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "VF %s of pool %s is %s", slot->address, pool->name,
                   va_slot_state_to_string (slot->state));
      return NULL;
    }
  if (!slot->pf->healthy)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "VF %s of pool %s is on PF %s, which is unhealthy: %s", slot->address, pool->name,
                   slot->pf->name, slot->pf->reason ? slot->pf->reason : "");
      return NULL;
    }
  lease_slot (self, slot, request->uuid, request->mac, network);
  return slot;
}

const VaSlot *
va_pools_allocate (VaPools *self, const VaPoolRequest *request, gboolean *existed, GError **error)
{
  const char *network;
  VaSlot *slot;
  Pool *pool;
  Pf *pf;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (request != NULL, NULL);

  network = request->network && *request->network ? request->network : NULL;
  if (existed)
    *existed = FALSE;
  if (!check_name ("domain UUID", request->uuid, error) || !check_name ("MAC", request->mac, error))
    return NULL;

  slot = lookup_key (self, request->uuid, request->mac);
  if (slot)
    {
      if (existed)
        *existed = TRUE;
      return slot;
    }

  pool = lookup_pool (self, request->pool, error);
  if (!pool)
    return NULL;
  if (pool->draining)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY,
                   "pool %s is draining and takes no new leases ('vdpactl pool undrain %s' ends that; 'vdpactl domain portable "
                   "DOMAIN' starts a domain without them)",
                   pool->name, pool->name);
      return NULL;
    }
  if (!va_pools_check_quota (self, network, request->network_others, pool->name, error))
    return NULL;

  if (request->slot)
    return take_slot (self, pool, request, network, error);
  pf = pick_pf (pool, request->numa_node);
  if (!pf)
    {
      VaPoolCounts c;

      pool_counts (pool, &c);
      if (c.pfs == 0)
        /* not full: empty; the allocator, which has the configuration,
         * names the keys that matched nothing */
        g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED, "no PF matches pool %s", pool->name);
      else
        g_set_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED,
                     "pool %s is exhausted: %u slots, %u leased, %u lost, %u free on unhealthy PFs", pool->name, c.total, c.leased, c.lost,
                     c.free - c.usable);
      return NULL;
    }

  slot = g_queue_peek_head (&pf->free);
  lease_slot (self, slot, request->uuid, request->mac, network);
  return slot;
}

gboolean
va_pools_restore (VaPools *self, const char *uuid, const char *mac, const char *network, const char *address, GError **error)
{
  VaSlot *slot;
  VaSlot *held;

  g_return_val_if_fail (self != NULL, FALSE);

  slot = address ? g_hash_table_lookup (self->slots, address) : NULL;
  if (!check_name ("domain UUID", uuid, error) || !check_name ("MAC", mac, error))
    return FALSE;
  if (!slot)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "the lease of %s %s names slot %.*s, which no pool has", uuid, mac,
                   VA_CUT (address ? address : "(null)", 64));
      return FALSE;
    }
  held = lookup_key (self, uuid, mac);
  if (held == slot)
    return TRUE;
  if (held)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "%s %s holds slot %s already, not %s", uuid, mac, held->address, slot->address);
      return FALSE;
    }
  if (slot->state != VA_SLOT_FREE)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "slot %s is %s, cannot restore the lease of %s %s", slot->address,
                   va_slot_state_to_string (slot->state), uuid, mac);
      return FALSE;
    }
  lease_slot (self, slot, uuid, mac, network);
  return TRUE;
}

gboolean
va_pools_release (VaPools *self, const char *uuid, const char *mac, GError **error)
{
  VaSlot *slot;

  g_return_val_if_fail (self != NULL, FALSE);

  slot = lookup_key (self, uuid, mac);
  if (!slot)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "no lease for %.*s %.*s", VA_CUT (uuid ? uuid : "(null)", 64),
                   VA_CUT (mac ? mac : "(null)", 64));
      return FALSE;
    }
  unlease_slot (self, slot);
  return TRUE;
}

guint
va_pools_release_domain (VaPools *self, const char *uuid)
{
  GPtrArray *domain;
  guint n = 0;

  g_return_val_if_fail (self != NULL, 0);

  domain = uuid ? g_hash_table_lookup (self->domains, uuid) : NULL;
  /* unlease_slot() shrinks the array and frees it with its last slot. */
  while (domain && domain->len > 0)
    {
      gboolean last = domain->len == 1;

      unlease_slot (self, g_ptr_array_index (domain, domain->len - 1));
      n++;
      if (last)
        break;
    }
  return n;
}

const VaSlot *
va_pools_lookup_lease (const VaPools *self, const char *uuid, const char *mac)
{
  g_return_val_if_fail (self != NULL, NULL);

  return lookup_key (self, uuid, mac);
}

const VaSlot *
va_pools_lookup_slot (const VaPools *self, const char *address)
{
  g_return_val_if_fail (self != NULL, NULL);

  return address ? g_hash_table_lookup (self->slots, address) : NULL;
}

guint
va_pools_get_n_leases (const VaPools *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return g_hash_table_size (self->leases);
}

const char *
va_slot_get_address (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->address;
}

const char *
va_slot_get_pool (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->pf->pool->name;
}

const char *
va_slot_get_pf (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->pf->name;
}

const char *
va_slot_get_pf_pci_address (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->pf->pci_address;
}

int
va_slot_get_numa_node (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, -1);

  return slot->pf->numa_node;
}

VaSlotState
va_slot_get_state (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, VA_SLOT_LOST);

  return slot->state;
}

const char *
va_slot_get_uuid (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->uuid;
}

const char *
va_slot_get_mac (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->mac;
}

const char *
va_slot_get_network (const VaSlot *slot)
{
  g_return_val_if_fail (slot != NULL, NULL);

  return slot->network;
}

VA_ENUM_IMPL (va_slot_state, VaSlotState, VA_SLOT_STATE_LAST, [VA_SLOT_FREE] = "free", [VA_SLOT_LEASED] = "leased", [VA_SLOT_LOST] = "lost")
