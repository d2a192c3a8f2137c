/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus adapter: translates between the bus and the allocator core,
 * which knows nothing of D-Bus. Reads are open to everyone; changes need
 * uid 0 or the polkit action org.vdpa_allocator.manage. */
#define G_LOG_DOMAIN "va-dbus"

#include "config.h"

#include "va-daemon-dbus.h"

#include <errno.h>
#include <malloc.h>
#include <polkit/polkit.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "va-bus.h"
#include "va-dbus-resources.h"
#include "va-daemon-open.h"
#include "va-daemon-swapback.h"
#include "va-error.h"
#include "va-daemon-events.h"
#include "va-lease.h"

struct _VaDbus
{
  VaAllocator *alloc;
  GDBusConnection *conn;
  GDBusNodeInfo *info;
  guint manager_id;
  GHashTable *pool_ids;   /* pool name → registration id */
  GHashTable *pool_cache; /* pool name → GVariant a{sv} of last sent props */
  GHashTable *pool_names; /* object path → pool name */
  GPtrArray *paths;       /* the objects' paths, in the order registered */
  struct _Introspection *introspection;
  guint filter_id;
  PolkitAuthority *authority;
  GHashTable *uids;           /* unique bus name → uid: a connection's uid never changes */
  GHashTable *lookups;        /* unique bus name → its UidLookup, while its uid is asked */
  VaOpen *open;               /* the open calls' workers and bounds */
  struct _Snapshot *snapshot; /* the leases as ListLeases last saw them, or NULL */
  struct _Devices *devices;   /* the devices as ListDevices last saw them, or NULL */
  guint snapshot_timer;       /* drops them */
  GVariant *pools_paths;      /* the Pools property */
  guint pools_timer;          /* the pools' signal window (pools_changed()) */
  gboolean pools_dirty;       /* a change came in the window: sent at its end */
  VaLease *added;             /* the lease Allocate last answered, and */
  GVariant *added_variant;    /* its variant, which LeaseAdded sends again */
  guint name_owner_sub;
  gulong handlers[6];
  VaMetrics *metrics;          /* or NULL */
  VaDaemonSwapBack *swap_back; /* or NULL */
  GHashTable *denials;         /* uid ("unknown" without one) → Denials* */
  guint denials_timer;         /* sums them up each minute while some are counted */
};

/* The denials of one uid since its last journal line: any local user can
 * call as often as it likes, so only its first is logged whole. */
typedef struct
{
  guint count;
  char *method; /* the last one's */
  gint64 since; /* monotonic µs of its last line */
} Denials;

static void
denials_free (Denials *d)
{
  g_free (d->method);
  g_free (d);
}

static gsize resources_registered;

/* ---- authorization ------------------------------------------------------- */

typedef void (*AuthorizedFunc) (VaDbus *self, GDBusMethodInvocation *inv);
/* A method open to everyone, given its caller's uid (G_MAXUINT32 when the
 * bus did not tell it). */
typedef void (*OpenFunc) (VaDbus *self, GDBusMethodInvocation *inv, guint32 uid);

typedef struct
{
  VaDbus *self;
  GDBusMethodInvocation *inv;
  AuthorizedFunc func; /* a change: needs uid 0 or polkit's yes */
  OpenFunc open_func;  /* or an open method */
} AuthCall;

static void
auth_call_free (AuthCall *c)
{
  g_object_unref (c->inv);
  g_free (c);
}

/* One line for the denials of @uid counted since its last: VA_COUNT of
 * them, VA_METHOD the last one's. */
static void
sum_denials (const char *uid, Denials *d, gint64 now)
{
  char count[16];
  const char *fields[] = { "VA_ACTION", VA_BUS_MANAGE_ACTION, "VA_METHOD", d->method, "VA_COUNT", count, NULL, NULL, NULL };

  g_snprintf (count, sizeof count, "%u", d->count);
  if (strcmp (uid, "unknown") != 0)
    {
      fields[6] = "VA_UID";
      fields[7] = uid;
    }
  va_event (G_LOG_LEVEL_WARNING, VA_EVENT_DENIED, NULL, fields,
            "denied %u more call(s) to uid %s in the last %" G_GINT64_FORMAT " s (the last: %s)", d->count, uid,
            (now - d->since) / G_USEC_PER_SEC, d->method);
  d->count = 0;
  d->since = now;
}

static gboolean
denials_tick (gpointer user_data)
{
  VaDbus *self = user_data;
  gint64 now = g_get_monotonic_time ();
  gboolean any = FALSE;
  GHashTableIter iter;
  gpointer uid, d;

  g_hash_table_iter_init (&iter, self->denials);
  while (g_hash_table_iter_next (&iter, &uid, &d))
    if (((Denials *) d)->count)
      {
        sum_denials (uid, d, now);
        any = TRUE;
      }
  if (any)
    return G_SOURCE_CONTINUE;
  self->denials_timer = 0;
  return G_SOURCE_REMOVE;
}

/* The answer, and the journal's VA_EVENT_DENIED with the caller's uid
 * when the bus told it (VA_UID absent otherwise): the first denial of a
 * uid in full, the next ones summed up in one line a minute at most
 * (denials_tick), so that a user's refused calls cannot flood the
 * journal. Not an allocation failure either: the metric counts those. */
static void
deny (VaDbus *self, GDBusMethodInvocation *inv, const char *why)
{
  const char *sender = g_dbus_method_invocation_get_sender (inv);
  const char *method = g_dbus_method_invocation_get_method_name (inv);
  gpointer uid;
  char uid_s[16] = "unknown";
  const char *fields[] = { "VA_ACTION", VA_BUS_MANAGE_ACTION, "VA_METHOD", method, "VA_SENDER", sender ? sender : "", NULL, NULL, NULL };
  Denials *d;

  if (sender && g_hash_table_lookup_extended (self->uids, sender, NULL, &uid))
    {
      g_snprintf (uid_s, sizeof uid_s, "%u", GPOINTER_TO_UINT (uid));
      fields[6] = "VA_UID";
      fields[7] = uid_s;
    }
  g_dbus_method_invocation_return_error (inv, VA_ERROR, VA_ERROR_PERMISSION_DENIED, "%s: %s needs root or the polkit action %s", why,
                                         method, VA_BUS_MANAGE_ACTION);
  d = g_hash_table_lookup (self->denials, uid_s);
  if (d)
    {
      d->count++;
      g_free (d->method);
      d->method = g_strdup (method);
      if (!self->denials_timer)
        self->denials_timer = g_timeout_add_seconds (60, denials_tick, self);
      return;
    }
  d = g_new0 (Denials, 1);
  d->method = g_strdup (method);
  d->since = g_get_monotonic_time ();
  g_hash_table_insert (self->denials, g_strdup (uid_s), d);
  va_event (G_LOG_LEVEL_WARNING, VA_EVENT_DENIED, NULL, fields,
            "denied %s to uid %s (%s): %s; more of this uid are counted, one line a minute", method, uid_s, sender ? sender : "no bus name",
            why);
}

static void
polkit_checked (GObject *source, GAsyncResult *res, gpointer user_data)
{
  AuthCall *c = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PolkitAuthorizationResult) result = polkit_authority_check_authorization_finish (POLKIT_AUTHORITY (source), res, &error);

  if (!result)
    deny (c->self, c->inv, error->message);
  else if (!polkit_authorization_result_get_is_authorized (result))
    deny (c->self, c->inv, "not authorized");
  else
    c->func (c->self, c->inv);
  auth_call_free (c);
}

