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
/* how often the held calls are looked at for those held too long */
#define SWEEP_MS 250

/* Calls that may start now, refilled at a fixed rate up to a burst. */
typedef struct
{
  double tokens;
  gint64 refilled; /* monotonic µs */
} Bucket;

/* @b as of @now, at @rate a second up to @burst. */
static void
bucket_refill (Bucket *b, gint64 now, double rate, double burst)
{
  b->tokens = MIN (burst, b->tokens + (double) (now - b->refilled) * rate / G_USEC_PER_SEC);
  b->refilled = now;
}

/* A uid's calls: those running and those held. */
typedef struct
{
  guint32 uid;
  guint running;    /* queued on the workers or in progress */
  GQueue held;      /* Job*, oldest first */
  gsize held_bytes; /* their arguments' */
  Bucket pace;      /* uids other than 0: the calls it may start now */
} User;

struct _VaOpen
{
  GThreadPool *pool;      /* unprivileged callers' jobs, niced threads */
  GThreadPool *root_pool; /* uid 0's */
  GMainContext *context;  /* where starts, admissions and expiries run */
  GMutex lock;            /* guards what follows: workers end their jobs */
  GHashTable *senders;    /* unique name → GPtrArray of its Job*, running or held */
  GHashTable *users;      /* uid → User*, while it has calls */
  GQueue waiting;         /* User* with held calls, in the order they get a turn */
  guint running;          /* jobs of uids other than 0 running */
  guint held;             /* calls of uids other than 0 held */
  gsize held_bytes;       /* their arguments' */
  GSource *admit;         /* admits held calls after a slot freed, or NULL */
  Bucket pace;            /* the calls users other than 0 may start now, all together */
  guint sweep_id;         /* main context only: expires held calls, admits paced ones */
  gulong hold_us;         /* tests only: how long a RewriteDomain job holds its worker first */
  int nice;               /* the daemon's own: workers of unprivileged jobs run 10 below it */
};

typedef struct
{
  VaOpen *open;
  GDBusMethodInvocation *inv; /* the call, or NULL and: */
  GDBusConnection *conn;      /* a call taken off the connection by a filter */
  GDBusMessage *msg;
  char *sender;
  guint32 uid;
  gsize bytes; /* its arguments' */
  gint64 since;
  gboolean held; /* under lock: in its user's queue */
  VaOpenStart start;
  gpointer start_data;
  VaOpenFunc func;         /* or NULL: a call only paced, and: */
  VaOpenAdmitted admitted; /* run on the main context once admitted */
  gpointer data;
  GDestroyNotify data_free;
  gboolean hold;      /* a RewriteDomain job: held first under the test seam */
  gboolean cancelled; /* under lock: the sender left before the job started */
} Job;

static void
job_free (Job *job)
{
  g_clear_object (&job->inv);
  g_clear_object (&job->msg);
  g_clear_object (&job->conn);
  g_free (job->sender);
  if (job->data && job->data_free)
    job->data_free (job->data);
  g_free (job);
}

static const char *
job_method (Job *job)
{
  return job->inv ? g_dbus_method_invocation_get_method_name (job->inv) : g_dbus_message_get_member (job->msg);
}

/* Sends a reply built from @job's message: a call a filter took has no
 * invocation to answer with. */
static void
job_send (Job *job, GDBusMessage *reply)
{
  g_autoptr (GError) error = NULL;

  if (!g_dbus_connection_send_message (job->conn, reply, G_DBUS_SEND_MESSAGE_FLAGS_NONE, NULL, &error))
    g_debug ("answering %s of %s: %s", job_method (job), job->sender, error->message);
  g_object_unref (reply);
}

/* Answers @job with @value ("(…)" tuple, floating or a reference the
 * caller gives up). */
static void
job_return_value (Job *job, GVariant *value)
{
  g_autoptr (GVariant) body = g_variant_take_ref (value);

  if (job->inv)
    g_dbus_method_invocation_return_value (g_steal_pointer (&job->inv), body);
  else
    {
      GDBusMessage *reply = g_dbus_message_new_method_reply (job->msg);

      g_dbus_message_set_body (reply, body);
      job_send (job, reply);
    }
}

