/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* VaDaemonSwapBack with a stub helper (swap-stub.c, found beside this test by
 * va_path_libexec): SIGTERM at a helper's bound and SIGKILL after the kill
 * delay, and the daemon's stop (va_daemon_swap_back_stop), each end one journal
 * event. Bounds of a second or two; every wait is generous and ends on
 * what happened, never on a time. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "va-error.h"
#include "va-daemon-events.h"
#include "va-daemon-swapback.h"

#define UUID1 "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"
#define WAIT_S 60

/* the swap-back events: VA_SWAP_BACK_RESULT of each */
static GPtrArray *results;

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer user_data)
{
  const char *id = NULL, *result = NULL;

  for (gsize i = 0; i < n; i++)
    if (strcmp (fields[i].key, "MESSAGE_ID") == 0)
      id = fields[i].value;
    else if (strcmp (fields[i].key, "VA_SWAP_BACK_RESULT") == 0)
      result = fields[i].value;
  if (g_strcmp0 (id, VA_EVENT_SWAP_BACK) != 0)
    return g_log_writer_default (level, fields, n, user_data);
  g_ptr_array_add (results, g_strdup (result));
  return G_LOG_WRITER_HANDLED;
}

typedef struct
{
  char *dir;
  char *file; /* what the stub wrote */
  VaDaemonSwapBack *sb;
} Fixture;

