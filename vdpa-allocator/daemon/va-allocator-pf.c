/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator-pf"

#include "config.h"

#include <string.h>

#include "va-allocator-private.h"

/* What the allocator remembers of a PF in a pool between discoveries. */
struct _PfState
{
  gboolean gone;
  gboolean healthy;
  char *reason;        /* current health reason; NULL when healthy */
  VaPfHealth code;     /* the reason as a fixed word; OK when healthy */
  char *prepare_error; /* why prepare_pf failed when it last ran, or NULL */
  char *slots_warning; /* why some, not all, of its VFs take no lease, or NULL */
  gboolean prepared;   /* prepare_pf succeeded for the fields below */
  guint prepared_vfs;
  VaEswitchMode prepared_eswitch;
  /* what decides the VFs' driver autoprobe and the VLAN's place */
  VaPoolKind prepared_kind;
  VaVlanMethod prepared_vlan_method;
  guint16 prepared_vlan;
  int prepared_eswitch_seen; /* the PF's mode as discovered then */
};

void
va_allocator_pf_state_free (PfState *st)
{
  g_free (st->reason);
  g_free (st->prepare_error);
  g_free (st->slots_warning);
  g_free (st);
}

/* ---- PFs coming and going ----------------------------------------------- */

static void pf_event (VaAllocator *self, const char *pool, const char *pf, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static void
pf_event (VaAllocator *self, const char *pool, const char *pf, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_signal_emit (self, va_allocator_signals[SIGNAL_PF_EVENT], 0, pool, pf, msg);
}

/* The first pool, in configuration order, whose selectors take @pf. */
static const VaPoolConfig *
pool_for (VaAllocator *self, const VaPfInfo *pf)
{
  for (guint k = 0; k < self->config->pools->len; k++)
    if (va_pool_config_matches (g_ptr_array_index (self->config->pools, k), pf))
      return g_ptr_array_index (self->config->pools, k);
  return NULL;
}

/* Health by precedence: gone, then what discovery says (a model that cannot
 * carry vDPA, no netdev, link down), then a failed prepare_pf. */
static void
update_health (VaAllocator *self, const char *pool, const char *pf, PfState *st, gboolean healthy, VaPfHealth code, const char *reason)
{
  if (healthy && st->prepare_error)
    {
      healthy = FALSE;
      code = VA_PF_HEALTH_PREPARE_FAILED;
      reason = st->prepare_error;
    }
  if (!healthy && !reason)
    reason = "unhealthy";
  if (!healthy && code == VA_PF_HEALTH_OK)
    code = VA_PF_HEALTH_OTHER;
  st->code = healthy ? VA_PF_HEALTH_OK : code;
  if (st->healthy == healthy && g_strcmp0 (st->reason, healthy ? NULL : reason) == 0)
    return;
  st->healthy = healthy;
  g_free (st->reason);
  st->reason = healthy ? NULL : g_strdup (reason);
  va_pools_set_pf_health (self->pools, pool, pf, healthy, reason, NULL);
  if (healthy)
    pf_event (self, pool, pf, "PF %s in pool %s is healthy again", pf, pool);
  else
    pf_event (self, pool, pf, "PF %s in pool %s is unhealthy: %s", pf, pool, reason);
}

/* The PF's slots become its VFs of now: new VFs join, VFs that went are
 * lost, VFs that came back are free (or leased) again. */
static gboolean
sync_slots (VaAllocator *self, const char *pool, const char *pf, GPtrArray *vfs, GPtrArray *reasons, GError **error)
{
  g_auto (GStrv) slots = va_pools_list_slots (self->pools, pool, pf, error);
  g_autoptr (GHashTable) now = g_hash_table_new (g_str_hash, g_str_equal);

  if (!slots)
    return FALSE;
  for (guint k = 0; k < vfs->len; k++)
    {
      const char *vf = g_ptr_array_index (vfs, k);

      /* a VF that cannot carry vDPA (no management device) is a slot
       * that takes no lease: lost, until discovery says otherwise */
      gboolean unusable = reasons && g_ptr_array_index (reasons, k);

      g_hash_table_add (now, (gpointer) vf);
      if (!va_pools_lookup_slot (self->pools, vf) && !va_pools_add_slot (self->pools, pool, pf, vf, error))
        return FALSE;
      if (!va_pools_set_slot_lost (self->pools, vf, unusable, error))
        return FALSE;
    }
  for (guint k = 0; slots[k]; k++)
    if (!g_hash_table_contains (now, slots[k]) && !va_pools_set_slot_lost (self->pools, slots[k], TRUE, error))
      return FALSE;
  return TRUE;
}

/* Entries on @slots (a set), oldest first is no matter: keys, copied, so
 * that signal handlers may call back in. */
static GPtrArray *
entries_on (VaAllocator *self, GHashTable *slots, gboolean broken)
{
  GPtrArray *keys = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_RELEASING && e->broken == broken && (!slots || g_hash_table_contains (slots, e->lease->slot)))
      g_ptr_array_add (keys, g_strdup (e->key));
  return keys;
}

