/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The swap back of domains that moved here: one
 * vdpa-allocator-libvirt-swap per domain at a time, at most
 * SWAP_BACK_MAX_RUNNING in all (the rest queued), each killed past its
 * bound. The main loop never waits for one: the hook that asked has long
 * returned to libvirtd, which must go on to finish the incoming migration
 * the helper waits for. Only the daemon's stop waits (va_daemon_swap_back_stop),
 * serving the bus meanwhile: the helper leases through it. Each ends as
 * one journal event. */
#define G_LOG_DOMAIN "va-swapback"

#include "config.h"

#include "va-daemon-swapback.h"

#include <signal.h>
#include <string.h>

#include "va-error.h"
#include "va-daemon-events.h"
#include "va-ids.h"
#include "va-paths.h"

#define SWAP_BACK_MAX_RUNNING 8
/* past the helper's own --wait: its swaps after the wait; then SIGTERM,
 * and SIGKILL after SWAP_BACK_KILL_S more (a swap's unplug may take 30 s) */
#define SWAP_BACK_GRACE_S 60
#define SWAP_BACK_KILL_S 120
/* after a SIGKILL: a process that left its pipes to a child of its own
 * still ends the wait */
#define SWAP_BACK_REAP_S 5
/* the helper's --pending: a listing of running domains */
#define SWAP_BACK_SCAN_S 60
#define SWAP_BACK_QUEUE_MAX 1024

struct _VaDaemonSwapBack
{
  char *uri; /* or NULL */
  guint timeout_s;
  guint grace_s;
  guint kill_s;
  gboolean stopping; /* va_daemon_swap_back_stop: no new helper */
  GMainContext *ctx;
  GHashTable *running; /* uuid → Run* */
  GQueue queued;       /* Queued*: those past SWAP_BACK_MAX_RUNNING */
  struct Scan *scan;   /* a running --pending, or NULL */
};

typedef struct Scan
{
  VaDaemonSwapBack *owner;
  GSubprocess *proc;
  GCancellable *cancel;
  GSource *timer;
} Scan;

typedef struct
{
  char *uuid;
  char *name;
} Queued;

static void
queued_free (Queued *q)
{
  g_free (q->uuid);
  g_free (q->name);
  g_free (q);
}

static void start_queued (VaDaemonSwapBack *self);

typedef enum
{
  RUN_ENDS_ITSELF,
  RUN_AT_BOUND, /* SIGTERM past its bound */
  RUN_AT_STOP,  /* SIGTERM at the daemon's stop */
} RunEnd;

typedef struct
{
  VaDaemonSwapBack *owner;
  char *uuid;
  char *name;
  GSubprocess *proc;
  GCancellable *cancel;
  GSource *timer;
  /* the bounds as the helper started with them (a reload may change them) */
  guint timeout_s;
  guint grace_s;
  guint kill_s;
  guint stop_s;
  RunEnd end;
  gboolean killed;
} Run;

static void
run_clear_timer (Run *r)
{
  if (r->timer)
    {
      g_source_destroy (r->timer);
      g_clear_pointer (&r->timer, g_source_unref);
    }
}

static void
run_free (Run *r)
{
  run_clear_timer (r);
  g_clear_object (&r->proc);
  g_clear_object (&r->cancel);
  g_free (r->uuid);
  g_free (r->name);
  g_free (r);
}

static void
run_set_timer (Run *r, guint seconds, GSourceFunc func)
{
  run_clear_timer (r);
  r->timer = g_timeout_source_new_seconds (seconds);
  g_source_set_callback (r->timer, func, r, NULL);
  g_source_attach (r->timer, r->owner->ctx);
}

static gboolean
killed_at_bound (gpointer user_data)
{
  Run *r = user_data;

  /* a libvirtd that does not answer at all */
  g_clear_pointer (&r->timer, g_source_unref);
  r->killed = TRUE;
  g_subprocess_force_exit (r->proc);
  return G_SOURCE_REMOVE;
}

