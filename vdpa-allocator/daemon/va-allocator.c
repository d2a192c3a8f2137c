/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator"

#include "config.h"

#include "va-allocator-private.h"

#include <string.h>

G_DEFINE_TYPE (VaAllocator, va_allocator, G_TYPE_OBJECT)

void
va_pool_status_free (VaPoolStatus *status)
{
  if (!status)
    return;
  g_free (status->name);
  g_free (status->health_reason);
  g_free (status->warning);
  g_free (status);
}

/* ---- status -------------------------------------------------------------- */

static gint
cmp_lease (gconstpointer a, gconstpointer b)
{
  const VaLease *x = *(VaLease **) a, *y = *(VaLease **) b;

  if (x->created != y->created)
    return x->created < y->created ? -1 : 1;
  return strcmp (x->uuid, y->uuid) ?: strcmp (x->mac, y->mac);
}

GPtrArray *
va_allocator_list_leases (VaAllocator *self)
{
  GPtrArray *out;
  GHashTableIter iter;
  Entry *e;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_lease_free);
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_PENDING)
      g_ptr_array_add (out, va_lease_copy (e->lease));
  g_ptr_array_sort (out, cmp_lease);
  return out;
}

guint
va_allocator_get_n_leases (VaAllocator *self)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), 0);

  return g_hash_table_size (self->entries);
}

/* The entry of (@uuid, @mac) as a caller spells them, or NULL. */
static Entry *
lookup_by_ids (VaAllocator *self, const char *uuid, const char *mac)
{
  g_autofree char *key = NULL;
  char u[VA_UUID_STRING_LEN], m[VA_MAC_STRING_LEN];

  if (!uuid || !mac || !va_uuid_normalize (uuid, u) || !va_mac_normalize (mac, m))
    return NULL;
  key = va_allocator_make_key (u, m);
  return va_allocator_lookup_entry (self, key);
}

/* The one answer to "does this lease carry nothing, and why": its slot
 * left the host (or came back without its device), else the backend gave
 * its software device up (asked as it is now). */
static char *
entry_broken (VaAllocator *self, const Entry *e)
{
  if (e->broken)
    return g_strdup (e->broken_reason ? e->broken_reason : "broken");
  return e->lease->software ? va_backend_software_stalled (self->backend, e->lease->device) : NULL;
}

char *
va_allocator_get_lease_broken (VaAllocator *self, const char *uuid, const char *mac)
{
  Entry *e;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  e = lookup_by_ids (self, uuid, mac);
  return e ? entry_broken (self, e) : NULL;
}

/* Committed leases of @pool that carry nothing: broken ones, and
 * software ones whose device the backend gave up (entry_broken()). */
static guint
broken_leases (VaAllocator *self, const char *pool)
{
  GHashTableIter iter;
  Entry *e;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->broken_entries);
  while (g_hash_table_iter_next (&iter, (gpointer *) &e, NULL))
    n += e->state != ENTRY_PENDING && strcmp (e->lease->pool, pool) == 0;
  g_hash_table_iter_init (&iter, self->software_entries);
  while (g_hash_table_iter_next (&iter, (gpointer *) &e, NULL))
    if (!e->broken && e->state != ENTRY_PENDING && strcmp (e->lease->pool, pool) == 0)
      {
        g_autofree char *why = entry_broken (self, e);
        n += why != NULL;
      }
  return n;
}

/* The backend gave a software device up: its lease is broken (its port
 * link stays, for the device is there and reconcile serves it again). */
static void
on_software_stalled (VaBackend *backend, const char *name, const char *reason, VaAllocator *self)
{
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state == ENTRY_COMMITTED && e->lease->software && g_strcmp0 (e->lease->device, name) == 0)
      {
        g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_BROKEN], 0, e->lease, reason);
        return;
      }
}

