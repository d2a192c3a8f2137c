/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The lease store against a real SQLite file in a temporary directory. */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "va-error.h"
#include "va-store-private.h"

#define UUID_A "7b0c4a4e-3f1d-4c59-9d2b-5a4f4f0e1a01"
#define UUID_B "7b0c4a4e-3f1d-4c59-9d2b-5a4f4f0e1a02"
#define UUID_C "7b0c4a4e-3f1d-4c59-9d2b-5a4f4f0e1a03"

typedef struct
{
  char *dir;
  char *path;
  VaStore *store;
} Fixture;

static void
rm_rf (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  if (dir)
    while ((name = g_dir_read_name (dir)))
      {
        g_autofree char *child = g_build_filename (path, name, NULL);

        rm_rf (child);
      }
  g_remove (path);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("va-store-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, VA_STORE_FILE_NAME, NULL);
  if (data == NULL)
    {
      f->store = va_store_open (f->dir, &error);
      g_assert_no_error (error);
      g_assert_nonnull (f->store);
    }
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->store, va_store_free);
  rm_rf (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

static void
reopen (Fixture *f)
{
  g_autoptr (GError) error = NULL;

  g_clear_pointer (&f->store, va_store_free);
  f->store = va_store_open (f->dir, &error);
  g_assert_no_error (error);
  g_assert_nonnull (f->store);
}

static VaLease *
make_lease (const char *uuid, const char *mac, const char *slot)
{
  VaLease *l = va_lease_new ();

  l->uuid = g_strdup (uuid);
  l->domain_name = g_strdup ("guest1");
  l->mac = g_strdup (mac);
  l->network = g_strdup ("vpc2");
  l->pool = g_strdup ("cx6-p1");
  l->slot = g_strdup (slot);
  l->device = g_strdup_printf ("vdpa-%c%c", slot[strlen (slot) - 3], slot[strlen (slot) - 1]);
  l->chardev = g_strdup ("/dev/vhost-vdpa-0");
  l->port = g_strdup_printf ("/run/vdpa-allocator/ports/%s/%s", uuid, mac);
  l->vlan = 2334;
  l->queues = 4;
  l->created = 1700000000;
  return l;
}

/* Queues, commits and asserts success; returns the committed op. */
static VaStoreOp *
insert_one (VaStore *store, const VaLease *lease)
{
  g_autoptr (GError) error = NULL;
  VaStoreOp *op = va_store_queue_insert (store, lease);

  g_assert_true (va_store_commit (store, &error));
  g_assert_no_error (error);
  g_assert_true (va_store_op_propagate_error (op, &error));
  g_assert_no_error (error);
  return op;
}

static GPtrArray *
load (VaStore *store)
{
  g_autoptr (GError) error = NULL;
  GPtrArray *leases = va_store_load (store, &error);

  g_assert_no_error (error);
  g_assert_nonnull (leases);
  return leases;
}

static void
raw_exec (const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  char *msg = NULL;

  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  if (sqlite3_exec (db, sql, NULL, NULL, &msg) != SQLITE_OK)
    g_error ("%s: %s", sql, msg);
  sqlite3_close (db);
}

/* The error message of @sql, which must fail. */
static char *
raw_exec_error (const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  char *msg = NULL;
  char *copy;

  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db, sql, NULL, NULL, &msg), !=, SQLITE_OK);
  copy = g_strdup (msg);
  sqlite3_free (msg);
  sqlite3_close (db);
  return copy;
}