static void
check_polkit (AuthCall *c)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PolkitSubject) subject = NULL;
  PolkitCheckAuthorizationFlags flags = POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE;

  if (!c->self->authority)
    c->self->authority = polkit_authority_get_sync (NULL, &error);
  if (!c->self->authority)
    {
      deny (c->self, c->inv, error->message);
      auth_call_free (c);
      return;
    }
  if (g_dbus_message_get_flags (g_dbus_method_invocation_get_message (c->inv)) & G_DBUS_MESSAGE_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION)
    flags = POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION;
  subject = polkit_system_bus_name_new (g_dbus_method_invocation_get_sender (c->inv));
  polkit_authority_check_authorization (c->self->authority, subject, VA_BUS_MANAGE_ACTION, NULL, flags, NULL, polkit_checked, c);
}

static void
polkit_admitted (gpointer data, GDBusMethodInvocation *inv)
{
  check_polkit (data);
}

/* @c's caller is uid @uid: a change is run, or checked with polkit at
 * its uid's pace (seen: 8 connections of one user made 2,000 refused
 * Allocate a second, and the hook's prepare p99 was 5.6 times the quiet
 * one); an open method is run with it. */
static void
with_uid (AuthCall *c, guint32 uid)
{
  if (c->open_func)
    c->open_func (c->self, c->inv, uid);
  else if (uid == 0)
    c->func (c->self, c->inv);
  else
    {
      va_open_admit (c->self->open, c->inv, uid, polkit_admitted, c, (GDestroyNotify) auth_call_free);
      return;
    }
  auth_call_free (c);
}

/* @sender's uid, or @error when the bus did not tell it. */
typedef void (*UidFunc) (VaDbus *self, guint32 uid, const GError *error, gpointer data);

typedef struct
{
  UidFunc func;
  gpointer data;
} UidWaiter;

typedef struct
{
  VaDbus *self;
  char *sender;
  GArray *waiters; /* UidWaiter */
} UidLookup;

static void
got_uid (GObject *source, GAsyncResult *res, gpointer user_data)
{
  UidLookup *l = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) ret = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), res, &error);
  guint32 uid = G_MAXUINT32;

  g_hash_table_remove (l->self->lookups, l->sender);
  if (ret)
    {
      g_variant_get (ret, "(u)", &uid);
      g_hash_table_insert (l->self->uids, g_strdup (l->sender), GUINT_TO_POINTER (uid));
    }
  /* in the order the calls came */
  for (guint i = 0; i < l->waiters->len; i++)
    {
      UidWaiter *w = &g_array_index (l->waiters, UidWaiter, i);

      w->func (l->self, uid, error, w->data);
    }
  g_array_unref (l->waiters);
  g_free (l->sender);
  g_free (l);
}

/* Calls @func with @sender's uid: from the bus, once per connection. A
 * known caller's is given at once, so that its request shares a commit
 * with the others of this main-loop turn. The calls that come while it
 * is asked wait for the one answer, in their order: one that came later
 * must not find it known and overtake them (seen: a user's Introspect
 * calls took the slots of its RewriteDomain calls sent before). */
static void
with_sender_uid (VaDbus *self, const char *sender, UidFunc func, gpointer data)
{
  UidWaiter w = { func, data };
  UidLookup *l;
  gpointer cached;

  if (g_hash_table_lookup_extended (self->uids, sender, NULL, &cached))
    {
      func (self, GPOINTER_TO_UINT (cached), NULL, data);
      return;
    }
  l = g_hash_table_lookup (self->lookups, sender);
  if (l)
    {
      g_array_append_val (l->waiters, w);
      return;
    }
  l = g_new0 (UidLookup, 1);
  l->self = self;
  l->sender = g_strdup (sender);
  l->waiters = g_array_new (FALSE, FALSE, sizeof (UidWaiter));
  g_array_append_val (l->waiters, w);
  g_hash_table_insert (self->lookups, g_strdup (sender), l); /* the call's own */
  g_dbus_connection_call (self->conn, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
                          g_variant_new ("(s)", sender), G_VARIANT_TYPE ("(u)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, got_uid, l);
}

static void
authorize_uid (VaDbus *self, guint32 uid, const GError *error, gpointer data)
{
  AuthCall *c = data;

  if (!error)
    {
      with_uid (c, uid);
      return;
    }
  /* the caller left before its uid was known: as for a call queued
   * when it left (va_open_sender_gone()), nothing is run */
  if (c->open_func && g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER))
    {
      g_message ("%s of %s not run: the caller left the bus", g_dbus_method_invocation_get_method_name (c->inv),
                 g_dbus_method_invocation_get_sender (c->inv));
      /* the handler's reference: c holds one of its own */
      g_dbus_method_invocation_return_error_literal (c->inv, VA_ERROR, VA_ERROR_FAILED, "the caller left the bus");
    }
  else if (c->open_func)
    c->open_func (c->self, c->inv, G_MAXUINT32);
  else
    deny (c->self, c->inv, error->message);
  auth_call_free (c);
}

/* Runs @func (a change) or @open_func (an open method) once the caller's
 * uid is known. */
static void
authorize (VaDbus *self, GDBusMethodInvocation *inv, AuthorizedFunc func, OpenFunc open_func)
{
  AuthCall *c = g_new0 (AuthCall, 1);
  const char *sender = g_dbus_method_invocation_get_sender (inv);

  c->self = self;
  c->inv = g_object_ref (inv);
  c->func = func;
  c->open_func = open_func;
  if (!sender)
    {
      /* a peer-to-peer connection has no bus to vouch for it */
      if (open_func)
        open_func (self, inv, G_MAXUINT32);
      else
        deny (self, inv, "unknown caller");
      auth_call_free (c);
      return;
    }
  with_sender_uid (self, sender, authorize_uid, c);
}

/* ---- methods ------------------------------------------------------------- */

typedef struct
{
  VaDbus *self;
  GDBusMethodInvocation *inv;
  gint64 start; /* monotonic, µs */
} AllocCall;

static void
allocated (GObject *source, GAsyncResult *res, gpointer user_data)
{
  AllocCall *c = user_data;
  VaDbus *self = c->self;
  g_autoptr (GDBusMethodInvocation) inv = c->inv;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) lease = va_allocator_allocate_finish (VA_ALLOCATOR (source), res, &error);
  GVariant *v;

  if (self->metrics)
    va_metrics_allocation (self->metrics, (g_get_monotonic_time () - c->start) / 1e6, error);
  g_free (c);
  if (!lease)
    {
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  v = g_variant_ref_sink (va_lease_to_variant (lease));
  g_dbus_method_invocation_return_value (inv, g_variant_new_tuple (&v, 1));
  /* kept for the LeaseAdded that follows (on_lease_added()) */
  g_clear_pointer (&self->added, va_lease_free);
  g_clear_pointer (&self->added_variant, g_variant_unref);
  self->added = g_steal_pointer (&lease);
  self->added_variant = v;
}

static void
do_allocate (VaDbus *self, GDBusMethodInvocation *inv)
{
  g_autoptr (GError) error = NULL;
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  AllocCall *c;
  gint64 start = g_get_monotonic_time ();

  /* the strings of req are the invocation's, which outlives the call */
  if (!va_alloc_request_from_variant (g_dbus_method_invocation_get_parameters (inv), &req, &error))
    {
      if (self->metrics)
        va_metrics_allocation (self->metrics, (g_get_monotonic_time () - start) / 1e6, error);
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  c = g_new0 (AllocCall, 1);
  c->self = self;
  c->inv = g_object_ref (inv);
  c->start = start;
  va_allocator_allocate_async (self->alloc, &req, allocated, c);
}

static void
released (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr (GDBusMethodInvocation) inv = user_data;
  g_autoptr (GError) error = NULL;

  if (!va_allocator_release_finish (VA_ALLOCATOR (source), res, &error))
    g_dbus_method_invocation_return_gerror (inv, error);
  else
    g_dbus_method_invocation_return_value (inv, NULL);
}

static void
do_release (VaDbus *self, GDBusMethodInvocation *inv)
{
  const char *uuid, *mac;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&s&s)", &uuid, &mac);
  va_allocator_release_async (self->alloc, uuid, mac, released, g_object_ref (inv));
}

static void
domain_released (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr (GDBusMethodInvocation) inv = user_data;
  g_autoptr (GError) error = NULL;
  gint n = va_allocator_release_domain_finish (VA_ALLOCATOR (source), res, &error);

  if (n < 0)
    g_dbus_method_invocation_return_gerror (inv, error);
  else
    g_dbus_method_invocation_return_value (inv, g_variant_new ("(u)", (guint32) n));
}

static void
do_release_domain (VaDbus *self, GDBusMethodInvocation *inv)
{
  const char *uuid;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&s)", &uuid);
  va_allocator_release_domain_async (self->alloc, uuid, domain_released, g_object_ref (inv));
}