static gboolean
timed_out (gpointer user_data)
{
  Run *r = user_data;

  /* the helper stops between two NICs, never within a swap */
  r->end = RUN_AT_BOUND;
  g_subprocess_send_signal (r->proc, SIGTERM);
  run_set_timer (r, r->kill_s, killed_at_bound);
  return G_SOURCE_REMOVE;
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
  if (r->end != RUN_ENDS_ITSELF)
    {
      /* what it swapped, else why it stopped where it did */
      g_autofree char *lines = out && *g_strstrip (out) ? va_event_one_line (out) : va_event_one_line (err);
      g_autofree char *why = r->end == RUN_AT_STOP ? g_strdup ("stopped as the daemon stopped")
                                                   : g_strdup_printf ("stopped at its bound (%u s and %u s)", r->timeout_s, r->grace_s);
      g_autofree char *kill
        = r->killed ? g_strdup_printf (", SIGKILL %u s after SIGTERM", r->end == RUN_AT_STOP ? r->stop_s : r->kill_s) : g_strdup ("");

      result = g_strdup_printf ("%s%s; the NICs not swapped yet stay portable%s%s", why, kill, *lines ? ": " : "", lines);
    }
  else if (error)
    result = g_strdup (error->message);
  else if (status == 0 || status == 3)
    result = va_event_one_line (out);
  else
    {
      g_autofree char *why = va_event_one_line (err);
      result = g_strdup_printf ("exit status %d: %s", status, *why ? why : "no message");
    }
  fields[5] = result;
  if (status == 0 && r->end == RUN_ENDS_ITSELF)
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_SWAP_BACK, NULL, fields, "domain %s: swap back after its move: %s", r->name,
              *result ? result : "no NIC was marked");
  else
    va_event (G_LOG_LEVEL_WARNING, VA_EVENT_SWAP_BACK, NULL, fields, "domain %s: swap back after its move incomplete: %s", r->name, result);
  {
    VaDaemonSwapBack *self = r->owner;

    g_hash_table_remove (self->running, r->uuid); /* frees @r */
    start_queued (self);
  }
}

VaDaemonSwapBack *
va_daemon_swap_back_new (const char *uri)
{
  VaDaemonSwapBack *self = g_new0 (VaDaemonSwapBack, 1);

  self->uri = g_strdup (uri);
  self->timeout_s = 300;
  self->grace_s = SWAP_BACK_GRACE_S;
  self->kill_s = SWAP_BACK_KILL_S;
  self->ctx = g_main_context_ref_thread_default ();
  self->running = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) run_free);
  return self;
}

void
va_daemon_swap_back_set_timeout (VaDaemonSwapBack *self, guint timeout_s)
{
  g_return_if_fail (self != NULL);

  self->timeout_s = timeout_s;
}

void
va_daemon_swap_back_set_bounds (VaDaemonSwapBack *self, guint grace_s, guint kill_s)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (kill_s > 0);

  self->grace_s = grace_s;
  self->kill_s = kill_s;
}

/* Runs the helper for @canon now. */
static gboolean
spawn (VaDaemonSwapBack *self, const char *canon, const char *name, GError **error)
{
  g_autofree char *helper = va_path_libexec ("vdpa-allocator-libvirt-swap");
  g_autofree char *wait = g_strdup_printf ("%u", self->timeout_s);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  Run *r;

  g_ptr_array_add (argv, helper);
  if (self->uri)
    {
      g_ptr_array_add (argv, (gpointer) "--uri");
      g_ptr_array_add (argv, self->uri);
    }
  g_ptr_array_add (argv, (gpointer) "--wait");
  g_ptr_array_add (argv, wait);
  g_ptr_array_add (argv, (gpointer) canon);
  g_ptr_array_add (argv, NULL);

  r = g_new0 (Run, 1);
  r->owner = self;
  r->uuid = g_strdup (canon);
  r->name = g_strdup (*name ? name : canon);
  r->timeout_s = self->timeout_s;
  r->grace_s = self->grace_s;
  r->kill_s = self->kill_s;
  r->cancel = g_cancellable_new ();
  r->proc = g_subprocess_newv ((const char *const *) argv->pdata, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, error);
  if (!r->proc)
    {
      g_prefix_error (error, "running %s: ", helper);
      run_free (r);
      return FALSE;
    }
  run_set_timer (r, r->timeout_s + r->grace_s, timed_out);
  g_hash_table_insert (self->running, r->uuid, r);
  g_main_context_push_thread_default (self->ctx);
  g_subprocess_communicate_utf8_async (r->proc, NULL, r->cancel, finished, r);
  g_main_context_pop_thread_default (self->ctx);
  g_message ("domain %s (%s): swap back after its move started", r->name, r->uuid);
  return TRUE;
}

