/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
#define G_LOG_DOMAIN "va-open"

#include "va-daemon-open.h"

#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include "va-domain.h"
#include "va-error.h"

/* a job this large leaves the heap grown: give it back */
#define TRIM_ABOVE (1024 * 1024)

struct _VaOpen
{
  GThreadPool *pool;      /* unprivileged callers' jobs, niced threads */
  GThreadPool *root_pool; /* uid 0's */
  GMutex lock;            /* guards what follows: workers end their jobs */
  GHashTable *senders;    /* unique name → GPtrArray of its Job* */
  GHashTable *uids;       /* uid → its jobs queued or running (not uid 0) */
  guint queued;           /* unprivileged jobs queued or running */
  guint root_queued;      /* uid 0's */
};

typedef struct
{
  VaOpen *open;
  GDBusMethodInvocation *inv;
  char *sender;
  guint32 uid;
  VaOpenFunc func;
  gpointer data;
  GDestroyNotify data_free;
  gboolean cancelled; /* under lock: the sender left before the job started */
} Job;

static void
job_free (Job *job)
{
  g_clear_object (&job->inv);
  g_free (job->sender);
  if (job->data_free)
    job->data_free (job->data);
  g_free (job);
}

/* Under lock: @job's slot is free again. */
static void
job_end (VaOpen *self, Job *job)
{
  GPtrArray *jobs = g_hash_table_lookup (self->senders, job->sender);

  if (jobs)
    {
      g_ptr_array_remove_fast (jobs, job);
      if (jobs->len == 0)
        g_hash_table_remove (self->senders, job->sender);
    }
  if (job->uid == 0)
    self->root_queued--;
  else
    {
      guint n = GPOINTER_TO_UINT (g_hash_table_lookup (self->uids, GUINT_TO_POINTER (job->uid)));

      self->queued--;
      if (n <= 1)
        g_hash_table_remove (self->uids, GUINT_TO_POINTER (job->uid));
      else
        g_hash_table_insert (self->uids, GUINT_TO_POINTER (job->uid), GUINT_TO_POINTER (n - 1));
    }
}

/* On a worker: the reply is serialized and sent from here, so that a
 * large one (ListLeases) costs the main loop nothing. The slot is freed
 * before the answer, so that a caller's next call never finds it taken. */
static void
run_job (gpointer data, gpointer user_data)
{
  static GPrivate niced;
  Job *job = data;
  VaOpen *self = job->open;
  g_autoptr (GError) error = NULL;
  GVariant *out = NULL;
  gsize bytes = 0;
  gboolean cancelled;

  /* below the main loop: a flood of open calls must not starve VM starts */
  if (job->uid != 0 && !g_private_get (&niced))
    {
      if (setpriority (PRIO_PROCESS, (id_t) gettid (), 10) < 0)
        g_debug ("lowering the open calls' thread priority: %s", g_strerror (errno));
      g_private_set (&niced, GINT_TO_POINTER (1));
    }
  g_mutex_lock (&self->lock);
  cancelled = job->cancelled;
  g_mutex_unlock (&self->lock);
  if (cancelled)
    {
      g_message ("%s of %s not run: the caller left the bus", g_dbus_method_invocation_get_method_name (job->inv), job->sender);
      g_set_error_literal (&error, VA_ERROR, VA_ERROR_FAILED, "the caller left the bus");
    }
  else
    out = job->func (job->inv, job->data, &bytes, &error);
  g_mutex_lock (&self->lock);
  job_end (self, job);
  g_mutex_unlock (&self->lock);
  if (out)
    g_dbus_method_invocation_return_value (g_steal_pointer (&job->inv), out);
  else
    g_dbus_method_invocation_return_gerror (g_steal_pointer (&job->inv), error);
  job_free (job);
  /* this thread's arena keeps what it freed otherwise */
  if (bytes > TRIM_ABOVE)
    malloc_trim (0);
}

VaOpen *
va_open_new (void)
{
  VaOpen *self = g_new0 (VaOpen, 1);

  g_mutex_init (&self->lock);
  self->senders = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_ptr_array_unref);
  self->uids = g_hash_table_new (NULL, NULL);
  self->pool = g_thread_pool_new (run_job, self, VA_OPEN_THREADS, FALSE, NULL);
  self->root_pool = g_thread_pool_new (run_job, self, VA_OPEN_THREADS, FALSE, NULL);
  return self;
}

