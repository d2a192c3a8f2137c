/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* VaOpen (the open methods' bounds, va-daemon-open.c) with calls that wait
 * on a gate the test opens, over a real GDBus peer connection: which calls
 * run, which are held, which are answered TryAgain, whatever the threads'
 * timing. The uid is the call's argument here; the daemon asks the bus. */
#define G_LOG_DOMAIN "test-open"

#include "config.h"

#include <gio/gio.h>
#include <sys/socket.h>

#include "va-daemon-open.h"
#include "va-error.h"

static const char introspection[] = "<node><interface name='t.Open'><method name='Call'>"
                                    "<arg type='u' name='uid' direction='in'/><arg type='s' name='pad' direction='in'/>"
                                    "<arg type='u' name='uid' direction='out'/></method></interface></node>";

typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean open; /* the gate: calls of uids other than 0 wait for it */
  guint entered; /* calls that reached the worker */
  guint started; /* starts run on the main context */
  VaOpen *vopen;
  GDBusConnection *server;
  GDBusConnection *client;
  guint reg;
} Fixture;

typedef struct
{
  guint answered;
  guint ok;
  guint try_again;
  guint other;
} Tally;

static gpointer
start (gpointer user_data, GDBusMethodInvocation *inv)
{
  Fixture *f = user_data;

  f->started++;
  return f;
}

static GVariant *
work (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  Fixture *f = data;
  guint32 uid;

  g_variant_get_child (g_dbus_method_invocation_get_parameters (inv), 0, "u", &uid);
  g_mutex_lock (&f->lock);
  f->entered++;
  g_cond_broadcast (&f->cond);
  g_main_context_wakeup (NULL); /* the test waits on the main context */
  while (uid != 0 && !f->open)
    g_cond_wait (&f->cond, &f->lock);
  g_mutex_unlock (&f->lock);
  return g_variant_new ("(u)", uid);
}

static void
method (GDBusConnection *conn, const char *sender, const char *path, const char *iface, const char *name, GVariant *params,
        GDBusMethodInvocation *inv, gpointer user_data)
{
  Fixture *f = user_data;
  guint32 uid;

  g_variant_get_child (params, 0, "u", &uid);
  va_open_submit (f->vopen, inv, uid, start, f, work, NULL);
}

static void
got_server (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Fixture *f = user_data;
  g_autoptr (GError) error = NULL;

  f->server = g_dbus_connection_new_finish (res, &error);
  g_assert_no_error (error);
}

static void
got_client (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Fixture *f = user_data;
  g_autoptr (GError) error = NULL;

  f->client = g_dbus_connection_new_finish (res, &error);
  g_assert_no_error (error);
}

static void
setup (Fixture *f, gconstpointer data)
{
  static const GDBusInterfaceVTable vtable = { method, NULL, NULL };
  g_autoptr (GDBusNodeInfo) info = g_dbus_node_info_new_for_xml (introspection, NULL);
  g_autofree char *guid = g_dbus_generate_guid ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GSocket) s0 = NULL;
  g_autoptr (GSocket) s1 = NULL;
  g_autoptr (GSocketConnection) c0 = NULL;
  g_autoptr (GSocketConnection) c1 = NULL;
  int sv[2];

  g_mutex_init (&f->lock);
  g_cond_init (&f->cond);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  s0 = g_socket_new_from_fd (sv[0], &error);
  g_assert_no_error (error);
  s1 = g_socket_new_from_fd (sv[1], &error);
  g_assert_no_error (error);
  c0 = g_socket_connection_factory_create_connection (s0);
  c1 = g_socket_connection_factory_create_connection (s1);
  g_dbus_connection_new (G_IO_STREAM (c0), guid, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_SERVER, NULL, NULL, got_server, f);
  g_dbus_connection_new (G_IO_STREAM (c1), NULL, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT, NULL, NULL, got_client, f);
  while (!f->server || !f->client)
    g_main_context_iteration (NULL, TRUE);
  f->vopen = va_open_new ();
  f->reg = g_dbus_connection_register_object (f->server, "/t", info->interfaces[0], &vtable, f, NULL, &error);
  g_assert_no_error (error);
}