static gboolean
is_queued (VaDaemonSwapBack *self, const char *canon)
{
  for (GList *l = self->queued.head; l; l = l->next)
    if (strcmp (((Queued *) l->data)->uuid, canon) == 0)
      return TRUE;
  return FALSE;
}

gboolean
va_daemon_swap_back_start (VaDaemonSwapBack *self, const char *uuid, const char *name, GError **error)
{
  char canon[VA_UUID_STRING_LEN];
  g_autofree char *shown = NULL;
  Queued *q;

  g_return_val_if_fail (self != NULL, FALSE);

  if (!va_uuid_check (uuid, canon, error))
    return FALSE;
  /* for the journal only: any name libvirt accepts, escaped and cut */
  shown = va_domain_name_display (name);
  name = shown;
  if (self->stopping)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_TRY_AGAIN, "the daemon is stopping");
      return FALSE;
    }
  if (g_hash_table_contains (self->running, canon) || is_queued (self, canon))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "a swap back of domain %s runs already", canon);
      return FALSE;
    }
  if (g_hash_table_size (self->running) < SWAP_BACK_MAX_RUNNING)
    return spawn (self, canon, name, error);
  /* a host draining to this one: each waits its turn */
  if (self->queued.length >= SWAP_BACK_QUEUE_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_TRY_AGAIN, "%d swaps back run and %d wait already", SWAP_BACK_MAX_RUNNING,
                   SWAP_BACK_QUEUE_MAX);
      return FALSE;
    }
  q = g_new0 (Queued, 1);
  q->uuid = g_strdup (canon);
  q->name = g_strdup (name);
  g_queue_push_tail (&self->queued, q);
  g_message ("domain %s (%s): swap back after its move queued behind %d running", *name ? name : canon, canon, SWAP_BACK_MAX_RUNNING);
  return TRUE;
}

static gboolean
set_flag (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the context until no helper runs or @seconds pass. */
static void
wait_running (VaDaemonSwapBack *self, guint seconds)
{
  g_autoptr (GSource) timer = g_timeout_source_new_seconds (seconds);
  gboolean expired = FALSE;

  g_source_set_callback (timer, set_flag, &expired, NULL);
  g_source_attach (timer, self->ctx);
  while (g_hash_table_size (self->running) > 0 && !expired)
    g_main_context_iteration (self->ctx, TRUE);
  g_source_destroy (timer);
}

void
va_daemon_swap_back_stop (VaDaemonSwapBack *self, guint wait_s)
{
  GHashTableIter iter;
  gpointer value;
  guint n;

  g_return_if_fail (self != NULL);

  self->stopping = TRUE;
  if (self->scan)
    {
      g_subprocess_force_exit (self->scan->proc);
      g_cancellable_cancel (self->scan->cancel);
      while (self->scan)
        g_main_context_iteration (self->ctx, TRUE);
    }
  if (self->queued.length > 0)
    g_warning ("%u domain(s) not swapped back: they are tried again at the daemon's next start", self->queued.length);
  g_queue_clear_full (&self->queued, (GDestroyNotify) queued_free);
  n = g_hash_table_size (self->running);
  if (n == 0)
    return;
  g_message ("stopping %u swap(s) back: SIGTERM now, SIGKILL after %u s", n, wait_s);
  g_hash_table_iter_init (&iter, self->running);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Run *r = value;

      if (r->killed)
        continue; /* SIGKILLed at its bound: it ends now */
      /* also one past its bound: the daemon's stop is its end now */
      run_clear_timer (r);
      r->end = RUN_AT_STOP;
      r->stop_s = wait_s;
      g_subprocess_send_signal (r->proc, SIGTERM);
    }
  if (wait_s > 0)
    wait_running (self, wait_s);
  g_hash_table_iter_init (&iter, self->running);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Run *r = value;

      if (!r->killed)
        {
          r->killed = TRUE;
          g_subprocess_force_exit (r->proc);
        }
    }
  wait_running (self, SWAP_BACK_REAP_S);
  /* the process is gone (GLib reaps it), a child of its own holds the pipes */
  g_hash_table_iter_init (&iter, self->running);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    g_cancellable_cancel (((Run *) value)->cancel);
  while (g_hash_table_size (self->running) > 0)
    g_main_context_iteration (self->ctx, TRUE);
}