static void
break_lease (VaAllocator *self, Entry *e, const char *reason)
{
  if (e->broken && g_strcmp0 (e->broken_reason, reason) == 0)
    return;
  va_allocator_entry_set_broken (self, e, reason);
  /* its node is gone, and a new device may get its number: nothing may
   * open the device through the link */
  va_allocator_remove_port_link (self, e->lease->uuid, e->lease->mac, FALSE);
  g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_BROKEN], 0, e->lease, reason);
}

/* The PF at @pci left the host: its slots are lost, its leases broken. */
static void
pf_gone (VaAllocator *self, const char *pci, PfState *st)
{
  const char *pool, *pf;
  g_auto (GStrv) slots = NULL;
  g_autoptr (GHashTable) set = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) keys = NULL;
  g_autofree char *reason = NULL;

  if (!va_pools_find_pf (self->pools, pci, &pool, &pf))
    return;
  st->gone = TRUE;
  reason = g_strdup_printf ("PF %s (%s) is gone from the host", pf, pci);
  slots = va_pools_list_slots (self->pools, pool, pf, NULL);
  for (guint k = 0; slots && slots[k]; k++)
    {
      va_pools_set_slot_lost (self->pools, slots[k], TRUE, NULL);
      g_hash_table_add (set, slots[k]);
    }
  g_clear_pointer (&st->prepare_error, g_free);
  update_health (self, pool, pf, st, FALSE, VA_PF_HEALTH_GONE, reason);
  pf_event (self, pool, pf, "PF %s (%s) left pool %s: its %u slot(s) are lost", pf, pci, pool, slots ? g_strv_length (slots) : 0);
  keys = entries_on (self, set, FALSE);
  for (guint i = 0; i < keys->len; i++)
    {
      Entry *e = va_allocator_lookup_entry (self, g_ptr_array_index (keys, i));
      if (e)
        break_lease (self, e, reason);
    }
}

/* Broken leases whose slot is back get it, and their device re-made. */
static void
repair_leases (VaAllocator *self)
{
  g_autoptr (GPtrArray) keys = entries_on (self, NULL, TRUE);

  for (guint i = 0; i < keys->len; i++)
    {
      Entry *e = va_allocator_lookup_entry (self, g_ptr_array_index (keys, i));
      const VaSlot *slot = e ? va_pools_lookup_slot (self->pools, e->lease->slot) : NULL;
      const VaSlot *held;
      VaDeviceRequest dreq = { 0 };
      g_autoptr (VaDeviceInfo) dev = NULL;
      g_autoptr (GError) error = NULL;
      g_autofree char *reason = NULL;

      if (!slot)
        continue;
      held = va_pools_lookup_lease (self->pools, e->lease->uuid, e->lease->mac);
      if (held != slot
          && !va_pools_restore (self->pools, e->lease->uuid, e->lease->mac, *e->lease->network ? e->lease->network : NULL, e->lease->slot,
                                NULL))
        continue; /* the slot is lost still, or another lease took it */
      if (va_slot_get_state (slot) != VA_SLOT_LEASED)
        continue;
      {
        PfState *st = g_hash_table_lookup (self->pf_states, va_slot_get_pf_pci_address (slot));
        if (st && st->gone)
          continue;
      }
      if (e->lease->sriov)
        {
          const VaPoolConfig *pc = va_config_lookup_pool (self->config, e->lease->pool);

          /* libvirt's VF is back; a switchdev pool's representor came back
           * new, without its VLAN */
          if (va_pool_config_representor_vlan (pc)
              && !va_backend_attach_vf (self->backend, e->lease->slot, pc, e->lease->mac, e->lease->vlan, &error))
            {
              break_lease (self, e, error->message);
              continue;
            }
          va_allocator_entry_set_broken (self, e, NULL);
          g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_REPAIRED], 0, e->lease);
          continue;
        }
      dreq.slot = e->lease->slot;
      dreq.pf = va_slot_get_pf (slot);
      dreq.mac = e->lease->mac;
      dreq.queues = e->lease->queues;
      dreq.vlan = e->lease->vlan;
      dreq.pool = va_config_lookup_pool (self->config, e->lease->pool);
      dreq.mtu = dreq.pool ? dreq.pool->mtu : 0;
      dev = va_backend_create_device (self->backend, &dreq, &error);
      if (!dev)
        {
          reason = g_strdup_printf ("its slot %s is back, but its device could not be re-made: %s", e->lease->slot, error->message);
          break_lease (self, e, reason);
          continue;
        }
      g_free (e->lease->device);
      e->lease->device = g_strdup (dev->name);
      g_free (e->lease->chardev);
      e->lease->chardev = g_strdup (dev->chardev);
      va_allocator_entry_set_broken (self, e, NULL);
      if (!va_allocator_make_port_link (self, e->lease, &error))
        {
          break_lease (self, e, error->message);
          continue;
        }
      g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_REPAIRED], 0, e->lease);
    }
}