static char *
raw_query (const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *stmt = NULL;
  char *result = NULL;

  g_assert_cmpint (sqlite3_open (path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
  if (sqlite3_step (stmt) == SQLITE_ROW)
    result = g_strdup ((const char *) sqlite3_column_text (stmt, 0));
  sqlite3_finalize (stmt);
  sqlite3_close (db);
  return result;
}

static void
test_open_creates_wal_db (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) leases = load (f->store);
  g_autofree char *mode = raw_query (f->path, "PRAGMA journal_mode");
  g_autofree char *version = raw_query (f->path, "SELECT value FROM meta WHERE key = 'schema_version'");

  g_assert_true (g_file_test (f->path, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpstr (va_store_get_path (f->store), ==, f->path);
  g_assert_cmpuint (va_store_get_schema_version (f->store), ==, VA_STORE_SCHEMA_VERSION);
  g_assert_cmpuint (leases->len, ==, 0);
  g_assert_cmpstr (mode, ==, "wal");
  g_assert_cmpstr (version, ==, G_STRINGIFY (VA_STORE_SCHEMA_VERSION));
}

static void
test_open_creates_missing_dir (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *sub = g_build_filename (f->dir, "a", "b", NULL);
  g_autoptr (VaStore) store = va_store_open (sub, &error);

  g_assert_no_error (error);
  g_assert_nonnull (store);
  g_assert_true (g_str_has_prefix (va_store_get_path (store), sub));
}

static void
test_insert_reload (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_lease (UUID_A, "52:54:00:00:00:02", "0000:b3:00.3");
  g_autoptr (VaStoreOp) op_a = NULL;
  g_autoptr (VaStoreOp) op_b = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;

  g_free (b->network);
  b->network = g_strdup (""); /* inline intent */
  b->vlan = 0;

  op_a = va_store_queue_insert (f->store, a);
  op_b = va_store_queue_insert (f->store, b);
  g_assert_cmpuint (va_store_get_n_pending (f->store), ==, 2);
  g_assert_true (va_store_commit (f->store, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (va_store_get_n_pending (f->store), ==, 0);

  g_assert_true (va_store_op_is_done (op_a));
  g_assert_true (va_store_op_propagate_error (op_a, NULL));
  g_assert_cmpuint (va_store_op_get_changes (op_a), ==, 1);
  g_assert_false (va_store_op_get_existed (op_a));
  g_assert_true (va_lease_equal (va_store_op_get_lease (op_a), a));
  g_assert_cmpuint (va_store_op_get_changes (op_b), ==, 1);

  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 2);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), a));
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 1), b));
}

static void
test_insert_sets_created (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = NULL;
  gint64 before = g_get_real_time () / G_USEC_PER_SEC;

  a->created = 0;
  op = insert_one (f->store, a);
  g_assert_cmpint (va_store_op_get_lease (op)->created, >=, before);
  g_assert_cmpint (va_store_op_get_lease (op)->created, <=, g_get_real_time () / G_USEC_PER_SEC);
}

static void
test_pending_until_commit (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = va_store_queue_insert (f->store, a);
  g_autoptr (GPtrArray) before = load (f->store);
  g_autoptr (GPtrArray) after = NULL;
  g_autoptr (GError) error = NULL;

  /* Nothing is written, and nothing may be answered, before the commit. */
  g_assert_cmpuint (before->len, ==, 0);
  g_assert_false (va_store_op_is_done (op));
  g_assert_false (va_store_op_propagate_error (op, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_null (va_store_op_get_lease (op));

  g_assert_true (va_store_commit (f->store, NULL));
  after = load (f->store);
  g_assert_cmpuint (after->len, ==, 1);
}

static void
test_insert_idempotent (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) retry = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.5");
  g_autoptr (VaStoreOp) first = insert_one (f->store, a);
  g_autoptr (VaStoreOp) second = NULL;
  g_autoptr (VaStoreOp) third = NULL;
  g_autoptr (GPtrArray) leases = NULL;

  /* The same key again, even with another slot: the stored lease wins. */
  second = insert_one (f->store, retry);
  g_assert_true (va_store_op_get_existed (second));
  g_assert_cmpuint (va_store_op_get_changes (second), ==, 0);
  g_assert_true (va_lease_equal (va_store_op_get_lease (second), a));

  /* Twice in one batch: the second sees the first. */
  {
    g_autoptr (VaLease) b = make_lease (UUID_B, "52:54:00:00:00:01", "0000:b3:00.3");
    g_autoptr (VaStoreOp) b1 = va_store_queue_insert (f->store, b);
    g_autoptr (VaStoreOp) b2 = va_store_queue_insert (f->store, b);

    g_assert_true (va_store_commit (f->store, NULL));
    g_assert_false (va_store_op_get_existed (b1));
    g_assert_true (va_store_op_get_existed (b2));
  }

  third = insert_one (f->store, a);
  g_assert_true (va_store_op_get_existed (third));
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 2);
}