static void
do_claim (VaDbus *self, GDBusMethodInvocation *inv)
{
  g_autoptr (GError) error = NULL;
  const char *uuid;
  gint n;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&s)", &uuid);
  n = va_allocator_claim (self->alloc, uuid, &error);
  if (n < 0)
    {
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  {
    char count[16];
    const char *fields[] = { "VA_DOMAIN_UUID", uuid, "VA_COUNT", count, NULL };

    g_snprintf (count, sizeof count, "%d", n);
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_CLAIM, NULL, fields, "domain %s claimed its %d lease(s)", uuid, n);
  }
  g_dbus_method_invocation_return_value (inv, g_variant_new ("(u)", (guint32) n));
}

static GVariant *
strv_variant (GPtrArray *a)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_STRING_ARRAY);
  for (guint i = 0; i < a->len; i++)
    g_variant_builder_add (&b, "s", (const char *) g_ptr_array_index (a, i));
  return g_variant_builder_end (&b);
}

GVariant *
va_dbus_report_to_variant (const VaReconcileReport *r)
{
  GVariantBuilder b;

  g_return_val_if_fail (r != NULL, NULL);

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "released", g_variant_new_uint32 (r->released));
  g_variant_builder_add (&b, "{sv}", "orphans", strv_variant (r->orphans));
  g_variant_builder_add (&b, "{sv}", "busy", strv_variant (r->busy));
  g_variant_builder_add (&b, "{sv}", "missing", strv_variant (r->missing));
  g_variant_builder_add (&b, "{sv}", "stale_links", strv_variant (r->stale_links));
  g_variant_builder_add (&b, "{sv}", "repaired", strv_variant (r->repaired));
  g_variant_builder_add (&b, "{sv}", "host_held", strv_variant (r->host_held));
  g_variant_builder_add (&b, "{sv}", "libvirt", g_variant_new_boolean (r->libvirt_reachable));
  if (r->libvirt_error)
    g_variant_builder_add (&b, "{sv}", "libvirt_error", g_variant_new_string (r->libvirt_error));
  return g_variant_builder_end (&b);
}

static void
reconciled (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr (GDBusMethodInvocation) inv = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaReconcileReport) report = va_allocator_reconcile_finish (VA_ALLOCATOR (source), res, &error);

  if (!report)
    {
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  g_dbus_method_invocation_return_value (inv, g_variant_new ("(@a{sv})", va_dbus_report_to_variant (report)));
}

static void
do_reconcile (VaDbus *self, GDBusMethodInvocation *inv)
{
  va_allocator_reconcile_async (self->alloc, reconciled, g_object_ref (inv));
}

static void
do_drain (VaDbus *self, GDBusMethodInvocation *inv)
{
  g_autoptr (GError) error = NULL;
  const char *pool;
  gboolean draining;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&sb)", &pool, &draining);
  if (!va_allocator_drain (self->alloc, pool, draining, &error))
    {
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  {
    const char *fields[] = { "VA_POOL", pool, "VA_DRAINING", draining ? "1" : "0", NULL };

    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_DRAIN, NULL, fields,
              draining ? "pool %s is draining: no new allocations" : "pool %s takes allocations again", pool);
  }
  g_dbus_method_invocation_return_value (inv, NULL);
}

/* ---- the open methods ---------------------------------------------------- */

/* The leases as a ListLeases call found them, shared by the workers that
 * answer from it: taken on the main loop (a copy, no reply built), kept
 * until a lease changes or for SNAPSHOT_KEEP_S, so that a flood of calls
 * costs the main loop one copy per change at most. ListDevices' copy of
 * the devices is kept the same way, and dropped with it. */
#define SNAPSHOT_KEEP_S 2
/* a reply of this many leases leaves the heap grown: give it back */
#define SNAPSHOT_TRIM_ABOVE 256

typedef struct _Snapshot
{
  gint ref_count;
  GPtrArray *leases; /* VaLease* */
  GPtrArray *broken; /* its reason, or NULL, for each */
  GMutex lock;       /* guards reply: the workers that answer from it */
  GVariant *reply;   /* serialized by the first of them, or NULL */
} Snapshot;

static Snapshot *
snapshot_ref (Snapshot *snap)
{
  g_atomic_int_inc (&snap->ref_count);
  return snap;
}

static void
snapshot_unref (Snapshot *snap)
{
  gboolean big;

  if (!g_atomic_int_dec_and_test (&snap->ref_count))
    return;
  big = snap->leases->len > SNAPSHOT_TRIM_ABOVE;
  g_ptr_array_unref (snap->leases);
  g_ptr_array_unref (snap->broken);
  g_clear_pointer (&snap->reply, g_variant_unref);
  g_mutex_clear (&snap->lock);
  g_free (snap);
  if (big)
    malloc_trim (0);
}

static void devices_unref (struct _Devices *d);

static gboolean
snapshot_expire (gpointer user_data)
{
  VaDbus *self = user_data;

  g_clear_pointer (&self->snapshot, snapshot_unref);
  g_clear_pointer (&self->devices, devices_unref);
  self->snapshot_timer = 0;
  return G_SOURCE_REMOVE;
}

/* Either copy was taken: both are dropped SNAPSHOT_KEEP_S after the first. */
static void
snapshot_keep (VaDbus *self)
{
  if (!self->snapshot_timer)
    self->snapshot_timer = g_timeout_add_seconds (SNAPSHOT_KEEP_S, snapshot_expire, self);
}

/* A lease, a pool or a device changed: the copies are dropped. */
static void
snapshot_invalidate (VaDbus *self)
{
  g_clear_pointer (&self->snapshot, snapshot_unref);
  g_clear_pointer (&self->devices, devices_unref);
  g_clear_handle_id (&self->snapshot_timer, g_source_remove);
}

static Snapshot *
snapshot_get (VaDbus *self)
{
  Snapshot *snap = self->snapshot;

  if (!snap)
    {
      snap = g_new0 (Snapshot, 1);
      snap->ref_count = 1;
      g_mutex_init (&snap->lock);
      snap->leases = va_allocator_list_leases (self->alloc);
      snap->broken = g_ptr_array_new_full (snap->leases->len, g_free);
      for (guint i = 0; i < snap->leases->len; i++)
        {
          const VaLease *lease = g_ptr_array_index (snap->leases, i);
          /* "lease-broken" and "lease-repaired" drop the copy */
          g_ptr_array_add (snap->broken, va_allocator_get_lease_broken (self->alloc, lease->uuid, lease->mac));
        }
      self->snapshot = snap;
      snapshot_keep (self);
    }
  return snapshot_ref (snap);
}

/* On a worker: the reply, serialized by the first call that answers from
 * @snap and handed to the others as it is (one reply per change however
 * many calls, the others wait for it rather than build it again); the
 * tree it was built as is freed here too (the serialized reply is one
 * block, mapped and unmapped whole: va-daemon.c). */