static gboolean
every_slot_unusable (GPtrArray *reasons)
{
  for (guint i = 0; i < reasons->len; i++)
    if (!g_ptr_array_index (reasons, i))
      return FALSE;
  return TRUE;
}

/* "2 of 8 VFs take no lease: <the first one's reason>", or NULL when all
 * can (all cannot: the PF is unhealthy instead). */
static char *
slots_warning (const VaPfInfo *pf)
{
  const char *first = NULL;
  guint n = 0;

  for (guint i = 0; pf->vf_reasons && i < pf->vf_reasons->len; i++)
    if (g_ptr_array_index (pf->vf_reasons, i))
      {
        first = first ? first : g_ptr_array_index (pf->vf_reasons, i);
        n++;
      }
  return n ? g_strdup_printf ("%u of %u VFs of PF %s take no lease: %s", n, pf->vf_reasons->len, pf->name, first) : NULL;
}

/* A kind=sriov pool's VFs that a host driver holds (its VFs are made on
 * no driver, so someone bound it: a container's VF, a host storage VF):
 * in use by the host, and not offered; NULL when there is none. */
static GPtrArray *
host_held_reasons (VaAllocator *self, GPtrArray *vfs)
{
  g_autoptr (GPtrArray) reasons = g_ptr_array_new_with_free_func (g_free);
  gboolean any = FALSE;

  for (guint i = 0; i < vfs->len; i++)
    {
      const char *vf = g_ptr_array_index (vfs, i);
      g_autofree char *driver = NULL;

      if (va_backend_vf_holder (self->backend, vf, &driver) == VA_VF_HOST)
        {
          g_ptr_array_add (reasons, va_allocator_host_held_line (vf, driver));
          any = TRUE;
        }
      else
        g_ptr_array_add (reasons, NULL);
    }
  return any ? g_steal_pointer (&reasons) : NULL;
}

/* The leases the allocator holds on the VFs of @pf (a restart with guests
 * running): the backend must then change neither its VF count nor its
 * eswitch mode. */
static guint
leases_on (VaAllocator *self, const VaPfInfo *pf)
{
  GHashTableIter iter;
  gpointer value;
  guint n = 0;

  for (guint i = 0; i < pf->vfs->len; i++)
    {
      const char *vf = g_ptr_array_index (pf->vfs, i);

      if (self->stored_slots && g_hash_table_contains (self->stored_slots, vf))
        n++;
      g_hash_table_iter_init (&iter, self->entries);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        if (g_strcmp0 (((const Entry *) value)->lease->slot, vf) == 0)
          n++;
    }
  return n;
}

/* Brings the pools to the PFs of @pfs: a new PF that a pool selects is
 * prepared and joins it with its VFs as slots; a known PF (by PCI address,
 * whatever its VF count) gets its health and slots updated; a PF that came
 * back is prepared again; a PF that is no longer there is gone. Goes on
 * past errors; the first is returned. */