static void
job_return_error (Job *job, const GError *error)
{
  if (job->inv)
    g_dbus_method_invocation_return_gerror (g_steal_pointer (&job->inv), error);
  else
    {
      g_autofree char *name = g_dbus_error_encode_gerror (error);

      job_send (job, g_dbus_message_new_method_error_literal (job->msg, name, error->message));
    }
}

static void
job_return_error_literal (Job *job, GQuark domain, int code, const char *message)
{
  g_autoptr (GError) error = g_error_new_literal (domain, code, message);

  job_return_error (job, error);
}

static guint
run_bound (guint32 uid)
{
  return uid == 0 ? VA_OPEN_ROOT_QUEUE : VA_OPEN_PER_UID;
}

/* Under lock: whether @user may have one more job running: a slot, and
 * for a uid other than 0 its own pace's and all users'. */
static gboolean
may_run (VaOpen *self, User *user)
{
  gint64 now;

  if (user->running >= run_bound (user->uid))
    return FALSE;
  if (user->uid == 0)
    return TRUE;
  if (self->running >= VA_OPEN_QUEUE)
    return FALSE;
  now = g_get_monotonic_time ();
  bucket_refill (&user->pace, now, VA_OPEN_RATE_PER_UID, VA_OPEN_BURST_PER_UID);
  bucket_refill (&self->pace, now, VA_OPEN_RATE_ALL, VA_OPEN_BURST_ALL);
  return user->pace.tokens >= 1 && self->pace.tokens >= 1;
}

/* Under lock: @uid's, made when absent. */
static User *
user_get (VaOpen *self, guint32 uid)
{
  User *user = g_hash_table_lookup (self->users, GUINT_TO_POINTER (uid));

  if (!user)
    {
      user = g_new0 (User, 1);
      user->uid = uid;
      user->pace.tokens = VA_OPEN_BURST_PER_UID;
      user->pace.refilled = g_get_monotonic_time ();
      g_queue_init (&user->held);
      g_hash_table_insert (self->users, GUINT_TO_POINTER (uid), user);
    }
  return user;
}

/* Under lock: @user is forgotten once it has no calls and its pace is
 * back to its burst (a caller with one call at a time is paced too); the
 * uids kept meanwhile are the local users', a few dozen bytes each. */
static void
user_settle (VaOpen *self, User *user)
{
  if (user->running != 0 || user->held.length != 0)
    return;
  if (user->uid != 0)
    {
      bucket_refill (&user->pace, g_get_monotonic_time (), VA_OPEN_RATE_PER_UID, VA_OPEN_BURST_PER_UID);
      if (user->pace.tokens < VA_OPEN_BURST_PER_UID)
        return;
    }
  g_hash_table_remove (self->users, GUINT_TO_POINTER (user->uid));
}

static void
sender_add (VaOpen *self, Job *job)
{
  GPtrArray *jobs = g_hash_table_lookup (self->senders, job->sender);

  if (!jobs)
    {
      jobs = g_ptr_array_new ();
      g_hash_table_insert (self->senders, g_strdup (job->sender), jobs);
    }
  g_ptr_array_add (jobs, job);
}

static void
sender_remove (VaOpen *self, Job *job)
{
  GPtrArray *jobs = g_hash_table_lookup (self->senders, job->sender);

  if (jobs)
    {
      g_ptr_array_remove_fast (jobs, job);
      if (jobs->len == 0)
        g_hash_table_remove (self->senders, job->sender);
    }
}

/* Under lock: @job takes a slot of its uid. */
static void
account_run (VaOpen *self, User *user)
{
  user->running++;
  if (user->uid != 0)
    {
      self->running++;
      user->pace.tokens -= 1;
      self->pace.tokens -= 1;
    }
}

/* Under lock: @job, held, leaves its uid's queue (to run, or to be
 * answered). */
static void
unhold (VaOpen *self, User *user, Job *job)
{
  g_queue_remove (&user->held, job);
  job->held = FALSE;
  user->held_bytes -= job->bytes;
  if (user->uid != 0)
    {
      self->held--;
      self->held_bytes -= job->bytes;
    }
  if (user->held.length == 0)
    g_queue_remove (&self->waiting, user);
}

/* Under lock: @job's slot is free again; a reply of @reply bytes is
 * charged to its uid's pace and all users' (one call more per
 * VA_OPEN_PACE_BYTES), after the fact: a uid in debt waits it out. */