void
va_open_free (VaOpen *self)
{
  if (!self)
    return;
  /* the jobs still queued run (cancelled ones quickly) and are answered */
  g_thread_pool_free (self->pool, FALSE, TRUE);
  g_thread_pool_free (self->root_pool, FALSE, TRUE);
  g_hash_table_unref (self->senders);
  g_hash_table_unref (self->uids);
  g_mutex_clear (&self->lock);
  g_free (self);
}

void
va_open_submit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenFunc func, gpointer data, GDestroyNotify data_free)
{
  const char *sender = g_dbus_method_invocation_get_sender (inv);
  const char *method = g_dbus_method_invocation_get_method_name (inv);
  g_autoptr (GError) busy = NULL;
  GPtrArray *jobs;
  Job *job;
  guint n;

  g_return_if_fail (self != NULL);
  g_return_if_fail (G_IS_DBUS_METHOD_INVOCATION (inv));
  g_return_if_fail (func != NULL);

  g_mutex_lock (&self->lock);
  n = GPOINTER_TO_UINT (g_hash_table_lookup (self->uids, GUINT_TO_POINTER (uid)));
  if (uid == 0 && self->root_queued >= VA_OPEN_ROOT_QUEUE)
    g_set_error (&busy, VA_ERROR, VA_ERROR_TRY_AGAIN,
                 "%d calls of uid 0 to %s and the other open methods are in progress already; try again", VA_OPEN_ROOT_QUEUE, method);
  else if (uid != 0 && n >= VA_OPEN_PER_UID)
    g_set_error (&busy, VA_ERROR, VA_ERROR_TRY_AGAIN, "%d calls of uid %u to %s and the other open methods are in progress already",
                 VA_OPEN_PER_UID, uid, method);
  else if (uid != 0 && self->queued >= VA_OPEN_QUEUE)
    g_set_error (&busy, VA_ERROR, VA_ERROR_TRY_AGAIN,
                 "%d calls of unprivileged users to %s and the other open methods are in progress already; try again", VA_OPEN_QUEUE,
                 method);
  if (busy)
    {
      g_mutex_unlock (&self->lock);
      g_dbus_method_invocation_return_gerror (inv, busy);
      if (data_free)
        data_free (data);
      return;
    }
  if (!sender)
    sender = "";
  job = g_new0 (Job, 1);
  job->open = self;
  job->inv = inv; /* the method handler's: answering consumes it */
  job->sender = g_strdup (sender);
  job->uid = uid;
  job->func = func;
  job->data = data;
  job->data_free = data_free;
  jobs = g_hash_table_lookup (self->senders, sender);
  if (!jobs)
    {
      jobs = g_ptr_array_new ();
      g_hash_table_insert (self->senders, g_strdup (sender), jobs);
    }
  g_ptr_array_add (jobs, job);
  if (uid == 0)
    self->root_queued++;
  else
    {
      self->queued++;
      g_hash_table_insert (self->uids, GUINT_TO_POINTER (uid), GUINT_TO_POINTER (n + 1));
    }
  g_mutex_unlock (&self->lock);
  g_thread_pool_push (uid == 0 ? self->root_pool : self->pool, job, NULL);
}

static GVariant *
rewrite (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  GVariant *params = g_dbus_method_invocation_get_parameters (inv);
  g_autoptr (GVariant) xml_v = g_variant_get_child_value (params, 0);
  char *out;
  const char *xml, *to;
  gsize len;

  xml = g_variant_get_string (xml_v, &len);
  g_variant_get_child (params, 1, "&s", &to);
  out = va_domain_rewrite_text (xml, (gssize) len, data, to, error);
  *bytes = len;
  return out ? g_variant_new ("(@s)", g_variant_new_take_string (out)) : NULL;
}

void
va_open_submit_rewrite (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaHostView *view)
{
  g_return_if_fail (view != NULL);

  va_open_submit (self, inv, uid, rewrite, va_host_view_ref (view), (GDestroyNotify) va_host_view_unref);
}

void
va_open_sender_gone (VaOpen *self, const char *sender)
{
  GPtrArray *jobs;

  g_return_if_fail (self != NULL);
  g_return_if_fail (sender != NULL);

  g_mutex_lock (&self->lock);
  jobs = g_hash_table_lookup (self->senders, sender);
  for (guint i = 0; jobs && i < jobs->len; i++)
    ((Job *) g_ptr_array_index (jobs, i))->cancelled = TRUE;
  g_mutex_unlock (&self->lock);
}
