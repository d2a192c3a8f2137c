/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
/* The allocator on the kernel backend following udev events: umockdev
 * testbeds changed while the allocator runs (a PF added, removed, its link
 * going down), the uevents emitted with umockdev_testbed_uevent, the main
 * loop run until the allocator has reacted. Runs with
 * LD_PRELOAD=libumockdev-preload.so.0. */
#include <errno.h>
#include <glib/gstdio.h>
#include <sched.h>
#include <string.h>
#include <umockdev.h>

#include "va-allocator.h"
#include "va-backend.h"
#include "va-error.h"
#include "va-daemon-events.h"
#include "va-host-view.h"
#include "va-paths.h"
#include "va-store.h"
#include "testbed-devlink.h"

#define BRIDGE_SYS "/sys/devices/pci0000:3a/0000:3a:00.0"
#define PF_SYS BRIDGE_SYS "/0000:3b:00.0"
#define PF_NET_SYS PF_SYS "/net/enp59s0f0np0"
#define UUID "5b2c4a8e-1f3d-4c6b-9a7e-2d8f0e1c3b4a"
#define MAC "52:54:00:00:00:01"
#define SLOT "0000:3b:00.2"
#define GONE "PF enp59s0f0np0 (0000:3b:00.0) is gone from the host"
#define NO_VDPA "the kernel has no vdpa netlink family (module vdpa not loaded, or kernel built without it)"

typedef struct
{
  UMockdevTestbed *bed;
  char *tmp;
  char *conf_dir;
  char *state_dir;
  char *run_dir;
  VaConfig *config;
  VaBackend *backend;
  VaStore *store;
  VaAllocator *alloc;
  guint changes;     /* "pfs-changed" of the backend */
  GPtrArray *events; /* "pf-event" messages */
  GPtrArray *broken; /* "lease-broken": "slot: reason" */
  guint repaired;
} Fixture;

/* The daemon's journal events (va-daemon-events.c), as GLib hands them to its
 * writer: field name → value, one table per event. */
static GPtrArray *journal;

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer user_data)
{
  GHashTable *r = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  for (gsize i = 0; i < n; i++)
    g_hash_table_insert (r, g_strdup (fields[i].key),
                         fields[i].length < 0 ? g_strdup (fields[i].value) : g_strndup (fields[i].value, fields[i].length));
  if (!g_hash_table_contains (r, "MESSAGE_ID"))
    {
      g_hash_table_unref (r);
      return g_log_writer_default (level, fields, n, user_data);
    }
  g_ptr_array_add (journal, r);
  return G_LOG_WRITER_HANDLED;
}

/* The @nth (from 0) event with @id; fails the test without one. */
static GHashTable *
event (const char *id, guint nth)
{
  for (guint i = 0; i < journal->len; i++)
    if (g_strcmp0 (g_hash_table_lookup (journal->pdata[i], "MESSAGE_ID"), id) == 0 && nth-- == 0)
      return journal->pdata[i];
  g_error ("no event %s", id);
  return NULL;
}

#define assert_field(r, k, v) g_assert_cmpstr (g_hash_table_lookup ((r), (k)), ==, (v))

static const char conf[] = "[pool accel]\n"
                           "match-vendor=15b3\n"
                           "max-vqp=2\n";

/* Lets the monitor read what was sent: umockdev's uevent socket is a Unix
 * datagram socket, which queues 10 datagrams (net.unix.max_dgram_qlen). */
static void
drain (void)
{
  while (g_main_context_pending (NULL))
    g_main_context_iteration (NULL, FALSE);
}

/* A testbed file, device by device: umockdev sends an "add" uevent for
 * each, and the allocator's monitor reads them as the kernel's would
 * arrive. */
