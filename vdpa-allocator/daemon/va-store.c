/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-store"

#include "va-store-private.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "va-error.h"
#include "va-host-view.h"

/* a statement of one call finalized as its scope ends, on every path */
G_DEFINE_AUTOPTR_CLEANUP_FUNC (sqlite3_stmt, sqlite3_finalize)

/* Durability. journal_mode=WAL with synchronous=FULL: every COMMIT appends
 * to the WAL and fsyncs it before sqlite3_step() returns, so a committed
 * batch survives both a SIGKILL of the daemon and a power loss. WAL with
 * synchronous=NORMAL would survive a SIGKILL (the pages are in the kernel's
 * page cache) but could roll back acknowledged leases on power loss, which
 * breaks "committed before answered". The cost of FULL is one fsync per
 * commit; batching a main-loop turn into one transaction keeps that at one
 * fsync per batch rather than per request. */

/* The upgrade path. Step N takes a database from N - 1 to N in the same
 * transaction that records N in meta.schema_version; a failing step leaves
 * the database as it was. Add a step for every schema change; never edit a
 * released step. Version 0 is a database with an empty meta table. */
static const VaStoreMigration migrations[] = {
  { 1, "CREATE TABLE leases ("
       "  id INTEGER PRIMARY KEY,"
       "  uuid TEXT NOT NULL CHECK (length (uuid) = 36),"
       "  domain_name TEXT NOT NULL CHECK (length (domain_name) <= 256),"
       "  mac TEXT NOT NULL CHECK (length (mac) = 17),"
       "  network TEXT NOT NULL CHECK (length (network) <= 64),"
       "  pool TEXT NOT NULL CHECK (length (pool) BETWEEN 1 AND 64),"
       "  slot TEXT NOT NULL CHECK (length (slot) BETWEEN 1 AND 32),"
       "  device TEXT NOT NULL CHECK (length (device) <= 64),"
       "  chardev TEXT NOT NULL CHECK (length (chardev) <= 512),"
       "  port TEXT NOT NULL CHECK (length (port) <= 512),"
       "  vlan INTEGER NOT NULL CHECK (vlan BETWEEN 0 AND 4094),"
       "  queues INTEGER NOT NULL CHECK (queues BETWEEN 1 AND 256),"
       "  created INTEGER NOT NULL CHECK (created >= 0),"
       "  UNIQUE (uuid, mac),"
       "  UNIQUE (slot)"
       ") STRICT;" },
  /* kind sriov (issue 15): a VF libvirt passed through, with nothing of
   * ours on it. SQLite changes no CHECK in place: a new table, copied. */
  { 2, "CREATE TABLE leases_v2 ("
       "  id INTEGER PRIMARY KEY,"
       "  uuid TEXT NOT NULL CHECK (length (uuid) = 36),"
       "  domain_name TEXT NOT NULL CHECK (length (domain_name) <= 256),"
       "  mac TEXT NOT NULL CHECK (length (mac) = 17),"
       "  network TEXT NOT NULL CHECK (length (network) <= 64),"
       "  pool TEXT NOT NULL CHECK (length (pool) BETWEEN 1 AND 64),"
       "  slot TEXT NOT NULL CHECK (length (slot) BETWEEN 1 AND 32),"
       "  device TEXT NOT NULL CHECK (length (device) <= 64),"
       "  chardev TEXT NOT NULL CHECK (length (chardev) <= 512),"
       "  port TEXT NOT NULL CHECK (length (port) <= 512),"
       "  vlan INTEGER NOT NULL CHECK (vlan BETWEEN 0 AND 4094),"
       "  queues INTEGER NOT NULL CHECK (queues BETWEEN 0 AND 256),"
       "  created INTEGER NOT NULL CHECK (created >= 0),"
       "  kind TEXT NOT NULL DEFAULT 'vdpa' CHECK (kind IN ('vdpa', 'sriov')),"
       "  CHECK ((kind = 'vdpa' AND queues >= 1)"
       "         OR (kind = 'sriov' AND queues = 0 AND device = '' AND chardev = '' AND port = '')),"
       "  UNIQUE (uuid, mac),"
       "  UNIQUE (slot)"
       ") STRICT;"
       "INSERT INTO leases_v2 (id, uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created, kind)"
       "  SELECT id, uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created, 'vdpa' FROM leases;"
       "DROP TABLE leases;"
       "ALTER TABLE leases_v2 RENAME TO leases;" },
  /* form software (issue 28): a VDUSE device and our relay; kind vdpa only */
  { 3, "ALTER TABLE leases ADD COLUMN form TEXT NOT NULL DEFAULT 'hardware'"
       "  CHECK (form = 'hardware' OR (form = 'software' AND kind = 'vdpa'));" },
};

