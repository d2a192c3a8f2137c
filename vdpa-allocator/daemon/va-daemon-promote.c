/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Automatic promotion of software vDPA NICs onto hardware (issue 28): the
 * daemon follows its allocator and runs vdpa-allocator-libvirt-swap
 * --promote, one at a time; libvirt's client stays out of the daemon. */
#define G_LOG_DOMAIN "va-promote"

#include "config.h"

#include "va-daemon-promote.h"

#include <gio/gio.h>
#include <signal.h>
#include <string.h>

#include "va-daemon-events.h"
#include "va-paths.h"

typedef struct
{
  VaDaemonPromote *owner;
  VaLease *lease; /* the software lease it moves */
  GSubprocess *proc;
  GCancellable *cancel;
  GSource *timer;
  gboolean termed;
} Run;

struct _VaDaemonPromote
{
  VaAllocator *alloc;
  char *uri; /* or NULL */
  GMainContext *ctx;
  gulong handlers[2];
  Run *run;          /* the one promotion, or NULL */
  GHashTable *tried; /* "uuid/mac" of those that failed since a hardware lease was last released */
};

static char *
key_of (const VaLease *lease)
{
  return g_strdup_printf ("%s/%s", lease->uuid, lease->mac);
}

static void
run_free (Run *r)
{
  if (r->timer)
    g_source_destroy (r->timer);
  g_clear_pointer (&r->timer, g_source_unref);
  g_clear_object (&r->proc);
  g_clear_object (&r->cancel);
  va_lease_free (r->lease);
  g_free (r);
}

static void consider (VaDaemonPromote *self);

static gboolean
past_bound (gpointer user_data)
{
  Run *r = user_data;

  g_clear_pointer (&r->timer, g_source_unref);
  if (!r->termed)
    {
      /* between two steps, never between the unplug and the plug */
      r->termed = TRUE;
      g_subprocess_send_signal (r->proc, SIGTERM);
      r->timer = g_timeout_source_new_seconds (VA_DAEMON_PROMOTE_KILL_S);
      g_source_set_callback (r->timer, past_bound, r, NULL);
      g_source_attach (r->timer, r->owner->ctx);
    }
  else
    g_subprocess_force_exit (r->proc);
  return G_SOURCE_REMOVE;
}

static void
finished (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *r = user_data;
  VaDaemonPromote *self;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL, *result = NULL;
  int status = -1;
  const char *fields[] = { "VA_PROMOTE_RESULT", NULL, NULL };

  if (g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), res, &out, &err, &error))
    status = g_subprocess_get_if_exited (r->proc) ? g_subprocess_get_exit_status (r->proc) : -1;
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return; /* the daemon stops: @r is freed */
  self = r->owner;
  if (error)
    result = g_strdup (error->message);
  else if (status == 0 || status == 3)
    result = va_event_one_line (out);
  else
    {
      g_autofree char *why = va_event_one_line (err);
      result = g_strdup_printf ("exit status %d%s: %s", status, r->termed ? " (stopped at its bound)" : "", *why ? why : "no message");
    }
  fields[1] = result;
  if (status == 0)
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_PROMOTE, r->lease, fields, "NIC %s of domain %s (%s): promoted from software device %s: %s",
              r->lease->mac, r->lease->domain_name, r->lease->uuid, r->lease->device, result);
  else
    va_event (G_LOG_LEVEL_WARNING, VA_EVENT_PROMOTE, r->lease, fields,
              "NIC %s of domain %s (%s): not promoted from software device %s (not tried again until a hardware lease is released): %s",
              r->lease->mac, r->lease->domain_name, r->lease->uuid, r->lease->device, result);
  self->run = NULL;
  run_free (r);
  consider (self);
}

/* The oldest software lease of a pool with a free hardware slot whose
 * network promotes, not tried since the last release: a new lease (NULL:
 * none). */
static VaLease *
pick (VaDaemonPromote *self)
{
  const VaConfig *config = va_allocator_get_config (self->alloc);
  g_autoptr (GPtrArray) pools = NULL;
  g_autoptr (GHashTable) room = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) leases = NULL;
  gboolean any = FALSE;

  /* most hosts: no network promotes, and nothing is listed */
  for (guint i = 0; i < config->networks->len && !any; i++)
    any = ((const VaNetworkConfig *) g_ptr_array_index (config->networks, i))->promote;
  if (!any)
    return NULL;
  pools = va_allocator_list_pools (self->alloc);
  for (guint i = 0; i < pools->len; i++)
    {
      const VaPoolStatus *p = g_ptr_array_index (pools, i);
      if (p->free > 0 && p->software_leased > 0)
        g_hash_table_add (room, p->name);
    }
  if (g_hash_table_size (room) == 0)
    return NULL;
  leases = va_allocator_list_leases (self->alloc); /* by creation */
  for (guint i = 0; i < leases->len; i++)
    {
      const VaLease *l = g_ptr_array_index (leases, i);
      const VaNetworkConfig *n = l->network && *l->network ? va_config_lookup_network (config, l->network) : NULL;
      g_autofree char *key = NULL;

      if (!l->software || !n || !n->promote || !g_hash_table_contains (room, l->pool))
        continue;
      key = key_of (l);
      if (!g_hash_table_contains (self->tried, key))
        return va_lease_copy (l);
    }
  return NULL;
}