static void
test_slot_unique (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_lease (UUID_B, "52:54:00:00:00:07", "0000:b3:00.2");
  g_autoptr (VaLease) c = make_lease (UUID_B, "52:54:00:00:00:08", "0000:b3:00.4");
  g_autoptr (VaStoreOp) op_a = insert_one (f->store, a);
  g_autoptr (VaStoreOp) op_b = NULL;
  g_autoptr (VaStoreOp) op_c = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;

  op_b = va_store_queue_insert (f->store, b);
  op_c = va_store_queue_insert (f->store, c);
  /* One operation failing does not sink the batch. */
  g_assert_true (va_store_commit (f->store, &error));
  g_assert_no_error (error);

  g_assert_true (va_store_op_is_done (op_b));
  g_assert_false (va_store_op_propagate_error (op_b, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, f->path));
  g_assert_nonnull (strstr (error->message, "UNIQUE constraint failed: leases.slot"));
  g_assert_null (va_store_op_get_lease (op_b));
  g_assert_true (va_store_op_propagate_error (op_c, NULL));

  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 2);
  g_assert_cmpstr (((VaLease *) g_ptr_array_index (leases, 0))->mac, ==, a->mac);
  g_assert_cmpstr (((VaLease *) g_ptr_array_index (leases, 1))->mac, ==, c->mac);
}

static void
test_slot_unique_in_schema (Fixture *f, gconstpointer data)
{
  sqlite3 *db = NULL;
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = insert_one (f->store, a);
  int rc;

  /* Even a writer that bypasses the store cannot lease a slot twice. */
  g_assert_cmpint (sqlite3_open (f->path, &db), ==, SQLITE_OK);
  rc = sqlite3_exec (db,
                     "INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created) "
                     "VALUES ('" UUID_B "', 'x', '52:54:00:00:00:09', '', 'p', '0000:b3:00.2', '', '', '', 0, 1, 0)",
                     NULL, NULL, NULL);
  g_assert_cmpint (rc, ==, SQLITE_CONSTRAINT);
  rc = sqlite3_exec (db,
                     "INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created) "
                     "VALUES ('" UUID_A "', 'x', '52:54:00:00:00:01', '', 'p', '0000:b3:00.9', '', '', '', 0, 1, 0)",
                     NULL, NULL, NULL);
  g_assert_cmpint (rc, ==, SQLITE_CONSTRAINT);
  sqlite3_close (db);
}

static void
test_insert_invalid (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) ops = g_ptr_array_new_with_free_func ((GDestroyNotify) va_store_op_unref);
  g_autoptr (GPtrArray) leases = NULL;
  const char *fields[] = { "uuid", "mac", "domain_name", "pool", "slot", "vlan", "queues", "chardev", "network" };

  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      g_autoptr (VaLease) l = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");

      switch (i)
        {
          case 0:
            g_free (l->uuid);
            l->uuid = g_ascii_strup (UUID_A, -1);
            break;
          case 1:
            g_free (l->mac);
            l->mac = g_strdup ("52:54:00:00:00");
            break;
          case 2:
            g_free (l->domain_name);
            l->domain_name = g_strnfill (VA_DOMAIN_NAME_MAX + 1, 'd');
            break;
          case 3:
            g_free (l->pool);
            l->pool = g_strdup ("");
            break;
          case 4:
            g_free (l->slot);
            l->slot = g_strnfill (VA_SLOT_MAX + 1, '0');
            break;
          case 5:
            l->vlan = 4095;
            break;
          case 6:
            l->queues = 0;
            break;
          case 7:
            g_free (l->chardev);
            l->chardev = g_strdup ("vhost-vdpa-0");
            break;
          case 8:
            g_free (l->network);
            l->network = g_strdup ("bad name");
            break;
          default:
            g_assert_not_reached ();
        }
      g_ptr_array_add (ops, va_store_queue_insert (f->store, l));
    }
  g_assert_true (va_store_commit (f->store, NULL));

  for (guint i = 0; i < ops->len; i++)
    {
      g_autoptr (GError) error = NULL;

      g_assert_false (va_store_op_propagate_error (g_ptr_array_index (ops, i), &error));
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      /* The message names the field (or the key's part) at fault. */
      if (i >= 2)
        g_assert_nonnull (strstr (error->message, fields[i]));
    }
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 0);
}