static void
load (Fixture *f, const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = g_build_filename (g_getenv ("VA_SRCDIR"), "tests", "kernel", "testbeds", name, NULL);
  g_autofree char *text = NULL;
  g_auto (GStrv) blocks = NULL;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_no_error (error);
  blocks = g_strsplit (text, "\n\n", -1);
  for (guint i = 0; blocks[i]; i++)
    {
      if (!*g_strstrip (blocks[i]))
        continue;
      g_assert_true (umockdev_testbed_add_from_string (f->bed, blocks[i], &error));
      g_assert_no_error (error);
      drain ();
    }
}

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *conf_file = NULL;

  f->bed = umockdev_testbed_new ();
  g_assert_true (umockdev_in_mock_environment ());
  if (data)
    load (f, data);
  /* a kernel that ships mlx5_vdpa, not loaded: the hint names modprobe */
  testbed_mlx5_modules (umockdev_testbed_get_root_dir (f->bed), TRUE, FALSE);
  f->tmp = g_dir_make_tmp ("va-monitor-XXXXXX", &error);
  g_assert_no_error (error);
  f->conf_dir = g_build_filename (f->tmp, "etc", NULL);
  f->state_dir = g_build_filename (f->tmp, "state", NULL);
  f->run_dir = g_build_filename (f->tmp, "run", NULL);
  g_assert_cmpint (g_mkdir (f->conf_dir, 0755), ==, 0);
  conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  g_assert_true (g_file_set_contents (conf_file, conf, -1, NULL));
  f->events = g_ptr_array_new_with_free_func (g_free);
  f->broken = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_set_size (journal, 0);
}

static void
on_changed (VaBackend *backend, Fixture *f)
{
  f->changes++;
}

static void
on_pf_event (VaAllocator *alloc, const char *pool, const char *pf, const char *message, Fixture *f)
{
  g_ptr_array_add (f->events, g_strdup (message));
}

static void
on_broken (VaAllocator *alloc, VaLease *lease, const char *reason, Fixture *f)
{
  g_ptr_array_add (f->broken, g_strdup_printf ("%s: %s", lease->slot, reason));
}

static void
on_repaired (VaAllocator *alloc, VaLease *lease, Fixture *f)
{
  f->repaired++;
}

static void
start (Fixture *f)
{
  g_autoptr (GError) error = NULL;

  f->config = va_config_load (f->conf_dir, &error);
  g_assert_no_error (error);
  f->backend = va_backend_kernel_new (f->config, f->run_dir, &error);
  g_assert_no_error (error);
  f->store = va_store_open (f->state_dir, &error);
  g_assert_no_error (error);
  f->alloc = va_allocator_new (f->config, f->backend, f->store, f->run_dir, &error);
  g_assert_no_error (error);
  /* after the allocator's own handler: it has reacted when this runs */
  g_signal_connect (f->backend, "pfs-changed", G_CALLBACK (on_changed), f);
  g_signal_connect (f->alloc, "pf-event", G_CALLBACK (on_pf_event), f);
  g_signal_connect (f->alloc, "lease-broken", G_CALLBACK (on_broken), f);
  g_signal_connect (f->alloc, "lease-repaired", G_CALLBACK (on_repaired), f);
  va_events_connect (f->alloc);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", f->tmp);

  g_clear_object (&f->alloc);
  g_clear_pointer (&f->store, va_store_free);
  g_clear_object (&f->backend);
  g_clear_pointer (&f->config, va_config_free);
  g_assert_true (g_spawn_command_line_sync (cmd, NULL, NULL, NULL, NULL));
  g_free (f->tmp);
  g_free (f->conf_dir);
  g_free (f->state_dir);
  g_free (f->run_dir);
  g_ptr_array_unref (f->events);
  g_ptr_array_unref (f->broken);
  g_clear_object (&f->bed);
  va_kernel_set_devlink (NULL);
}

