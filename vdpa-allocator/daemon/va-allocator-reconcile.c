/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator-reconcile"

#include "config.h"

#include "va-allocator-private.h"

#include <errno.h>
#include <glib/gstdio.h>

/* A lease of an inactive domain younger than this is not reconciled away:
 * it may belong to a start in progress (prepare runs before the domain is
 * active). */
#define RECONCILE_GRACE_SECONDS 60

/* ---- reconcile ----------------------------------------------------------- */

void
va_reconcile_report_free (VaReconcileReport *report)
{
  if (!report)
    return;
  g_ptr_array_unref (report->orphans);
  g_ptr_array_unref (report->busy);
  g_ptr_array_unref (report->missing);
  g_ptr_array_unref (report->stale_links);
  g_ptr_array_unref (report->repaired);
  g_ptr_array_unref (report->host_held);
  g_free (report->libvirt_error);
  g_free (report);
}

typedef struct
{
  GHashTable *domains;
  GError *error;
} ListerResult;

static void
lister_result_free (ListerResult *r)
{
  g_clear_pointer (&r->domains, g_hash_table_unref);
  g_clear_error (&r->error);
  g_free (r);
}

static void
run_lister (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VaAllocator *self = source;
  ListerResult *r = g_new0 (ListerResult, 1);

  if (!self->lister)
    g_set_error_literal (&r->error, VA_ERROR, VA_ERROR_UNREACHABLE, "no libvirt connection configured");
  else
    self->lister (&r->domains, self->lister_data, &r->error);
  g_task_return_pointer (task, r, (GDestroyNotify) lister_result_free);
}

/* A software lease's device served by a relay of this daemon: the one of
 * before a restart is replaced (the guest's NIC stalls a moment), a device
 * gone with a reboot is made anew ("missing"). */
static void
resume_software (VaAllocator *self, Entry *e, VaReconcileReport *report)
{
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, e->lease->pool);
  VaSoftwareRequest sreq;
  VaNicPlan plan;
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *stalled = NULL;
  gboolean made = FALSE;

  if (!pc || !va_allocator_resolve_lease (self, e->lease, &plan, &error) || !plan.bridge)
    {
      g_warning ("software device of %s: not served again: %s", e->key,
                 error ? error->message
                 : !pc ? "its pool is no longer configured"
                       : "its network has no fallback bridge");
      return;
    }
  va_allocator_software_request (self, e->lease->mac, 0, &plan, pc, &sreq);
  sreq.vlan = e->lease->vlan;
  stalled = va_backend_software_stalled (self->backend, e->lease->device);
  dev = va_backend_resume_software (self->backend, &sreq, &made, &error);
  if (!dev)
    {
      g_warning ("software device of %s: %s", e->key, error->message);
      return;
    }
  if (*dev->chardev && g_strcmp0 (dev->chardev, e->lease->chardev) != 0)
    {
      g_free (e->lease->chardev);
      e->lease->chardev = g_strdup (dev->chardev);
    }
  va_allocator_make_port_link (self, e->lease, NULL);
  if (made)
    g_ptr_array_add (report->missing, g_strdup (e->key));
  /* given up on before: it carries packets again */
  if (stalled)
    g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_REPAIRED], 0, e->lease);
}

/* Software devices no lease holds (a crash between making one and its
 * commit, or between a release's commit and its tear-down, or a store put
 * back): the vdpa device, any relay holding it and the VDUSE device go. */
static void
reconcile_software (VaAllocator *self, VaReconcileReport *report)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) names = va_backend_list_software (self->backend, &error);
  g_autoptr (GHashTable) leased = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  Entry *e;

  if (!names)
    {
      g_warning ("listing software vDPA devices: %s", error->message);
      return;
    }
  /* pending and releasing entries too: theirs are not orphans yet */
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->lease->software)
      g_hash_table_add (leased, e->lease->device);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);

      if (g_hash_table_contains (leased, name))
        continue;
      if (va_backend_destroy_software (self->backend, name, &error))
        {
          g_info ("software device %s: no lease holds it: removed with its relay", name);
          g_ptr_array_add (report->orphans, g_strdup (name));
        }
      else
        {
          g_warning ("removing the orphan software device %s: %s", name, error->message);
          g_clear_error (&error);
        }
    }
}

