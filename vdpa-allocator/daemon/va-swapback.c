/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The swap back of domains that moved here: one
 * vdpa-allocator-libvirt-swap per domain at a time, at most
 * SWAP_BACK_MAX_RUNNING in all, each killed past its bound. The main loop
 * never waits for one: the hook that asked has long returned to libvirtd,
 * which must go on to finish the incoming migration the helper waits for.
 * Each ends as one journal event. */
#define G_LOG_DOMAIN "va-swapback"

#include "config.h"

#include "va-swapback.h"

#include <signal.h>
#include <string.h>

#include "va-error.h"
#include "va-events.h"
#include "va-ids.h"
#include "va-paths.h"

#define SWAP_BACK_MAX_RUNNING 8
/* past the helper's own --wait: its swaps after the wait; then SIGTERM,
 * and SIGKILL after SWAP_BACK_KILL_S more (a swap's unplug may take 30 s) */
#define SWAP_BACK_GRACE_S 60
#define SWAP_BACK_KILL_S 120

struct _VaSwapBack
{
  char *uri; /* or NULL */
  guint timeout_s;
  GHashTable *running; /* uuid → Run* */
};

typedef struct
{
  VaSwapBack *owner; /* NULL once the owner is gone */
  char *uuid;
  char *name;
  GSubprocess *proc;
  guint timer;
  gboolean timed_out;
} Run;

static void
run_free (Run *r)
{
  if (r->timer)
    g_source_remove (r->timer);
  g_clear_object (&r->proc);
  g_free (r->uuid);
  g_free (r->name);
  g_free (r);
}

static gboolean
timed_out (gpointer user_data)
{
  Run *r = user_data;

  if (!r->timed_out)
    {
      /* the helper stops between two NICs, never within a swap */
      r->timed_out = TRUE;
      g_subprocess_send_signal (r->proc, SIGTERM);
      r->timer = g_timeout_add_seconds (SWAP_BACK_KILL_S, timed_out, r);
      return G_SOURCE_REMOVE;
    }
  /* a libvirtd that does not answer at all */
  r->timer = 0;
  g_subprocess_force_exit (r->proc);
  return G_SOURCE_REMOVE;
}

/* The helper's lines as one: a journal event is one line. */
static char *
one_line (const char *text)
{
  g_autofree char *t = g_strstrip (g_strdup (text ? text : ""));

  g_strdelimit (t, "\r\n", ';');
  return g_strdup (t);
}

static void
finished (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Run *r = user_data;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL, *result = NULL;
  int status = -1;
  const char *fields[] = { "VA_DOMAIN_UUID", r->uuid, "VA_DOMAIN_NAME", r->name, "VA_SWAP_BACK_RESULT", NULL, NULL };

  if (g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), res, &out, &err, &error))
    status = g_subprocess_get_if_exited (r->proc) ? g_subprocess_get_exit_status (r->proc) : -1;
  if (r->timed_out)
    {
      g_autofree char *lines = one_line (out);
      result = g_strdup_printf ("stopped at its bound (%u s and %d s); the NICs not swapped yet stay portable%s%s",
                                r->owner ? r->owner->timeout_s : 0, SWAP_BACK_GRACE_S, *lines ? ": " : "", lines);
    }
  else if (error)
    result = g_strdup (error->message);
  else if (status == 0 || status == 3)
    result = one_line (out);
  else
    {
      g_autofree char *why = one_line (err);
      result = g_strdup_printf ("exit status %d: %s", status, *why ? why : "no message");
    }
  fields[5] = result;
  if (status == 0 && !r->timed_out)
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_SWAP_BACK, NULL, fields, "domain %s: swap back after its move: %s", r->name,
              *result ? result : "no NIC was marked");
  else
    va_event (G_LOG_LEVEL_WARNING, VA_EVENT_SWAP_BACK, NULL, fields, "domain %s: swap back after its move incomplete: %s", r->name, result);
  if (r->owner)
    g_hash_table_remove (r->owner->running, r->uuid); /* frees @r */
  else
    run_free (r);
}

VaSwapBack *
va_swap_back_new (const char *uri)
{
  VaSwapBack *self = g_new0 (VaSwapBack, 1);

  self->uri = g_strdup (uri);
  self->timeout_s = 300;
  self->running = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) run_free);
  return self;
}

void
va_swap_back_set_timeout (VaSwapBack *self, guint timeout_s)
{
  g_return_if_fail (self != NULL);

  self->timeout_s = timeout_s;
}

gboolean
va_swap_back_start (VaSwapBack *self, const char *uuid, const char *name, GError **error)
{
  g_autofree char *helper = va_path_libexec ("vdpa-allocator-libvirt-swap");
  g_autofree char *wait = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  char canon[VA_UUID_STRING_LEN];
  Run *r;

  g_return_val_if_fail (self != NULL, FALSE);

  if (!uuid || !va_uuid_normalize (uuid, canon))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.*s' is not a UUID", VA_CUT (uuid ? uuid : "", 64));
      return FALSE;
    }
  if (!name || strlen (name) > 256 || strpbrk (name, "\r\n"))
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "the domain name must be one line of at most 256 bytes");
      return FALSE;
    }
  if (g_hash_table_contains (self->running, canon))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "a swap back of domain %s runs already", canon);
      return FALSE;
    }
  if (g_hash_table_size (self->running) >= SWAP_BACK_MAX_RUNNING)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "%d swaps back run already", SWAP_BACK_MAX_RUNNING);
      return FALSE;
    }
  wait = g_strdup_printf ("%u", self->timeout_s);
  g_ptr_array_add (argv, helper);
  if (self->uri)
    {
      g_ptr_array_add (argv, (gpointer) "--uri");
      g_ptr_array_add (argv, self->uri);
    }
  g_ptr_array_add (argv, (gpointer) "--wait");
  g_ptr_array_add (argv, wait);
  g_ptr_array_add (argv, canon);
  g_ptr_array_add (argv, NULL);

  r = g_new0 (Run, 1);
  r->owner = self;
  r->uuid = g_strdup (canon);
  r->name = g_strdup (*name ? name : canon);
  r->proc = g_subprocess_newv ((const char *const *) argv->pdata, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, error);
  if (!r->proc)
    {
      g_prefix_error (error, "running %s: ", helper);
      run_free (r);
      return FALSE;
    }
  r->timer = g_timeout_add_seconds (self->timeout_s + SWAP_BACK_GRACE_S, timed_out, r);
  g_hash_table_insert (self->running, r->uuid, r);
  g_subprocess_communicate_utf8_async (r->proc, NULL, NULL, finished, r);
  g_message ("domain %s (%s): swap back after its move started", r->name, r->uuid);
  return TRUE;
}

void
va_swap_back_free (VaSwapBack *self)
{
  GHashTableIter iter;
  gpointer value;

  if (!self)
    return;
  /* the running helpers finish on their own; their ends are logged */
  g_hash_table_iter_init (&iter, self->running);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Run *r = value;

      r->owner = NULL;
      g_hash_table_iter_steal (&iter);
    }
  g_hash_table_unref (self->running);
  g_free (self->uri);
  g_free (self);
}