static void
job_end (VaOpen *self, Job *job, gsize reply)
{
  User *user = g_hash_table_lookup (self->users, GUINT_TO_POINTER (job->uid));

  sender_remove (self, job);
  user->running--;
  if (job->uid != 0)
    {
      double charge = (double) (reply / VA_OPEN_PACE_BYTES);

      self->running--;
      user->pace.tokens -= charge;
      self->pace.tokens -= charge;
    }
  user_settle (self, user);
}

static gboolean admit_held (gpointer user_data);

/* Under lock, on any thread: a slot freed while calls are held. */
static void
schedule_admit (VaOpen *self)
{
  if (self->admit || self->waiting.length == 0)
    return;
  self->admit = g_idle_source_new ();
  g_source_set_priority (self->admit, G_PRIORITY_DEFAULT);
  g_source_set_callback (self->admit, admit_held, self, NULL);
  g_source_set_static_name (self->admit, "[va-open] admit");
  g_source_attach (self->admit, self->context);
}

/* Lowers or restores this worker thread's priority. */
static void
set_nice (int nice)
{
  nice = CLAMP (nice, -20, 19);
  if (setpriority (PRIO_PROCESS, (id_t) gettid (), nice) < 0)
    g_debug ("setting the open calls' thread priority to %d: %s", nice, g_strerror (errno));
}

/* On a worker: the reply is serialized and sent from here, so that a
 * large one (ListLeases) costs the main loop nothing. The slot is freed
 * before the answer, so that a caller's next call never finds it taken.
 * An unprivileged caller's call runs below the main loop's priority, so
 * that a flood of them does not starve VM starts; but not its answer:
 * GDBus serializes a reply holding the connection's lock, which the
 * thread that reads every incoming message (root's too) needs, and a
 * thread kept waiting at low priority under load would hold everyone's
 * messages with it (seen: 10 s for a property read while a user's
 * documents were answered). */
static void
run_job (gpointer data, gpointer user_data)
{
  Job *job = data;
  VaOpen *self = job->open;
  g_autoptr (GError) error = NULL;
  GVariant *out = NULL;
  gsize bytes = 0;
  gboolean cancelled;

  /* tests only (VDPA_ALLOCATOR_TEST_REWRITE_HOLD_MS): the job holds its
   * slot and its worker before anything, so that the calls that come
   * meanwhile find them taken whatever the machine's pace; a caller that
   * leaves meanwhile is seen below */
  if (job->hold && self->hold_us)
    g_usleep (self->hold_us);
  g_mutex_lock (&self->lock);
  cancelled = job->cancelled;
  g_mutex_unlock (&self->lock);
  if (cancelled)
    {
      g_message ("%s of %s not run: the caller left the bus", job_method (job), job->sender);
      g_set_error_literal (&error, VA_ERROR, VA_ERROR_FAILED, "the caller left the bus");
    }
  else
    {
      /* relative to the daemon's own (a unit's Nice=, a benchmark under
       * nice): an absolute 0 would raise a niced daemon's workers above
       * its main loop */
      if (job->uid != 0)
        set_nice (self->nice + 10);
      out = job->func (job->inv, job->data, &bytes, &error);
      if (job->uid != 0)
        set_nice (self->nice);
    }
  g_mutex_lock (&self->lock);
  job_end (self, job, out ? g_variant_get_size (out) : 0);
  schedule_admit (self);
  g_mutex_unlock (&self->lock);
  if (out)
    /* floating or a reference of ours (a reply shared by many calls):
     * the reply takes one of its own */
    job_return_value (job, out);
  else
    job_return_error (job, error);
  job_free (job);
  /* this thread's arena keeps what it freed otherwise */
  if (bytes > TRIM_ABOVE)
    malloc_trim (0);
}

/* On the main context: @job has its slot (accounted): its data is taken
 * now, and it goes to its workers. */
static void
start_job (VaOpen *self, Job *job)
{
  if (job->admitted)
    {
      job->admitted (g_steal_pointer (&job->data), g_steal_pointer (&job->inv));
      g_mutex_lock (&self->lock);
      job_end (self, job, 0);
      schedule_admit (self);
      g_mutex_unlock (&self->lock);
      job_free (job);
      return;
    }
  if (job->start)
    job->data = job->start (job->start_data, job->inv);
  g_thread_pool_push (job->uid == 0 ? self->root_pool : self->pool, job, NULL);
}