#define LEASE_COLUMNS "uuid, domain_name, mac, network, pool, slot, device, chardev, port, vlan, queues, created, kind, form"

typedef enum
{
  OP_INSERT,
  OP_DELETE,
  OP_DELETE_DOMAIN,
} OpKind;

struct _VaStoreOp
{
  grefcount ref;
  OpKind kind;
  VaLease *lease; /* insert: what to record, then what is recorded */
  char *uuid;
  char *mac;
  gboolean done;
  GError *error;
  guint changes;
  gboolean existed;
};

struct _VaStore
{
  char *path;
  sqlite3 *db;
  guint schema_version;
  gboolean created;   /* the file held no store before this open */
  GPtrArray *pending; /* VaStoreOp* */
  sqlite3_stmt *insert;
  sqlite3_stmt *select_key;
  sqlite3_stmt *delete_key;
  sqlite3_stmt *delete_uuid;
};

/* ---- SQLite helpers ---- */

static int
error_code_for (int rc)
{
  switch (rc)
    {
      case SQLITE_CONSTRAINT_UNIQUE:
      case SQLITE_CONSTRAINT_PRIMARYKEY:
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return VA_ERROR_BUSY;
      case SQLITE_CONSTRAINT_CHECK:
      case SQLITE_CONSTRAINT_NOTNULL:
      case SQLITE_CONSTRAINT_DATATYPE:
        return VA_ERROR_INVALID_ARGUMENT;
      default:
        return VA_ERROR_FAILED;
    }
}

/* "<file>: <what>: <sqlite message>" */
static void
set_db_error (VaStore *self, GError **error, const char *what)
{
  int rc = sqlite3_extended_errcode (self->db);

  g_set_error (error, VA_ERROR, error_code_for (rc), "%s: %s: %s", self->path, what, sqlite3_errmsg (self->db));
}

static gboolean
exec (VaStore *self, const char *sql, const char *what, GError **error)
{
  if (sqlite3_exec (self->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, what);
      return FALSE;
    }
  return TRUE;
}

static void
rollback (VaStore *self)
{
  if (!sqlite3_get_autocommit (self->db))
    sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
}

