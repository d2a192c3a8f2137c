/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-allocator"

#include "config.h"

#include "va-allocator.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "va-error.h"
#include "va-paths.h"
#include "va-pool.h"

/* A lease of an inactive domain younger than this is not reconciled away:
 * it may belong to a start in progress (prepare runs before the domain is
 * active). */
#define RECONCILE_GRACE_SECONDS 60

typedef enum
{
  ENTRY_PENDING,   /* provisioned, insert queued */
  ENTRY_COMMITTED, /* in the store */
  ENTRY_RELEASING, /* delete queued */
} EntryState;

typedef struct
{
  char *key; /* "uuid/mac" */
  VaLease *lease;
  EntryState state;
  gboolean broken;     /* its slot is not on this host now */
  char *broken_reason; /* why, while broken */
  GPtrArray *waiters;  /* GTask*, answered when the queued operation is done */
} Entry;

typedef struct _Job Job;

typedef enum
{
  PENDING_INSERT,
  PENDING_DELETE,
  PENDING_DELETE_DOMAIN,
} PendingKind;

typedef struct
{
  PendingKind kind;
  VaStoreOp *op;
  GPtrArray *keys; /* char*, the entries it settles */
  GTask *task;
} Pending;

struct _VaAllocator
{
  GObject parent;

  VaConfig *config;
  VaBackend *backend;
  VaStore *store;
  char *run_dir;
  char *ports_dir;
  VaHostView *view; /* networks and pools, capacity unlimited: pools decide */
  VaPools *pools;
  GHashTable *entries; /* key → Entry* */
  GPtrArray *pending;  /* Pending* */
  guint commit_source;
  Job *inflight; /* the batch a worker thread is writing, or NULL */
  GMutex lock;
  GCond cond;
  GHashTable *below_watermark; /* pool names */
  VaDomainLister lister;
  gpointer lister_data;
  GHashTable *pf_states; /* PCI address → PfState*, the PFs in pools */
  gulong pfs_changed_id;
};

/* What the allocator remembers of a PF in a pool between discoveries. */
typedef struct
{
  gboolean gone;
  gboolean healthy;
  char *reason;        /* current health reason; NULL when healthy */
  char *prepare_error; /* why prepare_pf failed when it last ran, or NULL */
} PfState;

enum
{
  SIGNAL_LEASE_ADDED,
  SIGNAL_LEASE_REMOVED,
  SIGNAL_LOW_WATERMARK,
  SIGNAL_POOLS_CHANGED,
  SIGNAL_PF_EVENT,
  SIGNAL_LEASE_BROKEN,
  SIGNAL_LEASE_REPAIRED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

G_DEFINE_TYPE (VaAllocator, va_allocator, G_TYPE_OBJECT)

static void
entry_free (Entry *e)
{
  g_free (e->key);
  g_free (e->broken_reason);
  va_lease_free (e->lease);
  g_clear_pointer (&e->waiters, g_ptr_array_unref);
  g_free (e);
}

static void
pf_state_free (PfState *st)
{
  g_free (st->reason);
  g_free (st->prepare_error);
  g_free (st);
}

static void
pending_free (Pending *p)
{
  g_clear_pointer (&p->op, va_store_op_unref);
  g_clear_pointer (&p->keys, g_ptr_array_unref);
  g_clear_object (&p->task);
  g_free (p);
}

void
va_pool_status_free (VaPoolStatus *status)
{
  if (!status)
    return;
  g_free (status->name);
  g_free (status->health_reason);
  g_free (status);
}

void
va_reconcile_report_free (VaReconcileReport *report)
{
  if (!report)
    return;
  g_ptr_array_unref (report->orphans);
  g_ptr_array_unref (report->busy);
  g_ptr_array_unref (report->missing);
  g_ptr_array_unref (report->stale_links);
  g_free (report->libvirt_error);
  g_free (report);
}

static char *
make_key (const char *uuid, const char *mac)
{
  return g_strconcat (uuid, "/", mac, NULL);
}

/* ---- port links ---------------------------------------------------------- */

/* RUN/ports/UUID/MAC → chardev, replaced atomically. */
static gboolean
make_port_link (VaAllocator *self, const VaLease *lease, GError **error)
{
  g_autofree char *dir = va_port_dir (self->ports_dir, lease->uuid);
  g_autofree char *tmp = g_strdup_printf ("%s.tmp", lease->port);
  g_autofree char *cur = g_file_read_link (lease->port, NULL);

  if (g_strcmp0 (cur, lease->chardev) == 0)
    return TRUE;
  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "creating %s: %s", dir, g_strerror (errno));
      return FALSE;
    }
  g_unlink (tmp);
  if (symlink (lease->chardev, tmp) < 0 || rename (tmp, lease->port) < 0)
    {
      int err = errno;
      g_unlink (tmp);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "linking %s to %s: %s", lease->port, lease->chardev, g_strerror (err));
      return FALSE;
    }
  return TRUE;
}

static void
remove_port_link (VaAllocator *self, const char *uuid, const char *mac, gboolean domain_gone)
{
  g_autofree char *dir = va_port_dir (self->ports_dir, uuid);
  g_autofree char *link = va_port_path (self->ports_dir, uuid, mac);

  g_unlink (link);
  /* The directory stays while the domain runs: on a file system mounted
   * with discard, every freed block is a synchronous trim. */
  if (domain_gone)
    g_rmdir (dir); /* only when empty */
}

/* ---- signals and counts -------------------------------------------------- */

static void
check_watermark (VaAllocator *self, const char *pool)
{
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, pool);
  VaPoolCounts counts;

  if (!pc || pc->low_watermark == 0 || !va_pools_get_counts (self->pools, pool, &counts, NULL))
    return;
  if (counts.usable < pc->low_watermark)
    {
      if (!g_hash_table_contains (self->below_watermark, pool))
        {
          g_hash_table_add (self->below_watermark, g_strdup (pool));
          g_signal_emit (self, signals[SIGNAL_LOW_WATERMARK], 0, pool, counts.usable);
        }
    }
  else
    g_hash_table_remove (self->below_watermark, pool);
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

static void
tear_down (VaAllocator *self, Entry *e, gboolean domain_gone)
{
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, e->lease->pool);
  g_autoptr (GError) error = NULL;

  remove_port_link (self, e->lease->uuid, e->lease->mac, domain_gone);
  /* A device that will not go is an orphan for reconciliation: the lease
   * is gone from the store either way. */
  if (*e->lease->device && !va_backend_destroy_device (self->backend, e->lease->slot, e->lease->device, pc, &error))
    g_debug ("%s: %s", e->key, error->message);
  /* a lease broken since start-up holds no slot: NOT_FOUND, ignored */
  va_pools_release (self->pools, e->lease->uuid, e->lease->mac, NULL);
}