VaPoolStatus *
va_allocator_get_pool (VaAllocator *self, const char *name, GError **error)
{
  g_autoptr (VaPoolStatus) st = NULL;
  const VaPoolConfig *pc;
  VaPoolCounts counts;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  st = g_new0 (VaPoolStatus, 1);
  pc = va_config_lookup_pool (self->config, name);
  if (!va_pools_get_counts (self->pools, name, &counts, error))
    return NULL;
  st->name = g_strdup (name);
  /* lost slots left the host with their PF; a leased one counts until
   * its lease is released */
  st->total = counts.total - counts.lost;
  st->leased = counts.leased;
  st->draining = va_pools_get_draining (self->pools, name);
  st->free = st->draining ? 0 : counts.usable;
  if (!va_pools_get_health (self->pools, name, &st->healthy, &st->health_reason, error))
    return NULL;
  /* a software-only pool has no PF by design: it is as healthy as the
   * kernel lets it make devices, which the backend's warning says */
  if (pc && pc->type == VA_POOL_TYPE_SOFTWARE)
    {
      const char *warning = g_hash_table_lookup (self->pool_warnings, name);

      st->healthy = warning == NULL;
      g_free (st->health_reason);
      st->health_reason = g_strdup (warning ? warning : "");
    }
  /* no PF, not a full pool: the keys that matched nothing, as the
   * refusals of an allocation say them */
  else if (counts.pfs == 0)
    {
      g_autofree char *keys = va_allocator_pool_match_keys (pc);

      g_free (st->health_reason);
      st->health_reason = g_strdup_printf ("no PF matches pool %s (%s)", name, keys);
    }
  /* a pool without PFs says so in the pool model; one whose PFs have no
   * VFs is healthy and empty, which deserves a word too */
  if (counts.total == 0 && !st->health_reason[0] && !(pc && pc->type == VA_POOL_TYPE_SOFTWARE))
    {
      g_free (st->health_reason);
      st->health_reason = g_strdup ("its PFs have no VFs");
    }
  st->software_slots = pc ? pc->software_slots : 0;
  st->software_leased = va_allocator_software_leases (self, name, NULL);
  st->broken_leases = broken_leases (self, name);
  st->vlan_method = va_vlan_method_to_string (pc ? pc->vlan_method : VA_VLAN_METHOD_NONE);
  st->warning = g_strdup (pc ? g_hash_table_lookup (self->pool_warnings, name) : NULL);
  if (!st->warning)
    st->warning = g_strdup ("");
  return g_steal_pointer (&st);
}

GPtrArray *
va_allocator_list_pools (VaAllocator *self)
{
  GPtrArray *out;
  g_auto (GStrv) names = NULL;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_pool_status_free);
  names = va_pools_list_pools (self->pools);
  for (guint i = 0; names[i]; i++)
    {
      VaPoolStatus *st = va_allocator_get_pool (self, names[i], NULL);
      if (st)
        g_ptr_array_add (out, st);
    }
  return out;
}

gboolean
va_allocator_drain (VaAllocator *self, const char *pool, gboolean draining, GError **error)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!pool || !va_name_is_valid (pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a pool name", VA_CUT (pool ? pool : "", 64));
      return FALSE;
    }
  if (!va_pools_has_pool (self->pools, pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "no pool named '%s'", pool);
      return FALSE;
    }
  if (!va_pools_set_draining (self->pools, pool, draining, error))
    return FALSE;
  g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
  return TRUE;
}

VaHostView *
va_allocator_get_host_view (VaAllocator *self)
{
  VaHostView *view;
  g_auto (GStrv) names = NULL;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  view = va_config_to_host_view (self->config, self->ports_dir);
  names = va_pools_list_pools (self->pools);
  for (guint i = 0; names[i]; i++)
    {
      g_autoptr (VaPoolStatus) st = va_allocator_get_pool (self, names[i], NULL);
      const VaPoolConfig *pc = va_config_lookup_pool (self->config, names[i]);
      guint software = 0;
      VaPoolCounts counts;

      /* a software slot is room too, for NICs on a network with a
       * fallback bridge */
      if (st && pc && pc->software_slots && !st->draining)
        software = pc->software_slots - MIN (pc->software_slots, va_allocator_software_leases (self, names[i], NULL));
      if (st)
        va_host_view_set_pool_free (view, names[i], (gint64) st->free + software, NULL);
      /* a refusal that says why and what helps, not only "no free slot" */
      if (st && st->draining)
        {
          g_autofree char *why = g_strdup_printf ("it is draining: 'vdpactl pool undrain %s' ends that; 'vdpactl domain portable "
                                                  "DOMAIN' runs the domain without acceleration",
                                                  names[i]);
          va_host_view_set_pool_why_full (view, names[i], why, NULL);
        }
      else if ((!pc || pc->type != VA_POOL_TYPE_SOFTWARE) && va_pools_get_counts (self->pools, names[i], &counts, NULL) && counts.pfs == 0)
        {
          g_autofree char *keys = va_allocator_pool_match_keys (pc);
          g_autofree char *why = g_strdup_printf ("no PF matches pool %s (%s)", names[i], keys);
          va_host_view_set_pool_why_full (view, names[i], why, NULL);
        }
    }
  return view;
}