static sqlite3_stmt *
prepare (VaStore *self, const char *sql, GError **error)
{
  sqlite3_stmt *stmt = NULL;

  if (sqlite3_prepare_v3 (self->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot prepare a statement");
      return NULL;
    }
  return stmt;
}

static char *
column_dup (sqlite3_stmt *stmt, int col)
{
  const unsigned char *text = sqlite3_column_text (stmt, col);

  return g_strdup (text ? (const char *) text : "");
}

/* Reads a row of LEASE_COLUMNS starting at @col. */
static VaLease *
lease_from_row (sqlite3_stmt *stmt, int col)
{
  VaLease *lease = va_lease_new ();

  lease->uuid = column_dup (stmt, col++);
  lease->domain_name = column_dup (stmt, col++);
  lease->mac = column_dup (stmt, col++);
  lease->network = column_dup (stmt, col++);
  lease->pool = column_dup (stmt, col++);
  lease->slot = column_dup (stmt, col++);
  lease->device = column_dup (stmt, col++);
  lease->chardev = column_dup (stmt, col++);
  lease->port = column_dup (stmt, col++);
  lease->vlan = (guint16) CLAMP (sqlite3_column_int64 (stmt, col), 0, G_MAXUINT16);
  col++;
  lease->queues = (guint16) CLAMP (sqlite3_column_int64 (stmt, col), 0, G_MAXUINT16);
  col++;
  lease->created = sqlite3_column_int64 (stmt, col);
  col++;
  {
    const unsigned char *kind = sqlite3_column_text (stmt, col);
    lease->sriov = kind && strcmp ((const char *) kind, "sriov") == 0;
  }
  col++;
  {
    const unsigned char *form = sqlite3_column_text (stmt, col);
    lease->software = form && strcmp ((const char *) form, "software") == 0;
  }
  return lease;
}

/* ---- open and upgrade ---- */

static gboolean
table_exists (VaStore *self, const char *name, gboolean *exists, GError **error)
{
  g_autoptr (sqlite3_stmt) stmt = NULL;
  int rc;

  if (sqlite3_prepare_v2 (self->db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1", -1, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot read the schema");
      return FALSE;
    }
  sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
  rc = sqlite3_step (stmt);
  *exists = rc == SQLITE_ROW;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    {
      set_db_error (self, error, "cannot read the schema");
      return FALSE;
    }
  return TRUE;
}

static gboolean
count_tables (VaStore *self, gint64 *n, GError **error)
{
  g_autoptr (sqlite3_stmt) stmt = NULL;
  int rc;

  if (sqlite3_prepare_v2 (self->db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table'", -1, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot read the schema");
      return FALSE;
    }
  rc = sqlite3_step (stmt);
  *n = rc == SQLITE_ROW ? sqlite3_column_int64 (stmt, 0) : 0;
  if (rc != SQLITE_ROW)
    {
      set_db_error (self, error, "cannot read the schema");
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_version (VaStore *self, guint *version, GError **error)
{
  g_autoptr (sqlite3_stmt) stmt = NULL;
  guint64 v = 0;
  int rc;

  if (sqlite3_prepare_v2 (self->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot read the schema version");
      return FALSE;
    }
  rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    {
      const char *text = (const char *) sqlite3_column_text (stmt, 0);

      if (!text || !g_ascii_string_to_unsigned (text, 10, 0, G_MAXUINT, &v, NULL))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: the schema version is not a number: %.*s", self->path,
                       VA_CUT (text ? text : "", 32));
          return FALSE;
        }
    }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    {
      set_db_error (self, error, "cannot read the schema version");
      return FALSE;
    }
  *version = (guint) v;
  return TRUE;
}

static gboolean
write_version (VaStore *self, guint version, GError **error)
{
  g_autofree char *sql = g_strdup_printf ("INSERT INTO meta (key, value) VALUES ('schema_version', '%u') "
                                          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                                          version);

  return exec (self, sql, "cannot record the schema version", error);
}

static gboolean
upgrade_locked (VaStore *self, const VaStoreMigration *steps, guint n_steps, GError **error)
{
  guint target = n_steps ? steps[n_steps - 1].version : 0;
  gboolean has_meta = FALSE;
  guint version = 0;

  if (!table_exists (self, "meta", &has_meta, error))
    return FALSE;
  if (!has_meta)
    {
      gint64 n_tables = 0;

      if (!count_tables (self, &n_tables, error))
        return FALSE;
      if (n_tables > 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: not a vdpa-allocator lease store (an SQLite database without a meta table)",
                       self->path);
          return FALSE;
        }
      if (!exec (self, "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT", "cannot create the meta table",
                 error))
        return FALSE;
    }
  else if (!read_version (self, &version, error))
    return FALSE;

  if (version > target)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED,
                   "%s: schema version %u is newer than the %u this vdpa-allocatord knows; refusing to use it "
                   "(run the newer vdpa-allocatord, or move the file away to start with no leases)",
                   self->path, version, target);
      return FALSE;
    }

  for (guint i = version; i < target; i++)
    {
      g_autofree char *what = NULL;

      g_assert (steps[i].version == i + 1);
      what = g_strdup_printf ("cannot upgrade the schema from version %u to %u", i, i + 1);
      if (!exec (self, steps[i].sql, what, error))
        return FALSE;
    }
  if (version != target || !has_meta)
    if (!write_version (self, target, error))
      return FALSE;
  /* a real write at every open: a read-only directory or file, or a WAL
   * that cannot be written, fails here and not at the first lease */
  if (!exec (self,
             "INSERT INTO meta (key, value) VALUES ('opened', strftime ('%s', 'now')) "
             "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
             "the store is not writable", error))
    return FALSE;
  self->schema_version = target;
  self->created = !has_meta;
  return TRUE;
}