static gboolean
sync_pfs (VaAllocator *self, GPtrArray *pfs, GError **error)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_auto (GStrv) known = NULL;
  GError *first = NULL;

  for (guint i = 0; i < pfs->len; i++)
    {
      VaPfInfo *pf = g_ptr_array_index (pfs, i);
      const VaPoolConfig *pc = NULL;
      const char *pool, *name;
      g_autoptr (GError) local = NULL;
      PfState *st;
      gboolean fresh = FALSE;

      g_hash_table_add (seen, pf->pci);
      if (va_pools_find_pf (self->pools, pf->pci, &pool, &name))
        st = g_hash_table_lookup (self->pf_states, pf->pci);
      else
        {
          pc = pool_for (self, pf);
          if (!pc)
            continue;
          if (!va_pools_add_pf (self->pools, pc->name, pf->name, pf->pci, pf->numa_node, &local))
            goto next;
          pool = pc->name;
          name = pf->name;
          st = g_new0 (PfState, 1);
          st->healthy = TRUE;
          g_hash_table_insert (self->pf_states, g_strdup (pf->pci), st);
          fresh = TRUE;
        }
      pc = va_config_lookup_pool (self->config, pool);
      if (pc
          && (fresh || st->gone || st->prepare_error || !st->prepared || pc->vfs != st->prepared_vfs || pc->eswitch != st->prepared_eswitch
              || pc->kind != st->prepared_kind || pc->vlan_method != st->prepared_vlan_method || pc->vlan_network_vlan != st->prepared_vlan
              || pf->eswitch_seen != st->prepared_eswitch_seen))
        {
          /* new, or back (a PF that returns comes back as the kernel
           * probes it, without the VFs or eswitch mode it had), or its
           * pool asks another VF count or mode (a reload), or it was
           * refused before: the backend refuses again while leases or
           * devices are on its VFs */
          g_autoptr (GError) prep = NULL;

          g_clear_pointer (&st->prepare_error, g_free);
          pf->leases = leases_on (self, pf);
          st->prepared = va_backend_prepare_pf (self->backend, pf, pc, &prep);
          if (st->prepared)
            {
              st->prepared_vfs = pc->vfs;
              st->prepared_eswitch = pc->eswitch;
              st->prepared_kind = pc->kind;
              st->prepared_vlan_method = pc->vlan_method;
              st->prepared_vlan = pc->vlan_network_vlan;
              st->prepared_eswitch_seen = pf->eswitch_seen;
            }
          else
            st->prepare_error = g_strdup (prep->message);
        }
      /* a kind=sriov pool passes VFs through: vDPA's reasons (the model,
       * the VFs' management devices) are not its own */
      if (pc && pc->kind == VA_POOL_KIND_SRIOV)
        {
          pf->healthy = pf->sriov_reason == NULL;
          g_free (pf->health_reason);
          pf->health_reason = g_strdup (pf->sriov_reason);
          pf->health_code = pf->sriov_code;
          g_clear_pointer (&pf->vf_reasons, g_ptr_array_unref);
          pf->vf_reasons = host_held_reasons (self, pf->vfs);
        }
      if (!sync_slots (self, pool, name, pf->vfs, pf->vf_reasons, &local))
        goto next;
      if (fresh)
        pf_event (self, pool, name, "PF %s (%s) joined pool %s with %u slot(s)", name, pf->pci, pool, pf->vfs->len);
      else if (st->gone)
        pf_event (self, pool, name, "PF %s (%s) is back in pool %s with %u slot(s)", name, pf->pci, pool, pf->vfs->len);
      st->gone = FALSE;
      g_clear_pointer (&st->slots_warning, g_free);
      if (pf->healthy && pf->vf_reasons && pf->vf_reasons->len && every_slot_unusable (pf->vf_reasons))
        update_health (self, pool, name, st, FALSE, VA_PF_HEALTH_NO_VDPA_VF, g_ptr_array_index (pf->vf_reasons, 0));
      else
        {
          update_health (self, pool, name, st, pf->healthy, pf->health_code, pf->health_reason);
          st->slots_warning = slots_warning (pf);
        }
    next:
      if (local && !first)
        first = g_steal_pointer (&local);
    }

  known = va_pools_list_pf_addresses (self->pools);
  for (guint i = 0; known[i]; i++)
    {
      PfState *st = g_hash_table_lookup (self->pf_states, known[i]);
      if (st && !st->gone && !g_hash_table_contains (seen, known[i]))
        pf_gone (self, known[i], st);
    }
  repair_leases (self);
  if (first)
    {
      g_propagate_error (error, first);
      return FALSE;
    }
  return TRUE;
}

