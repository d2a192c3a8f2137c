/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-bus"

#include "va-bus.h"

#include "va-error.h"

void
va_bus_error_register (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      static GDBusErrorEntry entries[VA_ERROR_LAST];
      gsize quark = 0;

      for (guint i = 0; i < VA_ERROR_LAST; i++)
        {
          entries[i].error_code = i;
          entries[i].dbus_error_name = g_strconcat (VA_BUS_ERROR_PREFIX, va_error_name (i), NULL);
        }
      /* the domain's own name: its one home is va-error.c */
      g_dbus_error_register_error_domain (g_quark_to_string (VA_ERROR), &quark, entries, VA_ERROR_LAST);
      g_once_init_leave (&once, 1);
    }
}

char *
va_bus_pool_path (const char *name)
{
  g_autofree char *escaped = NULL;

  g_return_val_if_fail (name != NULL, NULL);
  escaped = g_dbus_escape_object_path (name);
  return g_strconcat (VA_BUS_POOL_PATH_PREFIX, escaped, NULL);
}

gboolean
va_bus_error_is_refusal (const GError *error)
{
  g_autofree char *name = error ? g_dbus_error_get_remote_error (error) : NULL;

  return name && g_str_has_prefix (name, VA_BUS_ERROR_PREFIX);
}

typedef struct
{
  GDBusConnection *conn;
  GError *error;
  gboolean done;
} Connecting;

static void
connected (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Connecting *c = user_data;

  c->conn = g_dbus_connection_new_for_address_finish (res, &c->error);
  c->done = TRUE;
}

static gboolean
timed_out (gpointer user_data)
{
  g_cancellable_cancel (user_data);
  return G_SOURCE_REMOVE;
}

/* "2", "1.5": one wording for a budget, whatever of it was left. */
static char *
seconds_text (int ms)
{
  return ms % 1000 ? g_strdup_printf ("%.1f", ms / 1000.0) : g_strdup_printf ("%d", ms / 1000);
}

GDBusConnection *
va_bus_connect (int timeout_ms, GError **error)
{
  g_autoptr (GMainContext) context = g_main_context_new ();
  g_autoptr (GCancellable) cancel = g_cancellable_new ();
  g_autoptr (GSource) timer = g_timeout_source_new (MAX (timeout_ms, 1));
  g_autofree char *address = NULL;
  Connecting c = { 0 };

  va_bus_error_register ();
  address = g_dbus_address_get_for_bus_sync (G_BUS_TYPE_SYSTEM, NULL, error);
  if (!address)
    {
      g_prefix_error (error, "no system bus: ");
      return NULL;
    }
  g_source_set_callback (timer, timed_out, cancel, NULL);
  g_source_attach (timer, context);
  g_main_context_push_thread_default (context);
  g_dbus_connection_new_for_address (
    address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, cancel, connected, &c);
  while (!c.done)
    g_main_context_iteration (context, TRUE);
  g_main_context_pop_thread_default (context);
  g_source_destroy (timer);
  if (!c.conn)
    {
      if (g_error_matches (c.error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_autofree char *budget = seconds_text (timeout_ms);
          g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "the system bus did not answer within %s seconds", budget);
        }
      else
        g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "cannot reach the system bus: %s", c.error->message);
      g_clear_error (&c.error);
      return NULL;
    }
  return c.conn;
}

void
va_bus_explain_error (GError **error, int timeout_ms)
{
  GError *e;

  g_return_if_fail (error != NULL && *error != NULL);

  e = *error;
  if (va_bus_error_is_refusal (e) || (e->domain != G_DBUS_ERROR && e->domain != G_IO_ERROR))
    {
      /* the daemon's own error, or GDBus's (wrong types, the bus policy) */
      g_dbus_error_strip_remote_error (e);
      return;
    }
  if (g_error_matches (e, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN) || g_error_matches (e, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER))
    {
      g_clear_error (error);
      g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "vdpa-allocatord is not running (no %s on the system bus)", VA_BUS_NAME);
    }
  else if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_TIMED_OUT) || g_error_matches (e, G_DBUS_ERROR, G_DBUS_ERROR_TIMEOUT)
           || g_error_matches (e, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY))
    {
      g_autofree char *budget = seconds_text (timeout_ms);

      g_clear_error (error);
      g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "vdpa-allocatord did not answer within %s seconds", budget);
    }
  else
    g_dbus_error_strip_remote_error (e);
}

GVariant *
va_bus_call (GDBusConnection *conn, const char *path, const char *iface, const char *method, GVariant *params, const char *reply_type,
             int timeout_ms, GError **error)
{
  GError *local = NULL;
  GVariant *ret;

  g_return_val_if_fail (G_IS_DBUS_CONNECTION (conn), NULL);
  g_return_val_if_fail (path != NULL && iface != NULL && method != NULL, NULL);
  ret = g_dbus_connection_call_sync (conn, VA_BUS_NAME, path, iface, method, params, reply_type ? G_VARIANT_TYPE (reply_type) : NULL,
                                     G_DBUS_CALL_FLAGS_NONE, timeout_ms, NULL, &local);
  if (!ret)
    {
      va_bus_explain_error (&local, timeout_ms);
      g_propagate_error (error, local);
    }
  return ret;
}