const char *
va_allocator_get_backend_name (VaAllocator *self)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  return va_backend_get_name (self->backend);
}

void
va_allocator_set_domain_lister (VaAllocator *self, VaDomainLister lister, gpointer user_data)
{
  g_return_if_fail (VA_IS_ALLOCATOR (self));

  self->lister = lister;
  self->lister_data = user_data;
}

void
va_allocator_set_network_syncer (VaAllocator *self, VaNetworkSyncer syncer, gpointer user_data)
{
  g_return_if_fail (VA_IS_ALLOCATOR (self));

  self->syncer = syncer;
  self->syncer_data = user_data;
  g_hash_table_remove_all (self->networks);
  va_allocator_update_pool_warnings (self);
}

void
va_allocator_set_network_retry (VaAllocator *self, guint first_ms, guint max_ms)
{
  g_return_if_fail (VA_IS_ALLOCATOR (self));
  g_return_if_fail (first_ms > 0 && max_ms >= first_ms);

  self->network_retry_first_ms = first_ms;
  self->network_retry_max_ms = max_ms;
}

gboolean
va_allocator_flush (VaAllocator *self, GError **error)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  return va_allocator_commit_now (self, error);
}

/* ---- construction -------------------------------------------------------- */

static void
apply_networks (VaAllocator *self)
{
  g_clear_pointer (&self->view, va_host_view_unref);
  self->view = va_config_to_host_view (self->config, self->ports_dir);
  for (guint i = 0; i < self->config->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (self->config->networks, i);
      va_pools_set_network_quota (self->pools, n->net.name, n->quota);
    }
}

static gboolean
is_vhost_node (const char *path)
{
  const char *base = strrchr (path, '/');
  const char *digits;

  if (!g_path_is_absolute (path) || strstr (path, "/../") || !base || !g_str_has_prefix (base, "/vhost-vdpa-"))
    return FALSE;
  digits = base + strlen ("/vhost-vdpa-");
  if (!*digits)
    return FALSE;
  for (const char *c = digits; *c; c++)
    if (!g_ascii_isdigit (*c))
      return FALSE;
  return TRUE;
}

/* A lease row is not trusted with paths: its port path must be the one
 * this daemon makes, and its character device the one the backend shows
 * for its device; a row that names any other file is broken, never
 * followed (a row naming /etc/passwd as its port had it replaced by a
 * symlink). */
static void
restore_lease (VaAllocator *self, Entry *e, GHashTable *devices)
{
  VaLease *lease = e->lease;
  g_autofree char *port = va_port_path (self->ports_dir, lease->uuid, lease->mac);
  g_autoptr (GError) local = NULL;
  const VaDeviceInfo *dev;

  if (lease->sriov)
    va_pools_restore (self->pools, lease->uuid, lease->mac, *lease->network ? lease->network : NULL, lease->slot, &local);
  else if (strcmp (lease->port, port) != 0)
    g_set_error (&local, VA_ERROR, VA_ERROR_FAILED, "its stored port path %.*s is not %s: left alone", VA_CUT (lease->port, 200), port);
  else if (lease->software)
    ; /* a software device holds no slot of the pool model */
  else
    va_pools_restore (self->pools, lease->uuid, lease->mac, *lease->network ? lease->network : NULL, lease->slot, &local);
  if (local)
    {
      /* never lose track of a lease: one whose slot is gone stays, broken */
      g_warning ("lease of %s on %s is broken: %s", e->key, lease->slot, local->message);
      va_allocator_entry_set_broken (self, e, local->message);
      return;
    }
  if (lease->sriov)
    return;
  dev = devices ? g_hash_table_lookup (devices, lease->slot) : NULL;
  if (dev && g_strcmp0 (dev->name, lease->device) == 0 && g_strcmp0 (dev->chardev, lease->chardev) != 0)
    {
      g_free (lease->chardev);
      lease->chardev = g_strdup (dev->chardev);
    }
  /* a device the backend does not show yet: reconciliation re-makes it;
   * meanwhile its link may only name a vhost-vdpa node */
  if (!dev && !is_vhost_node (lease->chardev))
    return;
  va_allocator_make_port_link (self, lease, NULL);
}