static void
answer_waiters (Entry *e, const GError *error)
{
  g_autoptr (GPtrArray) waiters = g_steal_pointer (&e->waiters);

  for (guint i = 0; waiters && i < waiters->len; i++)
    {
      GTask *task = g_ptr_array_index (waiters, i);
      if (error)
        g_task_return_error (task, g_error_copy (error));
      else if (g_task_get_source_tag (task) == va_allocator_allocate_async)
        g_task_return_pointer (task, va_lease_copy (e->lease), (GDestroyNotify) va_lease_free);
      else
        g_task_return_boolean (task, TRUE);
    }
}

static void
settle_insert (VaAllocator *self, Pending *p)
{
  const char *key = g_ptr_array_index (p->keys, 0);
  Entry *e = g_hash_table_lookup (self->entries, key);
  g_autoptr (GError) error = NULL;
  g_autofree char *pool = g_strdup (e->lease->pool);

  if (!va_store_op_propagate_error (p->op, &error))
    {
      g_prefix_error (&error, "recording the lease: ");
      tear_down (self, e, FALSE);
      answer_waiters (e, error);
      g_hash_table_remove (self->entries, key);
      return;
    }
  e->state = ENTRY_COMMITTED;
  e->lease->created = va_store_op_get_lease (p->op)->created;
  answer_waiters (e, NULL);
  g_signal_emit (self, signals[SIGNAL_LEASE_ADDED], 0, e->lease);
  check_watermark (self, pool);
}

static void
settle_delete (VaAllocator *self, Pending *p)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = va_store_op_propagate_error (p->op, &error);

  for (guint i = 0; i < p->keys->len; i++)
    {
      const char *key = g_ptr_array_index (p->keys, i);
      Entry *e = g_hash_table_lookup (self->entries, key);
      g_autofree char *pool = NULL;

      if (!e)
        continue;
      if (!ok)
        {
          e->state = ENTRY_COMMITTED;
          answer_waiters (e, error);
          continue;
        }
      pool = g_strdup (e->lease->pool);
      tear_down (self, e, p->kind == PENDING_DELETE_DOMAIN);
      answer_waiters (e, NULL);
      g_signal_emit (self, signals[SIGNAL_LEASE_REMOVED], 0, e->lease);
      g_hash_table_remove (self->entries, key);
      check_watermark (self, pool);
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
  g_signal_emit (self, signals[SIGNAL_POOLS_CHANGED], 0);
}

/* Waits for the batch on its way to disk, if any, and settles it. */
static void
finish_inflight (VaAllocator *self)
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

  /* finish_inflight() may have settled it already */
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
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) pending_free);
  job->ops = va_store_take_batch (self->store);
  if (!job->ops)
    job->ops = g_ptr_array_new ();
  return job;
}

/* Commits everything queued now, in this thread, after the batch in flight. */
static gboolean
commit_now (VaAllocator *self, GError **error)
{
  Job *job;
  gboolean ok;

  g_clear_handle_id (&self->commit_source, g_source_remove);
  finish_inflight (self);
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

gboolean
va_allocator_flush (VaAllocator *self, GError **error)
{
  return commit_now (self, error);
}

/* ---- allocate ------------------------------------------------------------ */

static gboolean
check_request (const VaAllocRequest *req, char uuid[VA_UUID_STRING_LEN], char mac[VA_MAC_STRING_LEN], GError **error)
{
  if (!req->uuid || !va_uuid_normalize (req->uuid, uuid))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a domain UUID", req->uuid ? req->uuid : "");
      return FALSE;
    }
  if (!req->mac || !va_mac_normalize (req->mac, mac))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a unicast MAC address", req->mac ? req->mac : "");
      return FALSE;
    }
  if (req->domain_name && (strlen (req->domain_name) > VA_STORE_MAX_DOMAIN_NAME || !g_utf8_validate (req->domain_name, -1, NULL)))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "domain name is over %d bytes", VA_STORE_MAX_DOMAIN_NAME);
      return FALSE;
    }
  if (req->network && *req->network && !va_name_is_valid (req->network))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a network name", req->network);
      return FALSE;
    }
  if (req->pool && *req->pool && !va_name_is_valid (req->pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a pool name", req->pool);
      return FALSE;
    }
  if ((!req->network || !*req->network) && (!req->pool || !*req->pool))
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "name a network, or a pool inline");
      return FALSE;
    }
  if (req->network && *req->network && req->pool && *req->pool)
    {
      g_set_error_literal (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "name a network or a pool, not both");
      return FALSE;
    }
  if (req->vlan > VA_VLAN_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "VLAN %u is outside %d..%d", req->vlan, VA_VLAN_MIN, VA_VLAN_MAX);
      return FALSE;
    }
  if (req->queues > VA_QUEUES_MAX)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%u queues is outside %d..%d", req->queues, VA_QUEUES_MIN, VA_QUEUES_MAX);
      return FALSE;
    }
  if (req->mtu && (req->mtu < VA_MTU_MIN || req->mtu > VA_MTU_MAX))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "MTU %u is outside %d..%d", req->mtu, VA_MTU_MIN, VA_MTU_MAX);
      return FALSE;
    }
  return TRUE;
}