static gint
cmp_str (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* ---- the libvirt networks of kind=sriov pools ---------------------------- */

/* A sync runs the syncer (a libvirt client helper, bounded in time) in a
 * worker thread: a libvirtd that hangs must not stall the bus. One sync
 * per pool at a time; a failure is retried on a timer, backing off. */

struct _NetworkState
{
  char *tried;    /* the VF list ("\n"-joined) of the last finished sync */
  char *error;    /* why that sync failed, or NULL */
  char *sending;  /* the list of the sync in flight, or NULL */
  guint retry_id; /* retries a failure */
  guint retry_ms; /* the delay of the next retry */
};

void
va_allocator_network_state_free (NetworkState *st)
{
  g_clear_handle_id (&st->retry_id, g_source_remove);
  g_free (st->tried);
  g_free (st->error);
  g_free (st->sending);
  g_free (st);
}

typedef struct
{
  VaNetworkSyncer syncer;
  gpointer syncer_data;
  char *pool;
  GStrv vfs;
} SyncJob;

static void
sync_job_free (SyncJob *job)
{
  g_free (job->pool);
  g_strfreev (job->vfs);
  g_free (job);
}

static void
run_sync (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  SyncJob *job = data;

  g_task_return_pointer (task, job->syncer (job->pool, (const char *const *) job->vfs, job->syncer_data), g_free);
}

typedef struct
{
  VaAllocator *self; /* not a reference: the timer dies with the state */
  char *pool;
} Retry;

static void
retry_free (gpointer data)
{
  Retry *r = data;

  g_free (r->pool);
  g_free (r);
}

static gboolean
retry_due (gpointer data)
{
  Retry *r = data;
  NetworkState *st = g_hash_table_lookup (r->self->networks, r->pool);

  if (st)
    st->retry_id = 0;
  va_allocator_update_pool_warnings (r->self);
  return G_SOURCE_REMOVE;
}

static void
synced (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VaAllocator *self = VA_ALLOCATOR (source);
  g_autofree char *pool = user_data;
  g_autofree char *failed = g_task_propagate_pointer (G_TASK (res), NULL);
  NetworkState *st = g_hash_table_lookup (self->networks, pool);
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, pool);
  Retry *r;

  if (!st)
    return;
  g_free (st->tried);
  st->tried = g_steal_pointer (&st->sending);
  g_free (st->error);
  st->error = g_steal_pointer (&failed);
  if (!st->error)
    {
      st->retry_ms = 0;
      /* a removed network leaves nothing to remember */
      if ((!pc || pc->kind != VA_POOL_KIND_SRIOV) && !*st->tried)
        g_hash_table_remove (self->networks, pool);
    }
  else
    {
      if (!pc || pc->kind != VA_POOL_KIND_SRIOV)
        pf_event (self, pool, "", "removing the network of pool %s, which the configuration no longer has: %s", pool, st->error);
      st->retry_ms = st->retry_ms ? MIN (st->retry_ms * 2, self->network_retry_max_ms) : self->network_retry_first_ms;
      r = g_new0 (Retry, 1);
      r->self = self;
      r->pool = g_strdup (pool);
      g_clear_handle_id (&st->retry_id, g_source_remove);
      st->retry_id = g_timeout_add_full (G_PRIORITY_DEFAULT, st->retry_ms, retry_due, r, retry_free);
    }
  va_allocator_update_pool_warnings (self);
}

static void
start_sync (VaAllocator *self, const char *pool, NetworkState *st, const char *joined)
{
  g_autoptr (GTask) task = g_task_new (self, NULL, synced, g_strdup (pool));
  SyncJob *job = g_new0 (SyncJob, 1);

  job->syncer = self->syncer;
  job->syncer_data = self->syncer_data;
  job->pool = g_strdup (pool);
  job->vfs = *joined ? g_strsplit (joined, "\n", -1) : g_new0 (char *, 1);
  g_clear_handle_id (&st->retry_id, g_source_remove);
  st->sending = g_strdup (joined);
  g_task_set_task_data (task, job, (GDestroyNotify) sync_job_free);
  g_task_run_in_thread (task, run_sync);
}

/* Brings @pool's network to @joined (its VFs, "\n"-joined, sorted) unless
 * it is there, or a sync is in flight, or a failure of the same list
 * waits for its retry; the line of the last failure, or NULL. */
