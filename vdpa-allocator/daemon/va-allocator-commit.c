/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator-commit"

#include "config.h"

#include "va-allocator-private.h"

/* One queued operation of the store, and the entries it settles. */
struct _Pending
{
  PendingKind kind;
  VaStoreOp *op;
  GPtrArray *keys; /* char*, the entries it settles */
  GTask *task;
};

void
va_allocator_pending_free (Pending *p)
{
  g_clear_pointer (&p->op, va_store_op_unref);
  g_clear_pointer (&p->keys, g_ptr_array_unref);
  g_clear_object (&p->task);
  g_free (p);
}

/* ---- the batch ----------------------------------------------------------- */

static gboolean commit_idle (gpointer user_data);

static void
schedule_commit (VaAllocator *self)
{
  /* at idle priority: after every request already received this turn */
  if (!self->commit_source)
    self->commit_source = g_idle_add (commit_idle, self);
}

void
va_allocator_queue_pending (VaAllocator *self, PendingKind kind, VaStoreOp *op, GPtrArray *keys, GTask *task)
{
  Pending *p = g_new0 (Pending, 1);

  p->kind = kind;
  p->op = op;
  p->keys = keys;
  p->task = task ? g_object_ref (task) : NULL;
  g_ptr_array_add (self->pending, p);
  schedule_commit (self);
}

static void
tear_down (VaAllocator *self, Entry *e, gboolean domain_gone)
{
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, e->lease->pool);
  g_autoptr (GError) error = NULL;

  va_allocator_remove_port_link (self, e->lease->uuid, e->lease->mac, domain_gone);
  /* A device that will not go is an orphan for reconciliation: the lease
   * is gone from the store either way. */
  if (e->lease->software)
    {
      /* its device, relay and tap; a failure leaves an orphan, said once */
      if (!va_backend_destroy_software (self->backend, e->lease->device, &error))
        g_warning ("%s: %s", e->key, error->message);
    }
  else if (*e->lease->device && !va_backend_destroy_device (self->backend, e->lease->slot, e->lease->device, pc, &error))
    g_debug ("%s: %s", e->key, error->message);
  /* a switchdev sriov VF's representor leaves the bridge with its lease */
  g_clear_error (&error);
  if (e->lease->sriov && va_pool_config_representor_vlan (pc) && !va_backend_detach_vf (self->backend, e->lease->slot, pc, &error))
    g_warning ("%s: %s", e->key, error->message);
  /* a lease broken since start-up holds no slot: NOT_FOUND, ignored */
  va_pools_release (self->pools, e->lease->uuid, e->lease->mac, NULL);
}

/* Waiters of an insert are Allocates, answered with the lease; waiters of
 * a delete are Releases. An entry has waiters of one kind only: Release
 * commits a pending insert before it waits. */
static void
answer_waiters (Entry *e, const GError *error, gboolean with_lease)
{
  g_autoptr (GPtrArray) waiters = g_steal_pointer (&e->waiters);

  for (guint i = 0; waiters && i < waiters->len; i++)
    {
      GTask *task = g_ptr_array_index (waiters, i);
      if (error)
        g_task_return_error (task, g_error_copy (error));
      else if (with_lease)
        g_task_return_pointer (task, va_lease_copy (e->lease), (GDestroyNotify) va_lease_free);
      else
        g_task_return_boolean (task, TRUE);
    }
}

static void
settle_insert (VaAllocator *self, Pending *p)
{
  const char *key = g_ptr_array_index (p->keys, 0);
  Entry *e = va_allocator_lookup_entry (self, key);
  g_autoptr (GError) error = NULL;
  g_autofree char *pool = g_strdup (e->lease->pool);

  if (!va_store_op_propagate_error (p->op, &error))
    {
      g_prefix_error (&error, "recording the lease: ");
      tear_down (self, e, FALSE);
      answer_waiters (e, error, TRUE);
      va_allocator_remove_entry (self, key);
      return;
    }
  e->state = ENTRY_COMMITTED;
  e->lease->created = va_store_op_get_lease (p->op)->created;
  answer_waiters (e, NULL, TRUE);
  g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_ADDED], 0, e->lease);
  va_allocator_check_watermark (self, pool);
}