static VaLease *
provision (VaAllocator *self, const VaAllocRequest *req, const char *uuid, const char *mac, GError **error)
{
  VaNic nic = { 0 };
  VaNicPlan plan;
  VaPoolRequest preq = { 0 };
  VaDeviceRequest dreq = { 0 };
  const VaPoolConfig *pc;
  const VaSlot *slot;
  gboolean existed = FALSE;
  g_autoptr (VaDeviceInfo) dev = NULL;
  g_autoptr (VaLease) lease = NULL;

  nic.mac = (char *) mac;
  nic.network = (req->network && *req->network) ? (char *) req->network : NULL;
  nic.pool = nic.network ? NULL : (char *) req->pool;
  nic.vlan = nic.network ? 0 : req->vlan;
  nic.queues = req->queues;
  if (!va_nic_resolve (&nic, self->view, &plan, error))
    return NULL;
  if (!plan.pool)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "network '%s' is virtio only: it has nothing to allocate", nic.network);
      return NULL;
    }
  pc = va_config_lookup_pool (self->config, plan.pool);

  preq.uuid = uuid;
  preq.mac = mac;
  preq.pool = plan.pool;
  preq.network = nic.network;
  preq.numa_node = req->numa_node;
  slot = va_pools_allocate (self->pools, &preq, &existed, error);
  if (!slot)
    return NULL;

  dreq.slot = va_slot_get_address (slot);
  dreq.pf = va_slot_get_pf (slot);
  dreq.mac = mac;
  dreq.queues = plan.queues;
  dreq.mtu = req->mtu ? req->mtu : (pc ? pc->mtu : 0);
  dreq.vlan = plan.vlan;
  dreq.pool = pc;
  dev = va_backend_create_device (self->backend, &dreq, error);
  if (!dev)
    {
      va_pools_release (self->pools, uuid, mac, NULL);
      g_prefix_error (error, "pool '%s': ", plan.pool);
      return NULL;
    }

  lease = va_lease_new ();
  lease->uuid = g_strdup (uuid);
  lease->domain_name = g_strdup (req->domain_name ? req->domain_name : "");
  lease->mac = g_strdup (mac);
  lease->network = g_strdup (nic.network ? nic.network : "");
  lease->pool = g_strdup (plan.pool);
  lease->slot = g_strdup (dev->slot);
  lease->device = g_strdup (dev->name);
  lease->chardev = g_strdup (dev->chardev);
  lease->port = va_port_path (self->ports_dir, uuid, mac);
  lease->vlan = plan.vlan;
  lease->queues = plan.queues;

  if (!make_port_link (self, lease, error))
    {
      va_backend_destroy_device (self->backend, dev->slot, dev->name, pc, NULL);
      va_pools_release (self->pools, uuid, mac, NULL);
      return NULL;
    }
  return g_steal_pointer (&lease);
}

void
va_allocator_allocate_async (VaAllocator *self, const VaAllocRequest *req, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (self, NULL, callback, user_data);
  g_autoptr (GError) error = NULL;
  g_autofree char *key = NULL;
  char uuid[VA_UUID_STRING_LEN], mac[VA_MAC_STRING_LEN];
  Entry *e;
  VaLease *lease;
  Pending *p;

  g_task_set_source_tag (task, va_allocator_allocate_async);
  if (!check_request (req, uuid, mac, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  key = make_key (uuid, mac);
  e = g_hash_table_lookup (self->entries, key);
  if (e)
    {
      switch (e->state)
        {
          case ENTRY_COMMITTED:
            /* idempotent: the same NIC gets its lease back */
            if (!e->broken && !make_port_link (self, e->lease, &error))
              {
                g_task_return_error (task, g_steal_pointer (&error));
                return;
              }
            g_task_return_pointer (task, va_lease_copy (e->lease), (GDestroyNotify) va_lease_free);
            return;
          case ENTRY_PENDING:
            g_ptr_array_add (e->waiters, g_steal_pointer (&task));
            return;
          case ENTRY_RELEASING:
            g_task_return_new_error (task, VA_ERROR, VA_ERROR_BUSY, "NIC %s of domain %s is being released", mac, uuid);
            return;
        }
    }

  lease = provision (self, req, uuid, mac, &error);
  if (!lease)
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  e = g_new0 (Entry, 1);
  e->key = g_steal_pointer (&key);
  e->lease = lease;
  e->state = ENTRY_PENDING;
  e->waiters = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (e->waiters, g_steal_pointer (&task));
  g_hash_table_insert (self->entries, e->key, e);

  p = g_new0 (Pending, 1);
  p->kind = PENDING_INSERT;
  p->op = va_store_queue_insert (self->store, lease);
  p->keys = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (p->keys, g_strdup (e->key));
  g_ptr_array_add (self->pending, p);
  schedule_commit (self);
}

VaLease *
va_allocator_allocate_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- release ------------------------------------------------------------- */

/* Whether a process (a guest's QEMU) holds the lease's device open. Then
 * it must not go: the kernel's vdpa DEV_DEL waits until the node is closed
 * (vhost_vdpa_remove), and the daemon with it. */
static gboolean
in_use (VaAllocator *self, const Entry *e, GError **error)
{
  if (e->broken || !*e->lease->chardev || !va_backend_device_busy (self->backend, e->lease->chardev))
    return FALSE;
  g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "NIC %s of domain %s: its device %s (%s) is open: a guest runs on it; stop the domain first",
               e->lease->mac, e->lease->uuid, e->lease->device, e->lease->chardev);
  return TRUE;
}

static gboolean
check_uuid (const char *in, char uuid[VA_UUID_STRING_LEN], GError **error)
{
  if (!in || !va_uuid_normalize (in, uuid))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a domain UUID", in ? in : "");
      return FALSE;
    }
  return TRUE;
}