static gboolean
on_timeout (gpointer user_data)
{
  gboolean *expired = user_data;

  *expired = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs the main loop until the backend has announced a change (and the
 * allocator handled it), or @ms have passed; whether it did. */
static gboolean
wait_change (Fixture *f, guint since, guint ms)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add (ms, on_timeout, &expired);

  while (f->changes == since && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  return f->changes > since;
}

/* Runs the main loop until the backend has announced a change since
 * @since and then none for a while: the uevents of one hot-plug may come
 * in more than one burst. */
static gboolean
settle (Fixture *f, guint since)
{
  if (!wait_change (f, since, 5000))
    return FALSE;
  while (wait_change (f, f->changes, 400))
    ;
  return TRUE;
}

static void
uevent (Fixture *f, const char *sys_path, const char *action)
{
  umockdev_testbed_uevent (f->bed, sys_path, action);
  drain ();
}

static VaPoolStatus *
pool (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  VaPoolStatus *st = va_allocator_get_pool (f->alloc, "accel", &error);

  g_assert_no_error (error);
  return st;
}

static void
assert_pool (Fixture *f, guint total, guint free, guint leased, gboolean healthy, const char *reason)
{
  g_autoptr (VaPoolStatus) st = pool (f);

  g_assert_cmpuint (st->total, ==, total);
  g_assert_cmpuint (st->free, ==, free);
  g_assert_cmpuint (st->leased, ==, leased);
  g_assert_cmpint (st->healthy, ==, healthy);
  g_assert_cmpstr (st->health_reason, ==, reason);
}

static void
assert_warning (Fixture *f, const char *warning)
{
  g_autoptr (VaPoolStatus) st = pool (f);

  g_assert_cmpstr (st->warning, ==, warning);
}

static char *
vf_sys (guint i)
{
  return g_strdup_printf (BRIDGE_SYS "/0000:3b:%02x.%u", (2 + i) / 8, (2 + i) % 8);
}

/* As the kernel does when the PF goes: its VFs first, then its netdev,
 * then the PF itself; the uevents carry the properties of the devices, so
 * they are sent before the devices leave the testbed. Child devices are
 * removed one by one: umockdev drops the /sys/class link of the device it
 * is given only. */
static void
remove_pf (Fixture *f)
{
  for (guint i = 0; i < 8; i++)
    {
      g_autofree char *vf = vf_sys (i);
      g_autofree char *vf_net = g_strdup_printf ("%s/net/enp59s0f0np0v%u", vf, i);
      g_autofree char *rep = g_strdup_printf (PF_SYS "/net/enp59s0f0npf0vf%u", i);

      uevent (f, rep, "remove");
      uevent (f, vf_net, "remove");
      uevent (f, vf, "remove");
      umockdev_testbed_remove_device (f->bed, rep);
      umockdev_testbed_remove_device (f->bed, vf_net);
      umockdev_testbed_remove_device (f->bed, vf);
    }
  uevent (f, PF_NET_SYS, "remove");
  uevent (f, PF_SYS, "remove");
  umockdev_testbed_remove_device (f->bed, PF_NET_SYS);
  umockdev_testbed_remove_device (f->bed, PF_SYS);
}

/* Why the lease of (UUID, MAC) carries nothing, as lease list says it. */
static void
assert_broken (Fixture *f, const char *want)
{
  g_autofree char *why = va_allocator_get_lease_broken (f->alloc, UUID, MAC);

  g_assert_cmpstr (why, ==, want);
}

static void
test_pf_appears (Fixture *f, gconstpointer data)
{
  guint mark = 0;
  start (f);
  assert_pool (f, 0, 0, 0, FALSE, "no PF matches pool accel (match-vendor=15b3)");

  /* a ConnectX-6 Dx shows up after the daemon started */
  mark = f->changes;
  load (f, "cx6dx-switchdev.umockdev");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
  g_assert_cmpuint (f->events->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (f->events, 0), ==, "PF enp59s0f0np0 (0000:3b:00.0) joined pool accel with 8 slot(s)");
  /* vdpactl dev list: what discovery saw, from memory */
  {
    guint left_out = 99;
    g_autoptr (GPtrArray) devs = va_allocator_list_devices (f->alloc, 3, &left_out);
    const VaDevPf *pf;
    const VaDevVf *vf;

    g_assert_cmpuint (devs->len, ==, 1);
    pf = g_ptr_array_index (devs, 0);
    g_assert_cmpstr (pf->pci, ==, "0000:3b:00.0");
    g_assert_cmpstr (pf->name, ==, "enp59s0f0np0");
    g_assert_cmpstr (pf->model, ==, "ConnectX-6 Dx");
    /* this testbed answers no devlink: the mode is not known, not guessed */
    g_assert_null (pf->eswitch);
    g_assert_cmpstr (pf->pool, ==, "accel");
    g_assert_null (pf->why_no_pool);
    g_assert_cmpuint (pf->n_vfs, ==, 8);
    /* the bound: 3 VFs sent, 5 counted */
    g_assert_cmpuint (pf->vfs->len, ==, 3);
    g_assert_cmpuint (left_out, ==, 5);
    vf = g_ptr_array_index (pf->vfs, 0);
    g_assert_cmpstr (vf->state, ==, "free");
    g_assert_cmpstr (vf->mgmtdev, ==, "pci/0000:3b:00.2");
  }

  /* the same PF announced again joins nothing twice */
  mark = f->changes;
  uevent (f, PF_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
  g_assert_cmpuint (f->events->len, ==, 1);
}

static void
test_unrelated_ignored (Fixture *f, gconstpointer data)
{
  guint mark = 0;
  start (f);
  /* the Intel PCI bridge, and a netdev on no ConnectX */
  mark = f->changes;
  uevent (f, BRIDGE_SYS, "change");
  umockdev_testbed_add_device (f->bed, "net", "eth9", NULL, NULL, NULL);
  uevent (f, "/sys/devices/eth9", "add");
  g_assert_false (wait_change (f, mark, 400));
  g_assert_cmpuint (f->changes, ==, 0);
  assert_pool (f, 8, 8, 0, TRUE, "");
}

static void
store_lease (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStore) store = va_store_open (f->state_dir, &error);
  g_autoptr (VaLease) lease = va_lease_new ();
  g_autoptr (VaStoreOp) op = NULL;
  g_autofree char *ports = va_path_ports (f->run_dir);

  g_assert_no_error (error);
  lease->uuid = g_strdup (UUID);
  lease->domain_name = g_strdup ("vm1");
  lease->mac = g_strdup (MAC);
  lease->network = g_strdup ("");
  lease->pool = g_strdup ("accel");
  lease->slot = g_strdup (SLOT);
  lease->device = g_strdup ("va-" SLOT);
  lease->chardev = g_strdup ("/dev/vhost-vdpa-0");
  lease->port = va_port_path (ports, UUID, MAC);
  lease->queues = 2;
  op = va_store_queue_insert (store, lease);
  g_assert_true (va_store_commit (store, &error));
  g_assert_no_error (error);
  g_assert_true (va_store_op_propagate_error (op, &error));
}

static const VaLease *
find_lease (GPtrArray *leases)
{
  g_assert_cmpuint (leases->len, ==, 1);
  return g_ptr_array_index (leases, 0);
}

static void
released (GObject *source, GAsyncResult *res, gpointer user_data)
{
  gboolean *done = user_data;
  g_autoptr (GError) error = NULL;

  g_assert_true (va_allocator_release_finish (VA_ALLOCATOR (source), res, &error));
  g_assert_no_error (error);
  *done = TRUE;
}

static void
test_pf_leaves_and_returns (Fixture *f, gconstpointer data)
{
  GHashTable *r;
  guint mark = 0;
  g_autoptr (GPtrArray) leases = NULL;
  g_autofree char *ports = NULL;
  g_autofree char *link = NULL;
  g_autofree char *repair_failed = NULL;
  gboolean done = FALSE;

  store_lease (f);
  start (f);
  assert_pool (f, 8, 7, 1, TRUE, "");
  assert_broken (f, NULL);
  ports = va_path_ports (f->run_dir);
  link = va_port_path (ports, UUID, MAC);
  g_assert_true (g_file_test (link, G_FILE_TEST_IS_SYMLINK));

  /* the PF leaves the host under a live lease */
  mark = f->changes;
  remove_pf (f);
  g_assert_true (settle (f, mark));
  /* its free slots are lost; the leased one stays the lease's */
  assert_pool (f, 1, 0, 1, FALSE, "enp59s0f0np0: " GONE);
  g_assert_cmpuint (f->broken->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (f->broken, 0), ==, SLOT ": " GONE);
  assert_broken (f, GONE);
  g_assert_cmpstr (g_ptr_array_index (f->events, 0), ==, "PF enp59s0f0np0 in pool accel is unhealthy: " GONE);
  g_assert_cmpstr (g_ptr_array_index (f->events, 1), ==, "PF enp59s0f0np0 (0000:3b:00.0) left pool accel: its 8 slot(s) are lost");
  r = event (VA_EVENT_LEASE_BROKEN, 0);
  assert_field (r, "PRIORITY", "4");
  assert_field (r, "VA_POOL", "accel");
  assert_field (r, "VA_DOMAIN_UUID", UUID);
  assert_field (r, "VA_MAC", MAC);
  assert_field (r, "VA_SLOT", SLOT);
  assert_field (r, "VA_REASON", GONE);
  r = event (VA_EVENT_PF_HEALTH, 0);
  assert_field (r, "VA_POOL", "accel");
  assert_field (r, "VA_PF", "enp59s0f0np0");
  assert_field (r, "VA_PCI", "0000:3b:00.0");
  assert_field (r, "VA_HEALTHY", "0");
  assert_field (r, "VA_REASON", GONE);
  assert_field (r, "MESSAGE", "PF enp59s0f0np0 in pool accel is unhealthy: " GONE);
  /* the lease is kept, broken; no link to a node that is gone */
  leases = va_allocator_list_leases (f->alloc);
  g_assert_cmpstr (find_lease (leases)->slot, ==, SLOT);
  g_assert_false (g_file_test (link, G_FILE_TEST_EXISTS));

  /* the PF comes back: its slots with it; the lease has its slot again,
   * but its device cannot be re-made on a kernel without vdpa */
  mark = f->changes;
  load (f, "cx6dx-hotplug.umockdev");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 7, 1, TRUE, "");
  g_assert_cmpstr (g_ptr_array_index (f->events, f->events->len - 2), ==,
                   "PF enp59s0f0np0 (0000:3b:00.0) is back in pool accel with 8 slot(s)");
  g_assert_cmpstr (g_ptr_array_index (f->events, f->events->len - 1), ==, "PF enp59s0f0np0 in pool accel is healthy again");
  r = event (VA_EVENT_LEASE_BROKEN, 1);
  g_assert_true (g_str_has_prefix (g_hash_table_lookup (r, "VA_REASON"), "its slot " SLOT " is back, but its device could not be re-made"));
  repair_failed = g_strdup_printf ("its slot %s is back, but its device could not be re-made: vdpa device va-%s on VF %s: %s", SLOT, SLOT,
                                   SLOT, NO_VDPA);
  g_assert_cmpuint (f->broken->len, ==, 2);
  assert_broken (f, repair_failed);
  g_assert_cmpuint (f->repaired, ==, 0);

  /* released, the broken lease frees its slot */
  va_allocator_release_async (f->alloc, UUID, MAC, released, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
  assert_pool (f, 8, 8, 0, TRUE, "");
  assert_broken (f, NULL);
}

static void
test_release_while_gone (Fixture *f, gconstpointer data)
{
  guint mark = 0;
  gboolean done = FALSE;

  store_lease (f);
  start (f);
  mark = f->changes;
  remove_pf (f);
  g_assert_true (settle (f, mark));
  /* released while its PF is away: the slot is lost, not free */
  va_allocator_release_async (f->alloc, UUID, MAC, released, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
  assert_pool (f, 0, 0, 0, FALSE, "enp59s0f0np0: " GONE);
  mark = f->changes;
  load (f, "cx6dx-hotplug.umockdev");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
}

/* The one PF's reason as the metrics' fixed word. */
static void
assert_pf_code (Fixture *f, VaPfHealth code)
{
  g_autoptr (GPtrArray) pfs = va_allocator_list_pfs (f->alloc);

  g_assert_cmpuint (pfs->len, ==, 1);
  g_assert_cmpstr (va_pf_health_to_string (((VaPfStatus *) g_ptr_array_index (pfs, 0))->health_code), ==, va_pf_health_to_string (code));
}

static void
test_link_down_up (Fixture *f, gconstpointer data)
{
  GHashTable *r;
  guint mark = 0;
  start (f);
  assert_pool (f, 8, 8, 0, TRUE, "");

  mark = f->changes;
  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "operstate", "down");
  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "carrier", "0");
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  /* its slots stay, but take no lease */
  assert_pool (f, 8, 0, 0, FALSE, "enp59s0f0np0: link down on enp59s0f0np0 (operstate down, carrier off)");
  g_assert_cmpstr (g_ptr_array_index (f->events, 0), ==,
                   "PF enp59s0f0np0 in pool accel is unhealthy: link down on enp59s0f0np0 (operstate down, carrier off)");
  r = event (VA_EVENT_PF_HEALTH, 0);
  assert_field (r, "PRIORITY", "4");
  assert_field (r, "VA_HEALTHY", "0");
  assert_field (r, "VA_REASON", "link down on enp59s0f0np0 (operstate down, carrier off)");
  assert_pf_code (f, VA_PF_HEALTH_LINK_DOWN);

  mark = f->changes;
  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "operstate", "up");
  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "carrier", "1");
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
  g_assert_cmpstr (g_ptr_array_index (f->events, 1), ==, "PF enp59s0f0np0 in pool accel is healthy again");
  r = event (VA_EVENT_PF_HEALTH, 1);
  assert_field (r, "PRIORITY", "5");
  assert_field (r, "VA_HEALTHY", "1");
  assert_field (r, "VA_PCI", "0000:3b:00.0");
  g_assert_null (g_hash_table_lookup (r, "VA_REASON"));
  g_assert_cmpuint (f->broken->len, ==, 0);
  assert_pf_code (f, VA_PF_HEALTH_OK);
}