static void
reconcile_devices (VaAllocator *self, VaReconcileReport *report)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) devs = va_backend_list_devices (self->backend, &error);
  g_autoptr (GHashTable) by_slot = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) still_held = NULL;
  GHashTableIter iter;
  const char *slot;
  Entry *e;

  if (!devs)
    {
      g_warning ("listing vDPA devices: %s", error->message);
      return;
    }
  still_held = g_hash_table_new (g_str_hash, g_str_equal);
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    g_hash_table_insert (by_slot, e->lease->slot, e);

  for (guint i = 0; i < devs->len; i++)
    {
      VaDeviceInfo *dev = g_ptr_array_index (devs, i);
      Entry *owner = g_hash_table_lookup (by_slot, dev->slot);

      if (owner && g_strcmp0 (owner->lease->device, dev->name) == 0)
        {
          /* the backend's node is the truth, not what the row said */
          if (!owner->broken && g_strcmp0 (owner->lease->chardev, dev->chardev) != 0)
            {
              g_free (owner->lease->chardev);
              owner->lease->chardev = g_strdup (dev->chardev);
              va_allocator_make_port_link (self, owner->lease, NULL);
            }
          g_hash_table_add (seen, owner->key);
          continue;
        }
      /* nothing is freed while a process still holds the device, and its
       * slot goes to no one else, whatever the store says */
      if (va_backend_device_busy (self->backend, dev->chardev))
        {
          g_ptr_array_add (report->busy, g_strdup (dev->name));
          const VaSlot *held = owner ? NULL : va_pools_lookup_slot (self->pools, dev->slot);

          if (held && va_slot_get_state (held) == VA_SLOT_FREE && !g_hash_table_contains (self->held_slots, dev->slot))
            {
              g_warning ("slot %s: its device %s has no lease but a process holds it open: the slot is not leased until it is let go",
                         dev->slot, dev->name);
              va_pools_set_slot_lost (self->pools, dev->slot, TRUE, NULL);
              g_hash_table_add (self->held_slots, g_strdup (dev->slot));
            }
          g_hash_table_add (still_held, dev->slot);
          continue;
        }
      if (va_backend_destroy_device (self->backend, dev->slot, dev->name, NULL, &error))
        g_ptr_array_add (report->orphans, g_strdup (dev->name));
      else
        {
          g_warning ("removing orphan %s: %s", dev->name, error->message);
          g_clear_error (&error);
        }
    }

  /* a held slot whose device was let go (or deleted) is free again */
  g_hash_table_iter_init (&iter, self->held_slots);
  while (g_hash_table_iter_next (&iter, (gpointer *) &slot, NULL))
    if (!g_hash_table_contains (still_held, slot))
      {
        va_pools_set_slot_lost (self->pools, slot, FALSE, NULL);
        g_hash_table_iter_remove (&iter);
      }

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    {
      VaDeviceRequest dreq = { 0 };
      g_autoptr (VaDeviceInfo) dev = NULL;

      /* an sriov lease's VF is libvirt's: nothing of ours to re-make; a
       * software device is not in the backend's hardware list */
      if (e->lease->software && !e->broken && e->state == ENTRY_COMMITTED)
        {
          resume_software (self, e, report);
          continue;
        }
      if (e->broken || e->lease->sriov || e->lease->software || e->state != ENTRY_COMMITTED || g_hash_table_contains (seen, e->key))
        continue;
      dreq.slot = e->lease->slot;
      dreq.pf = va_slot_get_pf (va_pools_lookup_slot (self->pools, e->lease->slot));
      dreq.mac = e->lease->mac;
      dreq.queues = e->lease->queues;
      dreq.vlan = e->lease->vlan;
      dreq.pool = va_config_lookup_pool (self->config, e->lease->pool);
      dreq.mtu = dreq.pool ? dreq.pool->mtu : 0;
      dev = va_backend_create_device (self->backend, &dreq, &error);
      if (!dev)
        {
          g_warning ("re-making the device of %s: %s", e->key, error->message);
          g_clear_error (&error);
          continue;
        }
      if (g_strcmp0 (dev->chardev, e->lease->chardev) != 0)
        {
          g_free (e->lease->chardev);
          e->lease->chardev = g_strdup (dev->chardev);
        }
      va_allocator_make_port_link (self, e->lease, NULL);
      g_ptr_array_add (report->missing, g_strdup (e->key));
    }
}

/* Port links no lease owns. A crash between a Release's commit and its
 * tear-down, or between an Allocate's provisioning and its commit, leaves
 * one behind, naming a chardev that the next lease of that slot gets: a VM
 * started on it would take another VM's device. */