static void
consider (VaDaemonPromote *self)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *helper = NULL;
  char wait[16];
  Run *r;
  VaLease *lease;

  if (self->run || !(lease = pick (self)))
    return;
  g_hash_table_add (self->tried, key_of (lease));
  helper = va_path_libexec ("vdpa-allocator-libvirt-swap");
  /* a running domain: a job (a migration out) is waited for, briefly */
  g_snprintf (wait, sizeof wait, "%u", 10u);
  g_ptr_array_add (argv, helper);
  if (self->uri)
    {
      g_ptr_array_add (argv, (gpointer) "--uri");
      g_ptr_array_add (argv, self->uri);
    }
  g_ptr_array_add (argv, (gpointer) "--wait");
  g_ptr_array_add (argv, wait);
  g_ptr_array_add (argv, (gpointer) "--promote");
  g_ptr_array_add (argv, lease->mac);
  g_ptr_array_add (argv, lease->uuid);
  g_ptr_array_add (argv, NULL);

  r = g_new0 (Run, 1);
  r->owner = self;
  r->lease = lease;
  r->cancel = g_cancellable_new ();
  r->proc = g_subprocess_newv ((const char *const *) argv->pdata, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  if (!r->proc)
    {
      const char *fields[] = { "VA_PROMOTE_RESULT", error->message, NULL };

      va_event (G_LOG_LEVEL_WARNING, VA_EVENT_PROMOTE, lease, fields, "NIC %s of domain %s (%s): not promoted: running %s: %s", lease->mac,
                lease->domain_name, lease->uuid, helper, error->message);
      run_free (r);
      return;
    }
  self->run = r;
  r->timer = g_timeout_source_new_seconds (VA_DAEMON_PROMOTE_BOUND_S);
  g_source_set_callback (r->timer, past_bound, r, NULL);
  g_source_attach (r->timer, self->ctx);
  g_main_context_push_thread_default (self->ctx);
  g_subprocess_communicate_utf8_async (r->proc, NULL, r->cancel, finished, r);
  g_main_context_pop_thread_default (self->ctx);
  {
    const char *fields[] = { "VA_PROMOTE_RESULT", "started", NULL };

    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_PROMOTE, lease, fields,
              "NIC %s of domain %s (%s): a hardware slot of pool %s is free: promoting it from software device %s", lease->mac,
              lease->domain_name, lease->uuid, lease->pool, lease->device);
  }
}

/* A hardware lease released: the next free device, which those that
 * failed may try again (not the running promotion's own release of the
 * hardware lease it could not plug) */
static void
on_lease_removed (VaAllocator *alloc, VaLease *lease, VaDaemonPromote *self)
{
  if (lease->software || lease->sriov)
    return;
  if (!self->run || strcmp (self->run->lease->uuid, lease->uuid) != 0 || strcmp (self->run->lease->mac, lease->mac) != 0)
    g_hash_table_remove_all (self->tried);
  consider (self);
}

/* a PF back, a drain ended, a reload: room, perhaps */
static void
on_pools_changed (VaAllocator *alloc, VaDaemonPromote *self)
{
  consider (self);
}

VaDaemonPromote *
va_daemon_promote_new (VaAllocator *alloc, const char *uri)
{
  VaDaemonPromote *self;

  g_return_val_if_fail (VA_IS_ALLOCATOR (alloc), NULL);

  self = g_new0 (VaDaemonPromote, 1);
  self->alloc = g_object_ref (alloc);
  self->uri = g_strdup (uri);
  self->ctx = g_main_context_ref_thread_default ();
  self->tried = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->handlers[0] = g_signal_connect (alloc, "lease-removed", G_CALLBACK (on_lease_removed), self);
  self->handlers[1] = g_signal_connect (alloc, "pools-changed", G_CALLBACK (on_pools_changed), self);
  return self;
}

void
va_daemon_promote_free (VaDaemonPromote *self)
{
  if (!self)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (self->handlers); i++)
    g_clear_signal_handler (&self->handlers[i], self->alloc);
  if (self->run)
    {
      const char *fields[] = { "VA_PROMOTE_RESULT", "left running as the daemon stopped", NULL };

      /* it finishes its one NIC with its own leases: a NIC is never left
       * between its unplug and its plug */
      g_subprocess_send_signal (self->run->proc, SIGTERM);
      g_cancellable_cancel (self->run->cancel);
      va_event (G_LOG_LEVEL_WARNING, VA_EVENT_PROMOTE, self->run->lease, fields,
                "NIC %s of domain %s (%s): its promotion was running as the daemon stopped: SIGTERM, left to finish", self->run->lease->mac,
                self->run->lease->domain_name, self->run->lease->uuid);
      run_free (self->run);
    }
  g_hash_table_unref (self->tried);
  g_main_context_unref (self->ctx);
  g_free (self->uri);
  g_object_unref (self->alloc);
  g_free (self);
}