/* The eswitch mode is read from the PF, not taken from the configuration:
 * an operator's `devlink dev eswitch set ... mode switchdev` under a
 * kind=sriov pool whose network has a VLAN (libvirt's <vlan>, which mlx5
 * then refuses) makes the pool unhealthy with the line that says what to
 * set, and legacy again makes it healthy. */
static void
test_eswitch_flip_checks_vlan (Fixture *f, gconstpointer data)
{
  g_autofree char *conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  guint mark;

  g_assert_true (g_file_set_contents (conf_file,
                                      "[pool accel]\nkind=sriov\nmatch-vendor=15b3\n"
                                      "[network tenant]\nmode=sriov\npool=accel\nvlan=100\n",
                                      -1, NULL));
  fake_devlink_for ("cx6dx-legacy");
  testbed_unbind_vfs (umockdev_testbed_get_root_dir (f->bed), 0, 8);
  start (f);
  assert_pool (f, 8, 8, 0, TRUE, "");

  mark = f->changes;
  fake_devlink.mode = VA_KERNEL_ESWITCH_SWITCHDEV;
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 0, 0, FALSE,
               "enp59s0f0np0: PF 0000:3b:00.0 is in eswitch mode switchdev and takes no VF VLAN, but network tenant's VLAN 100 goes to "
               "libvirt's <vlan>: set vlan-method=bridge or ovs with uplink-bridge in [pool accel], or eswitch=legacy");
  assert_pf_code (f, VA_PF_HEALTH_PREPARE_FAILED);

  mark = f->changes;
  fake_devlink.mode = VA_KERNEL_ESWITCH_LEGACY;
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
}

