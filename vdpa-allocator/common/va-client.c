/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-client"

#include "va-client.h"

#include <string.h>

#include "va-bus.h"
#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-paths.h"

struct _VaClient
{
  GDBusConnection *conn; /* the one connection, from the first call on */
  int timeout_ms;
  gint64 deadline; /* monotonic µs; 0: each call has timeout_ms */
};

VaClient *
va_client_new (int timeout_ms, gboolean one_budget)
{
  VaClient *self;

  g_return_val_if_fail (timeout_ms > 0, NULL);

  self = g_new0 (VaClient, 1);
  self->timeout_ms = timeout_ms;
  if (one_budget)
    self->deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  return self;
}

void
va_client_free (VaClient *self)
{
  if (!self)
    return;
  g_clear_object (&self->conn);
  g_free (self);
}

VaClient *
va_client_get_default (void)
{
  static VaClient *client;

  /* clients are single-threaded; this one lives as long as the process */
  if (!client)
    client = va_client_new (VA_CLIENT_TIMEOUT_MS, FALSE);
  return client;
}

/* What the next call may wait: the budget's rest, never nothing. */
static int
remaining_ms (const VaClient *self)
{
  gint64 left;

  if (!self->deadline)
    return self->timeout_ms;
  left = (self->deadline - g_get_monotonic_time ()) / 1000;
  return (int) CLAMP (left, 1, self->timeout_ms);
}

/* The end of one call's budget, its retries included: the process's
 * (the hook's) or the call's own. */
static gint64
call_deadline (const VaClient *self)
{
  return self->deadline ? self->deadline : g_get_monotonic_time () + (gint64) self->timeout_ms * 1000;
}

static int
ms_until (gint64 until)
{
  gint64 left = (until - g_get_monotonic_time ()) / 1000;

  return (int) CLAMP (left, 1, G_MAXINT);
}

/* TryAgain (@try_again) is never final while the budget lasts: the
 * daemon is at a bound (its slots taken, by anyone) or mid-way through
 * the same operation. Waits @pause_ms (50 ms, doubling to 1 s; less when
 * the budget ends sooner, so that the last try comes at its end) and
 * says TRUE when there is time for another try after it. */
static gboolean
wait_to_retry (gboolean try_again, gint64 until, guint *pause_ms)
{
  /* the last try keeps this much for its answer */
  const gint64 last_us = 100 * 1000;
  gint64 left = until - g_get_monotonic_time ();

  if (!try_again || left <= 2 * last_us)
    return FALSE;
  g_usleep ((gulong) MIN ((gint64) *pause_ms * 1000, left - last_us));
  *pause_ms = MIN (*pause_ms * 2, 1000u);
  return TRUE;
}

static void
gave_up (GError **error, gint64 since, guint tries)
{
  if (tries > 1 && g_error_matches (*error, VA_ERROR, VA_ERROR_TRY_AGAIN))
    g_prefix_error (error, "still refused after %u tries in %.1f s: ", tries, (g_get_monotonic_time () - since) / (double) G_USEC_PER_SEC);
}

static gboolean
connect_bus (VaClient *self, GError **error)
{
  if (!self->conn)
    self->conn = va_bus_connect (remaining_ms (self), error);
  return self->conn != NULL;
}

/* @method at @path of @iface; consumes a floating @params. Retries
 * TryAgain within the budget. */
static GVariant *
call_at (VaClient *self, const char *path, const char *iface, const char *method, GVariant *params, const char *reply_type, GError **error)
{
  g_autoptr (GVariant) owned = params ? g_variant_ref_sink (params) : NULL;
  g_autoptr (GError) last_try_again = NULL;
  gint64 since = g_get_monotonic_time ();
  gint64 until;
  guint pause_ms = 50, tries = 0;

  g_return_val_if_fail (self != NULL, NULL);

  if (!connect_bus (self, error))
    return NULL;
  until = call_deadline (self);
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      /* the message takes its own reference of @owned */
      GVariant *reply = va_bus_call (self->conn, path, iface, method, owned, reply_type, ms_until (until), &local);

      tries++;
      if (reply)
        return reply;
      /* the last try's answer may come too late for the budget: what the
       * daemon said before is the reason */
      if (last_try_again && g_error_matches (local, VA_ERROR, VA_ERROR_UNREACHABLE))
        g_clear_error (&local);
      else
        {
          g_clear_error (&last_try_again);
          last_try_again = g_error_matches (local, VA_ERROR, VA_ERROR_TRY_AGAIN) ? g_steal_pointer (&local) : NULL;
        }
      if (!last_try_again || !wait_to_retry (TRUE, until, &pause_ms))
        {
          if (!local)
            local = g_steal_pointer (&last_try_again);
          gave_up (&local, since, tries);
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
}

static GVariant *
call (VaClient *self, const char *method, GVariant *params, const char *reply_type, GError **error)
{
  return call_at (self, VA_BUS_PATH, VA_BUS_IFACE, method, params, reply_type, error);
}

/* The one value of a reply (x), or NULL. */
static GVariant *
only_child (GVariant *reply)
{
  g_autoptr (GVariant) owned = reply;

  return owned ? g_variant_get_child_value (owned, 0) : NULL;
}

/* ---- leases -------------------------------------------------------------- */

static VaLease *
lease_of_reply (GVariant *reply, GError **error)
{
  g_autoptr (GVariant) dict = only_child (reply);
  VaLease *lease;

  if (!dict)
    return NULL;
  lease = va_lease_from_variant (dict, error);
  if (!lease)
    g_prefix_error (error, "the daemon's lease: ");
  return lease;
}

VaLease *
va_client_allocate (VaClient *self, const VaAllocRequest *req, GError **error)
{
  g_return_val_if_fail (req != NULL, NULL);

  return lease_of_reply (call (self, "Allocate", va_alloc_request_to_variant (req), "(a{sv})", error), error);
}

typedef struct
{
  GVariant *reply;
  GError *error;
  gboolean done;
} Pending;

static void
answered (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Pending *p = user_data;

  p->reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &p->error);
  p->done = TRUE;
}