static GVariant *
list_leases_reply (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  Snapshot *snap = data;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&snap->lock);
  g_autoptr (GVariant) tree = NULL;
  g_autoptr (GBytes) data_bytes = NULL;
  GVariantBuilder b;

  if (snap->reply)
    return g_variant_ref (snap->reply);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < snap->leases->len; i++)
    {
      const char *broken = g_ptr_array_index (snap->broken, i);
      g_autoptr (GVariant) v = g_variant_ref_sink (va_lease_to_variant (g_ptr_array_index (snap->leases, i)));
      GVariantIter iter;
      GVariant *child;

      g_variant_builder_open (&b, G_VARIANT_TYPE_VARDICT);
      g_variant_iter_init (&iter, v);
      while ((child = g_variant_iter_next_value (&iter)))
        {
          g_variant_builder_add_value (&b, child);
          g_variant_unref (child);
        }
      g_variant_builder_add (&b, "{sv}", "broken", g_variant_new_boolean (broken != NULL));
      g_variant_builder_add (&b, "{sv}", "broken_reason", g_variant_new_string (broken ? broken : ""));
      g_variant_builder_close (&b);
    }
  tree = g_variant_ref_sink (g_variant_new ("(aa{sv})", &b));
  data_bytes = g_variant_get_data_as_bytes (tree);
  /* no trim per reply: snapshot_unref() trims once the copy is dropped,
   * at most once per SNAPSHOT_KEEP_S however many calls read it */
  snap->reply = g_variant_ref_sink (g_variant_new_from_bytes (G_VARIANT_TYPE ("(aa{sv})"), data_bytes, TRUE));
  return g_variant_ref (snap->reply);
}

/* When the call gets its slot (it may have been held): the copy. */
static gpointer
list_leases_start (gpointer self, GDBusMethodInvocation *inv)
{
  return snapshot_get (self);
}

static void
do_list_leases (VaDbus *self, GDBusMethodInvocation *inv, guint32 uid)
{
  va_open_submit (self->open, inv, uid, list_leases_start, self, list_leases_reply, (GDestroyNotify) snapshot_unref);
}

static void
do_rewrite (VaDbus *self, GDBusMethodInvocation *inv, guint32 uid)
{
  va_open_submit_rewrite (self->open, inv, uid, self->alloc);
}

/* ListDevices is open to everyone: answered from the allocator's memory
 * (no sysfs, no netlink), at most this many VFs in a reply (about 200
 * bytes each), the rest counted in left_out. */
#define LIST_DEVICES_MAX_VFS 4096

static void
add_str (GVariantBuilder *b, const char *key, const char *value)
{
  g_variant_builder_add (b, "{sv}", key, g_variant_new_string (value ? value : ""));
}

static GVariant *
dev_vf_variant (const VaDevVf *vf)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  add_str (&b, "pci", vf->pci);
  add_str (&b, "mgmtdev", vf->mgmtdev);
  add_str (&b, "state", vf->state);
  add_str (&b, "uuid", vf->uuid);
  add_str (&b, "mac", vf->mac);
  add_str (&b, "domain_name", vf->domain_name);
  add_str (&b, "reason", vf->reason);
  return g_variant_builder_end (&b);
}

static GVariant *
dev_pf_variant (const VaDevPf *pf)
{
  GVariantBuilder b, vfs;
  char id[8];

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  add_str (&b, "pci", pf->pci);
  add_str (&b, "name", pf->name);
  add_str (&b, "model", pf->model);
  /* as lspci -n and the match-vendor and match-device keys spell them */
  g_snprintf (id, sizeof id, "%04x", pf->vendor);
  add_str (&b, "vendor", id);
  g_snprintf (id, sizeof id, "%04x", pf->device);
  add_str (&b, "device", id);
  g_variant_builder_add (&b, "{sv}", "numa", g_variant_new_int32 (pf->numa_node));
  add_str (&b, "eswitch", pf->eswitch);
  g_variant_builder_add (&b, "{sv}", "vf_count", g_variant_new_uint32 (pf->n_vfs));
  add_str (&b, "pool_name", pf->pool);
  add_str (&b, "no_pool_reason", pf->why_no_pool);
  g_variant_builder_add (&b, "{sv}", "healthy", g_variant_new_boolean (pf->healthy));
  add_str (&b, "health_reason", pf->health_reason);
  g_variant_builder_init (&vfs, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < pf->vfs->len; i++)
    g_variant_builder_add_value (&vfs, dev_vf_variant (g_ptr_array_index (pf->vfs, i)));
  g_variant_builder_add (&b, "{sv}", "vfs", g_variant_builder_end (&vfs));
  return g_variant_builder_end (&b);
}

/* What ListDevices calls answer from: a copy of the allocator's memory,
 * at most LIST_DEVICES_MAX_VFS VFs, taken on the main loop when a call
 * gets its slot and kept as the leases' (snapshot_get). */
typedef struct _Devices
{
  gint ref_count;
  GPtrArray *pfs; /* VaDevPf* */
  guint left_out;
  guint n_vfs;
  GMutex lock;     /* guards reply */
  GVariant *reply; /* serialized once, as the leases' (list_leases_reply) */
} Devices;

static Devices *
devices_ref (Devices *d)
{
  g_atomic_int_inc (&d->ref_count);
  return d;
}

static void
devices_unref (Devices *d)
{
  gboolean big;

  if (!g_atomic_int_dec_and_test (&d->ref_count))
    return;
  big = d->n_vfs > SNAPSHOT_TRIM_ABOVE;
  g_ptr_array_unref (d->pfs);
  g_clear_pointer (&d->reply, g_variant_unref);
  g_mutex_clear (&d->lock);
  g_free (d);
  if (big)
    malloc_trim (0);
}

static gpointer
list_devices_start (gpointer user_data, GDBusMethodInvocation *inv)
{
  VaDbus *self = user_data;
  Devices *d = self->devices;

  if (!d)
    {
      d = g_new0 (Devices, 1);
      d->ref_count = 1;
      g_mutex_init (&d->lock);
      d->pfs = va_allocator_list_devices (self->alloc, LIST_DEVICES_MAX_VFS, &d->left_out);
      for (guint i = 0; i < d->pfs->len; i++)
        d->n_vfs += ((VaDevPf *) g_ptr_array_index (d->pfs, i))->vfs->len;
      self->devices = d;
      snapshot_keep (self);
    }
  return devices_ref (d);
}

/* On a worker: the reply, built and serialized off the main loop, once
 * per copy, as ListLeases' (list_leases_reply). */
static GVariant *
list_devices_reply (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  Devices *d = data;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&d->lock);
  g_autoptr (GVariant) tree = NULL;
  g_autoptr (GBytes) data_bytes = NULL;
  GVariantBuilder b;

  if (d->reply)
    return g_variant_ref (d->reply);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < d->pfs->len; i++)
    g_variant_builder_add_value (&b, dev_pf_variant (g_ptr_array_index (d->pfs, i)));
  tree = g_variant_ref_sink (g_variant_new ("(aa{sv}u)", &b, d->left_out));
  data_bytes = g_variant_get_data_as_bytes (tree);
  *bytes = g_bytes_get_size (data_bytes);
  d->reply = g_variant_ref_sink (g_variant_new_from_bytes (G_VARIANT_TYPE ("(aa{sv}u)"), data_bytes, TRUE));
  return g_variant_ref (d->reply);
}

static void
do_list_devices (VaDbus *self, GDBusMethodInvocation *inv, guint32 uid)
{
  va_open_submit (self->open, inv, uid, list_devices_start, self, list_devices_reply, (GDestroyNotify) devices_unref);
}