static void
gate_open (Fixture *f)
{
  g_mutex_lock (&f->lock);
  f->open = TRUE;
  g_cond_broadcast (&f->cond);
  g_mutex_unlock (&f->lock);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  gate_open (f);
  g_dbus_connection_unregister_object (f->server, f->reg);
  va_open_free (f->vopen);
  g_dbus_connection_close_sync (f->client, NULL, NULL);
  g_dbus_connection_close_sync (f->server, NULL, NULL);
  g_clear_object (&f->client);
  g_clear_object (&f->server);
  g_mutex_clear (&f->lock);
  g_cond_clear (&f->cond);
}

static void
answered (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Tally *t = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);

  t->answered++;
  if (reply)
    t->ok++;
  else if (g_error_matches (error, VA_ERROR, VA_ERROR_TRY_AGAIN))
    t->try_again++;
  else
    {
      g_test_message ("answered: %s", error->message);
      t->other++;
    }
}

/* @n calls of @uid, each with @pad bytes of argument. */
static void
send_calls (Fixture *f, guint32 uid, guint n, gsize pad, Tally *t)
{
  g_autofree char *padding = g_strnfill (pad, 'x');

  for (guint i = 0; i < n; i++)
    g_dbus_connection_call (f->client, NULL, "/t", "t.Open", "Call", g_variant_new ("(us)", uid, padding), G_VARIANT_TYPE ("(u)"),
                            G_DBUS_CALL_FLAGS_NONE, 60000, NULL, answered, t);
}

/* Runs the main context until @cond holds. */
#define UNTIL(cond)                                                                                                                        \
  G_STMT_START                                                                                                                             \
  {                                                                                                                                        \
    while (!(cond))                                                                                                                        \
      g_main_context_iteration (NULL, TRUE);                                                                                               \
  }                                                                                                                                        \
  G_STMT_END

static guint
entered (Fixture *f)
{
  guint n;

  g_mutex_lock (&f->lock);
  n = f->entered;
  g_mutex_unlock (&f->lock);
  return n;
}

/* Lets what is pending on the main context and the workers happen: a
 * round trip after the calls. */
static void
settle (Fixture *f)
{
  g_autoptr (GVariant) r = NULL;

  for (guint i = 0; i < 3; i++)
    {
      r = g_dbus_connection_call_sync (f->client, NULL, "/t", "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, G_DBUS_CALL_FLAGS_NONE, -1,
                                       NULL, NULL);
      g_clear_pointer (&r, g_variant_unref);
      while (g_main_context_iteration (NULL, FALSE))
        ;
      g_usleep (20 * 1000);
    }
}

/* A user's calls over its 4 running are held, not refused, and run when
 * its slots free: all answered, none TryAgain. */
static void
test_held_then_run (Fixture *f, gconstpointer data)
{
  Tally t = { 0 };

  send_calls (f, 1000, VA_OPEN_PER_UID + 6, 16, &t);
  /* 4 have their slots: 2 on the workers, 2 queued there */
  UNTIL (entered (f) == VA_OPEN_THREADS && f->started == VA_OPEN_PER_UID);
  settle (f);
  g_assert_cmpuint (entered (f), ==, VA_OPEN_THREADS);
  g_assert_cmpuint (t.answered, ==, 0);
  /* the data is taken when the call gets its slot, not when it comes */
  g_assert_cmpuint (f->started, ==, VA_OPEN_PER_UID);
  gate_open (f);
  UNTIL (t.answered == VA_OPEN_PER_UID + 6);
  g_assert_cmpuint (t.ok, ==, VA_OPEN_PER_UID + 6);
  g_assert_cmpuint (f->started, ==, VA_OPEN_PER_UID + 6);
}

/* Past its queue's count, TryAgain at once; another user still gets its
 * own slots and queue; root is never behind them. */