/* A fresh store while devices or port links of ours exist means the
 * leases were lost (a 0-byte or replaced leases.db): reconciliation would
 * then delete every device, and a slot a guest still uses would go to the
 * next domain. */
static gboolean
check_fresh_store (VaAllocator *self, GPtrArray *devices, GError **error)
{
  g_autoptr (GDir) dir = NULL;
  guint links = 0;

  if (!va_store_was_created (self->store))
    return TRUE;
  dir = g_dir_open (self->ports_dir, 0, NULL);
  while (dir && g_dir_read_name (dir))
    links++;
  if ((!devices || devices->len == 0) && links == 0)
    return TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_FAILED,
               "%s holds no leases, but %u vDPA device(s) of ours and %u domain(s) under %s exist: restore it from a backup, or "
               "remove them (vdpa dev del NAME; rm -r %s) to start with no leases",
               va_store_get_path (self->store), devices ? devices->len : 0, links, self->ports_dir, self->ports_dir);
  return FALSE;
}

static gboolean
restore_leases (VaAllocator *self, GPtrArray *leases, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GPtrArray) devices = NULL;
  g_autoptr (GHashTable) by_slot = g_hash_table_new (g_str_hash, g_str_equal);

  devices = va_backend_list_devices (self->backend, &local);
  if (!devices)
    g_warning ("listing vDPA devices: %s; port links wait for reconciliation", local->message);
  if (!check_fresh_store (self, devices, error))
    return FALSE;
  for (guint i = 0; devices && i < devices->len; i++)
    {
      VaDeviceInfo *dev = g_ptr_array_index (devices, i);
      g_hash_table_insert (by_slot, dev->slot, dev);
    }
  for (guint i = 0; i < leases->len; i++)
    {
      VaLease *lease = g_ptr_array_index (leases, i);
      Entry *e = va_allocator_entry_new (va_allocator_make_key (lease->uuid, lease->mac), va_lease_copy (lease), ENTRY_COMMITTED);

      restore_lease (self, e, devices ? by_slot : NULL);
      va_allocator_insert_entry (self, e);
    }
  return TRUE;
}

VaAllocator *
va_allocator_new (VaConfig *config, VaBackend *backend, VaStore *store, const char *run_dir, GError **error)
{
  g_autoptr (VaAllocator) self = NULL;
  g_autoptr (GPtrArray) stored = NULL;

  g_return_val_if_fail (config != NULL, NULL);
  g_return_val_if_fail (VA_IS_BACKEND (backend), NULL);
  g_return_val_if_fail (store != NULL, NULL);
  g_return_val_if_fail (run_dir != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  self = g_object_new (VA_TYPE_ALLOCATOR, NULL);
  self->config = config;
  self->backend = g_object_ref (backend);
  self->store = store;
  self->run_dir = g_strdup (run_dir);
  self->ports_dir = va_path_ports (run_dir);
  self->pools = va_pools_new ();
  /* the stored leases' slots are known before the PFs are prepared: no VF
   * count or eswitch change under them (va-allocator-pf.c) */
  stored = va_store_load (store, error);
  if (!stored)
    return NULL;
  self->stored_slots = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < stored->len; i++)
    g_hash_table_add (self->stored_slots, ((VaLease *) g_ptr_array_index (stored, i))->slot);
  if (!va_allocator_add_pools (self, error))
    return NULL;
  g_clear_pointer (&self->stored_slots, g_hash_table_unref);
  apply_networks (self);
  if (!restore_leases (self, stored, error))
    return NULL;
  va_allocator_check_watermarks (self);
  self->pfs_changed_id = g_signal_connect (backend, "pfs-changed", G_CALLBACK (va_allocator_on_pfs_changed), self);
  self->software_stalled_id = g_signal_connect (backend, "software-stalled", G_CALLBACK (on_software_stalled), self);
  return g_steal_pointer (&self);
}

gboolean
va_allocator_reload (VaAllocator *self, VaConfig *config, GError **error)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), FALSE);
  g_return_val_if_fail (config != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!va_allocator_commit_now (self, error))
    return FALSE;
  self->config = config;
  if (!va_allocator_add_pools (self, error))
    return FALSE;
  apply_networks (self);
  g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
  return TRUE;
}