static void
settle_delete (VaAllocator *self, Pending *p)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = va_store_op_propagate_error (p->op, &error);

  for (guint i = 0; i < p->keys->len; i++)
    {
      const char *key = g_ptr_array_index (p->keys, i);
      Entry *e = va_allocator_lookup_entry (self, key);
      g_autofree char *pool = NULL;

      if (!e)
        continue;
      if (!ok)
        {
          e->state = ENTRY_COMMITTED;
          answer_waiters (e, error, FALSE);
          continue;
        }
      pool = g_strdup (e->lease->pool);
      tear_down (self, e, p->kind == PENDING_DELETE_DOMAIN);
      answer_waiters (e, NULL, FALSE);
      g_signal_emit (self, va_allocator_signals[SIGNAL_LEASE_REMOVED], 0, e->lease);
      va_allocator_remove_entry (self, key);
      va_allocator_check_watermark (self, pool);
    }
  if (p->task)
    {
      if (!ok)
        g_task_return_error (p->task, g_steal_pointer (&error));
      else
        g_task_return_int (p->task, p->keys->len);
    }
}

/* A batch on its way to disk: the store's operations and our Pending
 * records for them. The worker sets @finished under the allocator's lock. */
struct _Job
{
  GPtrArray *ops;   /* VaStoreOp* */
  GPtrArray *batch; /* Pending*; NULL once settled */
  gboolean ok;
  GError *error;
  gboolean finished;
};

static void
job_free (Job *job)
{
  g_clear_pointer (&job->ops, g_ptr_array_unref);
  g_clear_pointer (&job->batch, g_ptr_array_unref);
  g_clear_error (&job->error);
  g_free (job);
}

static void
settle (VaAllocator *self, Job *job)
{
  g_autoptr (GPtrArray) batch = g_steal_pointer (&job->batch);

  /* Each operation carries the transaction's error when it failed whole. */
  for (guint i = 0; i < batch->len; i++)
    {
      Pending *p = g_ptr_array_index (batch, i);
      if (p->kind == PENDING_INSERT)
        settle_insert (self, p);
      else
        settle_delete (self, p);
    }
  if (!job->ok)
    g_warning ("committing leases: %s", job->error->message);
  g_signal_emit (self, va_allocator_signals[SIGNAL_POOLS_CHANGED], 0);
}

/* Waits for the batch on its way to disk, if any, and settles it. */
void
va_allocator_finish_inflight (VaAllocator *self)
{
  Job *job = self->inflight;

  if (!job)
    return;
  g_mutex_lock (&self->lock);
  while (!job->finished)
    g_cond_wait (&self->cond, &self->lock);
  g_mutex_unlock (&self->lock);
  self->inflight = NULL;
  settle (self, job);
}

static void
commit_in_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VaAllocator *self = source;
  Job *job = data;

  job->ok = va_store_commit_batch (self->store, job->ops, &job->error);
  g_mutex_lock (&self->lock);
  job->finished = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  g_task_return_boolean (task, TRUE);
}

static void
committed (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VaAllocator *self = VA_ALLOCATOR (source);
  Job *job = g_task_get_task_data (G_TASK (res));

  /* va_allocator_finish_inflight() may have settled it already */
  if (self->inflight == job)
    {
      self->inflight = NULL;
      settle (self, job);
    }
  if (self->pending->len)
    schedule_commit (self);
}

static Job *
take_job (VaAllocator *self)
{
  Job *job;

  if (self->pending->len == 0)
    return NULL;
  job = g_new0 (Job, 1);
  job->batch = g_steal_pointer (&self->pending);
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) va_allocator_pending_free);
  job->ops = va_store_take_batch (self->store);
  if (!job->ops)
    job->ops = g_ptr_array_new ();
  return job;
}

gboolean
va_allocator_commit_now (VaAllocator *self, GError **error)
{
  Job *job;
  gboolean ok;

  g_clear_handle_id (&self->commit_source, g_source_remove);
  va_allocator_finish_inflight (self);
  job = take_job (self);
  if (!job)
    return TRUE;
  job->ok = va_store_commit_batch (self->store, job->ops, &job->error);
  job->finished = TRUE;
  ok = job->ok;
  if (!ok && error)
    *error = g_error_copy (job->error);
  settle (self, job);
  job_free (job);
  return ok;
}

/* Group commit: while one batch is on its way to disk, requests gather for
 * the next, so the batch grows with the load and the cost of a flush is
 * shared by all who came during the one before. */
static gboolean
commit_idle (gpointer user_data)
{
  VaAllocator *self = user_data;
  g_autoptr (GTask) task = NULL;
  Job *job;

  self->commit_source = 0;
  if (self->inflight)
    return G_SOURCE_REMOVE; /* committed() comes back for the rest */
  job = take_job (self);
  if (!job)
    return G_SOURCE_REMOVE;
  self->inflight = job;
  task = g_task_new (self, NULL, committed, NULL);
  g_task_set_task_data (task, job, (GDestroyNotify) job_free);
  g_task_run_in_thread (task, commit_in_thread);
  return G_SOURCE_REMOVE;
}