static void
test_full_queue_try_again (Fixture *f, gconstpointer data)
{
  Tally a = { 0 }, b = { 0 }, root = { 0 };

  send_calls (f, 1000, VA_OPEN_PER_UID + VA_OPEN_HOLD_PER_UID + 5, 16, &a);
  UNTIL (a.answered == 5);
  g_assert_cmpuint (a.try_again, ==, 5);
  g_assert_cmpuint (f->started, ==, VA_OPEN_PER_UID);
  /* another user: slots of its own, though its calls wait for the workers */
  send_calls (f, 1001, VA_OPEN_PER_UID + 1, 16, &b);
  UNTIL (f->started == 2 * VA_OPEN_PER_UID);
  /* root: its own slots and workers, behind no one */
  send_calls (f, 0, 3, 16, &root);
  UNTIL (root.answered == 3);
  g_assert_cmpuint (root.ok, ==, 3);
  settle (f);
  g_assert_cmpuint (a.answered, ==, 5);
  g_assert_cmpuint (b.answered, ==, 0);
  g_assert_cmpuint (f->started, ==, 2 * VA_OPEN_PER_UID + 3);
  gate_open (f);
  UNTIL (a.answered == VA_OPEN_PER_UID + VA_OPEN_HOLD_PER_UID + 5 && b.answered == VA_OPEN_PER_UID + 1);
  g_assert_cmpuint (a.ok, ==, VA_OPEN_PER_UID + VA_OPEN_HOLD_PER_UID);
  g_assert_cmpuint (b.ok, ==, VA_OPEN_PER_UID + 1);
}

/* What one user's queue holds is bounded in bytes: documents of 4 MiB,
 * 4 running, then as many held as fit in VA_OPEN_HOLD_BYTES_PER_UID, the
 * rest TryAgain at once. */
static void
test_queue_bytes_bounded (Fixture *f, gconstpointer data)
{
  const gsize doc = 4 * 1024 * 1024;
  const guint fit = VA_OPEN_HOLD_BYTES_PER_UID / (doc + 64); /* its argument and the uid's */
  Tally t = { 0 };

  send_calls (f, 1000, VA_OPEN_PER_UID + fit + 3, doc, &t);
  UNTIL (t.answered == 3 && f->started == VA_OPEN_PER_UID);
  g_assert_cmpuint (t.try_again, ==, 3);
  gate_open (f);
  UNTIL (t.answered == VA_OPEN_PER_UID + fit + 3);
  g_assert_cmpuint (t.ok, ==, VA_OPEN_PER_UID + fit);
}

typedef struct
{
  Fixture *f;
  guint32 uid;
  guint left; /* calls still to send */
  Tally t;
} Chain;

static void chain_next (Chain *c);

static void
chained (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Chain *c = user_data;

  answered (source, res, &c->t);
  chain_next (c);
}

/* The next of @c's calls, once the last is answered: a caller that never
 * has more than one call in flight. */
static void
chain_next (Chain *c)
{
  if (c->left == 0)
    return;
  c->left--;
  g_dbus_connection_call (c->f->client, NULL, "/t", "t.Open", "Call", g_variant_new ("(us)", c->uid, ""), G_VARIANT_TYPE ("(u)"),
                          G_DBUS_CALL_FLAGS_NONE, 60000, NULL, chained, c);
}

/* A user that sends its next call as each is answered is paced, not
 * refused: past its burst, VA_OPEN_RATE_PER_UID calls a second however
 * fast they are answered, so N calls take at least
 * (N - VA_OPEN_BURST_PER_UID) / VA_OPEN_RATE_PER_UID seconds (a bound
 * from below: a slow machine only takes longer). Unpaced, these took a
 * few milliseconds. */
static void
test_paced (Fixture *f, gconstpointer data)
{
  const guint over = VA_OPEN_RATE_PER_UID / 2;
  Chain c = { f, 1000, VA_OPEN_BURST_PER_UID + over, { 0 } };
  gint64 t0;

  gate_open (f);
  t0 = g_get_monotonic_time ();
  chain_next (&c);
  UNTIL (c.t.answered == VA_OPEN_BURST_PER_UID + over);
  g_assert_cmpuint (c.t.ok, ==, VA_OPEN_BURST_PER_UID + over);
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, (gint64) over * G_USEC_PER_SEC / VA_OPEN_RATE_PER_UID);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* the D-Bus names of VA_ERROR's codes */
  (void) VA_ERROR;
  g_test_add ("/open/held-then-run", Fixture, NULL, setup, test_held_then_run, teardown);
  g_test_add ("/open/full-queue-try-again", Fixture, NULL, setup, test_full_queue_try_again, teardown);
  g_test_add ("/open/queue-bytes-bounded", Fixture, NULL, setup, test_queue_bytes_bounded, teardown);
  g_test_add ("/open/paced", Fixture, NULL, setup, test_paced, teardown);
  return g_test_run ();
}