/* A VF without its vdpa management device is a slot that takes no lease;
 * with none on the PF (mlx5_vdpa not loaded) the pool says why. */
static void
test_vf_without_mgmtdev (Fixture *f, gconstpointer data)
{
  guint mark;

  fake_devlink_for ("cx6dx-switchdev");
  fake_devlink.no_mgmtdev = "0000:3b:00.3";
  start (f);
  assert_pool (f, 7, 7, 0, TRUE, ""); /* total: the slots not lost */
  /* healthy, but the missing slot is not silent */
  assert_warning (f, "1 of 8 VFs of PF enp59s0f0np0 take no lease: VF 0000:3b:00.3 has no vdpa management device: is mlx5_vdpa loaded? "
                     "(modprobe mlx5_vdpa)");

  mark = f->changes;
  fake_devlink.no_mgmtdevs = TRUE;
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 0, 0, 0, FALSE, "enp59s0f0np0: VF 0000:3b:00.2 has no vdpa management device: is mlx5_vdpa loaded? (modprobe mlx5_vdpa)");
  assert_pf_code (f, VA_PF_HEALTH_NO_VDPA_VF);

  /* mlx5_vdpa loaded: its management devices come (the auxiliary
   * device's bind), and the slots with them */
  mark = f->changes;
  fake_devlink.no_mgmtdevs = FALSE;
  fake_devlink.no_mgmtdev = NULL;
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, 8, 0, TRUE, "");
  assert_warning (f, "");
  /* when all were missing the health said it, and the warning went */
  assert_field (event (VA_EVENT_POOL_WARNING, 0), "VA_WARNING", "");

  /* one missing again: the warning, in the journal too */
  mark = f->changes;
  fake_devlink.no_mgmtdev = "0000:3b:00.4";
  uevent (f, PF_NET_SYS, "change");
  g_assert_true (settle (f, mark));
  fake_devlink.no_mgmtdev = NULL;
  assert_warning (f, "1 of 8 VFs of PF enp59s0f0np0 take no lease: VF 0000:3b:00.4 has no vdpa management device: is mlx5_vdpa loaded? "
                     "(modprobe mlx5_vdpa)");
  assert_field (event (VA_EVENT_POOL_WARNING, 1), "VA_POOL", "accel");
  assert_field (event (VA_EVENT_POOL_WARNING, 1), "PRIORITY", "4");
}