void
va_allocator_release_async (VaAllocator *self, const char *in_uuid, const char *in_mac, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (self, NULL, callback, user_data);
  g_autoptr (GError) error = NULL;
  g_autofree char *key = NULL;
  char uuid[VA_UUID_STRING_LEN], mac[VA_MAC_STRING_LEN];
  Entry *e;
  Pending *p;

  g_task_set_source_tag (task, va_allocator_release_async);
  if (!check_uuid (in_uuid, uuid, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  if (!in_mac || !va_mac_normalize (in_mac, mac))
    {
      g_task_return_new_error (task, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a unicast MAC address", in_mac ? in_mac : "");
      return;
    }

  key = make_key (uuid, mac);
  e = g_hash_table_lookup (self->entries, key);
  if (e && e->state == ENTRY_PENDING && !commit_now (self, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  e = g_hash_table_lookup (self->entries, key);
  if (!e)
    {
      /* idempotent; a stale link from before a crash goes too */
      remove_port_link (self, uuid, mac, FALSE);
      g_task_return_boolean (task, TRUE);
      return;
    }
  if (e->state == ENTRY_RELEASING)
    {
      g_ptr_array_add (e->waiters, g_steal_pointer (&task));
      return;
    }
  if (in_use (self, e, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }

  e->state = ENTRY_RELEASING;
  e->waiters = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (e->waiters, g_steal_pointer (&task));
  p = g_new0 (Pending, 1);
  p->kind = PENDING_DELETE;
  p->op = va_store_queue_delete (self->store, uuid, mac);
  p->keys = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (p->keys, g_steal_pointer (&key));
  g_ptr_array_add (self->pending, p);
  schedule_commit (self);
}

gboolean
va_allocator_release_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

static gboolean
has_pending_of (VaAllocator *self, const char *uuid)
{
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_COMMITTED && strcmp (e->lease->uuid, uuid) == 0)
      return TRUE;
  return FALSE;
}

/* Queues the deletion of every lease of @uuid; NULL task: settled quietly. */
static gboolean
queue_release_domain (VaAllocator *self, const char *uuid, GTask *task, GError **error)
{
  GHashTableIter iter;
  Entry *e;
  Pending *p;

  if (has_pending_of (self, uuid) && !commit_now (self, error))
    return FALSE;
  /* all or nothing: no lease of a domain whose guest still runs */
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (strcmp (e->lease->uuid, uuid) == 0 && in_use (self, e, error))
      return FALSE;

  p = g_new0 (Pending, 1);
  p->kind = PENDING_DELETE_DOMAIN;
  p->keys = g_ptr_array_new_with_free_func (g_free);
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (strcmp (e->lease->uuid, uuid) == 0)
      {
        e->state = ENTRY_RELEASING;
        g_ptr_array_add (p->keys, g_strdup (e->key));
      }
  p->op = va_store_queue_delete_domain (self->store, uuid);
  p->task = task ? g_object_ref (task) : NULL;
  g_ptr_array_add (self->pending, p);
  schedule_commit (self);
  return TRUE;
}

void
va_allocator_release_domain_async (VaAllocator *self, const char *in_uuid, GAsyncReadyCallback callback, gpointer user_data)
{
  g_autoptr (GTask) task = g_task_new (self, NULL, callback, user_data);
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  char uuid[VA_UUID_STRING_LEN];

  g_task_set_source_tag (task, va_allocator_release_domain_async);
  if (!check_uuid (in_uuid, uuid, &error) || !queue_release_domain (self, uuid, task, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  /* links of leases lost before a crash go with the domain's directory */
  dir = va_port_dir (self->ports_dir, uuid);
  if (g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
      const char *name;
      while (d && (name = g_dir_read_name (d)))
        {
          g_autofree char *key = make_key (uuid, name);
          if (!g_hash_table_contains (self->entries, key))
            {
              g_autofree char *path = g_build_filename (dir, name, NULL);
              g_unlink (path);
            }
        }
      g_rmdir (dir);
    }
}

gint
va_allocator_release_domain_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  return (gint) g_task_propagate_int (G_TASK (result), error);
}

gint
va_allocator_claim (VaAllocator *self, const char *in_uuid, GError **error)
{
  GHashTableIter iter;
  Entry *e;
  char uuid[VA_UUID_STRING_LEN];
  gint n = 0;

  if (!check_uuid (in_uuid, uuid, error))
    return -1;
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    {
      if (strcmp (e->lease->uuid, uuid) != 0 || e->state == ENTRY_RELEASING)
        continue;
      if (!e->broken && !make_port_link (self, e->lease, error))
        return -1;
      n++;
    }
  return n;
}

/* ---- status -------------------------------------------------------------- */

static gint
cmp_lease (gconstpointer a, gconstpointer b)
{
  const VaLease *x = *(VaLease **) a, *y = *(VaLease **) b;

  if (x->created != y->created)
    return x->created < y->created ? -1 : 1;
  return strcmp (x->uuid, y->uuid) ?: strcmp (x->mac, y->mac);
}

GPtrArray *
va_allocator_list_leases (VaAllocator *self)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_lease_free);
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_PENDING)
      g_ptr_array_add (out, va_lease_copy (e->lease));
  g_ptr_array_sort (out, cmp_lease);
  return out;
}

const char *
va_allocator_get_lease_broken (VaAllocator *self, const char *uuid, const char *mac)
{
  g_autofree char *key = NULL;
  char u[VA_UUID_STRING_LEN], m[VA_MAC_STRING_LEN];
  Entry *e;

  if (!uuid || !mac || !va_uuid_normalize (uuid, u) || !va_mac_normalize (mac, m))
    return NULL;
  key = make_key (u, m);
  e = g_hash_table_lookup (self->entries, key);
  return e && e->broken ? (e->broken_reason ? e->broken_reason : "broken") : NULL;
}

VaPoolStatus *
va_allocator_get_pool (VaAllocator *self, const char *name, GError **error)
{
  g_autoptr (VaPoolStatus) st = g_new0 (VaPoolStatus, 1);
  const VaPoolConfig *pc = va_config_lookup_pool (self->config, name);
  VaPoolCounts counts;

  if (!va_pools_get_counts (self->pools, name, &counts, error))
    return NULL;
  st->name = g_strdup (name);
  /* lost slots left the host with their PF; a leased one counts until
   * its lease is released */
  st->total = counts.total - counts.lost;
  st->leased = counts.leased;
  st->draining = va_pools_get_draining (self->pools, name);
  st->free = st->draining ? 0 : counts.usable;
  if (!va_pools_get_health (self->pools, name, &st->healthy, &st->health_reason, error))
    return NULL;
  /* a pool without PFs says so in the pool model; one whose PFs have no
   * VFs is healthy and empty, which deserves a word too */
  if (counts.total == 0 && !st->health_reason[0])
    {
      g_free (st->health_reason);
      st->health_reason = g_strdup ("its PFs have no VFs");
    }
  st->vlan_method = va_vlan_method_to_string (pc ? pc->vlan_method : VA_VLAN_METHOD_NONE);
  return g_steal_pointer (&st);
}

GPtrArray *
va_allocator_list_pools (VaAllocator *self)
{
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) va_pool_status_free);
  g_auto (GStrv) names = va_pools_list_pools (self->pools);

  for (guint i = 0; names[i]; i++)
    {
      VaPoolStatus *st = va_allocator_get_pool (self, names[i], NULL);
      if (st)
        g_ptr_array_add (out, st);
    }
  return out;
}

gboolean
va_allocator_drain (VaAllocator *self, const char *pool, gboolean draining, GError **error)
{
  if (!pool || !va_name_is_valid (pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not a pool name", pool ? pool : "");
      return FALSE;
    }
  if (!va_pools_has_pool (self->pools, pool))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "no pool named '%s'", pool);
      return FALSE;
    }
  if (!va_pools_set_draining (self->pools, pool, draining, error))
    return FALSE;
  g_signal_emit (self, signals[SIGNAL_POOLS_CHANGED], 0);
  return TRUE;
}