static void
do_swap_back (VaDbus *self, GDBusMethodInvocation *inv)
{
  g_autoptr (GError) error = NULL;
  const char *uuid, *name;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&s&s)", &uuid, &name);
  if (!self->swap_back)
    g_set_error_literal (&error, VA_ERROR, VA_ERROR_FAILED, "this daemon runs no swap back");
  if (error || !va_daemon_swap_back_start (self->swap_back, uuid, name, &error))
    {
      g_dbus_method_invocation_return_gerror (inv, error);
      return;
    }
  g_dbus_method_invocation_return_value (inv, NULL);
}

static gboolean props_method (VaDbus *self, GDBusMethodInvocation *inv, const char *iface, const char *method);

static void
manager_method (GDBusConnection *conn, const char *sender, const char *path, const char *iface, const char *method, GVariant *params,
                GDBusMethodInvocation *inv, gpointer user_data)
{
  VaDbus *self = user_data;
  static const struct
  {
    const char *name;
    AuthorizedFunc func; /* a change */
    OpenFunc open_func;  /* or open to everyone: VaOpen bounds it */
  } methods[] = {
    { "Allocate", do_allocate, NULL },
    { "Release", do_release, NULL },
    { "ReleaseDomain", do_release_domain, NULL },
    { "Claim", do_claim, NULL },
    { "Reconcile", do_reconcile, NULL },
    { "Drain", do_drain, NULL },
    { "SwapBack", do_swap_back, NULL },
    { "ListLeases", NULL, do_list_leases },
    { "RewriteDomain", NULL, do_rewrite },
    { "ListDevices", NULL, do_list_devices },
  };

  if (props_method (self, inv, iface, method))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (methods); i++)
    if (strcmp (method, methods[i].name) == 0)
      {
        authorize (self, inv, methods[i].func, methods[i].open_func);
        return;
      }
  g_dbus_method_invocation_return_error (inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s", method);
}

static GVariant *
pools_variant (GPtrArray *pools)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_OBJECT_PATH_ARRAY);
  for (guint i = 0; i < pools->len; i++)
    {
      g_autofree char *path = va_bus_pool_path (((VaPoolStatus *) g_ptr_array_index (pools, i))->name);
      g_variant_builder_add (&b, "o", path);
    }
  return g_variant_builder_end (&b);
}

/* The manager's property @prop as it is now (a reference of the
 * caller's), at a cost that does not grow with the slots or the leases. */
static GVariant *
manager_property (VaDbus *self, const char *prop, GError **error)
{
  if (strcmp (prop, "Version") == 0)
    return g_variant_new_string (VA_VERSION);
  if (strcmp (prop, "Backend") == 0)
    return g_variant_new_string (va_allocator_get_backend_name (self->alloc));
  if (strcmp (prop, "Pools") == 0)
    return g_variant_ref (self->pools_paths);
  if (strcmp (prop, "LeaseCount") == 0)
    return g_variant_new_uint32 (va_allocator_get_n_leases (self->alloc));
  if (strcmp (prop, "MetricsFile") == 0)
    return g_variant_new_string (self->metrics ? va_metrics_get_path (self->metrics) : "");
  g_set_error (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
  return NULL;
}

/* ---- pools --------------------------------------------------------------- */

static GVariant *
pool_props (const VaPoolStatus *st)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "Name", g_variant_new_string (st->name));
  g_variant_builder_add (&b, "{sv}", "Total", g_variant_new_uint32 (st->total));
  g_variant_builder_add (&b, "{sv}", "Free", g_variant_new_uint32 (st->free));
  g_variant_builder_add (&b, "{sv}", "Leased", g_variant_new_uint32 (st->leased));
  g_variant_builder_add (&b, "{sv}", "Healthy", g_variant_new_boolean (st->healthy));
  g_variant_builder_add (&b, "{sv}", "HealthReason", g_variant_new_string (st->health_reason));
  g_variant_builder_add (&b, "{sv}", "Draining", g_variant_new_boolean (st->draining));
  g_variant_builder_add (&b, "{sv}", "VlanMethod", g_variant_new_string (st->vlan_method));
  g_variant_builder_add (&b, "{sv}", "Warning", g_variant_new_string (st->warning));
  g_variant_builder_add (&b, "{sv}", "SoftwareSlots", g_variant_new_uint32 (st->software_slots));
  g_variant_builder_add (&b, "{sv}", "SoftwareLeased", g_variant_new_uint32 (st->software_leased));
  g_variant_builder_add (&b, "{sv}", "BrokenLeases", g_variant_new_uint32 (st->broken_leases));
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

/* ---- property reads ------------------------------------------------------ */

/* Property reads (Get, GetAll) are open to everyone: GDBus hands them to
 * the method handlers (no get_property in the vtables), and they are
 * bounded and paced per user as the open methods are (VaOpen): a reply
 * costs no more than a method's, and a user that reads in a loop would
 * otherwise take the CPU of VM starts through the bus. The pools' are
 * answered from what sync_pools() last saw (and sent in
 * PropertiesChanged), the manager's from what it holds, at a cost that
 * grows with neither the slots nor the leases. */
typedef struct
{
  GVariant *reply; /* "(v)" or "(a{sv})", or NULL and: */
  GError *error;
} PropAnswer;

static void
prop_answer_free (PropAnswer *a)
{
  g_clear_pointer (&a->reply, g_variant_unref);
  g_clear_error (&a->error);
  g_free (a);
}

/* The pool's properties at @path as last sent, or NULL. */
static GVariant *
pool_props_at (VaDbus *self, const char *path, GError **error)
{
  const char *name = g_hash_table_lookup (self->pool_names, path);
  GVariant *props = name ? g_hash_table_lookup (self->pool_cache, name) : NULL;

  if (!props)
    g_set_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL, "no pool at %s", path);
  return props;
}

static void pools_flush (VaDbus *self);

/* On the main context, when the read gets its slot: the reply, from the
 * values as they are then (a held read does not answer an old one). */