static void
ip (const char *args)
{
  g_autofree char *cmd = g_strdup_printf ("ip %s", args);
  g_autofree char *err = NULL;
  int status = 0;

  g_assert_true (g_spawn_command_line_sync (cmd, NULL, &err, &status, NULL));
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("%s: %s", cmd, err);
}

/* The kernel's side of a link change: sysfs (the testbed) says @up or not,
 * then the real link changes with `ip @args`; the pool must follow. */
#define LINK_DOWN "enp59s0f0np0: link down on enp59s0f0np0 (operstate lowerlayerdown, carrier off)"
static void
link_change (Fixture *f, gboolean up, const char *args)
{
  guint mark = f->changes;
  g_auto (GStrv) steps = g_strsplit (args, ";", -1);

  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "operstate", up ? "up" : "lowerlayerdown");
  umockdev_testbed_set_attribute (f->bed, PF_NET_SYS, "carrier", up ? "1" : "0");
  for (guint i = 0; steps[i]; i++)
    ip (steps[i]);
  g_assert_true (settle (f, mark));
  assert_pool (f, 8, up ? 8 : 0, 0, up, up ? "" : LINK_DOWN);
}

/* A carrier change sends no uevent, only a link message: the kernel keeps
 * the PF's sysfs carrier and operstate current, and tells rtnetlink's link
 * group. Here the testbed plays sysfs and a veth named like the PF's
 * uplink, in a network namespace of the test's own, plays the link: its
 * peer going down and up changes only its carrier. */