char *
va_allocator_rewrite_domain (VaAllocator *self, const char *xml, const char *to, GError **error)
{
  g_autoptr (VaHostView) view = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_auto (GStrv) names = NULL;
  gboolean saved = g_strcmp0 (to, "saved") == 0;
  VaForm form = VA_FORM_ACCELERATED;

  if (!saved && g_strcmp0 (to, "auto") != 0 && !va_form_from_string (to, &form))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "'%.64s' is not accelerated, portable, auto or saved", to ? to : "");
      return NULL;
    }
  view = va_config_to_host_view (self->config, self->ports_dir);
  names = va_pools_list_pools (self->pools);
  for (guint i = 0; names[i]; i++)
    {
      g_autoptr (VaPoolStatus) st = va_allocator_get_pool (self, names[i], NULL);
      if (st)
        va_host_view_set_pool_free (view, names[i], st->free, NULL);
    }
  domain = va_domain_parse (xml, -1, error);
  if (!domain || !(saved ? va_domain_rewrite_saved (domain, view, error) : va_domain_rewrite (domain, view, form, error)))
    return NULL;
  return va_domain_to_string (domain, NULL);
}

const char *
va_allocator_get_backend_name (VaAllocator *self)
{
  return va_backend_get_name (self->backend);
}

void
va_allocator_set_domain_lister (VaAllocator *self, VaDomainLister lister, gpointer user_data)
{
  self->lister = lister;
  self->lister_data = user_data;
}

/* ---- reconcile ----------------------------------------------------------- */

typedef struct
{
  GHashTable *domains;
  GError *error;
} ListerResult;

static void
lister_result_free (ListerResult *r)
{
  g_clear_pointer (&r->domains, g_hash_table_unref);
  g_clear_error (&r->error);
  g_free (r);
}

static void
run_lister (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VaAllocator *self = source;
  ListerResult *r = g_new0 (ListerResult, 1);

  if (!self->lister)
    g_set_error_literal (&r->error, VA_ERROR, VA_ERROR_UNREACHABLE, "no libvirt connection configured");
  else
    self->lister (&r->domains, self->lister_data, &r->error);
  g_task_return_pointer (task, r, (GDestroyNotify) lister_result_free);
}

static void
reconcile_devices (VaAllocator *self, VaReconcileReport *report)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) devs = va_backend_list_devices (self->backend, &error);
  g_autoptr (GHashTable) by_slot = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  Entry *e;

  if (!devs)
    {
      g_warning ("listing vDPA devices: %s", error->message);
      return;
    }
  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    g_hash_table_insert (by_slot, e->lease->slot, e);

  for (guint i = 0; i < devs->len; i++)
    {
      VaDeviceInfo *dev = g_ptr_array_index (devs, i);
      Entry *owner = g_hash_table_lookup (by_slot, dev->slot);

      if (owner && g_strcmp0 (owner->lease->device, dev->name) == 0)
        {
          g_hash_table_add (seen, owner->key);
          continue;
        }
      /* nothing is freed while a process still holds the device */
      if (va_backend_device_busy (self->backend, dev->chardev))
        {
          g_ptr_array_add (report->busy, g_strdup (dev->name));
          continue;
        }
      if (va_backend_destroy_device (self->backend, dev->slot, dev->name, NULL, &error))
        g_ptr_array_add (report->orphans, g_strdup (dev->name));
      else
        {
          g_warning ("removing orphan %s: %s", dev->name, error->message);
          g_clear_error (&error);
        }
    }

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    {
      VaDeviceRequest dreq = { 0 };
      g_autoptr (VaDeviceInfo) dev = NULL;

      if (e->broken || e->state != ENTRY_COMMITTED || g_hash_table_contains (seen, e->key))
        continue;
      dreq.slot = e->lease->slot;
      dreq.pf = va_slot_get_pf (va_pools_lookup_slot (self->pools, e->lease->slot));
      dreq.mac = e->lease->mac;
      dreq.queues = e->lease->queues;
      dreq.vlan = e->lease->vlan;
      dreq.pool = va_config_lookup_pool (self->config, e->lease->pool);
      dreq.mtu = dreq.pool ? dreq.pool->mtu : 0;
      dev = va_backend_create_device (self->backend, &dreq, &error);
      if (!dev)
        {
          g_warning ("re-making the device of %s: %s", e->key, error->message);
          g_clear_error (&error);
          continue;
        }
      if (g_strcmp0 (dev->chardev, e->lease->chardev) != 0)
        {
          g_free (e->lease->chardev);
          e->lease->chardev = g_strdup (dev->chardev);
        }
      make_port_link (self, e->lease, NULL);
      g_ptr_array_add (report->missing, g_strdup (e->key));
    }
}

/* Port links no lease owns. A crash between a Release's commit and its
 * tear-down, or between an Allocate's provisioning and its commit, leaves
 * one behind, naming a chardev that the next lease of that slot gets: a VM
 * started on it would take another VM's device. */
static void
reconcile_links (VaAllocator *self, VaReconcileReport *report)
{
  g_autoptr (GDir) top = g_dir_open (self->ports_dir, 0, NULL);
  const char *uuid;

  while (top && (uuid = g_dir_read_name (top)))
    {
      g_autofree char *dir = va_port_dir (self->ports_dir, uuid);
      g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
      const char *name;

      while (d && (name = g_dir_read_name (d)))
        {
          g_autofree char *key = make_key (uuid, name);
          g_autofree char *path = NULL;

          /* pending and releasing entries keep theirs until settled */
          if (g_hash_table_contains (self->entries, key))
            continue;
          path = g_build_filename (dir, name, NULL);
          if (g_unlink (path) == 0)
            g_ptr_array_add (report->stale_links, g_steal_pointer (&key));
          else
            g_warning ("removing the stale port link %s: %s", path, g_strerror (errno));
        }
      g_rmdir (dir); /* only when empty */
    }
}