static void
reconcile_links (VaAllocator *self, VaReconcileReport *report)
{
  g_autoptr (GDir) top = g_dir_open (self->ports_dir, 0, NULL);
  const char *uuid;

  while (top && (uuid = g_dir_read_name (top)))
    {
      g_autofree char *dir = va_port_dir (self->ports_dir, uuid);
      g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
      const char *name;

      while (d && (name = g_dir_read_name (d)))
        {
          g_autofree char *key = va_allocator_make_key (uuid, name);
          g_autofree char *path = NULL;

          /* pending and releasing entries keep theirs until settled */
          if (g_hash_table_contains (self->entries, key))
            continue;
          path = g_build_filename (dir, name, NULL);
          if (g_unlink (path) == 0)
            g_ptr_array_add (report->stale_links, g_steal_pointer (&key));
          else
            g_warning ("removing the stale port link %s: %s", path, g_strerror (errno));
        }
      g_rmdir (dir); /* only when empty */
    }
}

/* kind=sriov VFs that no lease holds (free: not leased, not lost) but
 * that a crash left with the VLAN or MAC of a passthrough; the backend
 * leaves alone any VF that is right or that libvirt holds. Runs after
 * the release of gone domains' leases, so that their VFs are seen. */
static void
reconcile_vfs (VaAllocator *self, VaReconcileReport *report)
{
  g_auto (GStrv) pcis = va_pools_list_pf_addresses (self->pools);

  for (guint i = 0; pcis && pcis[i]; i++)
    {
      const char *pool = NULL, *pf = NULL;
      const VaPoolConfig *pc;
      g_auto (GStrv) slots = NULL;

      if (!va_pools_find_pf (self->pools, pcis[i], &pool, &pf))
        continue;
      pc = va_config_lookup_pool (self->config, pool);
      if (!pc || pc->kind != VA_POOL_KIND_SRIOV)
        continue;
      slots = va_pools_list_slots (self->pools, pool, pf, NULL);
      for (guint k = 0; slots && slots[k]; k++)
        {
          const VaSlot *slot = va_pools_lookup_slot (self->pools, slots[k]);
          g_autoptr (GError) error = NULL;
          g_autofree char *driver = NULL;
          char *line = NULL;

          if (!slot || va_slot_get_state (slot) != VA_SLOT_FREE)
            continue;
          /* only a VF on no driver, which no one passes through, is ours
           * to reset; one a host driver holds is the host's, and not
           * offered (until discovery finds it let go) */
          switch (va_backend_vf_holder (self->backend, slots[k], &driver))
            {
              case VA_VF_HOST:
                line = va_allocator_host_held_line (slots[k], driver);
                g_message ("pool %s: %s", pool, line);
                g_ptr_array_add (report->host_held, line);
                va_pools_set_slot_lost (self->pools, slots[k], TRUE, NULL);
                continue;
              case VA_VF_LIBVIRT:
                continue;
              case VA_VF_NOBODY:
              default:
                break;
            }
          if (!va_backend_repair_vf (self->backend, slots[k], pf, &line, &error))
            {
              g_warning ("pool %s: checking VF %s: %s", pool, slots[k], error->message);
              continue;
            }
          if (line)
            {
              g_message ("pool %s: %s", pool, line);
              g_ptr_array_add (report->repaired, line);
            }
        }
    }
}

/* Whether @e is the lease of a failover member that was unplugged from
 * its running guest behind our back (virsh detach-device-alias, a guest
 * that ejected it): its VF on no driver, libvirt keeping no state of it.
 * QEMU's own unplug for a migration is not one: it keeps the device, and
 * libvirt the VF on vfio-pci. Past the grace only: between its Allocate
 * and its plug a member's VF is on no driver too. */
static gboolean
failover_vf_let_go (VaAllocator *self, const Entry *e, gint64 now)
{
  VaNicPlan plan;

  return e->lease->sriov && now - e->lease->created > RECONCILE_GRACE_SECONDS && va_allocator_resolve_lease (self, e->lease, &plan, NULL)
         && plan.failover && va_backend_vf_holder (self->backend, e->lease->slot, NULL) == VA_VF_NOBODY;
}