static void
test_carrier_without_uevent (Fixture *f, gconstpointer data)
{
  guint mark = 0;

  if (unshare (CLONE_NEWNET) != 0)
    {
      g_test_skip_printf ("no network namespace of our own: %s", g_strerror (errno));
      return;
    }
  start (f);
  assert_pool (f, 8, 8, 0, TRUE, "");
  /* the uplink comes up without carrier; the cable plugged in; pulled:
   * the carrier alone changes */
  link_change (f, FALSE, "link add enp59s0f0np0 type veth peer name cable0;link set enp59s0f0np0 up");
  link_change (f, TRUE, "link set cable0 up");
  link_change (f, FALSE, "link set cable0 down");

  /* the backend's own VF settings on the PF are link messages too, but
   * change no link state: no rediscovery for them */
  mark = f->changes;
  ip ("link set enp59s0f0np0 alias uplink");
  g_assert_false (wait_change (f, mark, 1000));
}

static void
test_reload_pf_without_vfs (Fixture *f, gconstpointer data)
{
  guint mark = 0;
  g_autoptr (GError) error = NULL;
  VaConfig *config;
  const char *cx5 = "enp94s0f0: ConnectX-5 (15b3:1017) cannot carry vDPA: mlx5_vdpa needs the virtio queue object, which ConnectX-5 lacks";

  start (f);
  assert_pool (f, 0, 0, 0, FALSE, cx5);
  /* a PF with no VFs is known by its address, not by a first VF: found
   * again on reload, it is no duplicate */
  config = va_config_load (f->conf_dir, &error);
  g_assert_no_error (error);
  g_assert_true (va_allocator_reload (f->alloc, config, &error));
  g_assert_no_error (error);
  va_config_free (f->config);
  f->config = config;
  assert_pool (f, 0, 0, 0, FALSE, cx5);
  /* and so on a uevent */
  mark = f->changes;
  uevent (f, "/sys/devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0", "change");
  g_assert_true (settle (f, mark));
  assert_pool (f, 0, 0, 0, FALSE, cx5);
}