static void
reconcile_listed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  VaAllocator *self = VA_ALLOCATOR (source);
  g_autoptr (GTask) task = user_data;
  ListerResult *r = g_task_propagate_pointer (G_TASK (result), NULL);
  g_autoptr (VaReconcileReport) report = g_new0 (VaReconcileReport, 1);
  g_autoptr (GError) error = NULL;

  report->orphans = g_ptr_array_new_with_free_func (g_free);
  report->busy = g_ptr_array_new_with_free_func (g_free);
  report->missing = g_ptr_array_new_with_free_func (g_free);
  report->stale_links = g_ptr_array_new_with_free_func (g_free);

  if (!commit_now (self, &error))
    {
      lister_result_free (r);
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  reconcile_devices (self, report);
  reconcile_links (self, report);

  report->libvirt_reachable = r->error == NULL;
  if (r->error)
    report->libvirt_error = g_strdup (r->error->message);
  else
    {
      g_autoptr (GHashTable) gone = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_autoptr (GHashTable) running = g_hash_table_new (g_str_hash, g_str_equal);
      GHashTableIter iter;
      const char *uuid;
      Entry *e;
      gint64 now = g_get_real_time () / G_USEC_PER_SEC;

      g_hash_table_iter_init (&iter, self->entries);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
        {
          gpointer active;
          gboolean known = g_hash_table_lookup_extended (r->domains, e->lease->uuid, NULL, &active);

          if (e->state != ENTRY_COMMITTED)
            continue;
          if (known && (GPOINTER_TO_INT (active) || now - e->lease->created <= RECONCILE_GRACE_SECONDS))
            continue;
          if (in_use (self, e, NULL))
            {
              /* whatever libvirt says, a guest runs on it */
              g_hash_table_add (running, e->lease->uuid);
              g_ptr_array_add (report->busy, g_strdup (e->lease->device));
            }
          else
            g_hash_table_add (gone, g_strdup (e->lease->uuid));
        }
      /* a domain's leases go all together or not at all */
      g_hash_table_iter_init (&iter, running);
      while (g_hash_table_iter_next (&iter, (gpointer *) &uuid, NULL))
        g_hash_table_remove (gone, uuid);
      g_hash_table_iter_init (&iter, self->entries);
      while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
        if (e->state == ENTRY_COMMITTED && g_hash_table_contains (gone, e->lease->uuid))
          report->released++;
      /* queued after the walk: queueing changes the entries' states */
      g_hash_table_iter_init (&iter, gone);
      while (!error && g_hash_table_iter_next (&iter, (gpointer *) &uuid, NULL))
        queue_release_domain (self, uuid, NULL, &error);
      if (!error)
        commit_now (self, &error);
      if (error)
        {
          lister_result_free (r);
          g_task_return_error (task, g_steal_pointer (&error));
          return;
        }
    }
  lister_result_free (r);
  g_task_return_pointer (task, g_steal_pointer (&report), (GDestroyNotify) va_reconcile_report_free);
}

void
va_allocator_reconcile_async (VaAllocator *self, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (self, NULL, callback, user_data);
  g_autoptr (GTask) lister = g_task_new (self, NULL, reconcile_listed, task);

  /* libvirt may be slow to answer: ask it off the main loop */
  g_task_run_in_thread (lister, run_lister);
}

VaReconcileReport *
va_allocator_reconcile_finish (VaAllocator *self, GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- construction -------------------------------------------------------- */

static void
apply_networks (VaAllocator *self)
{
  g_clear_pointer (&self->view, va_host_view_unref);
  self->view = va_config_to_host_view (self->config, self->ports_dir);
  for (guint i = 0; i < self->config->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (self->config->networks, i);
      va_pools_set_network_quota (self->pools, n->net.name, n->quota);
    }
}

/* ---- PFs coming and going ----------------------------------------------- */

static void pf_event (VaAllocator *self, const char *pool, const char *pf, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static void
pf_event (VaAllocator *self, const char *pool, const char *pf, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_signal_emit (self, signals[SIGNAL_PF_EVENT], 0, pool, pf, msg);
}

/* The first pool, in configuration order, whose selectors take @pf. */
static const VaPoolConfig *
pool_for (VaAllocator *self, const VaPfInfo *pf)
{
  for (guint k = 0; k < self->config->pools->len; k++)
    if (va_pool_config_matches (g_ptr_array_index (self->config->pools, k), pf))
      return g_ptr_array_index (self->config->pools, k);
  return NULL;
}

/* Health by precedence: gone, then what discovery says (a model that cannot
 * carry vDPA, no netdev, link down), then a failed prepare_pf. */
static void
update_health (VaAllocator *self, const char *pool, const char *pf, PfState *st, gboolean healthy, const char *reason)
{
  if (healthy && st->prepare_error)
    {
      healthy = FALSE;
      reason = st->prepare_error;
    }
  if (!healthy && !reason)
    reason = "unhealthy";
  if (st->healthy == healthy && g_strcmp0 (st->reason, healthy ? NULL : reason) == 0)
    return;
  st->healthy = healthy;
  g_free (st->reason);
  st->reason = healthy ? NULL : g_strdup (reason);
  va_pools_set_pf_health (self->pools, pool, pf, healthy, reason, NULL);
  if (healthy)
    pf_event (self, pool, pf, "PF %s in pool %s is healthy again", pf, pool);
  else
    pf_event (self, pool, pf, "PF %s in pool %s is unhealthy: %s", pf, pool, reason);
}

/* The PF's slots become its VFs of now: new VFs join, VFs that went are
 * lost, VFs that came back are free (or leased) again. */
static gboolean
sync_slots (VaAllocator *self, const char *pool, const char *pf, GPtrArray *vfs, GError **error)
{
  g_auto (GStrv) slots = va_pools_list_slots (self->pools, pool, pf, error);
  g_autoptr (GHashTable) now = g_hash_table_new (g_str_hash, g_str_equal);

  if (!slots)
    return FALSE;
  for (guint k = 0; k < vfs->len; k++)
    {
      const char *vf = g_ptr_array_index (vfs, k);

      g_hash_table_add (now, (gpointer) vf);
      if (va_pools_lookup_slot (self->pools, vf))
        {
          if (!va_pools_set_slot_lost (self->pools, vf, FALSE, error))
            return FALSE;
        }
      else if (!va_pools_add_slot (self->pools, pool, pf, vf, error))
        return FALSE;
    }
  for (guint k = 0; slots[k]; k++)
    if (!g_hash_table_contains (now, slots[k]) && !va_pools_set_slot_lost (self->pools, slots[k], TRUE, error))
      return FALSE;
  return TRUE;
}

/* Entries on @slots (a set), oldest first is no matter: keys, copied, so
 * that signal handlers may call back in. */
static GPtrArray *
entries_on (VaAllocator *self, GHashTable *slots, gboolean broken)
{
  GPtrArray *keys = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  Entry *e;

  g_hash_table_iter_init (&iter, self->entries);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &e))
    if (e->state != ENTRY_RELEASING && e->broken == broken && (!slots || g_hash_table_contains (slots, e->lease->slot)))
      g_ptr_array_add (keys, g_strdup (e->key));
  return keys;
}

static void
break_lease (VaAllocator *self, Entry *e, const char *reason)
{
  if (e->broken && g_strcmp0 (e->broken_reason, reason) == 0)
    return;
  e->broken = TRUE;
  g_free (e->broken_reason);
  e->broken_reason = g_strdup (reason);
  /* its node is gone, and a new device may get its number: nothing may
   * open the device through the link */
  remove_port_link (self, e->lease->uuid, e->lease->mac, FALSE);
  g_signal_emit (self, signals[SIGNAL_LEASE_BROKEN], 0, e->lease, reason);
}

