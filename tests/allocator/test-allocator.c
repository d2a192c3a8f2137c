/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The allocator core on the simulated NIC (the stand-in for hardware this
 * machine lacks) with a real SQLite store: leases, their durability across
 * a restart, port links, reconciliation of devices. */
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "va-allocator.h"
#include "va-backend.h"
#include "va-error.h"

#define UUID1 "6f1e2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
#define UUID2 "11111111-2222-3333-4444-555555555555"

typedef struct
{
  char *dir;
  char *conf_dir;
  char *state_dir;
  char *run_dir;
  VaConfig *config;
  VaBackend *backend;
  VaStore *store;
  VaAllocator *alloc;
  guint added;
  guint removed;
  guint low;
} Fixture;

static const char conf[] = "[simulate]\n"
                           "pfs=2\n"
                           "vfs=2\n"
                           "numa-nodes=2\n"
                           "[pool accel]\n"
                           "match-vendor=15b3\n"
                           "max-vqp=2\n"
                           "low-watermark=2\n"
                           "[network vpc2]\n"
                           "mode=vdpa\n"
                           "pool=accel\n"
                           "vlan=2334\n"
                           "[network capped]\n"
                           "mode=vdpa\n"
                           "pool=accel\n"
                           "vlan=10\n"
                           "quota=1\n"
                           "[network vpc1]\n"
                           "mode=virtio\n"
                           "vlan=2200\n"
                           "fallback-bridge=br0\n";

static void
on_added (VaAllocator *a, VaLease *lease, Fixture *f)
{
  f->added++;
}

static void
on_removed (VaAllocator *a, VaLease *lease, Fixture *f)
{
  f->removed++;
}

static void
on_low (VaAllocator *a, const char *pool, guint free, Fixture *f)
{
  f->low++;
}

static void
start (Fixture *f)
{
  g_autoptr (GError) error = NULL;

  f->config = va_config_load (f->conf_dir, &error);
  g_assert_no_error (error);
  f->backend = va_backend_sim_new (f->config, f->run_dir, &error);
  g_assert_no_error (error);
  f->store = va_store_open (f->state_dir, &error);
  g_assert_no_error (error);
  f->alloc = va_allocator_new (f->config, f->backend, f->store, f->run_dir, &error);
  g_assert_no_error (error);
  g_signal_connect (f->alloc, "lease-added", G_CALLBACK (on_added), f);
  g_signal_connect (f->alloc, "lease-removed", G_CALLBACK (on_removed), f);
  g_signal_connect (f->alloc, "low-watermark", G_CALLBACK (on_low), f);
}

static void
stop (Fixture *f)
{
  g_clear_object (&f->alloc);
  g_clear_pointer (&f->store, va_store_free);
  g_clear_object (&f->backend);
  g_clear_pointer (&f->config, va_config_free);
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *conf_file = NULL;

  f->dir = g_dir_make_tmp ("va-alloc-XXXXXX", &error);
  g_assert_no_error (error);
  f->conf_dir = g_build_filename (f->dir, "etc", NULL);
  f->state_dir = g_build_filename (f->dir, "state", NULL);
  f->run_dir = g_build_filename (f->dir, "run", NULL);
  g_mkdir (f->conf_dir, 0755);
  conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  g_file_set_contents (conf_file, conf, -1, &error);
  g_assert_no_error (error);
  start (f);
}

/* The allocator started again on @text as its configuration. */
static void
restart_with (Fixture *f, const char *text)
{
  g_autofree char *conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  g_autoptr (GError) error = NULL;

  stop (f);
  g_file_set_contents (conf_file, text, -1, &error);
  g_assert_no_error (error);
  start (f);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);

  stop (f);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
  g_free (f->conf_dir);
  g_free (f->state_dir);
  g_free (f->run_dir);
}