static void
test_delete (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_lease (UUID_A, "52:54:00:00:00:02", "0000:b3:00.3");
  g_autoptr (VaLease) c = make_lease (UUID_A, "52:54:00:00:00:03", "0000:b3:00.4");
  g_autoptr (VaLease) d = make_lease (UUID_B, "52:54:00:00:00:01", "0000:b3:00.5");
  g_autoptr (VaStoreOp) del1 = NULL;
  g_autoptr (VaStoreOp) del2 = NULL;
  g_autoptr (VaStoreOp) deldom = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  VaLease *all[] = { a, b, c, d };

  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    va_store_op_unref (va_store_queue_insert (f->store, all[i]));
  g_assert_true (va_store_commit (f->store, NULL));

  del1 = va_store_queue_delete (f->store, UUID_A, "52:54:00:00:00:01");
  g_assert_true (va_store_commit (f->store, NULL));
  g_assert_true (va_store_op_propagate_error (del1, NULL));
  g_assert_cmpuint (va_store_op_get_changes (del1), ==, 1);

  /* Release is idempotent: a second delete is no error, just no change. */
  del2 = va_store_queue_delete (f->store, UUID_A, "52:54:00:00:00:01");
  g_assert_true (va_store_commit (f->store, NULL));
  g_assert_true (va_store_op_propagate_error (del2, NULL));
  g_assert_cmpuint (va_store_op_get_changes (del2), ==, 0);

  deldom = va_store_queue_delete_domain (f->store, UUID_A);
  g_assert_true (va_store_commit (f->store, NULL));
  g_assert_cmpuint (va_store_op_get_changes (deldom), ==, 2);

  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), d));
}