/* The PF at @pci left the host: its slots are lost, its leases broken. */
static void
pf_gone (VaAllocator *self, const char *pci, PfState *st)
{
  const char *pool, *pf;
  g_auto (GStrv) slots = NULL;
  g_autoptr (GHashTable) set = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) keys = NULL;
  g_autofree char *reason = NULL;

  if (!va_pools_find_pf (self->pools, pci, &pool, &pf))
    return;
  st->gone = TRUE;
  reason = g_strdup_printf ("PF %s (%s) is gone from the host", pf, pci);
  slots = va_pools_list_slots (self->pools, pool, pf, NULL);
  for (guint k = 0; slots && slots[k]; k++)
    {
      va_pools_set_slot_lost (self->pools, slots[k], TRUE, NULL);
      g_hash_table_add (set, slots[k]);
    }
  g_clear_pointer (&st->prepare_error, g_free);
  update_health (self, pool, pf, st, FALSE, reason);
  pf_event (self, pool, pf, "PF %s (%s) left pool %s: its %u slot(s) are lost", pf, pci, pool, slots ? g_strv_length (slots) : 0);
  keys = entries_on (self, set, FALSE);
  for (guint i = 0; i < keys->len; i++)
    {
      Entry *e = g_hash_table_lookup (self->entries, g_ptr_array_index (keys, i));
      if (e)
        break_lease (self, e, reason);
    }
}

/* Broken leases whose slot is back get it, and their device re-made. */
static void
repair_leases (VaAllocator *self)
{
  g_autoptr (GPtrArray) keys = entries_on (self, NULL, TRUE);

  for (guint i = 0; i < keys->len; i++)
    {
      Entry *e = g_hash_table_lookup (self->entries, g_ptr_array_index (keys, i));
      const VaSlot *slot = e ? va_pools_lookup_slot (self->pools, e->lease->slot) : NULL;
      const VaSlot *held;
      VaDeviceRequest dreq = { 0 };
      g_autoptr (VaDeviceInfo) dev = NULL;
      g_autoptr (GError) error = NULL;
      g_autofree char *reason = NULL;

      if (!slot)
        continue;
      held = va_pools_lookup_lease (self->pools, e->lease->uuid, e->lease->mac);
      if (held != slot
          && !va_pools_restore (self->pools, e->lease->uuid, e->lease->mac, *e->lease->network ? e->lease->network : NULL, e->lease->slot,
                                NULL))
        continue; /* the slot is lost still, or another lease took it */
      if (va_slot_get_state (slot) != VA_SLOT_LEASED)
        continue;
      {
        PfState *st = g_hash_table_lookup (self->pf_states, va_slot_get_pf_pci_address (slot));
        if (st && st->gone)
          continue;
      }
      dreq.slot = e->lease->slot;
      dreq.pf = va_slot_get_pf (slot);
      dreq.mac = e->lease->mac;
      dreq.queues = e->lease->queues;
      dreq.vlan = e->lease->vlan;
      dreq.pool = va_config_lookup_pool (self->config, e->lease->pool);
      dreq.mtu = dreq.pool ? dreq.pool->mtu : 0;
      dev = va_backend_create_device (self->backend, &dreq, &error);
      if (!dev)
        {
          reason = g_strdup_printf ("its slot %s is back, but its device could not be re-made: %s", e->lease->slot, error->message);
          break_lease (self, e, reason);
          continue;
        }
      g_free (e->lease->device);
      e->lease->device = g_strdup (dev->name);
      g_free (e->lease->chardev);
      e->lease->chardev = g_strdup (dev->chardev);
      e->broken = FALSE;
      g_clear_pointer (&e->broken_reason, g_free);
      if (!make_port_link (self, e->lease, &error))
        {
          break_lease (self, e, error->message);
          continue;
        }
      g_signal_emit (self, signals[SIGNAL_LEASE_REPAIRED], 0, e->lease);
    }
}

/* Brings the pools to the PFs of @pfs: a new PF that a pool selects is
 * prepared and joins it with its VFs as slots; a known PF (by PCI address,
 * whatever its VF count) gets its health and slots updated; a PF that came
 * back is prepared again; a PF that is no longer there is gone. Goes on
 * past errors; the first is returned. */
static gboolean
sync_pfs (VaAllocator *self, GPtrArray *pfs, GError **error)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_auto (GStrv) known = NULL;
  GError *first = NULL;

  for (guint i = 0; i < pfs->len; i++)
    {
      VaPfInfo *pf = g_ptr_array_index (pfs, i);
      const VaPoolConfig *pc = NULL;
      const char *pool, *name;
      g_autoptr (GError) local = NULL;
      PfState *st;
      gboolean fresh = FALSE;

      g_hash_table_add (seen, pf->pci);
      if (va_pools_find_pf (self->pools, pf->pci, &pool, &name))
        st = g_hash_table_lookup (self->pf_states, pf->pci);
      else
        {
          pc = pool_for (self, pf);
          if (!pc)
            continue;
          if (!va_pools_add_pf (self->pools, pc->name, pf->name, pf->pci, pf->numa_node, &local))
            goto next;
          pool = pc->name;
          name = pf->name;
          st = g_new0 (PfState, 1);
          st->healthy = TRUE;
          g_hash_table_insert (self->pf_states, g_strdup (pf->pci), st);
          fresh = TRUE;
        }
      if (fresh || st->gone)
        {
          /* new, or back: a PF that returns comes back as the kernel
           * probes it, without the VFs or eswitch mode it had */
          g_autoptr (GError) prep = NULL;

          pc = va_config_lookup_pool (self->config, pool);
          g_clear_pointer (&st->prepare_error, g_free);
          if (pc && !va_backend_prepare_pf (self->backend, pf, pc, &prep))
            st->prepare_error = g_strdup (prep->message);
        }
      if (!sync_slots (self, pool, name, pf->vfs, &local))
        goto next;
      if (fresh)
        pf_event (self, pool, name, "PF %s (%s) joined pool %s with %u slot(s)", name, pf->pci, pool, pf->vfs->len);
      else if (st->gone)
        pf_event (self, pool, name, "PF %s (%s) is back in pool %s with %u slot(s)", name, pf->pci, pool, pf->vfs->len);
      st->gone = FALSE;
      update_health (self, pool, name, st, pf->healthy, pf->health_reason);
    next:
      if (local && !first)
        first = g_steal_pointer (&local);
    }

  known = va_pools_list_pf_addresses (self->pools);
  for (guint i = 0; known[i]; i++)
    {
      PfState *st = g_hash_table_lookup (self->pf_states, known[i]);
      if (st && !st->gone && !g_hash_table_contains (seen, known[i]))
        pf_gone (self, known[i], st);
    }
  repair_leases (self);
  if (first)
    {
      g_propagate_error (error, first);
      return FALSE;
    }
  return TRUE;
}