static gpointer
props_start (gpointer user_data, GDBusMethodInvocation *inv)
{
  VaDbus *self = user_data;
  const char *path = g_dbus_method_invocation_get_object_path (inv);
  GVariant *params = g_dbus_method_invocation_get_parameters (inv);
  gboolean manager = strcmp (path, VA_BUS_PATH) == 0;
  PropAnswer *a = g_new0 (PropAnswer, 1);
  GVariant *props;
  const char *prop;

  pools_flush (self);
  props = manager ? NULL : pool_props_at (self, path, &a->error);
  if (!manager && !props)
    return a;
  if (strcmp (g_dbus_method_invocation_get_method_name (inv), "Get") == 0)
    {
      g_autoptr (GVariant) v = NULL;

      /* GDBus checked the interface and that the property is readable */
      g_variant_get_child (params, 1, "&s", &prop);
      if (manager)
        {
          if ((v = manager_property (self, prop, &a->error)))
            g_variant_take_ref (v);
        }
      else if (!(v = g_variant_lookup_value (props, prop, NULL)))
        g_set_error (&a->error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
      if (v)
        a->reply = g_variant_ref_sink (g_variant_new ("(v)", v));
    }
  else if (manager)
    {
      GDBusInterfaceInfo *info = g_dbus_node_info_lookup_interface (self->info, VA_BUS_IFACE);
      GVariantBuilder b;

      g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
      for (guint i = 0; info->properties && info->properties[i]; i++)
        {
          g_autoptr (GVariant) v = manager_property (self, info->properties[i]->name, NULL);

          if (v && g_variant_take_ref (v))
            g_variant_builder_add (&b, "{sv}", info->properties[i]->name, v);
        }
      a->reply = g_variant_ref_sink (g_variant_new ("(a{sv})", &b));
    }
  else
    a->reply = g_variant_ref_sink (g_variant_new ("(@a{sv})", props));
  return a;
}

/* On a worker: the reply made at the start. */
static GVariant *
props_reply (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  PropAnswer *a = data;

  if (!a->reply)
    {
      g_propagate_error (error, g_steal_pointer (&a->error));
      return NULL;
    }
  return g_variant_ref (a->reply);
}

static void
do_read_props (VaDbus *self, GDBusMethodInvocation *inv, guint32 uid)
{
  va_open_submit (self->open, inv, uid, props_start, self, props_reply, (GDestroyNotify) prop_answer_free);
}

/* Get and GetAll of org.freedesktop.DBus.Properties (the only method a
 * pool has); GDBus refuses Set of these read-only properties itself. */
static gboolean
props_method (VaDbus *self, GDBusMethodInvocation *inv, const char *iface, const char *method)
{
  if (strcmp (iface, "org.freedesktop.DBus.Properties") != 0)
    return FALSE;
  if (strcmp (method, "Get") == 0 || strcmp (method, "GetAll") == 0)
    authorize (self, inv, NULL, do_read_props);
  else
    g_dbus_method_invocation_return_error (inv, G_DBUS_ERROR, G_DBUS_ERROR_PROPERTY_READ_ONLY, "%s: the properties are read-only", method);
  return TRUE;
}

static void
pool_method (GDBusConnection *conn, const char *sender, const char *path, const char *iface, const char *method, GVariant *params,
             GDBusMethodInvocation *inv, gpointer user_data)
{
  if (!props_method (user_data, inv, iface, method))
    g_dbus_method_invocation_return_error (inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s", method);
}

/* ---- introspection ------------------------------------------------------ */

/* Introspect is open to everyone too, but GDBus answers it itself: on the
 * thread that reads every incoming message (root's and the hook's too),
 * holding the connection's lock, making the XML anew for each call (seen:
 * a user's flood of it doubled the hook's prepare time). A connection
 * filter, which runs on that thread before GDBus dispatches, takes the
 * calls to our objects' paths and their parents' off the connection; they
 * are answered through the open calls' bounds (VaOpen), for the caller's
 * uid, with the XML GDBus would have answered: made by GDBus itself, once
 * each time objects are registered (render_introspection()). A call to
 * any other path is left to GDBus: its answer there is a few constant
 * lines, as cheap as the error any unknown call gets. */
typedef struct _Introspection
{
  gatomicrefcount ref;
  GMutex lock;
  GHashTable *replies;   /* under lock: object path → "(s)", or NULL */
  GMainContext *context; /* the daemon's: where the calls are admitted */
  VaDbus *dbus;          /* on the context only: NULL once freed */
} Introspection;

typedef struct
{
  Introspection *in;
  GDBusMessage *msg;
  GVariant *reply; /* "(s)" */
} IntrospectCall;

static void
introspection_unref (Introspection *in)
{
  if (!g_atomic_ref_count_dec (&in->ref))
    return;
  g_clear_pointer (&in->replies, g_hash_table_unref);
  g_main_context_unref (in->context);
  g_mutex_clear (&in->lock);
  g_free (in);
}

static void
introspect_call_free (IntrospectCall *c)
{
  introspection_unref (c->in);
  g_clear_object (&c->msg);
  g_clear_pointer (&c->reply, g_variant_unref);
  g_free (c);
}

/* On a worker: the XML rendered for the call's path. */
static GVariant *
introspect_reply (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error)
{
  return g_variant_ref (data);
}

static void
introspect_uid (VaDbus *self, guint32 uid, const GError *error, gpointer data)
{
  IntrospectCall *c = data;

  if (!c->in->dbus)
    ; /* stopped meanwhile */
  else if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER))
    g_message ("Introspect of %s not run: the caller left the bus", g_dbus_message_get_sender (c->msg));
  else
    va_open_submit_message (self->open, self->conn, c->msg, uid, introspect_reply, g_steal_pointer (&c->reply),
                            (GDestroyNotify) g_variant_unref);
  introspect_call_free (c);
}

/* On the daemon's context: a call the filter took. */
static gboolean
introspect_admit (gpointer user_data)
{
  IntrospectCall *taken = user_data, *c;
  VaDbus *self = taken->in->dbus;
  const char *sender;

  if (!self)
    return G_SOURCE_REMOVE; /* the daemon stops */
  c = g_new0 (IntrospectCall, 1);
  c->in = taken->in;
  g_atomic_ref_count_inc (&c->in->ref);
  c->msg = g_steal_pointer (&taken->msg);
  c->reply = g_steal_pointer (&taken->reply);
  sender = g_dbus_message_get_sender (c->msg);
  if (sender)
    with_sender_uid (self, sender, introspect_uid, c);
  else
    introspect_uid (self, G_MAXUINT32, NULL, c); /* a peer-to-peer connection */
  return G_SOURCE_REMOVE;
}

/* On GDBus's worker thread, for every message that comes in: an
 * Introspect call (as GDBus recognizes one) to a path rendered is taken. */
static GDBusMessage *
introspect_filter (GDBusConnection *conn, GDBusMessage *msg, gboolean incoming, gpointer user_data)
{
  Introspection *in = user_data;
  const char *path = g_dbus_message_get_path (msg);
  GVariant *reply = NULL;
  IntrospectCall *c;

  if (!incoming || g_dbus_message_get_message_type (msg) != G_DBUS_MESSAGE_TYPE_METHOD_CALL
      || g_strcmp0 (g_dbus_message_get_interface (msg), "org.freedesktop.DBus.Introspectable") != 0
      || g_strcmp0 (g_dbus_message_get_member (msg), "Introspect") != 0 || g_strcmp0 (g_dbus_message_get_signature (msg), "") != 0)
    return msg;
  g_mutex_lock (&in->lock);
  if (path && in->replies && (reply = g_hash_table_lookup (in->replies, path)))
    g_variant_ref (reply);
  g_mutex_unlock (&in->lock);
  if (!reply)
    return msg;
  c = g_new0 (IntrospectCall, 1);
  c->in = in;
  g_atomic_ref_count_inc (&in->ref);
  c->msg = msg; /* the filter's reference: GDBus dispatches it no more */
  c->reply = reply;
  g_main_context_invoke_full (in->context, G_PRIORITY_DEFAULT, introspect_admit, c, (GDestroyNotify) introspect_call_free);
  return NULL;
}

/* One end of a connection pair of our own, no bus, no authentication. */
static GDBusConnection *
peer_new (int fd, GError **error)
{
  g_autoptr (GSocket) sock = g_socket_new_from_fd (fd, error);
  g_autoptr (GSocketConnection) stream = NULL;

  if (!sock)
    {
      close (fd);
      return NULL;
    }
  stream = g_socket_connection_factory_create_connection (sock);
  return g_dbus_connection_new_sync (G_IO_STREAM (stream), NULL, G_DBUS_CONNECTION_FLAGS_NONE, NULL, NULL, error);
}

/* The answer GDBus gives to Introspect of each of our objects' paths and
 * of their parents: GDBus's own, from the same interfaces registered at
 * the same paths in the same order (the order of the child nodes) on a
 * connection pair of our own. */