static gboolean
upgrade (VaStore *self, const VaStoreMigration *steps, guint n_steps, GError **error)
{
  /* IMMEDIATE: take the write lock before reading the version, so two
   * openers cannot both upgrade. */
  if (!exec (self, "BEGIN IMMEDIATE", "cannot begin the upgrade transaction", error))
    return FALSE;
  if (!upgrade_locked (self, steps, n_steps, error))
    {
      rollback (self);
      return FALSE;
    }
  if (!exec (self, "COMMIT", "the store is not writable", error))
    {
      rollback (self);
      return FALSE;
    }
  return TRUE;
}

static gboolean
configure (VaStore *self, GError **error)
{
  g_autoptr (sqlite3_stmt) stmt = NULL;
  g_autofree char *mode = NULL;
  int rc;

  /* The first statement reads the file: a corrupt or foreign file fails
   * here with SQLite's own words ("file is not a database"). */
  if (sqlite3_prepare_v2 (self->db, "PRAGMA journal_mode = WAL", -1, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot open the database");
      return FALSE;
    }
  rc = sqlite3_step (stmt);
  if (rc != SQLITE_ROW)
    {
      set_db_error (self, error, "cannot open the database");
      return FALSE;
    }
  mode = column_dup (stmt, 0);
  /* done with before the pragmas below run on the connection */
  g_clear_pointer (&stmt, sqlite3_finalize);
  if (g_ascii_strcasecmp (mode, "wal") != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: cannot switch to write-ahead logging (journal mode stays %s)", self->path, mode);
      return FALSE;
    }
  /* Waiting briefly for a reader (an operator's sqlite3 shell) is better
   * than failing a batch; the daemon is the only writer. */
  sqlite3_busy_timeout (self->db, 2000);
  return exec (self, "PRAGMA synchronous = FULL; PRAGMA trusted_schema = OFF; PRAGMA foreign_keys = ON", "cannot configure the database",
               error);
}

VaStore *
va_store_open_with_migrations (const char *dir, const VaStoreMigration *steps, guint n_steps, GError **error)
{
  g_autoptr (VaStore) self = NULL;
  int rc;

  g_return_val_if_fail (dir != NULL, NULL);
  g_return_val_if_fail (steps != NULL || n_steps == 0, NULL);

  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      int errsv = errno;

      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "cannot create the state directory %s: %s", dir, g_strerror (errsv));
      return NULL;
    }

  self = g_new0 (VaStore, 1);
  self->path = g_build_filename (dir, VA_STORE_FILE_NAME, NULL);
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) va_store_op_unref);

  rc = sqlite3_open_v2 (self->path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK)
    {
      if (self->db)
        set_db_error (self, error, "cannot open the database");
      else
        g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: cannot open the database: %s", self->path, sqlite3_errstr (rc));
      return NULL;
    }
  sqlite3_extended_result_codes (self->db, 1);
  if (sqlite3_db_readonly (self->db, "main") == 1)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: the store is not writable (SQLite opened it read-only)", self->path);
      return NULL;
    }

  if (!configure (self, error))
    return NULL;
  if (!upgrade (self, steps, n_steps, error))
    return NULL;

  /* Prepared once, for the leases table every path creates at step 1. */
  if (self->schema_version >= 1)
    {
      self->insert = prepare (self,
                              "INSERT INTO leases (" LEASE_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
                              "ON CONFLICT (uuid, mac) DO NOTHING",
                              error);
      if (!self->insert)
        return NULL;
      self->select_key = prepare (self, "SELECT " LEASE_COLUMNS " FROM leases WHERE uuid = ?1 AND mac = ?2", error);
      if (!self->select_key)
        return NULL;
      self->delete_key = prepare (self, "DELETE FROM leases WHERE uuid = ?1 AND mac = ?2", error);
      if (!self->delete_key)
        return NULL;
      self->delete_uuid = prepare (self, "DELETE FROM leases WHERE uuid = ?1", error);
      if (!self->delete_uuid)
        return NULL;
    }

  return g_steal_pointer (&self);
}

const VaStoreMigration *
va_store_get_migrations (guint *n_steps)
{
  g_return_val_if_fail (n_steps != NULL, NULL);

  *n_steps = G_N_ELEMENTS (migrations);
  return migrations;
}

VaStore *
va_store_open (const char *dir, GError **error)
{
  G_STATIC_ASSERT (G_N_ELEMENTS (migrations) == VA_STORE_SCHEMA_VERSION);

  g_return_val_if_fail (dir != NULL, NULL);

  return va_store_open_with_migrations (dir, migrations, G_N_ELEMENTS (migrations), error);
}