static void
test_delete_invalid_key (Fixture *f, gconstpointer data)
{
  g_autoptr (VaStoreOp) op = va_store_queue_delete (f->store, "not-a-uuid", "52:54:00:00:00:01");
  g_autoptr (VaStoreOp) op2 = va_store_queue_delete_domain (f->store, NULL);
  g_autoptr (GError) error = NULL;

  g_assert_true (va_store_commit (f->store, NULL));
  g_assert_false (va_store_op_propagate_error (op, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (va_store_op_propagate_error (op2, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
}

static void
test_batch_order (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) ops = g_ptr_array_new_with_free_func ((GDestroyNotify) va_store_op_unref);
  g_autoptr (VaLease) x = make_lease (UUID_B, "52:54:00:00:ff:01", "0000:b4:00.2");
  g_autoptr (VaStoreOp) ins_x = NULL;
  g_autoptr (VaStoreOp) del_x = NULL;
  g_autoptr (VaStoreOp) reuse = NULL;
  g_autoptr (GPtrArray) leases = NULL;

  for (guint i = 0; i < 200; i++)
    {
      g_autofree char *mac = g_strdup_printf ("52:54:00:00:%02x:%02x", i / 256, i % 256);
      g_autofree char *slot = g_strdup_printf ("0000:b3:%02x.%u", i / 8, i % 8);
      g_autoptr (VaLease) l = make_lease (UUID_A, mac, slot);

      g_ptr_array_add (ops, va_store_queue_insert (f->store, l));
    }
  /* Operations run in queue order within the batch: a slot freed earlier
   * in the batch can be leased again later in it. */
  ins_x = va_store_queue_insert (f->store, x);
  del_x = va_store_queue_delete (f->store, UUID_B, "52:54:00:00:ff:01");
  {
    g_autoptr (VaLease) y = make_lease (UUID_B, "52:54:00:00:ff:02", "0000:b4:00.2");

    reuse = va_store_queue_insert (f->store, y);
  }
  g_assert_true (va_store_commit (f->store, NULL));

  for (guint i = 0; i < ops->len; i++)
    g_assert_cmpuint (va_store_op_get_changes (g_ptr_array_index (ops, i)), ==, 1);
  g_assert_cmpuint (va_store_op_get_changes (ins_x), ==, 1);
  g_assert_cmpuint (va_store_op_get_changes (del_x), ==, 1);
  g_assert_true (va_store_op_propagate_error (reuse, NULL));

  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 201);
  g_assert_cmpstr (((VaLease *) g_ptr_array_index (leases, 200))->mac, ==, "52:54:00:00:ff:02");
}

static void
test_batch_fails_whole (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_lease (UUID_A, "52:54:00:00:00:02", "0000:b3:00.3");
  g_autoptr (VaLease) bad = make_lease (UUID_A, "52:54:00:00:00:03", "0000:b3:00.4");
  g_autoptr (VaStoreOp) op_a = NULL;
  g_autoptr (VaStoreOp) op_b = NULL;
  g_autoptr (VaStoreOp) op_bad = NULL;
  g_autoptr (VaStoreOp) retry = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;
  sqlite3 *other = NULL;

  /* Another writer holds the database: the batch cannot begin. */
  g_assert_cmpint (sqlite3_open (f->path, &other), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (other, "BEGIN IMMEDIATE", NULL, NULL, NULL), ==, SQLITE_OK);

  bad->queues = 0;
  op_a = va_store_queue_insert (f->store, a);
  op_b = va_store_queue_insert (f->store, b);
  op_bad = va_store_queue_insert (f->store, bad);
  g_assert_false (va_store_commit (f->store, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_assert_nonnull (strstr (error->message, f->path));
  g_assert_nonnull (strstr (error->message, "database is locked"));
  g_clear_error (&error);

  /* Every operation is done, none succeeded; each says why. */
  g_assert_true (va_store_op_is_done (op_a));
  g_assert_false (va_store_op_propagate_error (op_a, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_BUSY);
  g_clear_error (&error);
  g_assert_false (va_store_op_propagate_error (op_b, NULL));
  g_assert_false (va_store_op_propagate_error (op_bad, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpuint (va_store_get_n_pending (f->store), ==, 0);

  sqlite3_exec (other, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close (other);

  retry = va_store_queue_insert (f->store, a);
  g_assert_true (va_store_commit (f->store, &error));
  g_assert_no_error (error);
  g_assert_false (va_store_op_get_existed (retry));
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
}

static void
test_commit_empty (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (va_store_commit (f->store, &error));
  g_assert_no_error (error);
}

static void
test_close_with_pending (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = va_store_queue_insert (f->store, a);
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;

  /* Whoever waits on an uncommitted op must learn it was never written. */
  g_clear_pointer (&f->store, va_store_free);
  g_assert_true (va_store_op_is_done (op));
  g_assert_false (va_store_op_propagate_error (op, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 0);
}

static void
test_survives_sigkill (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) leases = NULL;
  int fds[2];
  char ack = 0;
  int status = 0;
  pid_t pid;

  /* The child commits and says so; the parent then SIGKILLs it, as the
   * crash test will the daemon. The acknowledged lease must be there when
   * the store is opened again, from the WAL the child never checkpointed. */
  g_clear_pointer (&f->store, va_store_free);
  g_assert_cmpint (pipe (fds), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      VaStore *store = va_store_open (f->dir, NULL);
      VaLease *a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
      VaStoreOp *op;

      close (fds[0]);
      if (!store)
        _exit (2);
      op = va_store_queue_insert (store, a);
      if (!va_store_commit (store, NULL) || !va_store_op_propagate_error (op, NULL))
        _exit (3);
      if (write (fds[1], "y", 1) != 1)
        _exit (4);
      for (;;)
        pause ();
    }
  close (fds[1]);
  g_assert_cmpint (read (fds[0], &ack, 1), ==, 1);
  close (fds[0]);
  g_assert_cmpint (ack, ==, 'y');
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFSIGNALED (status));
  g_assert_cmpint (WTERMSIG (status), ==, SIGKILL);

  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_cmpstr (((VaLease *) g_ptr_array_index (leases, 0))->slot, ==, "0000:b3:00.2");
}

/* ---- upgrade path ---- */

static const char *const step2_sql = "ALTER TABLE leases ADD COLUMN mtu INTEGER NOT NULL DEFAULT 1500";

static VaStore *
open_with_step2 (const char *dir, const char *sql, GError **error)
{
  guint n = 0;
  const VaStoreMigration *real = va_store_get_migrations (&n);
  g_autofree VaStoreMigration *steps = g_new0 (VaStoreMigration, n + 1);

  memcpy (steps, real, n * sizeof *steps);
  steps[n].version = n + 1;
  steps[n].sql = sql;
  return va_store_open_with_migrations (dir, steps, n + 1, error);
}

static void
test_upgrade_from_older (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = insert_one (f->store, a);
  g_autoptr (VaStore) newer = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *version = NULL;
  g_autofree char *mtu = NULL;

  /* This build's database is "older" for a build with a step 2. */
  g_clear_pointer (&f->store, va_store_free);
  newer = open_with_step2 (f->dir, step2_sql, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (va_store_get_schema_version (newer), ==, VA_STORE_SCHEMA_VERSION + 1);
  leases = va_store_load (newer, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), a));
  g_clear_pointer (&newer, va_store_free);

  version = raw_query (f->path, "SELECT value FROM meta WHERE key = 'schema_version'");
  g_assert_cmpuint (g_ascii_strtoull (version, NULL, 10), ==, VA_STORE_SCHEMA_VERSION + 1);
  mtu = raw_query (f->path, "SELECT mtu FROM leases");
  g_assert_cmpstr (mtu, ==, "1500");
}

static void
test_upgrade_from_zero (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autofree char *version = NULL;

  /* A database left at version 0 (meta only) gets every step. */
  raw_exec (f->path, "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;"
                     "INSERT INTO meta VALUES ('schema_version', '0')");
  f->store = va_store_open (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (va_store_get_schema_version (f->store), ==, VA_STORE_SCHEMA_VERSION);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 0);
  version = raw_query (f->path, "SELECT value FROM meta WHERE key = 'schema_version'");
  g_assert_cmpstr (version, ==, G_STRINGIFY (VA_STORE_SCHEMA_VERSION));
}

static void
test_upgrade_step_fails (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = insert_one (f->store, a);
  g_autoptr (VaStore) newer = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;

  g_clear_pointer (&f->store, va_store_free);
  newer = open_with_step2 (f->dir, "ALTER TABLE no_such_table ADD COLUMN x INTEGER", &error);
  g_assert_null (newer);
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, f->path));
  {
    g_autofree char *step = g_strdup_printf ("from version %d to %d", VA_STORE_SCHEMA_VERSION, VA_STORE_SCHEMA_VERSION + 1);
    g_assert_nonnull (strstr (error->message, step));
  }
  g_assert_nonnull (strstr (error->message, "no such table"));

  /* Nothing changed: this build still opens it, lease and all. */
  reopen (f);
  g_assert_cmpuint (va_store_get_schema_version (f->store), ==, VA_STORE_SCHEMA_VERSION);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
}

static VaLease *
make_sriov_lease (const char *uuid, const char *mac, const char *slot)
{
  VaLease *l = make_lease (uuid, mac, slot);

  l->sriov = TRUE;
  g_free (l->device);
  l->device = g_strdup ("");
  g_free (l->chardev);
  l->chardev = g_strdup ("");
  g_free (l->port);
  l->port = g_strdup ("");
  l->queues = 0;
  return l;
}

/* A version 1 database (before kind sriov) keeps its leases, as kind vdpa,
 * and the new table takes an sriov lease. */
static void
test_upgrade_from_v1 (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_sriov_lease (UUID_B, "52:54:00:00:00:02", "0000:01:10.0");
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStoreOp) op = NULL;
  g_autofree char *kind = NULL;
  g_autofree char *sql = NULL;
  guint n = 0;
  const VaStoreMigration *steps = va_store_get_migrations (&n);

  g_assert_cmpuint (n, >=, 2);
  raw_exec (f->path, "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;"
                     "INSERT INTO meta VALUES ('schema_version', '1')");
  raw_exec (f->path, steps[0].sql);
  sql = g_strdup_printf ("INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created) "
                         "VALUES ('%s', '%s', '%s', '%s', '%s', '%s', '%s', '%s', '%s', %u, %u, %" G_GINT64_FORMAT ")",
                         a->uuid, a->domain_name, a->mac, a->network, a->pool, a->slot, a->device, a->chardev, a->port, a->vlan, a->queues,
                         a->created);
  raw_exec (f->path, sql);

  f->store = va_store_open (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (va_store_get_schema_version (f->store), ==, VA_STORE_SCHEMA_VERSION);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), a));
  g_assert_false (((VaLease *) g_ptr_array_index (leases, 0))->sriov);
  kind = raw_query (f->path, "SELECT kind FROM leases");
  g_assert_cmpstr (kind, ==, "vdpa");

  op = insert_one (f->store, b);
  g_clear_pointer (&leases, g_ptr_array_unref);
  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 2);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 1), b));
  g_assert_true (((VaLease *) g_ptr_array_index (leases, 1))->sriov);
}