static GHashTable *
render_introspection (VaDbus *self, GError **error)
{
  static const GDBusInterfaceVTable none = { NULL, NULL, NULL };
  g_autoptr (GHashTable) replies = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_variant_unref);
  g_autoptr (GHashTable) paths = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GDBusConnection) server = NULL;
  g_autoptr (GDBusConnection) client = NULL;
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer path;
  gboolean ok = TRUE;
  int fds[2];

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    {
      int err = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (err), "socketpair: %s", g_strerror (err));
      return NULL;
    }
  server = peer_new (fds[0], error);
  if (!server)
    {
      close (fds[1]);
      return NULL;
    }
  client = peer_new (fds[1], error);
  for (guint i = 0; client && i < self->paths->len && ok; i++)
    {
      const char *p = g_ptr_array_index (self->paths, i);
      const char *iface = strcmp (p, VA_BUS_PATH) == 0 ? VA_BUS_IFACE : VA_BUS_POOL_IFACE;
      guint id
        = g_dbus_connection_register_object (server, p, g_dbus_node_info_lookup_interface (self->info, iface), &none, NULL, NULL, error);

      ok = id != 0;
      g_ptr_array_add (ids, GUINT_TO_POINTER (id));
      /* the path and its parents */
      for (g_autofree char *at = g_strdup (p); ok && !g_hash_table_contains (paths, at);)
        {
          char *slash = strrchr (at, '/');

          g_hash_table_add (paths, g_strdup (at));
          if (slash == at)
            slash[1] = '\0';
          else
            *slash = '\0';
        }
    }
  g_hash_table_iter_init (&iter, paths);
  while (client && ok && g_hash_table_iter_next (&iter, &path, NULL))
    {
      GVariant *reply = g_dbus_connection_call_sync (client, NULL, path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL,
                                                     G_VARIANT_TYPE ("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, error);

      ok = reply != NULL;
      if (ok)
        g_hash_table_insert (replies, g_strdup (path), reply);
    }
  for (guint i = 0; i < ids->len; i++)
    if (GPOINTER_TO_UINT (ids->pdata[i]))
      g_dbus_connection_unregister_object (server, GPOINTER_TO_UINT (ids->pdata[i]));
  if (client)
    g_dbus_connection_close_sync (client, NULL, NULL);
  g_dbus_connection_close_sync (server, NULL, NULL);
  return client && ok ? g_steal_pointer (&replies) : NULL;
}

/* After objects were registered: the filter answers from their XML (and
 * leaves every call to GDBus if it could not be made). */
static void
introspection_render (VaDbus *self)
{
  g_autoptr (GError) error = NULL;
  GHashTable *replies = render_introspection (self, &error);

  if (!replies)
    g_warning ("rendering the objects' introspection: %s; GDBus answers Introspect, unbounded", error->message);
  g_mutex_lock (&self->introspection->lock);
  g_clear_pointer (&self->introspection->replies, g_hash_table_unref);
  self->introspection->replies = replies;
  g_mutex_unlock (&self->introspection->lock);
}

static void
emit_props_changed (VaDbus *self, const char *path, const char *iface, GVariant *changed)
{
  g_dbus_connection_emit_signal (self->conn, NULL, path, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                                 g_variant_new ("(s@a{sv}as)", iface, changed, NULL), NULL);
}

static void
sync_pools (VaDbus *self, gboolean emit)
{
  static const GDBusInterfaceVTable vtable = { pool_method, NULL, NULL };
  g_autoptr (GPtrArray) pools = va_allocator_list_pools (self->alloc);
  gboolean added = FALSE;

  self->pools_dirty = FALSE; /* sent now */

  for (guint i = 0; i < pools->len; i++)
    {
      VaPoolStatus *st = g_ptr_array_index (pools, i);
      g_autofree char *path = va_bus_pool_path (st->name);
      g_autoptr (GVariant) props = pool_props (st);
      GVariant *old = g_hash_table_lookup (self->pool_cache, st->name);

      if (!g_hash_table_contains (self->pool_ids, st->name))
        {
          GDBusInterfaceInfo *iface = g_dbus_node_info_lookup_interface (self->info, VA_BUS_POOL_IFACE);
          guint id = g_dbus_connection_register_object (self->conn, path, iface, &vtable, self, NULL, NULL);

          if (id)
            g_ptr_array_add (self->paths, g_strdup (path));
          g_hash_table_insert (self->pool_ids, g_strdup (st->name), GUINT_TO_POINTER (id));
          g_hash_table_insert (self->pool_names, g_strdup (path), g_strdup (st->name));
          added = TRUE;
        }
      if (emit && old && !g_variant_equal (old, props))
        {
          gsize n = g_variant_n_children (props), n_old = g_variant_n_children (old);
          GVariantBuilder b;

          /* pool_props() puts the same keys in one order: an entry (key
           * and value) unlike the old one at its index is a change (a
           * lookup by key walked the dictionary for each) */
          g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
          for (gsize k = 0; k < n; k++)
            {
              g_autoptr (GVariant) entry = g_variant_get_child_value (props, k);
              g_autoptr (GVariant) was = k < n_old ? g_variant_get_child_value (old, k) : NULL;

              if (!was || !g_variant_equal (entry, was))
                g_variant_builder_add_value (&b, entry);
            }
          emit_props_changed (self, path, VA_BUS_POOL_IFACE, g_variant_builder_end (&b));
        }
      g_hash_table_insert (self->pool_cache, g_strdup (st->name), g_steal_pointer (&props));
    }
  g_clear_pointer (&self->pools_paths, g_variant_unref);
  self->pools_paths = g_variant_ref_sink (pools_variant (pools));
  if (added)
    introspection_render (self);
  if (emit && added)
    {
      GVariantBuilder b;
      g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&b, "{sv}", "Pools", self->pools_paths);
      emit_props_changed (self, VA_BUS_PATH, VA_BUS_IFACE, g_variant_builder_end (&b));
    }
}

/* The pools' PropertiesChanged are coalesced: a change with no window
 * open is sent at once and opens one of POOLS_SIGNAL_MS; the changes that
 * come in it are sent together, with their final values, at its end (and
 * that opens the next). Without this, each commit batch (one per change at
 * one caller) rebuilt every pool's properties and sent a signal: a third
 * of a durable Allocate+Release's CPU. A watcher learns of a change within
 * the bound; a read (props_start()) sends what is pending first, so that
 * it answers nothing the signals have not said, and nothing stale. */
#define POOLS_SIGNAL_MS 100

static gboolean
pools_window_end (gpointer user_data)
{
  VaDbus *self = user_data;

  if (self->pools_dirty)
    {
      sync_pools (self, TRUE);
      return G_SOURCE_CONTINUE;
    }
  self->pools_timer = 0;
  return G_SOURCE_REMOVE;
}

static void
pools_changed (VaDbus *self)
{
  if (self->pools_timer)
    {
      self->pools_dirty = TRUE;
      return;
    }
  sync_pools (self, TRUE);
  self->pools_timer = g_timeout_add (POOLS_SIGNAL_MS, pools_window_end, self);
}

/* Before a read of the properties: what is pending is sent, then read. */
static void
pools_flush (VaDbus *self)
{
  if (self->pools_dirty)
    sync_pools (self, TRUE);
}

/* ---- signals ------------------------------------------------------------- */

/* @lease's variant: the one Allocate's reply was built with when that was
 * this lease as it is now (the allocator answers, then signals), so that a
 * lease is built once per change. */
static GVariant *
added_variant (VaDbus *self, const VaLease *lease)
{
  g_autoptr (VaLease) kept = g_steal_pointer (&self->added);
  g_autoptr (GVariant) v = g_steal_pointer (&self->added_variant);

  if (kept && va_lease_equal (kept, lease))
    return g_steal_pointer (&v);
  return g_variant_ref_sink (va_lease_to_variant (lease));
}

static void
on_lease_added (VaAllocator *alloc, VaLease *lease, VaDbus *self)
{
  g_autoptr (GVariant) v = added_variant (self, lease);

  snapshot_invalidate (self);
  g_dbus_connection_emit_signal (self->conn, NULL, VA_BUS_PATH, VA_BUS_IFACE, "LeaseAdded", g_variant_new_tuple (&v, 1), NULL);
}