static void
setup (Fixture *f, gconstpointer mode)
{
  g_autofree char *uri = NULL;

  f->dir = g_dir_make_tmp ("va-swapback-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->file = g_build_filename (f->dir, "stub.log", NULL);
  uri = g_strdup_printf ("%s:%s", (const char *) mode, f->file);
  f->sb = va_daemon_swap_back_new (uri);
  g_ptr_array_set_size (results, 0);
}

static void
teardown (Fixture *f, gconstpointer mode)
{
  g_clear_pointer (&f->sb, va_daemon_swap_back_free);
  g_unlink (f->file);
  g_rmdir (f->dir);
  g_free (f->file);
  g_free (f->dir);
}

static char *
stub_log (Fixture *f)
{
  char *text = NULL;

  return g_file_get_contents (f->file, &text, NULL, NULL) ? text : g_strdup ("");
}

static gboolean
expired (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

static gboolean
tick (gpointer user_data)
{
  return G_SOURCE_CONTINUE;
}

/* Runs the main context until @done, for at most WAIT_S; @done is polled
 * (the stub's file wakes no source). */
static gboolean
run_until (gboolean (*done) (Fixture *f), Fixture *f)
{
  gboolean timeout = FALSE;
  guint id = g_timeout_add_seconds (WAIT_S, expired, &timeout);
  guint poll = g_timeout_add (20, tick, NULL);

  while (!done (f) && !timeout)
    g_main_context_iteration (NULL, TRUE);
  if (!timeout)
    g_source_remove (id);
  g_source_remove (poll);
  return !timeout;
}

static gboolean
one_event (Fixture *f)
{
  return results->len > 0;
}

static gboolean
stub_started (Fixture *f)
{
  g_autofree char *text = stub_log (f);

  /* the stub's SIGTERM handler is in place before it says start */
  return strstr (text, "start ") != NULL;
}

static int
stub_pid (Fixture *f)
{
  g_autofree char *text = stub_log (f);
  const char *p = strstr (text, "start ");

  g_assert_nonnull (p);
  return atoi (p + 6);
}

static void
assert_gone (int pid)
{
  /* ended and reaped: GSubprocess waits for it before the event */
  g_assert_cmpint (kill (pid, 0), ==, -1);
  g_assert_cmpint (errno, ==, ESRCH);
}

static void
start (Fixture *f)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (va_daemon_swap_back_start (f->sb, UUID1, "moved", &error));
  g_assert_no_error (error);
  g_assert_true (run_until (stub_started, f));
}

/* A helper that sleeps past --wait gets SIGTERM at its bound and ends. */
static void
test_bound_sigterm (Fixture *f, gconstpointer mode)
{
  g_autofree char *text = NULL;
  int pid;

  va_daemon_swap_back_set_timeout (f->sb, 1);
  va_daemon_swap_back_set_bounds (f->sb, 0, WAIT_S);
  start (f);
  pid = stub_pid (f);
  g_assert_true (run_until (one_event, f));
  text = stub_log (f);
  g_assert_nonnull (strstr (text, "TERM\nexit\n"));
  g_assert_cmpuint (results->len, ==, 1);
  g_assert_cmpstr (results->pdata[0], ==,
                   "stopped at its bound (1 s and 0 s); the NICs not swapped yet stay portable: 52:54:00:6b:3c:58 accelerated");
  assert_gone (pid);
}

/* One that ignores SIGTERM is SIGKILLed after the kill delay. */
static void
test_bound_sigkill (Fixture *f, gconstpointer mode)
{
  g_autofree char *text = NULL;
  int pid;

  va_daemon_swap_back_set_timeout (f->sb, 1);
  va_daemon_swap_back_set_bounds (f->sb, 0, 1);
  start (f);
  pid = stub_pid (f);
  g_assert_true (run_until (one_event, f));
  text = stub_log (f);
  /* it had SIGTERM and never exited by itself */
  g_assert_nonnull (strstr (text, "TERM\n"));
  g_assert_null (strstr (text, "exit"));
  g_assert_cmpuint (results->len, ==, 1);
  g_assert_cmpstr (results->pdata[0], ==,
                   "stopped at its bound (1 s and 0 s), SIGKILL 1 s after SIGTERM; the NICs not swapped yet stay portable");
  assert_gone (pid);
}

/* The daemon's stop: SIGTERM, the helper ends, its event says so, and no
 * helper starts any more. */
static void
test_stop_sigterm (Fixture *f, gconstpointer mode)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  int pid;

  start (f);
  pid = stub_pid (f);
  va_daemon_swap_back_stop (f->sb, WAIT_S);
  text = stub_log (f);
  g_assert_nonnull (strstr (text, "TERM\nexit\n"));
  g_assert_cmpuint (results->len, ==, 1);
  g_assert_cmpstr (results->pdata[0], ==,
                   "stopped as the daemon stopped; the NICs not swapped yet stay portable: 52:54:00:6b:3c:58 accelerated");
  assert_gone (pid);
  g_assert_false (va_daemon_swap_back_start (f->sb, UUID1, "moved", &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_TRY_AGAIN);
  g_assert_cmpstr (error->message, ==, "the daemon is stopping");
}

/* One that ignores SIGTERM at the stop is SIGKILLed after the stop wait. */
static void
test_stop_sigkill (Fixture *f, gconstpointer mode)
{
  g_autofree char *text = NULL;
  int pid;

  start (f);
  pid = stub_pid (f);
  va_daemon_swap_back_stop (f->sb, 1);
  text = stub_log (f);
  g_assert_nonnull (strstr (text, "TERM\n"));
  g_assert_null (strstr (text, "exit"));
  g_assert_cmpuint (results->len, ==, 1);
  g_assert_cmpstr (results->pdata[0], ==,
                   "stopped as the daemon stopped, SIGKILL 1 s after SIGTERM; the NICs not swapped yet stay portable");
  assert_gone (pid);
}

/* Freed without a stop: nothing outlives it, the end is still an event. */
static void
test_free_reaps (Fixture *f, gconstpointer mode)
{
  int pid;

  start (f);
  pid = stub_pid (f);
  g_clear_pointer (&f->sb, va_daemon_swap_back_free);
  g_assert_cmpuint (results->len, ==, 1);
  g_assert_nonnull (strstr (results->pdata[0], "SIGKILL 0 s after SIGTERM"));
  assert_gone (pid);
}

static guint
starts (Fixture *f)
{
  g_autofree char *text = stub_log (f);
  guint n = 0;

  for (const char *p = text; (p = strstr (p, "start ")); p++)
    n++;
  return n;
}

static gboolean
eight_started (Fixture *f)
{
  return starts (f) == 8;
}

static gboolean
nine_started (Fixture *f)
{
  return starts (f) == 9;
}

static gboolean
ten_started (Fixture *f)
{
  return starts (f) == 10;
}

static gboolean
two_events (Fixture *f)
{
  return results->len == 2;
}

/* The PID in the stub's @nth "start PID" line (from 0). */
static int
nth_pid (Fixture *f, guint nth)
{
  g_autofree char *text = stub_log (f);
  const char *p = strstr (text, "start ");

  for (guint i = 0; i < nth && p; i++)
    p = strstr (p + 1, "start ");
  g_assert_nonnull (p);
  g_assert_cmpint (atoi (p + 6), >, 1);
  return atoi (p + 6);
}

/* The daemon's start resumes the swaps back its helper's --pending lists:
 * 8 at once (SWAP_BACK_MAX_RUNNING), the rest each as one ends; at the
 * stop, the queue is dropped and the running ones end. */
static void
test_resume_queues_past_the_limit (Fixture *f, gconstpointer mode)
{
  g_assert_true ((va_daemon_swap_back_resume (f->sb), run_until (eight_started, f)));
  /* one ends by itself: the ninth starts */
  g_assert_cmpint (kill (nth_pid (f, 0), SIGTERM), ==, 0);
  g_assert_true (run_until (nine_started, f));
  g_assert_cmpint (kill (nth_pid (f, 1), SIGTERM), ==, 0);
  g_assert_true (run_until (ten_started, f));
  g_assert_true (run_until (two_events, f));
  va_daemon_swap_back_stop (f->sb, WAIT_S);
  g_assert_cmpuint (results->len, ==, 10);
  g_assert_cmpuint (starts (f), ==, 10);
}

int
main (int argc, char **argv)
{
  int rc;

  g_test_init (&argc, &argv, NULL);
  results = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (writer, NULL, NULL);
  g_test_add ("/swapback/bound/sigterm", Fixture, "sleep", setup, test_bound_sigterm, teardown);
  g_test_add ("/swapback/bound/sigkill", Fixture, "ignore-term", setup, test_bound_sigkill, teardown);
  g_test_add ("/swapback/stop/sigterm", Fixture, "sleep", setup, test_stop_sigterm, teardown);
  g_test_add ("/swapback/stop/sigkill", Fixture, "ignore-term", setup, test_stop_sigkill, teardown);
  g_test_add ("/swapback/free", Fixture, "ignore-term", setup, test_free_reaps, teardown);
  g_test_add ("/swapback/resume/queue", Fixture, "sleep", setup, test_resume_queues_past_the_limit, teardown);
  rc = g_test_run ();
  g_ptr_array_unref (results);
  return rc;
}