/* A lease of kind sriov carries nothing of ours; the schema says so too. */
static void
test_sriov_lease_validated (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) b = make_sriov_lease (UUID_B, "52:54:00:00:00:02", "0000:01:10.0");
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;

  g_assert_true (va_lease_validate (b, &error));
  g_assert_no_error (error);
  g_free (b->device);
  b->device = g_strdup ("vdpa-0");
  g_assert_false (va_lease_validate (b, &error));
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "kind sriov"));
  g_clear_error (&error);
  g_free (b->device);
  b->device = g_strdup ("");
  b->queues = 4;
  g_assert_false (va_lease_validate (b, &error));
  g_clear_error (&error);

  /* past the validation, SQLite's CHECK refuses such a row */
  err = raw_exec_error (f->path, "INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, "
                                 "created, kind) VALUES ('" UUID_B "', '', '52:54:00:00:00:02', '', 'p', '0000:01:10.0', 'vdpa-0', '', "
                                 "'', 0, 0, 1, 'sriov')");
  g_assert_nonnull (strstr (err, "CHECK constraint failed"));
}

/* A version 2 database (before the software form) keeps its leases, as
 * form hardware; the new column takes a software lease, and the schema
 * refuses a software lease of kind sriov. */
static void
test_upgrade_from_v2 (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaLease) b = make_lease (UUID_B, "52:54:00:00:00:02", "sw-525400000002");
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStoreOp) op = NULL;
  g_autofree char *form = NULL;
  g_autofree char *sql = NULL;
  g_autofree char *err = NULL;
  guint n = 0;
  const VaStoreMigration *steps = va_store_get_migrations (&n);

  g_assert_cmpuint (n, >=, 3);
  raw_exec (f->path, "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;"
                     "INSERT INTO meta VALUES ('schema_version', '2')");
  raw_exec (f->path, steps[0].sql);
  raw_exec (f->path, steps[1].sql);
  sql = g_strdup_printf ("INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created, "
                         "kind) VALUES ('%s', '%s', '%s', '%s', '%s', '%s', '%s', '%s', '%s', %u, %u, %" G_GINT64_FORMAT ", 'vdpa')",
                         a->uuid, a->domain_name, a->mac, a->network, a->pool, a->slot, a->device, a->chardev, a->port, a->vlan, a->queues,
                         a->created);
  raw_exec (f->path, sql);

  f->store = va_store_open (f->dir, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (va_store_get_schema_version (f->store), ==, 3);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 1);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 0), a));
  g_assert_false (((VaLease *) g_ptr_array_index (leases, 0))->software);
  form = raw_query (f->path, "SELECT form FROM leases");
  g_assert_cmpstr (form, ==, "hardware");

  b->software = TRUE;
  op = insert_one (f->store, b);
  g_clear_pointer (&leases, g_ptr_array_unref);
  reopen (f);
  leases = load (f->store);
  g_assert_cmpuint (leases->len, ==, 2);
  g_assert_true (va_lease_equal (g_ptr_array_index (leases, 1), b));
  g_assert_true (((VaLease *) g_ptr_array_index (leases, 1))->software);

  err = raw_exec_error (f->path, "INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, "
                                 "created, kind, form) VALUES ('" UUID_C "', '', '52:54:00:00:00:03', '', 'p', '0000:01:10.1', '', '', "
                                 "'', 0, 0, 1, 'sriov', 'software')");
  g_assert_nonnull (strstr (err, "CHECK constraint failed"));
}