/* Under lock: the held calls whose uid has a slot free again (and its
 * pace), the uids in turn (one call each per round), until no slot is
 * free for any of them; added to @admitted, to be started unlocked. */
static void
admit_some (VaOpen *self, GPtrArray *admitted)
{
  guint idle = 0;

  while (self->waiting.length > 0 && idle < self->waiting.length)
    {
      User *user = g_queue_pop_head (&self->waiting);
      Job *job;

      if (!may_run (self, user))
        {
          g_queue_push_tail (&self->waiting, user);
          idle++;
          continue;
        }
      idle = 0;
      job = g_queue_peek_head (&user->held);
      g_queue_push_tail (&self->waiting, user); /* unhold() takes it off when it was its last */
      unhold (self, user, job);
      account_run (self, user);
      g_ptr_array_add (admitted, job);
    }
}

static gboolean
admit_held (gpointer user_data)
{
  VaOpen *self = user_data;
  g_autoptr (GPtrArray) admitted = g_ptr_array_new ();

  g_mutex_lock (&self->lock);
  g_clear_pointer (&self->admit, g_source_unref);
  admit_some (self, admitted);
  g_mutex_unlock (&self->lock);
  for (guint i = 0; i < admitted->len; i++)
    start_job (self, g_ptr_array_index (admitted, i));
  return G_SOURCE_REMOVE;
}

static void
answer_try_again (Job *job, const char *why)
{
  job_return_error_literal (job, VA_ERROR, VA_ERROR_TRY_AGAIN, why);
  job_free (job);
}

/* The held calls held VA_OPEN_HOLD_MS are answered TryAgain; those
 * held for their pace alone (no slot freed since) are admitted as it
 * allows. */
static gboolean
sweep (gpointer user_data)
{
  VaOpen *self = user_data;
  g_autoptr (GPtrArray) expired = g_ptr_array_new ();
  g_autoptr (GPtrArray) admitted = g_ptr_array_new ();
  gint64 oldest = g_get_monotonic_time () - (gint64) VA_OPEN_HOLD_MS * 1000;
  gboolean more;

  g_mutex_lock (&self->lock);
  for (GList *l = self->waiting.head; l;)
    {
      User *user = l->data;
      Job *job;

      l = l->next; /* unhold() may take @user off the list */
      while ((job = g_queue_peek_head (&user->held)) && job->since <= oldest)
        {
          unhold (self, user, job);
          sender_remove (self, job);
          g_ptr_array_add (expired, job);
        }
      user_settle (self, user);
    }
  admit_some (self, admitted);
  more = self->waiting.length > 0;
  if (!more)
    self->sweep_id = 0;
  g_mutex_unlock (&self->lock);
  for (guint i = 0; i < admitted->len; i++)
    start_job (self, g_ptr_array_index (admitted, i));
  for (guint i = 0; i < expired->len; i++)
    {
      Job *job = g_ptr_array_index (expired, i);
      g_autofree char *why = g_strdup_printf ("%s held %d s behind the calls of uid %u to the open methods; try again", job_method (job),
                                              VA_OPEN_HOLD_MS / 1000, job->uid);

      answer_try_again (job, why);
    }
  return more ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

VaOpen *
va_open_new (void)
{
  VaOpen *self = g_new0 (VaOpen, 1);
  /* tests only: RewriteDomain jobs that hold their workers make "calls
   * arriving while the slots are taken" the test's choice, not the
   * machine's pace (docs/test-tiers.md) */
  const char *hold = g_getenv ("VDPA_ALLOCATOR_TEST_REWRITE_HOLD_MS");
  guint64 hold_ms = 0;

  if (hold && g_ascii_string_to_unsigned (hold, 10, 0, 60000, &hold_ms, NULL))
    self->hold_us = (gulong) hold_ms * 1000;
  errno = 0;
  self->nice = getpriority (PRIO_PROCESS, 0);
  if (self->nice == -1 && errno != 0)
    self->nice = 0;
  self->pace.tokens = VA_OPEN_BURST_ALL;
  self->pace.refilled = g_get_monotonic_time ();
  g_mutex_init (&self->lock);
  self->context = g_main_context_ref_thread_default ();
  self->senders = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_ptr_array_unref);
  self->users = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g_queue_init (&self->waiting);
  self->pool = g_thread_pool_new (run_job, self, VA_OPEN_THREADS, FALSE, NULL);
  self->root_pool = g_thread_pool_new (run_job, self, VA_OPEN_THREADS, FALSE, NULL);
  return self;
}