const VaConfig *
va_allocator_get_config (VaAllocator *self)
{
  g_return_val_if_fail (VA_IS_ALLOCATOR (self), NULL);

  return self->config;
}

static void
va_allocator_finalize (GObject *object)
{
  VaAllocator *self = VA_ALLOCATOR (object);

  g_clear_signal_handler (&self->pfs_changed_id, self->backend);
  g_clear_signal_handler (&self->software_stalled_id, self->backend);
  g_clear_handle_id (&self->commit_source, g_source_remove);
  va_allocator_finish_inflight (self);
  g_clear_pointer (&self->pending, g_ptr_array_unref);
  g_clear_pointer (&self->software_entries, g_hash_table_unref);
  g_clear_pointer (&self->broken_entries, g_hash_table_unref);
  g_clear_pointer (&self->entries, g_hash_table_unref);
  g_clear_pointer (&self->pools, va_pools_free);
  g_clear_pointer (&self->view, va_host_view_unref);
  g_clear_pointer (&self->below_watermark, g_hash_table_unref);
  g_clear_pointer (&self->pf_states, g_hash_table_unref);
  g_clear_pointer (&self->seen_pfs, g_ptr_array_unref);
  g_clear_pointer (&self->held_slots, g_hash_table_unref);
  g_clear_pointer (&self->pool_warnings, g_hash_table_unref);
  g_clear_pointer (&self->networks, g_hash_table_unref);
  g_clear_pointer (&self->stored_slots, g_hash_table_unref);
  g_clear_object (&self->backend);
  g_free (self->run_dir);
  g_free (self->ports_dir);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (va_allocator_parent_class)->finalize (object);
}

static void
va_allocator_class_init (VaAllocatorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = va_allocator_finalize;

  /* (VaLease *lease): a lease was committed */
  va_allocator_signals[SIGNAL_LEASE_ADDED]
    = g_signal_new ("lease-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
  /* (VaLease *lease): a lease was released */
  va_allocator_signals[SIGNAL_LEASE_REMOVED]
    = g_signal_new ("lease-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
  /* (const char *pool, guint free): free slots dropped below the watermark */
  va_allocator_signals[SIGNAL_LOW_WATERMARK] = g_signal_new ("low-watermark", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                                             NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_UINT);
  /* counts, health or drain of some pool may have changed */
  va_allocator_signals[SIGNAL_POOLS_CHANGED]
    = g_signal_new ("pools-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /* (const char *pool, const char *pf, const char *message): a PF joined a
   * pool, left the host, came back, or changed health; @message is one
   * line for the log. @pool and @pf are "" when discovery itself failed. */
  va_allocator_signals[SIGNAL_PF_EVENT] = g_signal_new ("pf-event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                        G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING);
  /* (VaLease *lease, const char *reason): the lease carries nothing: its
   * slot left the host, or came back without its device, or its software
   * device's relay was given up on; the lease stays until released
   * ("lease-repaired" when reconciliation or the slot's return ends it) */
  va_allocator_signals[SIGNAL_LEASE_BROKEN] = g_signal_new ("lease-broken", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                                            NULL, G_TYPE_NONE, 2, G_TYPE_POINTER, G_TYPE_STRING);
  /* (const char *pool, const char *warning): the pool's warning changed;
   * "" when it has none any more */
  va_allocator_signals[SIGNAL_POOL_WARNING] = g_signal_new ("pool-warning", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                                            NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  /* (const char *pool, VaDeviceInfo *device): a lease's device was made,
   * its steps timed */
  va_allocator_signals[SIGNAL_DEVICE_MADE] = g_signal_new ("device-made", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                           G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_POINTER);
  /* (VaLease *lease): a broken lease has its slot and device again, or
   * its software device is served again */
  va_allocator_signals[SIGNAL_LEASE_REPAIRED]
    = g_signal_new ("lease-repaired", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void
va_allocator_init (VaAllocator *self)
{
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) va_allocator_entry_free);
  self->software_entries = g_hash_table_new (NULL, NULL);
  self->broken_entries = g_hash_table_new (NULL, NULL);
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) va_allocator_pending_free);
  self->below_watermark = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pf_states = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) va_allocator_pf_state_free);
  self->held_slots = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pool_warnings = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->networks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) va_allocator_network_state_free);
  self->network_retry_first_ms = NETWORK_RETRY_FIRST_MS;
  self->network_retry_max_ms = NETWORK_RETRY_MAX_MS;
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
}