static void
test_newer_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (VaLease) a = make_lease (UUID_A, "52:54:00:00:00:01", "0000:b3:00.2");
  g_autoptr (VaStoreOp) op = insert_one (f->store, a);
  g_autoptr (VaStore) store = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *version = NULL;

  g_clear_pointer (&f->store, va_store_free);
  raw_exec (f->path, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");

  store = va_store_open (f->dir, &error);
  g_assert_null (store);
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, f->path));
  g_assert_nonnull (strstr (error->message, "schema version 99 is newer than the " G_STRINGIFY (VA_STORE_SCHEMA_VERSION)));

  /* Refusing leaves the file alone. */
  version = raw_query (f->path, "SELECT value FROM meta WHERE key = 'schema_version'");
  g_assert_cmpstr (version, ==, "99");
}

static void
test_corrupt_file (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStore) store = NULL;
  g_autofree char *junk = g_strnfill (8192, 'x');

  g_assert_true (g_file_set_contents (f->path, junk, -1, NULL));
  store = va_store_open (f->dir, &error);
  g_assert_null (store);
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, f->path));
  g_assert_nonnull (strstr (error->message, "file is not a database"));
}

static void
test_foreign_db (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStore) store = NULL;

  raw_exec (f->path, "CREATE TABLE something (x)");
  store = va_store_open (f->dir, &error);
  g_assert_null (store);
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "not a vdpa-allocator lease store"));
}