void
va_open_free (VaOpen *self)
{
  g_autoptr (GPtrArray) held = NULL;
  GHashTableIter iter;
  User *user;

  if (!self)
    return;
  /* nothing held is admitted from now on: answered at the end */
  held = g_ptr_array_new ();
  g_mutex_lock (&self->lock);
  g_hash_table_iter_init (&iter, self->users);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &user))
    {
      Job *job;

      while ((job = g_queue_peek_head (&user->held)))
        {
          unhold (self, user, job);
          sender_remove (self, job);
          g_ptr_array_add (held, job);
        }
    }
  g_mutex_unlock (&self->lock);
  /* the jobs still queued run (cancelled ones quickly) and are answered */
  g_thread_pool_free (self->pool, FALSE, TRUE);
  g_thread_pool_free (self->root_pool, FALSE, TRUE);
  for (guint i = 0; i < held->len; i++)
    answer_try_again (g_ptr_array_index (held, i), "the daemon is stopping; try again");
  if (self->admit)
    {
      g_source_destroy (self->admit);
      g_source_unref (self->admit);
    }
  g_clear_handle_id (&self->sweep_id, g_source_remove);
  g_hash_table_unref (self->senders);
  g_hash_table_unref (self->users);
  g_main_context_unref (self->context);
  g_mutex_clear (&self->lock);
  g_free (self);
}

/* @job (its call, what it runs and its sender) is run, held or answered
 * TryAgain. */
static void
submit (VaOpen *self, Job *job)
{
  const char *method = job_method (job);
  g_autofree char *full = NULL;
  gsize bytes = job->bytes;
  guint32 uid = job->uid;
  gboolean run = FALSE;
  User *user;

  g_mutex_lock (&self->lock);
  user = user_get (self, uid);
  /* first come, first served: behind its uid's held calls */
  if (user->held.length == 0 && may_run (self, user))
    run = TRUE;
  else if (user->held.length >= VA_OPEN_HOLD_PER_UID || user->held_bytes + bytes > VA_OPEN_HOLD_BYTES_PER_UID)
    full = g_strdup_printf ("%u calls of uid %u to %s and the other open methods are in progress and %u (%" G_GSIZE_FORMAT
                            " KiB) wait already; try again",
                            user->running, uid, method, user->held.length, user->held_bytes / 1024);
  else if (uid != 0 && (self->held >= VA_OPEN_HOLD_ALL || self->held_bytes + bytes > VA_OPEN_HOLD_BYTES_ALL))
    full = g_strdup_printf ("%u calls of unprivileged users to %s and the other open methods are in progress and %u (%" G_GSIZE_FORMAT
                            " KiB) wait already; try again",
                            self->running, method, self->held, self->held_bytes / 1024);
  if (full)
    {
      user_settle (self, user);
      g_mutex_unlock (&self->lock);
      answer_try_again (job, full);
      return;
    }
  job->since = g_get_monotonic_time ();
  sender_add (self, job);
  if (run)
    account_run (self, user);
  else
    {
      job->held = TRUE;
      g_queue_push_tail (&user->held, job);
      user->held_bytes += bytes;
      if (uid != 0)
        {
          self->held++;
          self->held_bytes += bytes;
        }
      if (user->held.length == 1)
        g_queue_push_tail (&self->waiting, user);
      /* a slot may have freed since the last admission */
      schedule_admit (self);
    }
  g_mutex_unlock (&self->lock);
  if (run)
    start_job (self, job);
  else if (!self->sweep_id)
    self->sweep_id = g_timeout_add_full (G_PRIORITY_DEFAULT, SWEEP_MS, sweep, self, NULL);
}

static Job *
job_new (VaOpen *self, guint32 uid, const char *sender, gsize bytes, VaOpenFunc func)
{
  Job *job = g_new0 (Job, 1);

  job->open = self;
  job->uid = uid;
  job->sender = g_strdup (sender ? sender : "");
  job->bytes = bytes;
  job->func = func;
  return job;
}