static const char *
sync_network (VaAllocator *self, const char *pool, const char *joined)
{
  NetworkState *st = g_hash_table_lookup (self->networks, pool);
  gboolean same;

  if (!self->syncer)
    return NULL;
  if (!st)
    {
      st = g_new0 (NetworkState, 1);
      g_hash_table_insert (self->networks, g_strdup (pool), st);
    }
  same = g_strcmp0 (st->tried, joined) == 0;
  if (st->sending || (same && (!st->error || st->retry_id)))
    return st->error;
  start_sync (self, pool, st, joined);
  return st->error;
}

/* A kind=sriov pool's VFs: those of its PFs that are present, lost slots
 * left out; sorted, "\n"-joined. */
static char *
pool_vfs (VaAllocator *self, GPtrArray *pcis)
{
  g_autoptr (GPtrArray) vfs = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i + 1 < pcis->len; i++)
    {
      const char *pool = NULL, *pf = NULL;
      g_auto (GStrv) slots = NULL;

      if (!va_pools_find_pf (self->pools, g_ptr_array_index (pcis, i), &pool, &pf))
        continue;
      slots = va_pools_list_slots (self->pools, pool, pf, NULL);
      for (guint k = 0; slots && slots[k]; k++)
        {
          const VaSlot *slot = va_pools_lookup_slot (self->pools, slots[k]);

          if (slot && va_slot_get_state (slot) != VA_SLOT_LOST)
            g_ptr_array_add (vfs, g_strdup (slots[k]));
        }
    }
  g_ptr_array_sort (vfs, cmp_str);
  g_ptr_array_add (vfs, NULL);
  return g_strjoinv ("\n", (char **) vfs->pdata);
}

/* The networks of kind=sriov pools a reload removed (or made kind=vdpa):
 * synced to no VF, which removes them; retried while libvirt refuses. */
static void
drop_networks (VaAllocator *self)
{
  g_autoptr (GPtrArray) gone = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, self->networks);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      const VaPoolConfig *pc = va_config_lookup_pool (self->config, key);

      if (!pc || pc->kind != VA_POOL_KIND_SRIOV)
        g_ptr_array_add (gone, g_strdup (key));
    }
  for (guint i = 0; i < gone->len; i++)
    sync_network (self, g_ptr_array_index (gone, i), "");
}

gboolean
va_allocator_is_syncing_networks (VaAllocator *self)
{
  GHashTableIter iter;
  gpointer value;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), FALSE);

  g_hash_table_iter_init (&iter, self->networks);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((NetworkState *) value)->sending)
      return TRUE;
  return FALSE;
}

/* Asks the backend again what each pool lacks to be accelerated, and
 * brings the kind=sriov pools' libvirt networks to their VFs; a change is
 * a PF event, so that it reaches the journal. */
void
va_allocator_update_pool_warnings (VaAllocator *self)
{
  gboolean changed = FALSE;

  for (guint k = 0; k < self->config->pools->len; k++)
    {
      const VaPoolConfig *pc = g_ptr_array_index (self->config->pools, k);
      g_autoptr (GPtrArray) pcis = g_ptr_array_new ();
      g_autofree char *warning = NULL;
      const char *had = g_hash_table_lookup (self->pool_warnings, pc->name);
      GHashTableIter iter;
      gpointer key, value;

      g_hash_table_iter_init (&iter, self->pf_states);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          const char *pool = NULL, *pf = NULL;

          if (!((PfState *) value)->gone && va_pools_find_pf (self->pools, key, &pool, &pf) && strcmp (pool, pc->name) == 0)
            g_ptr_array_add (pcis, key);
        }
      g_ptr_array_add (pcis, NULL);
      /* a network that libvirt would not take leaves the pool serving
       * nothing: that first */
      if (pc->kind == VA_POOL_KIND_SRIOV)
        {
          g_autofree char *vfs = pool_vfs (self, pcis);
          warning = g_strdup (sync_network (self, pc->name, vfs));
        }
      /* a software pool has no PF, and still a kernel to ask */
      if (!warning && (pcis->len > 1 || pc->software_slots))
        warning = va_backend_pool_warning (self->backend, pc, (const char *const *) pcis->pdata);
      for (guint i = 0; !warning && i + 1 < pcis->len; i++)
        {
          const PfState *st = g_hash_table_lookup (self->pf_states, g_ptr_array_index (pcis, i));
          warning = g_strdup (st->slots_warning);
        }
      if (g_strcmp0 (warning, had) == 0)
        continue;
      g_signal_emit (self, va_allocator_signals[SIGNAL_POOL_WARNING], 0, pc->name, warning ? warning : "");
      if (warning)
        g_hash_table_insert (self->pool_warnings, g_strdup (pc->name), g_steal_pointer (&warning));
      else
        g_hash_table_remove (self->pool_warnings, pc->name);
      changed = TRUE;
    }
  drop_networks (self);
  /* the pools' Warning property, which readers get from the last
   * PropertiesChanged */
  if (changed)
    g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
}