static void
start_queued (VaDaemonSwapBack *self)
{
  while (!self->stopping && self->queued.length > 0 && g_hash_table_size (self->running) < SWAP_BACK_MAX_RUNNING)
    {
      g_autoptr (GError) error = NULL;
      Queued *q = g_queue_pop_head (&self->queued);

      if (!spawn (self, q->uuid, q->name, &error))
        g_warning ("domain %s: its queued swap back: %s", q->uuid, error->message);
      queued_free (q);
    }
}

static gboolean
scan_timed_out (gpointer user_data)
{
  Scan *scan = user_data;

  g_clear_pointer (&scan->timer, g_source_unref);
  g_subprocess_force_exit (scan->proc);
  return G_SOURCE_REMOVE;
}

static void
scanned (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Scan *scan = user_data;
  VaDaemonSwapBack *self = scan->owner;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GError) local = NULL;
  guint n = 0;

  if (!g_subprocess_communicate_utf8_finish (G_SUBPROCESS (source), res, &out, &err, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) /* the daemon's stop */
        g_warning ("listing the domains whose swap back was cut short: %s", error->message);
    }
  else if (!g_subprocess_get_if_exited (scan->proc) || g_subprocess_get_exit_status (scan->proc) != 0)
    {
      g_autofree char *why = va_event_one_line (err);

      /* libvirtd not running yet (the unit starts before it) is no fault:
       * nothing runs then, and each incoming domain comes through the hook */
      g_message ("no swap back resumed: listing the running domains failed: %.200s", *why ? why : "killed at its bound");
    }
  else
    {
      lines = g_strsplit (out ? out : "", "\n", SWAP_BACK_QUEUE_MAX + 1);
      for (guint i = 0; lines[i] && i < SWAP_BACK_QUEUE_MAX; i++)
        {
          char *sp = strchr (lines[i], ' ');

          if (!sp)
            continue;
          *sp = '\0';
          /* Busy: the hook's SwapBack came first; TryAgain: the stop began */
          if (va_daemon_swap_back_start (self, lines[i], sp + 1, &local))
            n++;
          else if (!g_error_matches (local, VA_ERROR, VA_ERROR_BUSY) && !g_error_matches (local, VA_ERROR, VA_ERROR_TRY_AGAIN))
            g_warning ("domain %.64s: resuming its swap back: %s", lines[i], local->message);
          g_clear_error (&local);
        }
      if (n)
        g_message ("resumed the swap back of %u domain(s) whose NICs are still marked", n);
      else
        g_message ("no running domain has a NIC still marked for a swap back");
    }
  if (scan->timer)
    {
      g_source_destroy (scan->timer);
      g_source_unref (scan->timer);
    }
  g_object_unref (scan->proc);
  g_object_unref (scan->cancel);
  g_free (scan);
  self->scan = NULL;
}

void
va_daemon_swap_back_resume (VaDaemonSwapBack *self)
{
  g_autofree char *helper = va_path_libexec ("vdpa-allocator-libvirt-swap");
  g_autoptr (GError) error = NULL;
  const char *argv[5] = { helper, "--pending", NULL };
  Scan *scan;

  g_return_if_fail (self != NULL);

  if (self->stopping || self->scan)
    return;
  if (self->uri)
    {
      argv[1] = "--uri";
      argv[2] = self->uri;
      argv[3] = "--pending";
    }
  scan = g_new0 (Scan, 1);
  scan->owner = self;
  scan->cancel = g_cancellable_new ();
  scan->proc = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  if (!scan->proc)
    {
      g_warning ("running %s --pending: %s", helper, error->message);
      g_object_unref (scan->cancel);
      g_free (scan);
      return;
    }
  scan->timer = g_timeout_source_new_seconds (SWAP_BACK_SCAN_S);
  g_source_set_callback (scan->timer, scan_timed_out, scan, NULL);
  g_source_attach (scan->timer, self->ctx);
  self->scan = scan;
  g_main_context_push_thread_default (self->ctx);
  g_subprocess_communicate_utf8_async (scan->proc, NULL, scan->cancel, scanned, scan);
  g_main_context_pop_thread_default (self->ctx);
}

void
va_daemon_swap_back_free (VaDaemonSwapBack *self)
{
  if (!self)
    return;
  /* no helper outlives its owner (va_daemon_swap_back_stop waits first) */
  va_daemon_swap_back_stop (self, 0);
  g_hash_table_unref (self->running);
  g_main_context_unref (self->ctx);
  g_free (self->uri);
  g_free (self);
}