void
va_store_free (VaStore *self)
{
  if (!self)
    return;
  /* Queued but never committed: nothing was written, and the operations
   * must say so to whoever still holds them. */
  for (guint i = 0; i < self->pending->len; i++)
    {
      VaStoreOp *op = g_ptr_array_index (self->pending, i);

      if (!op->error)
        g_set_error (&op->error, VA_ERROR, VA_ERROR_FAILED, "%s: the store was closed before the operation was committed", self->path);
      op->done = TRUE;
    }
  g_ptr_array_unref (self->pending);
  sqlite3_finalize (self->insert);
  sqlite3_finalize (self->select_key);
  sqlite3_finalize (self->delete_key);
  sqlite3_finalize (self->delete_uuid);
  if (self->db)
    sqlite3_close (self->db);
  g_free (self->path);
  g_free (self);
}

const char *
va_store_get_path (const VaStore *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->path;
}

gboolean
va_store_was_created (const VaStore *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->created;
}

guint
va_store_get_schema_version (const VaStore *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->schema_version;
}

GPtrArray *
va_store_load (VaStore *self, GError **error)
{
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (sqlite3_stmt) stmt = NULL;
  int rc;

  g_return_val_if_fail (self != NULL, NULL);

  leases = g_ptr_array_new_with_free_func ((GDestroyNotify) va_lease_free);
  if (sqlite3_prepare_v2 (self->db, "SELECT id, " LEASE_COLUMNS " FROM leases ORDER BY id", -1, &stmt, NULL) != SQLITE_OK)
    {
      set_db_error (self, error, "cannot read the leases");
      return NULL;
    }
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    {
      g_autoptr (VaLease) lease = lease_from_row (stmt, 1);
      g_autoptr (GError) local_error = NULL;

      /* The schema bounds what is stored; this catches a hand-edited row
       * before it reaches the pool model. */
      if (!va_lease_validate (lease, &local_error))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: lease row %" G_GINT64_FORMAT ": %s", self->path,
                       (gint64) sqlite3_column_int64 (stmt, 0), local_error->message);
          return NULL;
        }
      g_ptr_array_add (leases, g_steal_pointer (&lease));
    }
  if (rc != SQLITE_DONE)
    {
      set_db_error (self, error, "cannot read the leases");
      return NULL;
    }
  return g_steal_pointer (&leases);
}

/* ---- operations ---- */

static VaStoreOp *
op_new (VaStore *self, OpKind kind)
{
  VaStoreOp *op = g_new0 (VaStoreOp, 1);

  g_ref_count_init (&op->ref);
  op->kind = kind;
  g_ptr_array_add (self->pending, va_store_op_ref (op));
  return op;
}

VaStoreOp *
va_store_queue_insert (VaStore *self, const VaLease *lease)
{
  VaStoreOp *op;

  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (lease != NULL, NULL);

  op = op_new (self, OP_INSERT);
  op->lease = va_lease_copy (lease);
  if (op->lease->created == 0)
    op->lease->created = g_get_real_time () / G_USEC_PER_SEC;
  va_lease_validate (op->lease, &op->error);
  return op;
}

VaStoreOp *
va_store_queue_delete (VaStore *self, const char *uuid, const char *mac)
{
  VaStoreOp *op;

  g_return_val_if_fail (self != NULL, NULL);

  op = op_new (self, OP_DELETE);
  if (va_lease_check_key (uuid, mac ? mac : "", &op->error))
    {
      op->uuid = g_strdup (uuid);
      op->mac = g_strdup (mac);
    }
  return op;
}

VaStoreOp *
va_store_queue_delete_domain (VaStore *self, const char *uuid)
{
  VaStoreOp *op;

  g_return_val_if_fail (self != NULL, NULL);

  op = op_new (self, OP_DELETE_DOMAIN);
  if (va_lease_check_key (uuid, NULL, &op->error))
    op->uuid = g_strdup (uuid);
  return op;
}

guint
va_store_get_n_pending (const VaStore *self)
{
  g_return_val_if_fail (self != NULL, 0);

  return self->pending->len;
}