gboolean
va_allocator_add_pools (VaAllocator *self, GError **error)
{
  g_autoptr (GPtrArray) pfs = NULL;
  gboolean ok;

  for (guint i = 0; i < self->config->pools->len; i++)
    {
      const VaPoolConfig *pc = g_ptr_array_index (self->config->pools, i);
      if (!va_pools_has_pool (self->pools, pc->name) && !va_pools_add_pool (self->pools, pc->name, error))
        return FALSE;
    }

  pfs = va_backend_discover (self->backend, error);
  if (!pfs)
    return FALSE;
  ok = sync_pfs (self, pfs, error);
  g_clear_pointer (&self->seen_pfs, g_ptr_array_unref);
  self->seen_pfs = g_steal_pointer (&pfs);
  va_allocator_update_pool_warnings (self);
  return ok;
}

/* The backend saw PFs come, go or change (the udev monitor). */
void
va_allocator_on_pfs_changed (VaBackend *backend, VaAllocator *self)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pfs = va_backend_discover (backend, &error);

  if (!pfs)
    pf_event (self, "", "", "discovering PFs after a device change: %s", error->message);
  else if (!sync_pfs (self, pfs, &error))
    pf_event (self, "", "", "updating the pools after a device change: %s", error->message);
  if (pfs)
    {
      g_clear_pointer (&self->seen_pfs, g_ptr_array_unref);
      self->seen_pfs = g_steal_pointer (&pfs);
    }
  va_allocator_update_pool_warnings (self);
  g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
  va_allocator_check_watermarks (self);
}

/* ---- status -------------------------------------------------------------- */

void
va_pf_status_free (VaPfStatus *status)
{
  if (!status)
    return;
  g_free (status->pci);
  g_free (status->pool);
  g_free (status->name);
  g_free (status->health_reason);
  g_free (status);
}

static gint
by_pci (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(VaPfStatus **) a)->pci, (*(VaPfStatus **) b)->pci);
}

GPtrArray *
va_allocator_list_pfs (VaAllocator *self)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_pf_status_free);
  GHashTableIter iter;
  gpointer key, value;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), out);

  g_hash_table_iter_init (&iter, self->pf_states);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      const PfState *st = value;
      const char *pool = NULL, *pf = NULL;
      VaPfStatus *s;

      if (!va_pools_find_pf (self->pools, key, &pool, &pf))
        continue;
      s = g_new0 (VaPfStatus, 1);
      s->pci = g_strdup (key);
      s->pool = g_strdup (pool);
      s->name = g_strdup (pf);
      s->present = !st->gone;
      s->healthy = !st->gone && st->healthy;
      s->health_reason = g_strdup (s->healthy ? "" : st->reason ? st->reason : st->gone ? "gone" : "unhealthy");
      s->health_code = s->healthy                    ? VA_PF_HEALTH_OK
                       : st->gone                    ? VA_PF_HEALTH_GONE
                       : st->code != VA_PF_HEALTH_OK ? st->code
                                                     : VA_PF_HEALTH_OTHER;
      g_ptr_array_add (out, s);
    }
  g_ptr_array_sort (out, by_pci);
  return out;
}

/* ---- what the daemon sees (vdpactl dev list) ----------------------------- */

void
va_dev_vf_free (VaDevVf *vf)
{
  if (!vf)
    return;
  g_free (vf->pci);
  g_free (vf->mgmtdev);
  g_free (vf->state);
  g_free (vf->uuid);
  g_free (vf->mac);
  g_free (vf->domain_name);
  g_free (vf->reason);
  g_free (vf);
}