static gboolean
add_pools (VaAllocator *self, GError **error)
{
  g_autoptr (GPtrArray) pfs = NULL;

  for (guint i = 0; i < self->config->pools->len; i++)
    {
      const VaPoolConfig *pc = g_ptr_array_index (self->config->pools, i);
      if (!va_pools_has_pool (self->pools, pc->name) && !va_pools_add_pool (self->pools, pc->name, error))
        return FALSE;
    }

  pfs = va_backend_discover (self->backend, error);
  if (!pfs)
    return FALSE;
  return sync_pfs (self, pfs, error);
}

static void
check_watermarks (VaAllocator *self)
{
  for (guint i = 0; i < self->config->pools->len; i++)
    check_watermark (self, ((VaPoolConfig *) g_ptr_array_index (self->config->pools, i))->name);
}

/* The backend saw PFs come, go or change (the udev monitor). */
static void
on_pfs_changed (VaBackend *backend, VaAllocator *self)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pfs = va_backend_discover (backend, &error);

  if (!pfs)
    pf_event (self, "", "", "discovering PFs after a device change: %s", error->message);
  else if (!sync_pfs (self, pfs, &error))
    pf_event (self, "", "", "updating the pools after a device change: %s", error->message);
  g_signal_emit (self, signals[SIGNAL_POOLS_CHANGED], 0);
  check_watermarks (self);
}

static gboolean
restore_leases (VaAllocator *self, GError **error)
{
  g_autoptr (GPtrArray) leases = va_store_load (self->store, error);

  if (!leases)
    return FALSE;
  for (guint i = 0; i < leases->len; i++)
    {
      VaLease *lease = g_ptr_array_index (leases, i);
      Entry *e = g_new0 (Entry, 1);
      g_autoptr (GError) local = NULL;

      e->key = make_key (lease->uuid, lease->mac);
      e->lease = va_lease_copy (lease);
      e->state = ENTRY_COMMITTED;
      /* never lose track of a lease: one whose slot is gone stays, broken */
      if (!va_pools_restore (self->pools, lease->uuid, lease->mac, *lease->network ? lease->network : NULL, lease->slot, &local))
        {
          g_warning ("lease of %s on %s is broken: %s", e->key, lease->slot, local->message);
          e->broken = TRUE;
          e->broken_reason = g_strdup (local->message);
        }
      else
        make_port_link (self, e->lease, NULL);
      g_hash_table_insert (self->entries, e->key, e);
    }
  return TRUE;
}

VaAllocator *
va_allocator_new (VaConfig *config, VaBackend *backend, VaStore *store, const char *run_dir, GError **error)
{
  g_autoptr (VaAllocator) self = g_object_new (VA_TYPE_ALLOCATOR, NULL);

  self->config = config;
  self->backend = g_object_ref (backend);
  self->store = store;
  self->run_dir = g_strdup (run_dir);
  self->ports_dir = va_path_ports (run_dir);
  self->pools = va_pools_new ();
  if (!add_pools (self, error))
    return NULL;
  apply_networks (self);
  if (!restore_leases (self, error))
    return NULL;
  check_watermarks (self);
  self->pfs_changed_id = g_signal_connect (backend, "pfs-changed", G_CALLBACK (on_pfs_changed), self);
  return g_steal_pointer (&self);
}

gboolean
va_allocator_reload (VaAllocator *self, VaConfig *config, GError **error)
{
  if (!commit_now (self, error))
    return FALSE;
  self->config = config;
  if (!add_pools (self, error))
    return FALSE;
  apply_networks (self);
  g_signal_emit (self, signals[SIGNAL_POOLS_CHANGED], 0);
  return TRUE;
}

static void
va_allocator_finalize (GObject *object)
{
  VaAllocator *self = VA_ALLOCATOR (object);

  g_clear_signal_handler (&self->pfs_changed_id, self->backend);
  g_clear_handle_id (&self->commit_source, g_source_remove);
  finish_inflight (self);
  g_clear_pointer (&self->pending, g_ptr_array_unref);
  g_clear_pointer (&self->entries, g_hash_table_unref);
  g_clear_pointer (&self->pools, va_pools_free);
  g_clear_pointer (&self->view, va_host_view_unref);
  g_clear_pointer (&self->below_watermark, g_hash_table_unref);
  g_clear_pointer (&self->pf_states, g_hash_table_unref);
  g_clear_object (&self->backend);
  g_free (self->run_dir);
  g_free (self->ports_dir);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (va_allocator_parent_class)->finalize (object);
}

static void
va_allocator_class_init (VaAllocatorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = va_allocator_finalize;

  /* (VaLease *lease): a lease was committed */
  signals[SIGNAL_LEASE_ADDED]
    = g_signal_new ("lease-added", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
  /* (VaLease *lease): a lease was released */
  signals[SIGNAL_LEASE_REMOVED]
    = g_signal_new ("lease-removed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
  /* (const char *pool, guint free): free slots dropped below the watermark */
  signals[SIGNAL_LOW_WATERMARK] = g_signal_new ("low-watermark", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_UINT);
  /* counts, health or drain of some pool may have changed */
  signals[SIGNAL_POOLS_CHANGED]
    = g_signal_new ("pools-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 0);
  /* (const char *pool, const char *pf, const char *message): a PF joined a
   * pool, left the host, came back, or changed health; @message is one
   * line for the log. @pool and @pf are "" when discovery itself failed. */
  signals[SIGNAL_PF_EVENT] = g_signal_new ("pf-event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 3,
                                           G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING);
  /* (VaLease *lease, const char *reason): the lease's slot left the host,
   * or came back without its device; the lease stays until released */
  signals[SIGNAL_LEASE_BROKEN] = g_signal_new ("lease-broken", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                               G_TYPE_NONE, 2, G_TYPE_POINTER, G_TYPE_STRING);
  /* (VaLease *lease): a broken lease has its slot and device again */
  signals[SIGNAL_LEASE_REPAIRED]
    = g_signal_new ("lease-repaired", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_POINTER);
}

static void
va_allocator_init (VaAllocator *self)
{
  self->entries = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) entry_free);
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) pending_free);
  self->below_watermark = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pf_states = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) pf_state_free);
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
}