static void
bind_lease (sqlite3_stmt *stmt, const VaLease *l)
{
  int i = 1;

  sqlite3_bind_text (stmt, i++, l->uuid, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->domain_name, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->mac, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->network, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->pool, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->slot, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->device, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->chardev, -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, l->port, -1, SQLITE_STATIC);
  sqlite3_bind_int (stmt, i++, l->vlan);
  sqlite3_bind_int (stmt, i++, l->queues);
  sqlite3_bind_int64 (stmt, i++, l->created);
  sqlite3_bind_text (stmt, i++, VA_LEASE_KIND (l), -1, SQLITE_STATIC);
  sqlite3_bind_text (stmt, i++, VA_LEASE_FORM (l), -1, SQLITE_STATIC);
}

/* Steps a prepared write statement once; resets it either way. */
static gboolean
step_write (VaStore *self, sqlite3_stmt *stmt, const char *what, GError **error)
{
  int rc = sqlite3_step (stmt);
  gboolean ok = rc == SQLITE_DONE;

  if (!ok)
    set_db_error (self, error, what);
  sqlite3_reset (stmt);
  sqlite3_clear_bindings (stmt);
  return ok;
}

static gboolean
run_insert (VaStore *self, VaStoreOp *op, GError **error)
{
  g_autofree char *what = g_strdup_printf ("cannot record the lease of %s %s on slot %s", op->lease->uuid, op->lease->mac, op->lease->slot);
  int rc;

  bind_lease (self->insert, op->lease);
  if (!step_write (self, self->insert, what, error))
    return FALSE;
  op->changes = (guint) sqlite3_changes (self->db);
  if (op->changes > 0)
    return TRUE;

  /* The key was there: report what is stored, write nothing. */
  sqlite3_bind_text (self->select_key, 1, op->lease->uuid, -1, SQLITE_STATIC);
  sqlite3_bind_text (self->select_key, 2, op->lease->mac, -1, SQLITE_STATIC);
  rc = sqlite3_step (self->select_key);
  if (rc == SQLITE_ROW)
    {
      va_lease_free (op->lease);
      op->lease = lease_from_row (self->select_key, 0);
      op->existed = TRUE;
    }
  else
    set_db_error (self, error, what);
  sqlite3_reset (self->select_key);
  sqlite3_clear_bindings (self->select_key);
  return rc == SQLITE_ROW;
}

static gboolean
run_op (VaStore *self, VaStoreOp *op, GError **error)
{
  switch (op->kind)
    {
      case OP_INSERT:
        return run_insert (self, op, error);
      case OP_DELETE:
        {
          g_autofree char *what = g_strdup_printf ("cannot delete the lease of %s %s", op->uuid, op->mac);

          sqlite3_bind_text (self->delete_key, 1, op->uuid, -1, SQLITE_STATIC);
          sqlite3_bind_text (self->delete_key, 2, op->mac, -1, SQLITE_STATIC);
          if (!step_write (self, self->delete_key, what, error))
            return FALSE;
          op->changes = (guint) sqlite3_changes (self->db);
          return TRUE;
        }
      case OP_DELETE_DOMAIN:
        {
          g_autofree char *what = g_strdup_printf ("cannot delete the leases of %s", op->uuid);

          sqlite3_bind_text (self->delete_uuid, 1, op->uuid, -1, SQLITE_STATIC);
          if (!step_write (self, self->delete_uuid, what, error))
            return FALSE;
          op->changes = (guint) sqlite3_changes (self->db);
          return TRUE;
        }
      default:
        g_assert_not_reached ();
    }
}

/* The batch failed as a whole: nothing was written. Operations that had
 * failed on their own keep their error; the others get @batch_error. */
static void
fail_batch (GPtrArray *ops, GPtrArray *failed_alone, const GError *batch_error)
{
  for (guint i = 0; i < ops->len; i++)
    {
      VaStoreOp *op = g_ptr_array_index (ops, i);

      if (!g_ptr_array_find (failed_alone, op, NULL))
        {
          g_clear_error (&op->error);
          op->error = g_error_copy (batch_error);
          op->changes = 0;
          op->existed = FALSE;
        }
      op->done = TRUE;
    }
}