static void
on_lease_removed (VaAllocator *alloc, VaLease *lease, VaDbus *self)
{
  GVariant *v = va_lease_to_variant (lease);

  snapshot_invalidate (self);
  g_dbus_connection_emit_signal (self->conn, NULL, VA_BUS_PATH, VA_BUS_IFACE, "LeaseRemoved", g_variant_new_tuple (&v, 1), NULL);
}

static void
on_lease_broken (VaAllocator *alloc, VaLease *lease, const char *reason, VaDbus *self)
{
  snapshot_invalidate (self);
  sync_pools (self, TRUE); /* BrokenLeases */
  g_dbus_connection_emit_signal (self->conn, NULL, VA_BUS_PATH, VA_BUS_IFACE, "LeaseBroken",
                                 g_variant_new ("(@a{sv}s)", va_lease_to_variant (lease), reason), NULL);
}

static void
on_lease_repaired (VaAllocator *alloc, VaLease *lease, VaDbus *self)
{
  snapshot_invalidate (self);
  sync_pools (self, TRUE);
}

static void
on_low_watermark (VaAllocator *alloc, const char *pool, guint free, VaDbus *self)
{
  g_dbus_connection_emit_signal (self->conn, NULL, VA_BUS_PATH, VA_BUS_IFACE, "LowWatermark", g_variant_new ("(su)", pool, free), NULL);
}

static void
on_pools_changed (VaAllocator *alloc, VaDbus *self)
{
  /* a commit, a drain, a reconcile (a software device served again) or
   * a device change */
  snapshot_invalidate (self);
  pools_changed (self);
}

static void
on_name_owner_changed (GDBusConnection *conn, const char *sender, const char *path, const char *iface, const char *signal, GVariant *params,
                       gpointer user_data)
{
  VaDbus *self = user_data;
  const char *name, *old_owner, *new_owner;

  g_variant_get (params, "(&s&s&s)", &name, &old_owner, &new_owner);
  if (!*new_owner)
    {
      g_hash_table_remove (self->uids, name);
      va_open_sender_gone (self->open, name);
    }
}

VaDbus *
va_dbus_new (VaAllocator *alloc, GDBusConnection *conn, GError **error)
{
  static const GDBusInterfaceVTable vtable = { manager_method, NULL, NULL };
  g_autoptr (GBytes) xml = NULL;
  VaDbus *self;

  g_return_val_if_fail (VA_IS_ALLOCATOR (alloc), NULL);
  g_return_val_if_fail (G_IS_DBUS_CONNECTION (conn), NULL);

  /* registered by hand: a static library drops the automatic constructor */
  if (g_once_init_enter (&resources_registered))
    {
      va_dbus_register_resource ();
      g_once_init_leave (&resources_registered, 1);
    }
  xml = g_resources_lookup_data ("/org/vdpa_allocator/dbus/org.vdpa_allocator.Allocator1.xml", 0, error);
  if (!xml)
    return NULL;
  va_bus_error_register ();
  self = g_new0 (VaDbus, 1);
  self->alloc = g_object_ref (alloc);
  self->conn = g_object_ref (conn);
  self->pool_ids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->pool_cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_variant_unref);
  self->pool_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->uids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->lookups = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->denials = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) denials_free);
  self->open = va_open_new ();
  self->paths = g_ptr_array_new_with_free_func (g_free);
  self->introspection = g_new0 (Introspection, 1);
  g_atomic_ref_count_init (&self->introspection->ref);
  g_mutex_init (&self->introspection->lock);
  self->introspection->context = g_main_context_ref_thread_default ();
  self->introspection->dbus = self;
  g_atomic_ref_count_inc (&self->introspection->ref);
  self->filter_id = g_dbus_connection_add_filter (conn, introspect_filter, self->introspection, (GDestroyNotify) introspection_unref);
  self->name_owner_sub
    = g_dbus_connection_signal_subscribe (conn, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
                                          NULL, G_DBUS_SIGNAL_FLAGS_NONE, on_name_owner_changed, self, NULL);
  self->info = g_dbus_node_info_new_for_xml (g_bytes_get_data (xml, NULL), error);
  if (!self->info)
    {
      va_dbus_free (self);
      return NULL;
    }
  self->manager_id = g_dbus_connection_register_object (conn, VA_BUS_PATH, g_dbus_node_info_lookup_interface (self->info, VA_BUS_IFACE),
                                                        &vtable, self, NULL, error);
  if (!self->manager_id)
    {
      va_dbus_free (self);
      return NULL;
    }
  g_ptr_array_add (self->paths, g_strdup (VA_BUS_PATH));
  sync_pools (self, FALSE); /* renders the introspection */
  self->handlers[0] = g_signal_connect (alloc, "lease-added", G_CALLBACK (on_lease_added), self);
  self->handlers[1] = g_signal_connect (alloc, "lease-removed", G_CALLBACK (on_lease_removed), self);
  self->handlers[2] = g_signal_connect (alloc, "low-watermark", G_CALLBACK (on_low_watermark), self);
  self->handlers[3] = g_signal_connect (alloc, "pools-changed", G_CALLBACK (on_pools_changed), self);
  self->handlers[4] = g_signal_connect (alloc, "lease-broken", G_CALLBACK (on_lease_broken), self);
  self->handlers[5] = g_signal_connect (alloc, "lease-repaired", G_CALLBACK (on_lease_repaired), self);
  return self;
}

void
va_dbus_set_metrics (VaDbus *self, VaMetrics *metrics)
{
  g_return_if_fail (self != NULL);

  self->metrics = metrics;
}

void
va_dbus_set_swap_back (VaDbus *self, VaDaemonSwapBack *swap_back)
{
  g_return_if_fail (self != NULL);

  self->swap_back = swap_back;
}

void
va_dbus_free (VaDbus *self)
{
  GHashTableIter iter;
  gpointer id;

  if (!self)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (self->handlers); i++)
    g_clear_signal_handler (&self->handlers[i], self->alloc);
  /* a call the filter takes from now on is dropped (introspect_admit()) */
  if (self->filter_id)
    g_dbus_connection_remove_filter (self->conn, self->filter_id);
  if (self->introspection)
    {
      self->introspection->dbus = NULL;
      introspection_unref (self->introspection);
    }
  if (self->manager_id)
    g_dbus_connection_unregister_object (self->conn, self->manager_id);
  g_hash_table_iter_init (&iter, self->pool_ids);
  while (g_hash_table_iter_next (&iter, NULL, &id))
    g_dbus_connection_unregister_object (self->conn, GPOINTER_TO_UINT (id));
  if (self->name_owner_sub)
    g_dbus_connection_signal_unsubscribe (self->conn, self->name_owner_sub);
  g_clear_pointer (&self->open, va_open_free);
  snapshot_invalidate (self);
  g_clear_pointer (&self->pools_paths, g_variant_unref);
  g_clear_handle_id (&self->pools_timer, g_source_remove);
  g_clear_pointer (&self->added, va_lease_free);
  g_clear_pointer (&self->added_variant, g_variant_unref);
  /* the denials counted since the last line are told at stop too */
  if (self->denials_timer)
    {
      guint timer = self->denials_timer;

      denials_tick (self);
      g_source_remove (timer);
      self->denials_timer = 0;
    }
  g_hash_table_unref (self->denials);
  g_hash_table_unref (self->uids);
  g_hash_table_unref (self->lookups);
  g_hash_table_unref (self->pool_ids);
  g_hash_table_unref (self->pool_cache);
  g_hash_table_unref (self->pool_names);
  g_ptr_array_unref (self->paths);
  g_clear_pointer (&self->info, g_dbus_node_info_unref);
  g_clear_object (&self->authority);
  g_object_unref (self->conn);
  g_object_unref (self->alloc);
  g_free (self);
}