static void
done_cb (GObject *source, GAsyncResult *result, gpointer user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static GAsyncResult *
wait_for (GAsyncResult **slot)
{
  while (!*slot)
    g_main_context_iteration (NULL, TRUE);
  return *slot;
}

static VaLease *
allocate (Fixture *f, const char *uuid, const char *mac, const char *network, int numa, GError **error)
{
  VaAllocRequest req = { .uuid = uuid, .domain_name = "vm", .mac = mac, .network = network, .numa_node = numa };
  g_autoptr (GAsyncResult) res = NULL;

  va_allocator_allocate_async (f->alloc, &req, done_cb, &res);
  return va_allocator_allocate_finish (f->alloc, wait_for (&res), error);
}

static VaLease *
allocate_req (Fixture *f, const VaAllocRequest *req, GError **error)
{
  g_autoptr (GAsyncResult) res = NULL;

  va_allocator_allocate_async (f->alloc, req, done_cb, &res);
  return va_allocator_allocate_finish (f->alloc, wait_for (&res), error);
}

static gboolean
release (Fixture *f, const char *uuid, const char *mac, GError **error)
{
  g_autoptr (GAsyncResult) res = NULL;

  va_allocator_release_async (f->alloc, uuid, mac, done_cb, &res);
  return va_allocator_release_finish (f->alloc, wait_for (&res), error);
}

static guint
n_leases (Fixture *f)
{
  g_autoptr (GPtrArray) leases = va_allocator_list_leases (f->alloc);
  return leases->len;
}

static guint
n_leased (Fixture *f, const char *pool)
{
  g_autoptr (VaPoolStatus) st = va_allocator_get_pool (f->alloc, pool, NULL);
  return st->leased;
}

static void
test_allocate_until_exhausted (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) slots = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (VaPoolStatus) st = NULL;

  for (guint i = 0; i < 4; i++)
    {
      g_autofree char *mac = g_strdup_printf ("52:54:00:00:00:%02x", i + 1);
      g_autoptr (VaLease) lease = allocate (f, UUID1, mac, "vpc2", -1, &error);
      g_autofree char *target = NULL;

      g_assert_no_error (error);
      g_assert_cmpstr (lease->pool, ==, "accel");
      g_assert_cmpuint (lease->vlan, ==, 2334);
      g_assert_cmpuint (lease->queues, ==, 2);
      g_assert_true (g_hash_table_add (slots, g_strdup (lease->slot)));
      /* the port path resolves to the device's char node */
      target = g_file_read_link (lease->port, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (target, ==, lease->chardev);
      g_assert_true (g_file_test (lease->port, G_FILE_TEST_EXISTS));
    }
  g_assert_cmpuint (f->added, ==, 4);
  g_assert_cmpuint (f->low, ==, 1); /* crossed below 2 once */

  g_assert_null (allocate (f, UUID2, "52:54:00:00:01:01", "vpc2", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  st = va_allocator_get_pool (f->alloc, "accel", NULL);
  g_assert_cmpuint (st->total, ==, 4);
  g_assert_cmpuint (st->free, ==, 0);
  g_assert_cmpuint (st->leased, ==, 4);
}

static void
test_idempotent_and_release (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:6B:3C:58", "vpc2", -1, &error);
  g_autoptr (VaLease) b = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autofree char *port = NULL;
  g_autofree char *chardev = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (a->mac, ==, "52:54:00:6b:3c:58");
  b = allocate (f, UUID1, "52:54:00:6b:3c:58", "vpc2", -1, &error);
  g_assert_no_error (error);
  g_assert_true (va_lease_equal (a, b));
  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpuint (leases->len, ==, 1);

  port = g_strdup (a->port);
  chardev = g_strdup (a->chardev);
  g_assert_true (release (f, UUID1, a->mac, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (port, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (chardev, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (f->removed, ==, 1);
  /* releasing again is fine */
  g_assert_true (release (f, UUID1, a->mac, &error));
  g_assert_cmpuint (f->removed, ==, 1);
}

static void
test_bad_requests (Fixture *f, gconstpointer data)
{
  static const struct
  {
    const char *uuid, *mac, *network;
    gint code;
  } cases[] = {
    { "not-a-uuid", "52:54:00:00:00:01", "vpc2", VA_ERROR_INVALID_ARGUMENT },
    { UUID1, "01:00:5e:00:00:01", "vpc2", VA_ERROR_INVALID_ARGUMENT },
    { UUID1, "52:54:00:00:00:01", "nope", VA_ERROR_NO_SUCH_NETWORK },
    { UUID1, "52:54:00:00:00:01", "vpc1", VA_ERROR_INVALID_ARGUMENT }, /* virtio only */
    { UUID1, "52:54:00:00:00:01", "", VA_ERROR_INVALID_ARGUMENT },     /* neither network nor pool */
    { UUID1, "52:54:00:00:00:01", "../../etc", VA_ERROR_INVALID_ARGUMENT },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_null (allocate (f, cases[i].uuid, cases[i].mac, cases[i].network, -1, &error));
      g_assert_error (error, VA_ERROR, cases[i].code);
    }
  g_assert_cmpuint (n_leases (f), ==, 0);
}

static void
test_quota_drain_numa (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "capped", -1, &error);
  g_autoptr (VaLease) n1 = NULL;
  g_autoptr (VaPoolStatus) st = NULL;

  g_assert_no_error (error);
  g_assert_null (allocate (f, UUID1, "52:54:00:00:00:02", "capped", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_clear_error (&error);

  /* sim PF i sits on NUMA node i % 2; sim1 is node 1 */
  n1 = allocate (f, UUID1, "52:54:00:00:00:03", "vpc2", 1, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_prefix (n1->slot, "0001:"));

  g_assert_true (va_allocator_drain (f->alloc, "accel", TRUE, &error));
  g_assert_null (allocate (f, UUID2, "52:54:00:00:00:04", "vpc2", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  st = va_allocator_get_pool (f->alloc, "accel", NULL);
  g_assert_true (st->draining);
  g_assert_cmpuint (st->free, ==, 0);
  /* release still works while draining */
  g_assert_true (release (f, UUID1, a->mac, &error));
  g_assert_false (va_allocator_drain (f->alloc, "ghost", TRUE, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_NO_SUCH_POOL);
}

/* Issue 28's software slot: a NIC whose pool has no free hardware slot,
 * on a network with a fallback bridge, gets a software device (the sim
 * backend's stand-in for VDUSE and the relay) while the pool has software
 * slots; a software-only pool makes nothing else; the leases say their
 * form, survive a restart, and release takes the device away. */
static void
test_software_fallback (Fixture *f, gconstpointer data)
{
  static const char soft_conf[] = "[simulate]\npfs=1\nvfs=1\n"
                                  "[pool accel]\nmatch-vendor=15b3\nsoftware-slots=1\n"
                                  "[pool sw]\ntype=software\nsoftware-slots=1\n"
                                  "[network soft]\nmode=vdpa\npool=accel\nvlan=20\nfallback-bridge=br0\n"
                                  "[network nofb]\nmode=vdpa\npool=accel\nvlan=30\n"
                                  "[network swnet]\nmode=auto\npool=sw\nvlan=40\nfallback-bridge=br1\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) hw = NULL;
  g_autoptr (VaLease) sw = NULL;
  g_autoptr (VaLease) again = NULL;
  g_autoptr (VaLease) only = NULL;
  g_autoptr (VaHostView) view = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autofree char *target = NULL;

  restart_with (f, soft_conf);

  /* room in software counts for the intent engine */
  view = va_allocator_get_host_view (f->alloc);
  g_assert_cmpint (va_host_view_get_pool_free (view, "accel"), ==, 2);
  g_clear_pointer (&view, va_host_view_unref);

  hw = allocate (f, UUID1, "52:54:00:00:00:01", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_false (hw->software);

  /* no fallback bridge: no software device, the pool's own refusal */
  g_assert_null (allocate (f, UUID1, "52:54:00:00:00:02", "nofb", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_nonnull (strstr (error->message, "pool accel is exhausted"));
  g_clear_error (&error);

  sw = allocate (f, UUID1, "52:54:00:00:00:03", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_true (sw->software);
  g_assert_cmpstr (sw->slot, ==, "vasw-525400000003");
  g_assert_cmpstr (sw->device, ==, "vasw-525400000003");
  g_assert_cmpstr (sw->pool, ==, "accel");
  g_assert_cmpuint (sw->vlan, ==, 20);
  g_assert_cmpuint (sw->queues, ==, 1);
  target = g_file_read_link (sw->port, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (target, ==, sw->chardev);
  g_assert_true (g_file_test (sw->chardev, G_FILE_TEST_EXISTS));

  /* the same NIC again: its lease back, idempotent */
  again = allocate (f, UUID1, "52:54:00:00:00:03", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_true (va_lease_equal (again, sw));

  /* the one software slot is taken */
  g_assert_null (allocate (f, UUID2, "52:54:00:00:00:04", "soft", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_cmpstr (error->message, ==, "pool 'accel': no free hardware slot, and its 1 software slot(s) are in use");
  g_clear_error (&error);
  view = va_allocator_get_host_view (f->alloc);
  g_assert_cmpint (va_host_view_get_pool_free (view, "accel"), ==, 0);
  g_assert_cmpint (va_host_view_get_pool_free (view, "sw"), ==, 1);
  /* a software-only pool has no PF by design, and is healthy without one */
  {
    g_autoptr (VaPoolStatus) st = va_allocator_get_pool (f->alloc, "sw", &error);

    g_assert_no_error (error);
    g_assert_true (st->healthy);
    g_assert_cmpstr (st->health_reason, ==, "");
  }

  /* a software-only pool */
  only = allocate (f, UUID2, "52:54:00:00:00:05", "swnet", -1, &error);
  g_assert_no_error (error);
  g_assert_true (only->software);
  g_assert_cmpstr (only->pool, ==, "sw");

  /* the form survives a restart, and the leases are not broken */
  stop (f);
  start (f);
  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpuint (leases->len, ==, 3);
  for (guint i = 0; i < leases->len; i++)
    {
      VaLease *l = g_ptr_array_index (leases, i);
      if (strcmp (l->mac, sw->mac) == 0)
        g_assert_true (va_lease_equal (l, sw));
    }
  g_assert_true (g_file_test (sw->port, G_FILE_TEST_EXISTS));
  /* reconciliation keeps a leased software device, and removes one no
   * lease holds (a crash between making it and the commit) */
  {
    g_autoptr (GAsyncResult) res = NULL;
    g_autoptr (VaReconcileReport) report = NULL;
    g_autofree char *dir = g_path_get_dirname (sw->chardev);
    g_autofree char *orphan = g_build_filename (dir, "vhost-vdpa-vasw-5254000000ee", NULL);

    g_assert_true (g_file_set_contents (orphan, "", 0, &error));
    va_allocator_reconcile_async (f->alloc, done_cb, &res);
    report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
    g_assert_no_error (error);
    g_assert_cmpuint (report->missing->len, ==, 0);
    g_assert_cmpuint (report->orphans->len, ==, 1);
    g_assert_cmpstr (g_ptr_array_index (report->orphans, 0), ==, "vasw-5254000000ee");
    g_assert_false (g_file_test (orphan, G_FILE_TEST_EXISTS));
    g_assert_true (g_file_test (sw->chardev, G_FILE_TEST_EXISTS));
  }
  /* a device gone (a reboot) is made anew, and said missing */
  {
    g_autoptr (GAsyncResult) res = NULL;
    g_autoptr (VaReconcileReport) report = NULL;

    g_assert_cmpint (g_unlink (sw->chardev), ==, 0);
    va_allocator_reconcile_async (f->alloc, done_cb, &res);
    report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
    g_assert_no_error (error);
    g_assert_cmpuint (report->missing->len, ==, 1);
    g_assert_true (g_file_test (sw->chardev, G_FILE_TEST_EXISTS));
  }

  /* release takes the software device away, and frees its slot */
  g_assert_true (release (f, UUID1, sw->mac, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (sw->chardev, G_FILE_TEST_EXISTS));
  g_clear_pointer (&again, va_lease_free);
  again = allocate (f, UUID2, "52:54:00:00:00:04", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_true (again->software);
}

/* A network's quota counts its software leases as it counts its
 * hardware ones: a full pool with software slots left gives no software
 * device to a network at its quota, and a software-only pool none
 * beyond it; the refusal is the quota's own. */
static void
test_software_quota (Fixture *f, gconstpointer data)
{
  static const char soft_conf[] = "[simulate]\npfs=1\nvfs=1\n"
                                  "[pool accel]\nmatch-vendor=15b3\nsoftware-slots=3\n"
                                  "[pool sw]\ntype=software\nsoftware-slots=3\n"
                                  "[network soft]\nmode=vdpa\npool=accel\nvlan=20\nfallback-bridge=br0\nquota=2\n"
                                  "[network other]\nmode=vdpa\npool=accel\nvlan=30\nfallback-bridge=br0\n"
                                  "[network swnet]\nmode=vdpa\npool=sw\nvlan=40\nfallback-bridge=br1\nquota=1\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) hw = NULL;
  g_autoptr (VaLease) sw = NULL;
  g_autoptr (VaLease) other = NULL;
  g_autoptr (VaLease) only = NULL;
  g_autoptr (VaLease) again = NULL;

  restart_with (f, soft_conf);

  hw = allocate (f, UUID1, "52:54:00:00:00:01", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_false (hw->software);
  sw = allocate (f, UUID1, "52:54:00:00:00:02", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_true (sw->software);
  /* two leases on "soft", one of them software: at its quota */
  g_assert_null (allocate (f, UUID2, "52:54:00:00:00:03", "soft", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_cmpstr (error->message, ==, "network soft has reached its quota of 2 leases in pool accel");
  g_clear_error (&error);
  /* the pool's software slots are still there for another network */
  other = allocate (f, UUID2, "52:54:00:00:00:04", "other", -1, &error);
  g_assert_no_error (error);
  g_assert_true (other->software);
  /* a software-only pool: its one software lease fills the quota */
  only = allocate (f, UUID2, "52:54:00:00:00:05", "swnet", -1, &error);
  g_assert_no_error (error);
  g_assert_true (only->software);
  g_assert_null (allocate (f, UUID2, "52:54:00:00:00:06", "swnet", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_cmpstr (error->message, ==, "network swnet has reached its quota of 1 leases in pool sw");
  g_clear_error (&error);
  /* a software lease released gives its room back */
  g_assert_true (release (f, UUID1, sw->mac, &error));
  g_assert_no_error (error);
  again = allocate (f, UUID2, "52:54:00:00:00:03", "soft", -1, &error);
  g_assert_no_error (error);
  g_assert_true (again->software);
}

/* "lease-broken" and "lease-repaired" as they come: "broken: REASON",
 * "repaired" */
static void
on_broken_said (VaAllocator *alloc, VaLease *lease, const char *reason, GPtrArray *said)
{
  g_ptr_array_add (said, g_strdup_printf ("broken: %s", reason));
}

static void
on_repaired_said (VaAllocator *alloc, VaLease *lease, GPtrArray *said)
{
  g_ptr_array_add (said, g_strdup ("repaired"));
}

static gboolean
set_flag (gpointer flag)
{
  *(gboolean *) flag = TRUE;
  return G_SOURCE_REMOVE;
}

static guint
pool_broken (Fixture *f, const char *pool)
{
  g_autoptr (VaPoolStatus) st = va_allocator_get_pool (f->alloc, pool, NULL);

  return st ? st->broken_leases : G_MAXUINT;
}

/* A software device whose relay was given up on (it died too often; the
 * sim backend's stand-in is RUN/sim/relay/NAME.stalled, which it
 * watches) carries nothing: its lease is broken, as one signal and the
 * pool's count say, with why; it keeps its port link (the device is
 * there, and the guest's QEMU holds it), until reconciliation serves the
 * device again and the lease is whole. */
static void
test_software_relay_given_up (Fixture *f, gconstpointer data)
{
  static const char soft_conf[] = "[simulate]\npfs=1\nvfs=1\n"
                                  "[pool sw]\ntype=software\nsoftware-slots=1\n"
                                  "[network swnet]\nmode=auto\npool=sw\nvlan=40\nfallback-bridge=br1\n";
  static const char why[] = "software device vasw-525400000005: its relay was killed by signal 9, 6 times within 60 s: not started "
                            "again; the NIC stalls until its lease is released or vdpactl reconcile runs";
  g_autofree char *relay_dir = g_build_filename (f->run_dir, "sim", "relay", NULL);
  g_autofree char *stalled_file = g_build_filename (relay_dir, "vasw-525400000005.stalled", NULL);
  g_autofree char *broken = NULL;
  g_autofree char *want = g_strdup_printf ("broken: %s", why);
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) sw = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GPtrArray) said = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (VaReconcileReport) report = NULL;
  gulong ids[2];

  restart_with (f, soft_conf);
  ids[0] = g_signal_connect (f->alloc, "lease-broken", G_CALLBACK (on_broken_said), said);
  ids[1] = g_signal_connect (f->alloc, "lease-repaired", G_CALLBACK (on_repaired_said), said);

  sw = allocate (f, UUID1, "52:54:00:00:00:05", "swnet", -1, &error);
  g_assert_no_error (error);
  g_assert_true (sw->software);
  broken = va_allocator_get_lease_broken (f->alloc, UUID1, sw->mac);
  g_assert_null (broken);
  g_assert_cmpuint (pool_broken (f, "sw"), ==, 0);

  g_assert_true (g_file_set_contents (stalled_file, why, -1, &error));
  /* the backend's event, then the allocator's (the bound only keeps a
   * missing signal from hanging the test) */
  {
    gboolean late = FALSE;
    guint bound = g_timeout_add_seconds (60, set_flag, &late);

    while (said->len == 0 && !late)
      g_main_context_iteration (NULL, TRUE);
    if (!late)
      g_source_remove (bound);
  }
  g_assert_cmpuint (said->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (said, 0), ==, want);
  broken = va_allocator_get_lease_broken (f->alloc, UUID1, sw->mac);
  g_assert_cmpstr (broken, ==, why);
  g_clear_pointer (&broken, g_free);
  g_assert_cmpuint (pool_broken (f, "sw"), ==, 1);
  /* the device is there and its link stays: the lease is not released */
  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), sw));
  g_assert_true (g_file_test (sw->port, G_FILE_TEST_EXISTS));

  /* reconciliation starts its relay again: whole, once */
  va_allocator_reconcile_async (f->alloc, done_cb, &res);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (report->missing->len, ==, 0);
  broken = va_allocator_get_lease_broken (f->alloc, UUID1, sw->mac);
  g_assert_null (broken);
  g_assert_cmpuint (pool_broken (f, "sw"), ==, 0);
  g_assert_cmpuint (said->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (said, 1), ==, "repaired");
  g_assert_false (g_file_test (stalled_file, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (sw->chardev, G_FILE_TEST_EXISTS));
  g_signal_handler_disconnect (f->alloc, ids[0]);
  g_signal_handler_disconnect (f->alloc, ids[1]);
}

/* A caller whose domain's memory is not shared (a live swap, an attach,
 * the hook at start) asks for hardware only: a full pool then refuses,
 * and makes no software device whose relay would reach none of the
 * guest's memory; a software lease is not handed back to it either. */
static void
test_software_hardware_only (Fixture *f, gconstpointer data)
{
  static const char soft_conf[] = "[simulate]\npfs=1\nvfs=1\n"
                                  "[pool accel]\nmatch-vendor=15b3\nsoftware-slots=2\n"
                                  "[network soft]\nmode=vdpa\npool=accel\nvlan=20\nfallback-bridge=br0\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) hw = NULL, sw = NULL;
  VaAllocRequest req = { .uuid = UUID1, .domain_name = "vm", .mac = "52:54:00:00:00:02", .network = "soft", .numa_node = -1 };

  restart_with (f, soft_conf);

  req.form = "hardware";
  req.mac = "52:54:00:00:00:01";
  hw = allocate_req (f, &req, &error);
  g_assert_no_error (error);
  g_assert_false (hw->software);

  req.mac = "52:54:00:00:00:02";
  g_assert_null (allocate_req (f, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_assert_cmpstr (error->message, ==,
                   "pool 'accel' has no free hardware slot, and the NIC is hardware only (a software device was not asked for)");
  g_clear_error (&error);
  g_assert_cmpuint (n_leases (f), ==, 1);

  /* without it, the same NIC gets its software device */
  req.form = NULL;
  sw = allocate_req (f, &req, &error);
  g_assert_no_error (error);
  g_assert_true (sw->software);
  req.form = "hardware";
  g_assert_null (allocate_req (f, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, "holds a software device"));
  g_clear_error (&error);

  req.form = "software";
  req.mac = "52:54:00:00:00:03";
  g_assert_null (allocate_req (f, &req, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
}

static void
test_leases_survive_restart (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (VaLease) b = allocate (f, UUID2, "52:54:00:00:00:02", "vpc2", -1, &error);
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (VaReconcileReport) report = NULL;
  gint n;

  g_assert_no_error (error);
  /* the link of a lease is gone, as after a reboot of /run */
  g_unlink (b->port);
  stop (f);
  start (f);

  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpuint (leases->len, ==, 2);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), a) || va_lease_equal (g_ptr_array_index (leases, 1), a));
  /* the restored leases hold their slots */
  g_assert_cmpuint (n_leased (f, "accel"), ==, 2);
  g_assert_true (g_file_test (b->port, G_FILE_TEST_EXISTS));

  n = va_allocator_claim (f->alloc, UUID1, &error);
  g_assert_no_error (error);
  g_assert_cmpint (n, ==, 1);

  /* no libvirt here: reconciliation releases nothing and says so */
  va_allocator_reconcile_async (f->alloc, done_cb, &res);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
  g_assert_no_error (error);
  g_assert_false (report->libvirt_reachable);
  g_assert_cmpuint (report->released, ==, 0);
  g_assert_cmpuint (n_leases (f), ==, 2);
}

static gboolean
list_two (GHashTable **domains, gpointer user_data, GError **error)
{
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_insert (*domains, g_strdup (UUID1), GINT_TO_POINTER (TRUE));
  return TRUE;
}

static void
test_reconcile (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (VaLease) gone = allocate (f, UUID2, "52:54:00:00:00:02", "vpc2", -1, &error);
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (VaReconcileReport) report = NULL;
  g_autofree char *orphan_rec = NULL;
  g_autofree char *a_rec = NULL;
  g_autoptr (VaDeviceInfo) orphan = NULL;
  g_autofree char *stale_dir = NULL;
  g_autofree char *stale = NULL;
  VaDeviceRequest dreq = { .slot = "0001:3c:00.1", .pf = "sim1", .mac = "52:54:00:99:99:99", .queues = 1 };

  g_assert_no_error (error);
  /* a device no lease owns, as after a crash between provisioning and
   * commit; and a leased device that vanished */
  orphan = va_backend_create_device (f->backend, &dreq, &error);
  g_assert_no_error (error);
  a_rec = g_build_filename (f->run_dir, "sim", "vdpa", a->device, NULL);
  g_unlink (a->chardev);
  g_unlink (a_rec);
  orphan_rec = g_build_filename (f->run_dir, "sim", "vdpa", orphan->name, NULL);
  g_assert_true (g_file_test (orphan_rec, G_FILE_TEST_IS_SYMLINK));
  /* a port link no lease owns, as after a crash between a Release's
   * commit and its tear-down */
  stale_dir = g_build_filename (f->run_dir, "ports", UUID1, NULL);
  stale = g_build_filename (stale_dir, "52:54:00:00:00:07", NULL);
  g_assert_cmpint (symlink (a->chardev, stale), ==, 0);

  va_allocator_set_domain_lister (f->alloc, list_two, NULL);
  va_allocator_reconcile_async (f->alloc, done_cb, &res);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
  g_assert_no_error (error);
  g_assert_true (report->libvirt_reachable);
  g_assert_cmpuint (report->orphans->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (report->orphans, 0), ==, orphan->name);
  g_assert_false (g_file_test (orphan_rec, G_FILE_TEST_IS_SYMLINK));
  g_assert_cmpuint (report->missing->len, ==, 1);
  g_assert_true (g_file_test (a->chardev, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (report->stale_links->len, ==, 1);
  g_assert_false (g_file_test (stale, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (a->port, G_FILE_TEST_EXISTS));
  /* UUID2 is unknown to libvirt: released */
  g_assert_cmpuint (report->released, ==, 1);
  g_assert_cmpuint (n_leases (f), ==, 1);
  g_assert_false (g_file_test (gone->port, G_FILE_TEST_EXISTS));
}

static gboolean
list_none (GHashTable **domains, gpointer user_data, GError **error)
{
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return TRUE;
}

/* A guest holding its device open (QEMU on /dev/vhost-vdpa-N): on a real
 * kernel, deleting the device would wait until it is closed, and the
 * daemon with it. Nothing releases it: not Release, not ReleaseDomain, not
 * reconciliation with a libvirt that does not know the domain. */
static void
test_no_release_while_open (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (VaLease) b = allocate (f, UUID1, "52:54:00:00:00:02", "vpc2", -1, &error);
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (GAsyncResult) res2 = NULL;
  g_autoptr (VaReconcileReport) report = NULL;
  g_autofree char *msg = NULL;
  int fd;

  g_assert_no_error (error);
  fd = open (a->chardev, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);

  g_assert_false (release (f, UUID1, a->mac, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  msg = g_strdup_printf ("NIC 52:54:00:00:00:01 of domain %s: its device %s (%s) is open: a guest runs on it; stop the domain first", UUID1,
                         a->device, a->chardev);
  g_assert_cmpstr (error->message, ==, msg);
  g_clear_error (&error);
  va_allocator_release_domain_async (f->alloc, UUID1, done_cb, &res);
  va_allocator_release_domain_finish (f->alloc, wait_for (&res), &error);
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_cmpuint (n_leases (f), ==, 2);

  va_allocator_set_domain_lister (f->alloc, list_none, NULL);
  va_allocator_reconcile_async (f->alloc, done_cb, &res2);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res2), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (report->released, ==, 0);
  g_assert_cmpuint (report->busy->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (report->busy, 0), ==, a->device);
  g_assert_cmpuint (n_leases (f), ==, 2);
  g_assert_true (g_file_test (a->chardev, G_FILE_TEST_EXISTS));

  /* the guest gone, the lease goes */
  close (fd);
  g_assert_true (release (f, UUID1, a->mac, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (a->chardev, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (n_leases (f), ==, 1);
}

static void
test_release_domain (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (VaLease) b = allocate (f, UUID1, "52:54:00:00:00:02", "vpc2", -1, &error);
  g_autoptr (VaLease) c = allocate (f, UUID2, "52:54:00:00:00:03", "vpc2", -1, &error);
  g_autoptr (GAsyncResult) res = NULL;
  g_autofree char *dir = g_path_get_dirname (a->port);

  g_assert_no_error (error);
  va_allocator_release_domain_async (f->alloc, UUID1, done_cb, &res);
  g_assert_cmpint (va_allocator_release_domain_finish (f->alloc, wait_for (&res), &error), ==, 2);
  g_assert_no_error (error);
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (n_leases (f), ==, 1);
}

/* A Release of a NIC whose domain is being released in the same turn is
 * answered once, like every call. */
static void
test_release_while_domain_release_settles (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (GAsyncResult) domain_res = NULL;
  g_autoptr (GAsyncResult) nic_res = NULL;

  g_assert_no_error (error);
  va_allocator_release_domain_async (f->alloc, UUID1, done_cb, &domain_res);
  va_allocator_release_async (f->alloc, UUID1, "52:54:00:00:00:01", done_cb, &nic_res);
  g_assert_cmpint (va_allocator_release_domain_finish (f->alloc, wait_for (&domain_res), &error), ==, 1);
  g_assert_no_error (error);
  g_assert_true (va_allocator_release_finish (f->alloc, wait_for (&nic_res), &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_leases (f), ==, 0);
}

/* The same NIC asking for another network, VLAN or queue count does not
 * get its old lease back: it would start on a VLAN it no longer asks for. */
static void
test_same_nic_other_intent_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (VaLease) again = NULL;
  g_autoptr (VaLease) other = NULL;
  g_autoptr (GAsyncResult) res = NULL;
  VaAllocRequest inline_req = { .uuid = UUID1, .mac = "52:54:00:00:00:01", .pool = "accel", .vlan = 100, .numa_node = -1 };
  VaLease *inline_lease;

  g_assert_no_error (error);
  again = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again->slot, ==, a->slot);

  other = allocate (f, UUID1, "52:54:00:00:00:01", "capped", -1, &error);
  g_assert_null (other);
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==,
                   "NIC 52:54:00:00:00:01 of domain " UUID1 " holds a lease on network vpc2 (pool accel, VLAN 2334, 2 queue pair(s)); "
                   "this asks for network capped (pool accel, VLAN 10, 2 queue pair(s)): release it first");
  g_clear_error (&error);

  va_allocator_allocate_async (f->alloc, &inline_req, done_cb, &res);
  inline_lease = va_allocator_allocate_finish (f->alloc, wait_for (&res), &error);
  g_assert_null (inline_lease);
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, "this asks for inline (pool accel, VLAN 100"));
  g_assert_cmpuint (n_leases (f), ==, 1);
}

/* RewriteDomain's view of this host (what the D-Bus adapter hands the
 * engine; tests/bus rewrites against it): the configuration's networks and
 * pools with their live free capacity, none while a pool drains. */
static void
test_host_view_has_live_capacity (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaHostView) before = va_allocator_get_host_view (f->alloc);
  g_autoptr (VaHostView) drained = NULL;
  g_autoptr (VaHostView) leased = NULL;
  g_autoptr (VaLease) lease = NULL;
  g_autofree char *ports = g_build_filename (f->run_dir, "ports", NULL);
  gint64 free_slots = va_host_view_get_pool_free (before, "accel");

  g_assert_cmpint (free_slots, >, 0);
  g_assert_cmpuint (va_host_view_get_pool_max_vqp (before, "accel"), ==, 2);
  g_assert_nonnull (va_host_view_lookup_network (before, "vpc2"));
  g_assert_cmpstr (va_host_view_get_port_root (before), ==, ports);

  g_assert_true (va_allocator_drain (f->alloc, "accel", TRUE, NULL));
  drained = va_allocator_get_host_view (f->alloc);
  g_assert_cmpint (va_host_view_get_pool_free (drained, "accel"), ==, 0);
  /* a snapshot: the view taken before is left as it was */
  g_assert_cmpint (va_host_view_get_pool_free (before, "accel"), ==, free_slots);

  g_assert_true (va_allocator_drain (f->alloc, "accel", FALSE, NULL));
  lease = allocate (f, UUID1, "52:54:00:00:00:09", "vpc2", -1, &error);
  g_assert_no_error (error);
  leased = va_allocator_get_host_view (f->alloc);
  g_assert_cmpint (va_host_view_get_pool_free (leased, "accel"), ==, free_slots - 1);
}

static void
reconcile_now (Fixture *f)
{
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (VaReconcileReport) report = NULL;
  g_autoptr (GError) error = NULL;

  va_allocator_set_domain_lister (f->alloc, list_none, NULL);
  va_allocator_reconcile_async (f->alloc, done_cb, &res);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
  g_assert_no_error (error);
}

/* A device without a lease (its row lost) that a process holds open: its
 * slot is never leased to another NIC, whatever the store says, and comes
 * back once it is let go. */
static void
test_held_slot_is_never_leased (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = allocate (f, UUID1, "52:54:00:00:00:01", "vpc2", -1, &error);
  g_autoptr (GPtrArray) others = g_ptr_array_new_with_free_func ((GDestroyNotify) va_lease_free);
  g_autoptr (VaStoreOp) op = NULL;
  char mac[VA_MAC_STRING_LEN];
  VaLease *l;
  int fd;

  g_assert_no_error (error);
  fd = open (a->chardev, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  /* the row goes behind the daemon's back */
  stop (f);
  f->store = va_store_open (f->state_dir, &error);
  g_assert_no_error (error);
  op = va_store_queue_delete (f->store, UUID1, a->mac);
  g_assert_true (va_store_commit (f->store, &error));
  g_clear_pointer (&f->store, va_store_free);
  start (f);
  /* it warns that the slot is held, as it should; criticals stay fatal */
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  reconcile_now (f);
  while (g_snprintf (mac, sizeof mac, "52:54:00:00:01:%02x", others->len + 1) && (l = allocate (f, UUID2, mac, "vpc2", -1, NULL)))
    {
      g_assert_cmpstr (l->slot, !=, a->slot);
      g_ptr_array_add (others, l);
    }
  g_assert_cmpuint (others->len, ==, 3);

  close (fd);
  reconcile_now (f); /* the orphan goes now, and its slot is free */
  l = allocate (f, UUID2, "52:54:00:00:01:99", "vpc2", -1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (l->slot, ==, a->slot);
  va_lease_free (l);
}

/* Whether QEMU holds a device is read from /proc/PID/fd: a scanner that
 * may not read another uid's fds (a unit without CAP_SYS_PTRACE) must
 * count the device as held, not free. */
static void
test_held_open_unknown_is_held (void)
{
  g_autofree char *path = NULL;
  int fd, status, answer[2];
  char held = 0;
  pid_t pid;

  if (getuid () != 0)
    {
      g_test_skip ("needs root, to scan as another user");
      return;
    }
  fd = g_file_open_tmp ("va-held-XXXXXX", &path, NULL);
  g_assert_cmpint (fd, >=, 0);
  close (fd);
  g_assert_cmpint (chmod (path, 0644), ==, 0);
  g_assert_false (va_chardev_held_open (path)); /* root sees every fd: no holder */
  /* the answer comes back through a pipe: under valgrind the child's exit
   * status is valgrind's */
  g_assert_cmpint (pipe (answer), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      char mine = '?';

      close (answer[0]);
      if (setgid (65534) == 0 && setuid (65534) == 0)
        {
          /* it warns, and GTest makes warnings fatal */
          g_log_set_always_fatal (G_LOG_FATAL_MASK);
          mine = va_chardev_held_open (path) ? 'y' : 'n';
        }
      if (write (answer[1], &mine, 1) != 1)
        _exit (2);
      _exit (0);
    }
  close (answer[1]);
  g_assert_cmpint (read (answer[0], &held, 1), ==, 1);
  close (answer[0]);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_unlink (path);
  g_assert_cmpint (held, ==, 'y');
}

typedef struct
{
  guint calls;
  char *pool;
  char *vfs;          /* the last call's, " "-joined */
  const char *answer; /* what the syncer returns */
  GThread *thread;    /* the last call's */
} Syncer;

/* A VaNetworkSyncer; the allocator runs it in a worker thread. */
static char *
record_sync (const char *pool, const char *const *vfs, gpointer user_data)
{
  Syncer *s = user_data;

  s->calls++;
  s->thread = g_thread_self ();
  g_free (s->pool);
  s->pool = g_strdup (pool);
  g_free (s->vfs);
  s->vfs = g_strjoinv (" ", (char **) vfs);
  return g_strdup (s->answer);
}

/* Until no sync is in flight: their answers are handled in this thread. */
static void
settle_syncs (Fixture *f)
{
  while (va_allocator_is_syncing_networks (f->alloc))
    g_main_context_iteration (NULL, TRUE);
}

static char *
pool_warning (Fixture *f, const char *pool)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaPoolStatus) st = va_allocator_get_pool (f->alloc, pool, &error);

  g_assert_no_error (error);
  return g_strdup (st->warning);
}

static gboolean
flag_up (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main loop for @ms. */
static void
spin (guint ms)
{
  gboolean done = FALSE;

  g_timeout_add (ms, flag_up, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

/* A kind=sriov pool's libvirt network is synced to exactly its VFs at
 * once, off the main thread, not again while they stay the same; a
 * failure is the pool's warning and is retried on a timer, with no event,
 * until a sync succeeds. */
static void
test_sriov_network_sync (Fixture *f, gconstpointer data)
{
  static const char sriov_conf[] = "[simulate]\npfs=2\nvfs=2\n"
                                   "[pool accel]\nmatch-pci=0000:3b:00.0\n"
                                   "[pool pt]\nkind=sriov\nmatch-pci=0001:3b:00.0\n";
  g_autofree char *conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  g_autoptr (GError) error = NULL;
  Syncer s = { 0 };
  g_autofree char *w1 = NULL, *w2 = NULL, *w3 = NULL, *w4 = NULL;
  guint failed_calls;

  restart_with (f, sriov_conf);

  /* a failure is the pool's warning, and retried without an event */
  s.answer = "network vdpa-allocator-pt: libvirt did not answer within 30 s";
  va_allocator_set_network_retry (f->alloc, 20, 40);
  va_allocator_set_network_syncer (f->alloc, record_sync, &s);
  settle_syncs (f);
  /* the vdpa pool has no network */
  g_assert_cmpuint (s.calls, ==, 1);
  g_assert_true (s.thread != g_thread_self ());
  g_assert_cmpstr (s.pool, ==, "pt");
  g_assert_cmpstr (s.vfs, ==, "0001:3c:00.0 0001:3c:00.1");
  w1 = pool_warning (f, "pt");
  g_assert_cmpstr (w1, ==, "network vdpa-allocator-pt: libvirt did not answer within 30 s");
  w2 = pool_warning (f, "accel");
  g_assert_cmpstr (w2, ==, "");
  /* an event with the same VFs waits for the retry */
  g_signal_emit_by_name (f->backend, "pfs-changed");
  g_assert_false (va_allocator_is_syncing_networks (f->alloc));
  while (s.calls < 3)
    {
      spin (10);
      settle_syncs (f);
    }
  failed_calls = s.calls;
  s.answer = NULL;
  while (s.calls == failed_calls)
    {
      spin (10);
      settle_syncs (f);
    }
  w3 = pool_warning (f, "pt");
  g_assert_cmpstr (w3, ==, "");
  /* synced: no retry, and a device change that changes nothing: no call */
  spin (100);
  g_signal_emit_by_name (f->backend, "pfs-changed");
  settle_syncs (f);
  g_assert_cmpuint (s.calls, ==, failed_calls + 1);

  /* a reload without the pool removes its network: a sync to no VF */
  {
    static const char vdpa_only[] = "[simulate]\npfs=2\nvfs=2\n[pool accel]\nmatch-pci=0000:3b:00.0\n";
    VaConfig *old = f->config;

    g_file_set_contents (conf_file, vdpa_only, -1, &error);
    g_assert_no_error (error);
    f->config = va_config_load (f->conf_dir, &error);
    g_assert_no_error (error);
    g_assert_true (va_allocator_reload (f->alloc, f->config, &error));
    g_assert_no_error (error);
    settle_syncs (f);
    g_assert_cmpuint (s.calls, ==, failed_calls + 2);
    g_assert_cmpstr (s.pool, ==, "pt");
    g_assert_cmpstr (s.vfs, ==, "");
    w4 = pool_warning (f, "accel");
    g_assert_cmpstr (w4, ==, "");
    /* and only once */
    g_signal_emit_by_name (f->backend, "pfs-changed");
    spin (100);
    settle_syncs (f);
    g_assert_cmpuint (s.calls, ==, failed_calls + 2);
    /* the allocator holds pointers into the configuration it started with */
    stop (f);
    va_config_free (old);
  }
  g_free (s.pool);
  g_free (s.vfs);
}

static VaLease *
allocate_vf (Fixture *f, const char *uuid, const char *mac, const char *network, const char *vf, guint16 vf_vlan, GError **error)
{
  VaAllocRequest req = { .uuid = uuid, .domain_name = "vm", .mac = mac, .network = network, .numa_node = -1, .vf = vf, .vf_vlan = vf_vlan };
  g_autoptr (GAsyncResult) res = NULL;

  va_allocator_allocate_async (f->alloc, &req, done_cb, &res);
  return va_allocator_allocate_finish (f->alloc, wait_for (&res), error);
}

static guint
n_devices (Fixture *f)
{
  g_autoptr (GPtrArray) devs = va_backend_list_devices (f->backend, NULL);
  return devs->len;
}

static gboolean
list_uuid1 (GHashTable **domains, gpointer user_data, GError **error)
{
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_insert (*domains, g_strdup (UUID1), GINT_TO_POINTER (TRUE));
  return TRUE;
}

static gboolean list_none (GHashTable **domains, gpointer user_data, GError **error);

static VaReconcileReport *
reconcile (Fixture *f, VaDomainLister lister)
{
  g_autoptr (GAsyncResult) res = NULL;
  g_autoptr (GError) error = NULL;
  VaReconcileReport *report;

  va_allocator_set_domain_lister (f->alloc, lister, NULL);
  va_allocator_reconcile_async (f->alloc, done_cb, &res);
  report = va_allocator_reconcile_finish (f->alloc, wait_for (&res), &error);
  g_assert_no_error (error);
  return report;
}

/* A kind=sriov pool's lease records the VF libvirt chose: nothing is made
 * on it (no vDPA device, no port), the refusals are one line each, and
 * the pool's counts, quota, drain, watermark, restart, reconciliation and
 * release treat it as any lease. */
static void
test_sriov_leases (Fixture *f, gconstpointer data)
{
  static const char sriov_conf[] = "[simulate]\npfs=2\nvfs=2\n"
                                   "[pool accel]\nmatch-pci=0000:3b:00.0\n"
                                   "[pool pt]\nkind=sriov\nmatch-pci=0001:3b:00.0\nlow-watermark=2\n"
                                   "[network vpc2]\nmode=vdpa\npool=accel\nvlan=2334\n"
                                   "[network pt2334]\nmode=sriov\npool=pt\nvlan=2334\nquota=1\n"
                                   "[network pt10]\nmode=sriov\npool=pt\nvlan=10\n";
  g_autofree char *port_dir = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = NULL;
  g_autoptr (VaLease) again = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (VaPoolStatus) st = NULL;
  g_autoptr (VaReconcileReport) r1 = NULL;
  g_autoptr (VaReconcileReport) r2 = NULL;
  VaLease *l;

  restart_with (f, sriov_conf);

  /* never a vDPA device on a VF meant for passthrough */
  g_assert_null (allocate (f, UUID1, "52:54:00:00:00:01", "pt2334", -1, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "pool pt is kind sriov"));
  g_clear_error (&error);
  g_assert_cmpuint (n_devices (f), ==, 0);
  /* a VF from outside on a kind=vdpa pool */
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "vpc2", "0000:3c:00.0", 2334, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "pool accel is kind vdpa"));
  g_clear_error (&error);
  /* a VF of another pool */
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0000:3c:00.0", 2334, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "VF 0000:3c:00.0 is not in pool pt");
  g_clear_error (&error);
  /* a VLAN libvirt applied that is not the NIC's */
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 10, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "NIC 52:54:00:00:00:01: libvirt put VF 0001:3c:00.0 on VLAN 10, but the NIC's intent is VLAN 2334");
  g_clear_error (&error);
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 0, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpuint (n_leases (f), ==, 0);

  a = allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 2334, &error);
  g_assert_no_error (error);
  g_assert_true (a->sriov);
  g_assert_cmpstr (a->slot, ==, "0001:3c:00.0");
  g_assert_cmpstr (a->pool, ==, "pt");
  g_assert_cmpstr (a->device, ==, "");
  g_assert_cmpstr (a->chardev, ==, "");
  g_assert_cmpstr (a->port, ==, "");
  g_assert_cmpuint (a->queues, ==, 0);
  g_assert_cmpuint (a->vlan, ==, 2334);
  g_assert_cmpuint (n_devices (f), ==, 0);
  port_dir = g_build_filename (f->run_dir, "ports", UUID1, NULL);
  g_assert_false (g_file_test (port_dir, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (f->added, ==, 1);
  g_assert_cmpuint (f->low, ==, 1); /* 1 free, below 2 */
  st = va_allocator_get_pool (f->alloc, "pt", NULL);
  g_assert_cmpuint (st->total, ==, 2);
  g_assert_cmpuint (st->leased, ==, 1);
  g_assert_cmpuint (st->free, ==, 1);
  g_clear_pointer (&st, va_pool_status_free);

  /* idempotent; the same NIC naming another VF is refused */
  again = allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 2334, &error);
  g_assert_no_error (error);
  g_assert_true (va_lease_equal (a, again));
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.1", 2334, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  /* a VF leased to another NIC */
  g_assert_null (allocate_vf (f, UUID2, "52:54:00:00:00:02", "pt10", "0001:3c:00.0", 10, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_cmpstr (error->message, ==, "VF 0001:3c:00.0 of pool pt is leased to NIC 52:54:00:00:00:01 of domain " UUID1);
  g_clear_error (&error);
  /* the network's quota counts it */
  g_assert_null (allocate_vf (f, UUID2, "52:54:00:00:00:02", "pt2334", "0001:3c:00.1", 2334, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_POOL_EXHAUSTED);
  g_clear_error (&error);
  /* drain refuses new ones */
  g_assert_true (va_allocator_drain (f->alloc, "pt", TRUE, &error));
  g_assert_null (allocate_vf (f, UUID2, "52:54:00:00:00:02", "pt10", "0001:3c:00.1", 10, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_true (va_allocator_drain (f->alloc, "pt", FALSE, &error));

  /* a restart keeps it, as kind sriov on its VF */
  stop (f);
  start (f);
  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpuint (leases->len, ==, 1);
  l = g_ptr_array_index (leases, 0);
  g_assert_true (l->sriov);
  g_assert_true (va_lease_equal (l, a));
  {
    g_autofree char *broken = va_allocator_get_lease_broken (f->alloc, UUID1, "52:54:00:00:00:01");
    g_assert_null (broken);
  }
  st = va_allocator_get_pool (f->alloc, "pt", NULL);
  g_assert_cmpuint (st->leased, ==, 1);
  g_clear_pointer (&st, va_pool_status_free);

  /* reconciliation re-makes nothing for it while its domain runs ... */
  r1 = reconcile (f, list_uuid1);
  g_assert_cmpuint (r1->missing->len, ==, 0);
  g_assert_cmpuint (r1->orphans->len, ==, 0);
  g_assert_cmpuint (r1->released, ==, 0);
  g_assert_cmpuint (n_devices (f), ==, 0);
  g_assert_cmpuint (n_leases (f), ==, 1);
  /* ... and releases it once libvirt no longer knows the domain */
  r2 = reconcile (f, list_none);
  g_assert_cmpuint (r2->released, ==, 1);
  g_assert_cmpuint (n_leases (f), ==, 0);
  st = va_allocator_get_pool (f->alloc, "pt", NULL);
  g_assert_cmpuint (st->leased, ==, 0);
  g_assert_cmpuint (st->free, ==, 2);
  g_clear_pointer (&st, va_pool_status_free);
}

/* ReleaseDomain (the hook at stopped end) gives an sriov lease back. */
static void
test_sriov_release_domain (Fixture *f, gconstpointer data)
{
  static const char sriov_conf[] = "[simulate]\npfs=1\nvfs=2\n"
                                   "[pool pt]\nkind=sriov\nmatch-vendor=15b3\n"
                                   "[network pt2334]\nmode=sriov\npool=pt\nvlan=2334\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = NULL;
  g_autoptr (VaLease) b = NULL;
  g_autoptr (GAsyncResult) res = NULL;

  restart_with (f, sriov_conf);
  a = allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0000:3c:00.0", 2334, &error);
  g_assert_no_error (error);
  b = allocate_vf (f, UUID1, "52:54:00:00:00:02", "pt2334", "0000:3c:00.1", 2334, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (n_leased (f, "pt"), ==, 2);
  va_allocator_release_domain_async (f->alloc, UUID1, done_cb, &res);
  g_assert_cmpint (va_allocator_release_domain_finish (f->alloc, wait_for (&res), &error), ==, 2);
  g_assert_no_error (error);
  g_assert_cmpuint (n_leases (f), ==, 0);
  g_assert_cmpuint (n_leased (f, "pt"), ==, 0);
  g_assert_cmpuint (f->removed, ==, 2);
}

static void
sim_vf_state (Fixture *f, const char *slot, const char *suffix, const char *contents)
{
  g_autofree char *dir = g_build_filename (f->run_dir, "sim", "vf", NULL);
  g_autofree char *name = g_strconcat (slot, suffix, NULL);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;

  g_mkdir_with_parents (dir, 0755);
  g_file_set_contents (path, contents, -1, &error);
  g_assert_no_error (error);
}

static gboolean
sim_vf_dirty (Fixture *f, const char *slot)
{
  g_autofree char *path = g_build_filename (f->run_dir, "sim", "vf", slot, NULL);
  return g_file_test (path, G_FILE_TEST_EXISTS);
}

/* After a crash a kind=sriov VF may keep a passthrough's VLAN and MAC with
 * no lease (the classic sriov-cni complaint): reconciliation resets it,
 * but never a VF that a lease holds, that libvirt holds, of a vdpa pool,
 * or that is right. */
static void
test_sriov_repair (Fixture *f, gconstpointer data)
{
  static const char sriov_conf[] = "[simulate]\npfs=2\nvfs=3\n"
                                   "[pool accel]\nmatch-pci=0000:3b:00.0\n"
                                   "[pool pt]\nkind=sriov\nmatch-pci=0001:3b:00.0\n"
                                   "[network pt2334]\nmode=sriov\npool=pt\nvlan=2334\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = NULL;
  g_autoptr (VaReconcileReport) r1 = NULL;
  g_autoptr (VaReconcileReport) r2 = NULL;

  restart_with (f, sriov_conf);
  a = allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0001:3c:00.0", 2334, &error);
  g_assert_no_error (error);
  sim_vf_state (f, "0001:3c:00.0", "", "2334 52:54:00:00:00:01\n"); /* leased: libvirt's */
  sim_vf_state (f, "0001:3c:00.1", "", "2335 52:54:00:00:00:02\n"); /* no lease: left by a crash */
  sim_vf_state (f, "0001:3c:00.2", "", "2336 52:54:00:00:00:03\n"); /* libvirt holds it */
  sim_vf_state (f, "0001:3c:00.2", ".held", "");
  sim_vf_state (f, "0000:3c:00.1", "", "10 52:54:00:00:00:04\n"); /* a vdpa pool's */

  r1 = reconcile (f, list_uuid1);
  g_assert_cmpuint (r1->repaired->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (r1->repaired, 0), ==,
                   "VF 0001:3c:00.1 (sim1): no lease, left with VLAN and MAC 2335 52:54:00:00:00:02: reset");
  g_assert_false (sim_vf_dirty (f, "0001:3c:00.1"));
  g_assert_true (sim_vf_dirty (f, "0001:3c:00.0"));
  g_assert_true (sim_vf_dirty (f, "0001:3c:00.2"));
  g_assert_true (sim_vf_dirty (f, "0000:3c:00.1"));
  g_assert_cmpuint (n_leases (f), ==, 1);
  /* nothing right is repaired */
  r2 = reconcile (f, list_uuid1);
  g_assert_cmpuint (r2->repaired->len, ==, 0);
}

/* A kind=sriov pool on a switchdev eswitch: mlx5 refuses VF VLANs, so
 * libvirt applies none and the daemon puts the NIC's VLAN on the chosen
 * VF's representor (the simulated NIC records it in RUN/sim/rep/SLOT),
 * fail-closed, and takes it off at release. Only the simulated NIC tests
 * this: this machine has no switchdev SR-IOV hardware, and igb no
 * eswitch. */
static void
test_sriov_switchdev_vlan (Fixture *f, gconstpointer data)
{
  static const char sriov_conf[] = "[simulate]\npfs=1\nvfs=2\n"
                                   "[pool pt]\nkind=sriov\nmatch-vendor=15b3\neswitch=switchdev\nvlan-method=ovs\nuplink-bridge=br-sw\n"
                                   "[network pt2334]\nmode=sriov\npool=pt\nvlan=2334\n";
  g_autofree char *rep0 = NULL;
  g_autofree char *rep1_fail = NULL;
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) a = NULL;
  g_autoptr (GAsyncResult) res = NULL;

  restart_with (f, sriov_conf);
  rep0 = g_build_filename (f->run_dir, "sim", "rep", "0000:3c:00.0", NULL);

  /* a VLAN libvirt set on the VF: not how this pool works */
  g_assert_null (allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0000:3c:00.0", 2334, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "tags its representor"));
  g_clear_error (&error);
  g_assert_false (g_file_test (rep0, G_FILE_TEST_EXISTS));

  a = allocate_vf (f, UUID1, "52:54:00:00:00:01", "pt2334", "0000:3c:00.0", 0, &error);
  g_assert_no_error (error);
  g_assert_true (a->sriov);
  g_assert_cmpuint (a->vlan, ==, 2334);
  g_assert_true (g_file_get_contents (rep0, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "2334 52:54:00:00:00:01\n");

  /* fail closed: the representor refused, no lease, the VF free */
  rep1_fail = g_build_filename (f->run_dir, "sim", "rep", "0000:3c:00.1.fail", NULL);
  g_file_set_contents (rep1_fail, "", -1, &error);
  g_assert_no_error (error);
  g_assert_null (allocate_vf (f, UUID2, "52:54:00:00:00:02", "pt2334", "0000:3c:00.1", 0, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED);
  g_assert_nonnull (strstr (error->message, "pool 'pt': VF 0000:3c:00.1"));
  g_clear_error (&error);
  g_assert_cmpuint (n_leases (f), ==, 1);
  g_assert_cmpuint (n_leased (f, "pt"), ==, 1);

  /* release takes the representor off the bridge */
  va_allocator_release_domain_async (f->alloc, UUID1, done_cb, &res);
  g_assert_cmpint (va_allocator_release_domain_finish (f->alloc, wait_for (&res), &error), ==, 1);
  g_assert_no_error (error);
  g_assert_false (g_file_test (rep0, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, setup, fn, teardown)
  ADD ("/allocator/sriov-network-sync", test_sriov_network_sync);
  ADD ("/allocator/sriov-leases", test_sriov_leases);
  ADD ("/allocator/sriov-release-domain", test_sriov_release_domain);
  ADD ("/allocator/sriov-repair", test_sriov_repair);
  ADD ("/allocator/sriov-switchdev-vlan", test_sriov_switchdev_vlan);
  ADD ("/allocator/allocate-until-exhausted", test_allocate_until_exhausted);
  ADD ("/allocator/idempotent-and-release", test_idempotent_and_release);
  ADD ("/allocator/bad-requests", test_bad_requests);
  ADD ("/allocator/quota-drain-numa", test_quota_drain_numa);
  ADD ("/allocator/leases-survive-restart", test_leases_survive_restart);
  ADD ("/allocator/reconcile", test_reconcile);
  ADD ("/allocator/release-domain", test_release_domain);
  ADD ("/allocator/release-while-domain-release-settles", test_release_while_domain_release_settles);
  ADD ("/allocator/same-nic-other-intent-refused", test_same_nic_other_intent_refused);
  ADD ("/allocator/no-release-while-open", test_no_release_while_open);
  ADD ("/allocator/host-view-has-live-capacity", test_host_view_has_live_capacity);
  ADD ("/allocator/software-fallback", test_software_fallback);
  ADD ("/allocator/software-hardware-only", test_software_hardware_only);
  ADD ("/allocator/software-relay-given-up", test_software_relay_given_up);
  ADD ("/allocator/software-quota", test_software_quota);
  ADD ("/allocator/held-slot-is-never-leased", test_held_slot_is_never_leased);
  g_test_add_func ("/allocator/held-open-unknown-is-held", test_held_open_unknown_is_held);
  return g_test_run ();
}