static void
stop (Fixture *f)
{
  g_clear_object (&f->alloc);
  g_clear_pointer (&f->store, va_store_free);
  g_clear_object (&f->backend);
  g_clear_pointer (&f->config, va_config_free);
}

/* A PF moved from a kind=vdpa pool to a kind=sriov one (issue 27): the
 * VFs the daemon had on mlx5_core as vDPA slots are let go of, as a
 * kind=sriov pool makes its VFs, so they are slots, across a daemon
 * restart and with no hand on the VFs; a VF bound again by someone since
 * (a new netdev) is the host's, untouched and not offered. */
static void
test_vdpa_pool_to_sriov (Fixture *f, gconstpointer data)
{
  g_autofree char *conf_file = g_build_filename (f->conf_dir, "vdpa-allocator.conf", NULL);
  g_autofree char *vf7 = vf_sys (7);
  g_autofree char *vf7_net = g_strconcat (vf7, "/net/enp59s0f0np0v7", NULL);
  g_autofree char *autoprobe = NULL;
  g_autoptr (GString) unbound = g_string_new (NULL);
  g_autoptr (VaPoolStatus) st = NULL;

  fake_devlink_for ("cx6dx-legacy");
  start (f);
  assert_pool (f, 8, 8, 0, TRUE, "");
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, "");

  /* the host took VF 7 meanwhile: unbound and bound again */
  umockdev_testbed_set_attribute (f->bed, vf7_net, "ifindex", "99");
  stop (f);
  g_assert_true (g_file_set_contents (conf_file, "[pool accel]\nkind=sriov\nmatch-vendor=15b3\n", -1, NULL));
  start (f);

  st = pool (f);
  g_assert_cmpuint (st->free, ==, 7);
  g_assert_true (st->healthy);
  g_assert_nonnull (strstr (st->warning, "VF 0000:3b:01.1"));
  for (guint i = 0; i < 7; i++)
    g_string_append_printf (unbound, "0000:3b:%02x.%u unbind\n", (2 + i) / 8, (2 + i) % 8);
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, unbound->str);
  autoprobe = va_sysfs_read (PF_SYS "/sriov_drivers_autoprobe", NULL);
  g_assert_cmpstr (autoprobe, ==, "0");

  /* prepared again (a reload, a restart): nothing more is unbound */
  stop (f);
  start (f);
  g_assert_cmpstr (fake_devlink.vf_calls->str, ==, unbound->str);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  journal = g_ptr_array_new_with_free_func ((GDestroyNotify) g_hash_table_unref);
  g_log_set_writer_func (writer, NULL, NULL);
#define ADD(path, bed, fn) g_test_add (path, Fixture, bed, setup, fn, teardown)
  ADD ("/monitor/pf-appears", NULL, test_pf_appears);
  ADD ("/monitor/unrelated-ignored", "cx6dx-switchdev.umockdev", test_unrelated_ignored);
  ADD ("/monitor/pf-leaves-and-returns", "cx6dx-switchdev.umockdev", test_pf_leaves_and_returns);
  ADD ("/monitor/release-while-gone", "cx6dx-switchdev.umockdev", test_release_while_gone);
  ADD ("/monitor/link-down-up", "cx6dx-switchdev.umockdev", test_link_down_up);
  ADD ("/monitor/eswitch-flip-checks-vlan", "cx6dx-switchdev.umockdev", test_eswitch_flip_checks_vlan);
  ADD ("/monitor/vf-without-mgmtdev", "cx6dx-switchdev.umockdev", test_vf_without_mgmtdev);
  ADD ("/monitor/carrier-without-uevent", "cx6dx-switchdev.umockdev", test_carrier_without_uevent);
  ADD ("/monitor/reload-pf-without-vfs", "cx5.umockdev", test_reload_pf_without_vfs);
  ADD ("/monitor/vdpa-pool-to-sriov", "cx6dx-switchdev.umockdev", test_vdpa_pool_to_sriov);
  return g_test_run ();
}