gboolean
va_client_allocate_batch (VaClient *self, const VaAllocRequest *reqs, guint n, VaLease **leases, GError **errors, GError **error)
{
  g_autoptr (GMainContext) context = NULL;
  g_autofree Pending *pending = NULL;
  gint64 since = g_get_monotonic_time ();
  gint64 until;
  guint pause_ms = 50, tries = 0;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (n == 0 || (reqs && leases && errors), FALSE);

  if (!connect_bus (self, error))
    return FALSE;
  until = call_deadline (self);
  pending = g_new0 (Pending, n);
  context = g_main_context_new ();
  g_main_context_push_thread_default (context);
  for (;;)
    {
      guint done = 0, again = 0;

      /* all sent before any answer is read: one main-loop turn of the
       * daemon; on a retry, those it asked to try again */
      for (guint i = 0; i < n; i++)
        if (!pending[i].done)
          g_dbus_connection_call (self->conn, VA_BUS_NAME, VA_BUS_PATH, VA_BUS_IFACE, "Allocate", va_alloc_request_to_variant (&reqs[i]),
                                  G_VARIANT_TYPE ("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, ms_until (until), NULL, answered, &pending[i]);
      tries++;
      while (done < n)
        {
          done = 0;
          for (guint i = 0; i < n; i++)
            done += pending[i].done;
          if (done < n)
            g_main_context_iteration (context, TRUE);
        }
      for (guint i = 0; i < n; i++)
        if (pending[i].error)
          {
            va_bus_explain_error (&pending[i].error, self->timeout_ms);
            again += g_error_matches (pending[i].error, VA_ERROR, VA_ERROR_TRY_AGAIN);
          }
      if (!wait_to_retry (again > 0, until, &pause_ms))
        break;
      for (guint i = 0; i < n; i++)
        if (g_error_matches (pending[i].error, VA_ERROR, VA_ERROR_TRY_AGAIN))
          {
            g_clear_error (&pending[i].error);
            pending[i].done = FALSE;
          }
    }
  g_main_context_pop_thread_default (context);
  for (guint i = 0; i < n; i++)
    {
      leases[i] = NULL;
      errors[i] = NULL;
      if (pending[i].error)
        {
          errors[i] = pending[i].error;
          gave_up (&errors[i], since, tries);
        }
      else
        leases[i] = lease_of_reply (pending[i].reply, &errors[i]);
    }
  return TRUE;
}

gboolean
va_client_release (VaClient *self, const char *uuid, const char *mac, GError **error)
{
  g_autoptr (GVariant) reply = NULL;

  g_return_val_if_fail (uuid != NULL && mac != NULL, FALSE);

  reply = call (self, "Release", g_variant_new ("(ss)", uuid, mac), "()", error);
  return reply != NULL;
}

static gint
count_of (GVariant *reply)
{
  g_autoptr (GVariant) owned = reply;
  guint32 n;

  if (!owned)
    return -1;
  g_variant_get (owned, "(u)", &n);
  return (gint) MIN (n, (guint32) G_MAXINT);
}

gint
va_client_release_domain (VaClient *self, const char *uuid, GError **error)
{
  g_return_val_if_fail (uuid != NULL, -1);

  return count_of (call (self, "ReleaseDomain", g_variant_new ("(s)", uuid), "(u)", error));
}

gint
va_client_claim (VaClient *self, const char *uuid, GError **error)
{
  g_return_val_if_fail (uuid != NULL, -1);

  return count_of (call (self, "Claim", g_variant_new ("(s)", uuid), "(u)", error));
}

gboolean
va_client_swap_back (VaClient *self, const char *uuid, const char *name, GError **error)
{
  g_autoptr (GVariant) reply = NULL;
  g_autofree char *shown = NULL;

  g_return_val_if_fail (uuid != NULL && name != NULL, FALSE);

  /* a bus string is UTF-8; the daemon shows the name in this form anyway */
  shown = va_domain_name_display (name);
  reply = call (self, "SwapBack", g_variant_new ("(ss)", uuid, shown), "()", error);
  return reply != NULL;
}

gboolean
va_client_drain (VaClient *self, const char *pool, gboolean draining, GError **error)
{
  g_autoptr (GVariant) reply = NULL;

  g_return_val_if_fail (pool != NULL, FALSE);

  reply = call (self, "Drain", g_variant_new ("(sb)", pool, draining), "()", error);
  return reply != NULL;
}

GVariant *
va_client_list_leases (VaClient *self, GError **error)
{
  return only_child (call (self, "ListLeases", NULL, "(aa{sv})", error));
}

GVariant *
va_client_list_devices (VaClient *self, guint *left_out, GError **error)
{
  g_autoptr (GVariant) reply = call (self, "ListDevices", NULL, "(aa{sv}u)", error);
  GVariant *pfs;
  guint32 left;

  if (!reply)
    return NULL;
  g_variant_get (reply, "(@aa{sv}u)", &pfs, &left);
  if (left_out)
    *left_out = left;
  return pfs;
}

GVariant *
va_client_reconcile (VaClient *self, GError **error)
{
  return only_child (call (self, "Reconcile", NULL, "(a{sv})", error));
}

GVariant *
va_client_get_properties (VaClient *self, const char *path, GError **error)
{
  return only_child (call_at (self, path ? path : VA_BUS_PATH, "org.freedesktop.DBus.Properties", "GetAll",
                              g_variant_new ("(s)", path ? VA_BUS_POOL_IFACE : VA_BUS_IFACE), "(a{sv})", error));
}

gboolean
va_client_lookup_lease_count (GVariant *props, guint32 *count)
{
  g_return_val_if_fail (props != NULL && count != NULL, FALSE);

  return g_variant_lookup (props, "LeaseCount", "u", count);
}

/* ---- the rewrite --------------------------------------------------------- */

char *
va_client_rewrite (VaClient *self, const char *xml, const char *to, GError **error)
{
  g_autoptr (GVariant) reply = NULL;
  char *out;

  g_return_val_if_fail (xml != NULL && to != NULL, NULL);

  reply = call (self, "RewriteDomain", g_variant_new ("(ss)", xml, to), "(s)", error);
  if (!reply)
    return NULL;
  g_variant_get (reply, "(s)", &out);
  return out;
}

VaConfig *
va_client_load_config (const char *config_dir, GError **error)
{
  g_autoptr (GError) local = NULL;
  VaConfig *config;

  /* A configuration that is there but broken is an error, never an empty
   * one: an empty one would only fail later, on a NIC, in other words. */
  if (config_dir)
    return va_config_load (config_dir, error);
  config = va_config_load (va_path_get (VA_PATH_CONFIG), &local);
  if (!config && g_error_matches (local, VA_ERROR, VA_ERROR_NOT_FOUND))
    return va_config_new_empty ();
  if (!config)
    g_propagate_error (error, g_steal_pointer (&local));
  return config;
}

VaHostView *
va_client_offline_view (const char *config_dir, GError **error)
{
  g_autoptr (VaConfig) config = va_client_load_config (config_dir, error);
  g_autofree char *ports = NULL;

  if (!config)
    return NULL;
  ports = va_path_ports (va_path_get (VA_PATH_RUN));
  return va_config_to_host_view (config, ports);
}

const char *
va_client_alloc_form (const VaHostView *view, const VaNic *nic, gboolean shared)
{
  g_autoptr (VaHostView) own = NULL;
  VaNicPlan plan;

  g_return_val_if_fail (nic != NULL, NULL);

  if (shared)
    return NULL;
  if (!view)
    view = own = va_client_offline_view (NULL, NULL);
  if (view && va_nic_resolve (nic, view, &plan, NULL) && !plan.software)
    return NULL;
  return "hardware";
}

char *
va_client_rewrite_domain (VaClient *self, const char *xml, const char *to, const char *config_dir, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (VaHostView) view = NULL;
  char *out = va_client_rewrite (self, xml, to, &local);

  if (out || !g_error_matches (local, VA_ERROR, VA_ERROR_UNREACHABLE))
    {
      /* the daemon answered: its rewrite, or its refusal, stands */
      if (local)
        g_propagate_error (error, g_steal_pointer (&local));
      return out;
    }
  /* no daemon: this host's configuration, with room everywhere */
  view = va_client_offline_view (config_dir, error);
  if (!view)
    return NULL;
  /* saved: nothing can be leased without the daemon, so the portable form */
  return va_domain_rewrite_xml (xml, -1, view,
                                strcmp (to, "portable") == 0 || strcmp (to, "saved") == 0 ? VA_FORM_PORTABLE : VA_FORM_ACCELERATED, error);
}
