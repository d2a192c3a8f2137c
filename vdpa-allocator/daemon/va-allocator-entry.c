/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator-entry"

#include "config.h"

#include "va-allocator-private.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <unistd.h>

/* The bottom of the allocator's files: what every role needs of an entry
 * and of the pools' signals, calling none of them. */

guint va_allocator_signals[N_SIGNALS];

/* ---- entries ------------------------------------------------------------- */

Entry *
va_allocator_entry_new (char *key, VaLease *lease, EntryState state)
{
  Entry *e = g_new0 (Entry, 1);

  e->key = key;
  e->lease = lease;
  e->state = state;
  return e;
}

void
va_allocator_entry_free (Entry *e)
{
  g_free (e->key);
  g_free (e->broken_reason);
  va_lease_free (e->lease);
  g_clear_pointer (&e->waiters, g_ptr_array_unref);
  g_free (e);
}

char *
va_allocator_make_key (const char *uuid, const char *mac)
{
  return g_strconcat (uuid, "/", mac, NULL);
}

void
va_allocator_insert_entry (VaAllocator *self, Entry *e)
{
  g_hash_table_insert (self->entries, e->key, e);
  if (e->lease->software)
    g_hash_table_add (self->software_entries, e);
  if (e->broken)
    g_hash_table_add (self->broken_entries, e);
}

void
va_allocator_remove_entry (VaAllocator *self, const char *key)
{
  Entry *e = g_hash_table_lookup (self->entries, key);

  if (!e)
    return;
  g_hash_table_remove (self->software_entries, e);
  g_hash_table_remove (self->broken_entries, e);
  g_hash_table_remove (self->entries, key);
}

/* @reason NULL: whole again. */
void
va_allocator_entry_set_broken (VaAllocator *self, Entry *e, const char *reason)
{
  e->broken = reason != NULL;
  g_free (e->broken_reason);
  e->broken_reason = g_strdup (reason);
  if (reason)
    g_hash_table_add (self->broken_entries, e);
  else
    g_hash_table_remove (self->broken_entries, e);
}

guint
va_allocator_software_leases (VaAllocator *self, const char *pool, const char *network)
{
  GHashTableIter iter;
  Entry *e;
  guint n = 0;

  g_hash_table_iter_init (&iter, self->software_entries);
  while (g_hash_table_iter_next (&iter, (gpointer *) &e, NULL))
    if ((!pool || g_strcmp0 (e->lease->pool, pool) == 0) && (!network || g_strcmp0 (e->lease->network, network) == 0))
      n++;
  return n;
}

Entry *
va_allocator_lookup_entry (VaAllocator *self, const char *key)
{
  return g_hash_table_lookup (self->entries, key);
}

/* ---- port links ---------------------------------------------------------- */

/* RUN/ports/UUID/MAC → chardev, replaced atomically. */
gboolean
va_allocator_make_port_link (VaAllocator *self, const VaLease *lease, GError **error)
{
  g_autofree char *dir = va_port_dir (self->ports_dir, lease->uuid);
  g_autofree char *tmp = g_strdup_printf ("%s.tmp", lease->port);
  g_autofree char *cur = NULL;

  if (lease->sriov)
    return TRUE; /* QEMU opens the VF through vfio: no port */
  cur = g_file_read_link (lease->port, NULL);
  if (g_strcmp0 (cur, lease->chardev) == 0)
    return TRUE;
  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "creating %s: %s", dir, g_strerror (errno));
      return FALSE;
    }
  g_unlink (tmp);
  if (symlink (lease->chardev, tmp) < 0 || rename (tmp, lease->port) < 0)
    {
      int err = errno;
      g_unlink (tmp);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "linking %s to %s: %s", lease->port, lease->chardev, g_strerror (err));
      return FALSE;
    }
  return TRUE;
}

void
va_allocator_remove_port_link (VaAllocator *self, const char *uuid, const char *mac, gboolean domain_gone)
{
  g_autofree char *dir = va_port_dir (self->ports_dir, uuid);
  g_autofree char *link = va_port_path (self->ports_dir, uuid, mac);

  g_unlink (link);
  /* The directory stays while the domain runs: on a file system mounted
   * with discard, every freed block is a synchronous trim. */
  if (domain_gone)
    g_rmdir (dir); /* only when empty */
}

/* ---- signals and counts -------------------------------------------------- */

void
va_allocator_check_watermark (VaAllocator *self, const char *pool)
{
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, pool);
  VaPoolCounts counts;

  if (!pc || pc->low_watermark == 0 || !va_pools_get_counts (self->pools, pool, &counts, NULL))
    return;
  if (counts.usable < pc->low_watermark)
    {
      if (!g_hash_table_contains (self->below_watermark, pool))
        {
          g_hash_table_add (self->below_watermark, g_strdup (pool));
          g_signal_emit (self, va_allocator_signals[SIGNAL_LOW_WATERMARK], 0, pool, counts.usable);
        }
    }
  else
    g_hash_table_remove (self->below_watermark, pool);
}

void
va_allocator_check_watermarks (VaAllocator *self)
{
  for (guint i = 0; i < self->config->pools->len; i++)
    va_allocator_check_watermark (self, ((VaPoolConfig *) g_ptr_array_index (self->config->pools, i))->name);
}