static void
reconcile_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  VaAllocator *self = VA_ALLOCATOR (source);
  g_autoptr (GTask) task = user_data;
  ListerResult *r = g_task_propagate_pointer (G_TASK (result), NULL);
  g_autoptr (VaReconcileReport) report = g_new0 (VaReconcileReport, 1);
  g_autoptr (GError) error = NULL;

  report->orphans = g_ptr_array_new_with_free_func (g_free);
  report->busy = g_ptr_array_new_with_free_func (g_free);
  report->missing = g_ptr_array_new_with_free_func (g_free);
  report->stale_links = g_ptr_array_new_with_free_func (g_free);
  report->repaired = g_ptr_array_new_with_free_func (g_free);
  report->host_held = g_ptr_array_new_with_free_func (g_free);

  if (!va_allocator_commit_now (self, &error))
    {
      lister_result_free (r);
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  reconcile_devices (self, report);
  reconcile_software (self, report);
  reconcile_links (self, report);

  report->libvirt_reachable = r->error == NULL;
  if (r->error)
    report->libvirt_error = g_strdup (r->error->message);
  else
    {
      g_autoptr (GHashTable) gone = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_autoptr (GHashTable) running = g_hash_table_new (g_str_hash, g_str_equal);
      g_autoptr (GPtrArray) let_go = g_ptr_array_new_with_free_func ((GDestroyNotify) va_lease_free);
      GHashTableIter iter;
      const char *uuid;
      Entry *e;
      gint64 now = g_get_real_time () / G_USEC_PER_SEC;

      g_hash_table_iter_init (&iter, self->entries);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
        {
          gpointer active;
          gboolean known = g_hash_table_lookup_extended (r->domains, e->lease->uuid, NULL, &active);

          if (e->state != ENTRY_COMMITTED)
            continue;
          if (known && GPOINTER_TO_INT (active) && failover_vf_let_go (self, e, now))
            g_ptr_array_add (let_go, va_lease_copy (e->lease));
          if (known && (GPOINTER_TO_INT (active) || now - e->lease->created <= RECONCILE_GRACE_SECONDS))
            continue;
          if (va_allocator_in_use (self, e, NULL))
            {
              /* whatever libvirt says, a guest runs on it */
              g_hash_table_add (running, e->lease->uuid);
              g_ptr_array_add (report->busy, g_strdup (e->lease->sriov ? e->lease->slot : e->lease->device));
            }
          else
            g_hash_table_add (gone, g_strdup (e->lease->uuid));
        }
      /* a domain's leases go all together or not at all */
      g_hash_table_iter_init (&iter, running);
      while (g_hash_table_iter_next (&iter, (gpointer *) &uuid, NULL))
        g_hash_table_remove (gone, uuid);
      g_hash_table_iter_init (&iter, self->entries);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
        if (e->state == ENTRY_COMMITTED && g_hash_table_contains (gone, e->lease->uuid))
          report->released++;
      /* queued after the walk: queueing changes the entries' states */
      g_hash_table_iter_init (&iter, gone);
      while (!error && g_hash_table_iter_next (&iter, (gpointer *) &uuid, NULL))
        va_allocator_queue_release_domain (self, uuid, NULL, &error);
      for (guint i = 0; !error && i < let_go->len; i++)
        {
          const VaLease *l = g_ptr_array_index (let_go, i);

          g_message ("NIC %s of domain %s: its failover VF %s was unplugged from the running guest: its lease is released", l->mac, l->uuid,
                     l->slot);
          va_allocator_release_async (self, l->uuid, l->mac, NULL, NULL);
          report->released++;
        }
      if (!error)
        va_allocator_commit_now (self, &error);
      if (error)
        {
          lister_result_free (r);
          g_task_return_error (task, g_steal_pointer (&error));
          return;
        }
    }
  lister_result_free (r);
  reconcile_vfs (self, report);
  /* slots lost or found again (a host-held VF, a device back): the pools'
   * properties, which readers get from the last PropertiesChanged */
  g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
  g_task_return_pointer (task, g_steal_pointer (&report), (GDestroyNotify) va_reconcile_report_free);
}

void
va_allocator_reconcile_async (VaAllocator *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task;
  g_autoptr (GTask) lister = NULL;

  g_return_if_fail (VA_IS_ALLOCATOR (self));

  task = g_task_new (self, NULL, callback, user_data);
  lister = g_task_new (self, NULL, reconcile_listed, task);
  /* libvirt may be slow to answer: ask it off the main loop */
  g_task_run_in_thread (lister, run_lister);
}

VaReconcileReport *
va_allocator_reconcile_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);

  return g_task_propagate_pointer (G_TASK (result), error);
}