GPtrArray *
va_store_take_batch (VaStore *self)
{
  GPtrArray *ops;

  g_return_val_if_fail (self != NULL, NULL);

  if (self->pending->len == 0)
    return NULL;
  ops = g_steal_pointer (&self->pending);
  self->pending = g_ptr_array_new_with_free_func ((GDestroyNotify) va_store_op_unref);
  return ops;
}

gboolean
va_store_commit (VaStore *self, GError **error)
{
  g_autoptr (GPtrArray) ops = NULL;

  g_return_val_if_fail (self != NULL, FALSE);

  ops = va_store_take_batch (self);
  return ops ? va_store_commit_batch (self, ops, error) : TRUE;
}

gboolean
va_store_commit_batch (VaStore *self, GPtrArray *ops, GError **error)
{
  g_autoptr (GPtrArray) failed_alone = NULL;
  g_autoptr (GError) batch_error = NULL;

  g_return_val_if_fail (self != NULL, FALSE);
  g_return_val_if_fail (ops != NULL, FALSE);

  failed_alone = g_ptr_array_new ();
  /* Invalid at queue time: failed on their own, whatever the batch does. */
  for (guint i = 0; i < ops->len; i++)
    if (((VaStoreOp *) g_ptr_array_index (ops, i))->error)
      g_ptr_array_add (failed_alone, g_ptr_array_index (ops, i));

  if (!self->insert)
    g_set_error (&batch_error, VA_ERROR, VA_ERROR_FAILED, "%s: the store was opened without the lease schema", self->path);
  else if (!exec (self, "BEGIN IMMEDIATE", "cannot begin a transaction", &batch_error))
    rollback (self);

  for (guint i = 0; !batch_error && i < ops->len; i++)
    {
      VaStoreOp *op = g_ptr_array_index (ops, i);
      g_autoptr (GError) op_error = NULL;

      if (op->error)
        continue;
      if (run_op (self, op, &op_error))
        continue;
      /* A failed statement is undone on its own (ON CONFLICT ABORT) and the
       * transaction goes on; but some errors (I/O, full disk, no memory)
       * make SQLite roll the whole transaction back. */
      if (sqlite3_get_autocommit (self->db))
        batch_error = g_steal_pointer (&op_error);
      else
        {
          op->error = g_steal_pointer (&op_error);
          g_ptr_array_add (failed_alone, op);
        }
    }

  if (!batch_error && !exec (self, "COMMIT", "cannot commit a transaction", &batch_error))
    rollback (self);

  if (batch_error)
    {
      fail_batch (ops, failed_alone, batch_error);
      g_propagate_error (error, g_steal_pointer (&batch_error));
      return FALSE;
    }

  for (guint i = 0; i < ops->len; i++)
    ((VaStoreOp *) g_ptr_array_index (ops, i))->done = TRUE;
  return TRUE;
}

VaStoreOp *
va_store_op_ref (VaStoreOp *op)
{
  g_return_val_if_fail (op != NULL, NULL);

  g_ref_count_inc (&op->ref);
  return op;
}

void
va_store_op_unref (VaStoreOp *op)
{
  if (!op || !g_ref_count_dec (&op->ref))
    return;
  va_lease_free (op->lease);
  g_free (op->uuid);
  g_free (op->mac);
  g_clear_error (&op->error);
  g_free (op);
}

gboolean
va_store_op_is_done (const VaStoreOp *op)
{
  g_return_val_if_fail (op != NULL, FALSE);

  return op->done;
}

gboolean
va_store_op_propagate_error (const VaStoreOp *op, GError **error)
{
  g_return_val_if_fail (op != NULL, FALSE);

  if (!op->done)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "the lease store has not committed this operation yet");
      return FALSE;
    }
  if (op->error)
    {
      g_propagate_error (error, g_error_copy (op->error));
      return FALSE;
    }
  return TRUE;
}

guint
va_store_op_get_changes (const VaStoreOp *op)
{
  g_return_val_if_fail (op != NULL, 0);

  return op->done && !op->error ? op->changes : 0;
}

gboolean
va_store_op_get_existed (const VaStoreOp *op)
{
  g_return_val_if_fail (op != NULL, FALSE);

  return op->done && !op->error && op->existed;
}

const VaLease *
va_store_op_get_lease (const VaStoreOp *op)
{
  g_return_val_if_fail (op != NULL, NULL);

  return op->kind == OP_INSERT && op->done && !op->error ? op->lease : NULL;
}
