/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
#define G_LOG_DOMAIN "va-rewriter"

#include "va-daemon-rewriter.h"

#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include "va-domain.h"
#include "va-error.h"

/* a document this large leaves the heap grown: give it back */
#define TRIM_ABOVE (1024 * 1024)

struct _VaRewriter
{
  GThreadPool *pool;
  GMainContext *context;
  GHashTable *senders; /* unique name → GPtrArray of its Job*, main thread only */
  guint queued;        /* jobs queued or running */
  gulong hold_us;      /* tests only: how long each job holds its worker first */
};

typedef struct
{
  VaRewriter *rewriter;
  GDBusMethodInvocation *inv;
  char *sender;
  VaHostView *view;
  gint cancelled; /* atomic: the sender left before the job started */
  char *out;
  GError *error;
} Job;

static void
job_free (Job *job)
{
  g_clear_object (&job->inv);
  g_free (job->sender);
  va_host_view_unref (job->view);
  g_free (job->out);
  g_clear_error (&job->error);
  g_free (job);
}

/* On the main context: the answer, and the bookkeeping. */
static gboolean
job_done (gpointer data)
{
  Job *job = data;
  VaRewriter *self = job->rewriter;
  GPtrArray *jobs = g_hash_table_lookup (self->senders, job->sender);

  if (jobs)
    {
      g_ptr_array_remove_fast (jobs, job);
      if (jobs->len == 0)
        g_hash_table_remove (self->senders, job->sender);
    }
  self->queued--;
  if (job->out)
    g_dbus_method_invocation_return_value (g_steal_pointer (&job->inv), g_variant_new ("(s)", job->out));
  else
    g_dbus_method_invocation_return_gerror (g_steal_pointer (&job->inv), job->error);
  job_free (job);
  return G_SOURCE_REMOVE;
}

static void
run_job (gpointer data, gpointer user_data)
{
  static GPrivate niced;
  Job *job = data;
  const char *xml, *to;
  gsize len;

  /* below the main loop: a flood of rewrites must not starve VM starts */
  if (!g_private_get (&niced))
    {
      if (setpriority (PRIO_PROCESS, (id_t) gettid (), 10) < 0)
        g_debug ("lowering the rewrite thread's priority: %s", g_strerror (errno));
      g_private_set (&niced, GINT_TO_POINTER (1));
    }
  if (job->rewriter->hold_us)
    g_usleep (job->rewriter->hold_us);
  if (g_atomic_int_get (&job->cancelled))
    {
      g_message ("RewriteDomain of %s not parsed: the caller left the bus", job->sender);
      g_set_error_literal (&job->error, VA_ERROR, VA_ERROR_FAILED, "the caller left the bus");
    }
  else
    {
      GVariant *params = g_dbus_method_invocation_get_parameters (job->inv);
      GVariant *xml_v = g_variant_get_child_value (params, 0);

      xml = g_variant_get_string (xml_v, &len);
      g_variant_get_child (params, 1, "&s", &to);
      job->out = va_domain_rewrite_text (xml, (gssize) len, job->view, to, &job->error);
      g_variant_unref (xml_v);
      if (len > TRIM_ABOVE)
        malloc_trim (0);
    }
  g_main_context_invoke (job->rewriter->context, job_done, job);
}

VaRewriter *
va_rewriter_new (void)
{
  VaRewriter *self = g_new0 (VaRewriter, 1);
  /* tests only: jobs that hold their workers make "calls arriving while
   * the workers are busy" the test's choice, not the machine's pace */
  const char *hold = g_getenv ("VDPA_ALLOCATOR_TEST_REWRITE_HOLD_MS");
  guint64 hold_ms = 0;

  if (hold && g_ascii_string_to_unsigned (hold, 10, 0, 60000, &hold_ms, NULL))
    self->hold_us = (gulong) hold_ms * 1000;

  self->context = g_main_context_ref_thread_default ();
  self->senders = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_ptr_array_unref);
  self->pool = g_thread_pool_new (run_job, self, VA_REWRITER_THREADS, FALSE, NULL);
  return self;
}

void
va_rewriter_free (VaRewriter *self)
{
  if (!self)
    return;
  /* the jobs still queued run (cancelled ones quickly); then answer them */
  g_thread_pool_free (self->pool, FALSE, TRUE);
  while (self->queued > 0)
    g_main_context_iteration (self->context, TRUE);
  g_hash_table_unref (self->senders);
  g_main_context_unref (self->context);
  g_free (self);
}

void
va_rewriter_submit (VaRewriter *self, GDBusMethodInvocation *inv, VaHostView *view)
{
  const char *sender = g_dbus_method_invocation_get_sender (inv);
  GPtrArray *jobs;
  Job *job;

  g_return_if_fail (self != NULL);
  g_return_if_fail (G_IS_DBUS_METHOD_INVOCATION (inv));
  g_return_if_fail (view != NULL);

  if (!sender)
    sender = "";
  jobs = g_hash_table_lookup (self->senders, sender);
  if (jobs && jobs->len >= VA_REWRITER_PER_SENDER)
    {
      g_dbus_method_invocation_return_error (inv, VA_ERROR, VA_ERROR_TRY_AGAIN,
                                             "%d RewriteDomain calls of this caller are in progress already", VA_REWRITER_PER_SENDER);
      return;
    }
  if (self->queued >= VA_REWRITER_QUEUE)
    {
      g_dbus_method_invocation_return_error (inv, VA_ERROR, VA_ERROR_TRY_AGAIN, "%d RewriteDomain calls are in progress already; try again",
                                             VA_REWRITER_QUEUE);
      return;
    }
  if (!jobs)
    {
      jobs = g_ptr_array_new ();
      g_hash_table_insert (self->senders, g_strdup (sender), jobs);
    }
  job = g_new0 (Job, 1);
  job->rewriter = self;
  job->inv = inv; /* the method handler's: answering consumes it */
  job->sender = g_strdup (sender);
  job->view = va_host_view_ref (view);
  g_ptr_array_add (jobs, job);
  self->queued++;
  g_thread_pool_push (self->pool, job, NULL);
}

void
va_rewriter_sender_gone (VaRewriter *self, const char *sender)
{
  GPtrArray *jobs;

  g_return_if_fail (self != NULL);
  g_return_if_fail (sender != NULL);

  jobs = g_hash_table_lookup (self->senders, sender);
  for (guint i = 0; jobs && i < jobs->len; i++)
    g_atomic_int_set (&((Job *) g_ptr_array_index (jobs, i))->cancelled, 1);
}