static void
test_load_hand_edited (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GError) error = NULL;

  /* Within the schema's CHECKs but not a valid lease (upper-case UUID). */
  raw_exec (f->path, "INSERT INTO leases (uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created) "
                     "VALUES ('7B0C4A4E-3F1D-4C59-9D2B-5A4F4F0E1A01', 'x', '52:54:00:00:00:09', '', 'p', "
                     "'0000:b3:00.2', '', '', '', 0, 1, 0)");
  leases = va_store_load (f->store, &error);
  g_assert_null (leases);
  g_assert_error (error, VA_ERROR, VA_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, f->path));
  g_assert_nonnull (strstr (error->message, "lease row 1"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, fn, data) g_test_add (path, Fixture, data, fixture_set_up, fn, fixture_tear_down)
  ADD ("/store/open/creates-wal-db", test_open_creates_wal_db, NULL);
  ADD ("/store/open/creates-missing-dir", test_open_creates_missing_dir, NULL);
  ADD ("/store/open/corrupt-file-is-an-error", test_corrupt_file, "no-open");
  ADD ("/store/open/foreign-db-is-refused", test_foreign_db, "no-open");
  ADD ("/store/insert/reload", test_insert_reload, NULL);
  ADD ("/store/insert/sets-created", test_insert_sets_created, NULL);
  ADD ("/store/insert/pending-until-commit", test_pending_until_commit, NULL);
  ADD ("/store/insert/idempotent-for-key", test_insert_idempotent, NULL);
  ADD ("/store/insert/slot-leased-twice-is-an-error", test_slot_unique, NULL);
  ADD ("/store/insert/schema-enforces-unique", test_slot_unique_in_schema, NULL);
  ADD ("/store/insert/invalid-lease-is-refused", test_insert_invalid, NULL);
  ADD ("/store/delete/by-key-and-domain", test_delete, NULL);
  ADD ("/store/delete/invalid-key", test_delete_invalid_key, NULL);
  ADD ("/store/batch/runs-in-order", test_batch_order, NULL);
  ADD ("/store/batch/fails-as-a-whole", test_batch_fails_whole, NULL);
  ADD ("/store/batch/empty-commit", test_commit_empty, NULL);
  ADD ("/store/batch/close-with-pending", test_close_with_pending, NULL);
  ADD ("/store/durability/survives-sigkill", test_survives_sigkill, NULL);
  ADD ("/store/upgrade/from-older-version", test_upgrade_from_older, NULL);
  ADD ("/store/upgrade/from-version-zero", test_upgrade_from_zero, "no-open");
  ADD ("/store/upgrade/failing-step-changes-nothing", test_upgrade_step_fails, NULL);
  ADD ("/store/upgrade/newer-version-refused", test_newer_refused, NULL);
  ADD ("/store/upgrade/from-version-1-kinds", test_upgrade_from_v1, "no-open");
  ADD ("/store/upgrade/from-version-2-forms", test_upgrade_from_v2, "no-open");
  ADD ("/store/insert/sriov-lease-validated", test_sriov_lease_validated, NULL);
  ADD ("/store/load/hand-edited-row-is-an-error", test_load_hand_edited, NULL);
#undef ADD

  return g_test_run ();
}