void
va_dev_pf_free (VaDevPf *pf)
{
  if (!pf)
    return;
  g_free (pf->pci);
  g_free (pf->name);
  g_free (pf->model);
  g_free (pf->eswitch);
  g_free (pf->pool);
  g_free (pf->why_no_pool);
  g_free (pf->health_reason);
  g_ptr_array_unref (pf->vfs);
  g_free (pf);
}

/* Why no pool takes @pf: each pool and the key that leaves it out. */
static char *
why_no_pool (VaAllocator *self, const VaPfInfo *pf)
{
  GString *s = g_string_new (NULL);

  if (self->config->pools->len == 0)
    return g_string_free (s, FALSE) /* "" */;
  for (guint k = 0; k < self->config->pools->len; k++)
    {
      const VaPoolConfig *pc = g_ptr_array_index (self->config->pools, k);
      g_autofree char *why = va_pool_config_mismatch (pc, pf);

      g_string_append_printf (s, "%spool %s: %s", s->len ? "; " : "", pc->name,
                              why ? why : "selects it, but an earlier discovery failed to add it");
    }
  return g_string_free (s, FALSE);
}

static VaDevVf *
dev_vf (VaAllocator *self, const VaPfInfo *pf, guint i, gboolean pooled)
{
  VaDevVf *vf = g_new0 (VaDevVf, 1);
  const char *addr = g_ptr_array_index (pf->vfs, i);
  const VaSlot *slot = pooled ? va_pools_lookup_slot (self->pools, addr) : NULL;
  const char *reason = pf->vf_reasons && i < pf->vf_reasons->len ? g_ptr_array_index (pf->vf_reasons, i) : NULL;

  vf->pci = g_strdup (addr);
  vf->mgmtdev = va_pf_info_vf_mgmtdev (pf, i);
  vf->reason = g_strdup (reason);
  if (!slot)
    vf->state = g_strdup ("unpooled");
  else
    {
      vf->state = g_strdup (va_slot_state_to_string (va_slot_get_state (slot)));
      if (va_slot_get_uuid (slot))
        {
          g_autofree char *key = va_allocator_make_key (va_slot_get_uuid (slot), va_slot_get_mac (slot));
          Entry *e = va_allocator_lookup_entry (self, key);

          vf->uuid = g_strdup (va_slot_get_uuid (slot));
          vf->mac = g_strdup (va_slot_get_mac (slot));
          vf->domain_name = g_strdup (e ? e->lease->domain_name : NULL);
        }
    }
  return vf;
}

GPtrArray *
va_allocator_list_devices (VaAllocator *self, guint max_vfs, guint *left_out)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_dev_pf_free);
  guint vfs = 0, left = 0;

  g_return_val_if_fail (VA_IS_ALLOCATOR (self), out);

  for (guint i = 0; self->seen_pfs && i < self->seen_pfs->len; i++)
    {
      const VaPfInfo *info = g_ptr_array_index (self->seen_pfs, i);
      const PfState *st = g_hash_table_lookup (self->pf_states, info->pci);
      const char *pool = NULL, *name = NULL;
      VaDevPf *pf = g_new0 (VaDevPf, 1);

      pf->pci = g_strdup (info->pci);
      pf->name = g_strdup (info->name);
      pf->model = g_strdup (info->model);
      pf->vendor = info->vendor;
      pf->device = info->device;
      pf->numa_node = info->numa_node;
      pf->eswitch = g_strdup (info->eswitch);
      pf->n_vfs = info->vfs ? info->vfs->len : 0;
      if (st && va_pools_find_pf (self->pools, info->pci, &pool, &name))
        {
          pf->pool = g_strdup (pool);
          pf->healthy = !st->gone && st->healthy;
          pf->health_reason = g_strdup (pf->healthy ? NULL : st->reason);
        }
      else
        {
          pf->why_no_pool = why_no_pool (self, info);
          pf->healthy = info->healthy;
          pf->health_reason = g_strdup (info->health_reason);
        }
      pf->vfs = g_ptr_array_new_with_free_func ((GDestroyNotify) va_dev_vf_free);
      for (guint k = 0; info->vfs && k < info->vfs->len; k++)
        {
          if (vfs >= max_vfs)
            {
              left++;
              continue;
            }
          g_ptr_array_add (pf->vfs, dev_vf (self, info, k, pf->pool != NULL));
          vfs++;
        }
      g_ptr_array_add (out, pf);
    }
  if (left_out)
    *left_out = left;
  return out;
}