static void
submit_invocation (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenStart start, gpointer start_data, VaOpenFunc func,
                   GDestroyNotify data_free, gboolean hold)
{
  Job *job;

  g_return_if_fail (self != NULL);
  g_return_if_fail (G_IS_DBUS_METHOD_INVOCATION (inv));
  g_return_if_fail (func != NULL);

  job = job_new (self, uid, g_dbus_method_invocation_get_sender (inv), g_variant_get_size (g_dbus_method_invocation_get_parameters (inv)),
                 func);
  job->inv = inv; /* the method handler's: answering consumes it */
  job->start = start;
  job->start_data = start_data;
  job->data_free = data_free;
  job->hold = hold;
  submit (self, job);
}

void
va_open_submit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenStart start, gpointer start_data, VaOpenFunc func,
                GDestroyNotify data_free)
{
  submit_invocation (self, inv, uid, start, start_data, func, data_free, FALSE);
}

void
va_open_admit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenAdmitted func, gpointer data, GDestroyNotify data_free)
{
  Job *job;

  g_return_if_fail (self != NULL);
  g_return_if_fail (G_IS_DBUS_METHOD_INVOCATION (inv));
  g_return_if_fail (func != NULL);

  job = job_new (self, uid, g_dbus_method_invocation_get_sender (inv), g_variant_get_size (g_dbus_method_invocation_get_parameters (inv)),
                 NULL);
  job->inv = inv;
  job->admitted = func;
  job->data = data;
  job->data_free = data_free;
  submit (self, job);
}

void
va_open_submit_message (VaOpen *self, GDBusConnection *conn, GDBusMessage *msg, guint32 uid, VaOpenFunc func, gpointer data,
                        GDestroyNotify data_free)
{
  GVariant *body;
  Job *job;

  g_return_if_fail (self != NULL);
  g_return_if_fail (G_IS_DBUS_CONNECTION (conn));
  g_return_if_fail (G_IS_DBUS_MESSAGE (msg));
  g_return_if_fail (func != NULL);

  body = g_dbus_message_get_body (msg);
  job = job_new (self, uid, g_dbus_message_get_sender (msg), body ? g_variant_get_size (body) : 0, func);
  job->conn = g_object_ref (conn);
  job->msg = g_object_ref (msg);
  job->data = data;
  job->data_free = data_free;
  submit (self, job);
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

static gpointer
host_view (gpointer alloc, GDBusMethodInvocation *inv)
{
  return va_allocator_get_host_view (alloc);
}

void
va_open_submit_rewrite (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaAllocator *alloc)
{
  g_return_if_fail (VA_IS_ALLOCATOR (alloc));

  submit_invocation (self, inv, uid, host_view, alloc, rewrite, (GDestroyNotify) va_host_view_unref, TRUE);
}

void
va_open_sender_gone (VaOpen *self, const char *sender)
{
  g_autoptr (GPtrArray) dropped = g_ptr_array_new ();
  GPtrArray *jobs;

  g_return_if_fail (self != NULL);
  g_return_if_fail (sender != NULL);

  g_mutex_lock (&self->lock);
  jobs = g_hash_table_lookup (self->senders, sender);
  for (guint i = 0; jobs && i < jobs->len;)
    {
      Job *job = g_ptr_array_index (jobs, i);

      if (job->held)
        {
          User *user = g_hash_table_lookup (self->users, GUINT_TO_POINTER (job->uid));

          unhold (self, user, job);
          user_settle (self, user);
          g_ptr_array_remove_index_fast (jobs, i);
          g_ptr_array_add (dropped, job);
          continue;
        }
      job->cancelled = TRUE;
      i++;
    }
  if (jobs && jobs->len == 0)
    g_hash_table_remove (self->senders, sender);
  g_mutex_unlock (&self->lock);
  for (guint i = 0; i < dropped->len; i++)
    {
      Job *job = g_ptr_array_index (dropped, i);

      g_message ("%s of %s not run: the caller left the bus", job_method (job), job->sender);
      job_return_error_literal (job, VA_ERROR, VA_ERROR_FAILED, "the caller left the bus");
      job_free (job);
    }
}
