/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A load generator for vdpa-allocatord: CLIENTS connections to the bus at
 * DBUS_SYSTEM_BUS_ADDRESS, each with one Allocate or Release in flight at a
 * time on its own NICs, for SECONDS. Prints the durable allocate+release
 * pairs per second. Exits 1 on any error answer.
 *
 *   bench-load CLIENTS SECONDS */
#include <gio/gio.h>
#include <stdlib.h>

#define NAME "org.vdpa_allocator.Allocator1"
#define PATH "/org/vdpa_allocator/Allocator1"
#define IFACE "org.vdpa_allocator.Allocator1"

typedef struct
{
  GDBusConnection *conn;
  guint id;
  guint n;
  gboolean releasing;
} Client;

static gint64 deadline;
static guint pairs;
static guint running;
static gboolean failed;
static GMainLoop *loop;

static void send_next (Client *c);

static void
answered (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Client *c = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = g_dbus_connection_call_finish (c->conn, res, &error);

  if (!ret)
    {
      g_printerr ("bench-load: client %u: %s\n", c->id, error->message);
      failed = TRUE;
      g_main_loop_quit (loop);
      return;
    }
  if (c->releasing)
    {
      pairs++;
      c->n++;
    }
  c->releasing = !c->releasing;
  if (!c->releasing && g_get_monotonic_time () >= deadline)
    {
      if (--running == 0)
        g_main_loop_quit (loop);
      return;
    }
  send_next (c);
}

static void
send_next (Client *c)
{
  g_autofree char *uuid = g_strdup_printf ("b0000000-0000-4000-8000-%012x", c->id);
  g_autofree char *mac = g_strdup_printf ("52:54:00:b0:%02x:%02x", c->id, c->n % 4);
  GVariant *args;

  if (c->releasing)
    args = g_variant_new ("(ss)", uuid, mac);
  else
    args = g_variant_new ("(ssss@a{sv})", uuid, "bench", mac, "bench", g_variant_new_array (G_VARIANT_TYPE ("{sv}"), NULL, 0));
  g_dbus_connection_call (c->conn, NAME, PATH, IFACE, c->releasing ? "Release" : "Allocate", args, NULL, G_DBUS_CALL_FLAGS_NONE, 30000,
                          NULL, answered, c);
}

int
main (int argc, char **argv)
{
  guint n_clients = argc > 1 ? (guint) atoi (argv[1]) : 1;
  double seconds = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 2;
  const char *address = g_getenv ("DBUS_SYSTEM_BUS_ADDRESS");
  g_autofree Client *clients = NULL;
  gint64 start;

  if (!address || n_clients == 0 || n_clients > 255 || seconds <= 0)
    {
      g_printerr ("usage: DBUS_SYSTEM_BUS_ADDRESS=... bench-load CLIENTS SECONDS\n");
      return 2;
    }
  clients = g_new0 (Client, n_clients);
  for (guint i = 0; i < n_clients; i++)
    {
      g_autoptr (GError) error = NULL;

      clients[i].id = i;
      clients[i].conn = g_dbus_connection_new_for_address_sync (
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL, NULL, &error);
      if (!clients[i].conn)
        {
          g_printerr ("bench-load: %s\n", error->message);
          return 1;
        }
    }
  loop = g_main_loop_new (NULL, FALSE);
  start = g_get_monotonic_time ();
  deadline = start + (gint64) (seconds * G_USEC_PER_SEC);
  running = n_clients;
  for (guint i = 0; i < n_clients; i++)
    send_next (&clients[i]);
  g_main_loop_run (loop);
  if (!failed)
    g_print ("%.0f\n", pairs / ((g_get_monotonic_time () - start) / (double) G_USEC_PER_SEC));
  for (guint i = 0; i < n_clients; i++)
    g_object_unref (clients[i].conn);
  g_main_loop_unref (loop);
  return failed ? 1 : 0;
}
