/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-lease.h"

G_BEGIN_DECLS

/* The durable lease store: DIR/leases.db, SQLite in WAL mode with
 * synchronous=FULL, so a committed batch survives a SIGKILL of the daemon
 * and a power loss alike. The database itself refuses to lease one slot
 * twice (UNIQUE(slot)) or to hold two leases for one NIC (UNIQUE(uuid,mac)).
 *
 * Writes are batched: callers queue operations, then va_store_commit() runs
 * them all in one transaction (one fsync), after which every operation
 * carries its own result. The daemon queues each request of a main-loop
 * turn and commits once at the end of the turn, answering a request only
 * after its operation is committed.
 *
 * No function here logs or prints; every failure is a GError in VA_ERROR
 * that names the database file and carries SQLite's message. */

#define VA_STORE_FILE_NAME "leases.db"
/* The schema this build writes. A database at a lower version is upgraded
 * on open; one at a higher version is refused. */
#define VA_STORE_SCHEMA_VERSION 3

/* A lease's bounds are va-ids' (common/va-lease.h), enforced before it
 * reaches SQLite and again by CHECK constraints in the schema. */

typedef struct _VaStore VaStore;
typedef struct _VaStoreOp VaStoreOp;

/* Creates DIR (0755) when missing, then creates or opens DIR/leases.db and
 * brings its schema to VA_STORE_SCHEMA_VERSION in one transaction. Errors:
 * VA_ERROR_FAILED for SQLite failures (a corrupt or foreign file included)
 * and for a schema newer than this build. */
VaStore *va_store_open (const char *dir, GError **error);
void va_store_free (VaStore *self);

const char *va_store_get_path (const VaStore *self);
guint va_store_get_schema_version (const VaStore *self);

/* Whether this open made the store: the file was absent, empty, or an
 * SQLite database without tables. */
gboolean va_store_was_created (const VaStore *self);

/* Every lease in the store, in the order they were recorded; VaLease*. */
GPtrArray *va_store_load (VaStore *self, GError **error);

/* Queue an operation for the next va_store_commit(). The returned operation
 * is pending until then; the caller owns the reference.
 *
 * insert: records @lease (copied; created==0 becomes now). Idempotent for
 *   (uuid, mac): when a lease for that key is already stored, nothing is
 *   written and the operation reports existed with the stored lease. A slot
 *   already leased to another key fails the operation with VA_ERROR_BUSY.
 *   An invalid lease fails with VA_ERROR_INVALID_ARGUMENT.
 * delete: removes the lease of (uuid, mac); changes is 0 or 1, never an
 *   error when there was none (Release is idempotent).
 * delete_domain: removes every lease of @uuid; changes is how many. */
VaStoreOp *va_store_queue_insert (VaStore *self, const VaLease *lease);
VaStoreOp *va_store_queue_delete (VaStore *self, const char *uuid, const char *mac);
VaStoreOp *va_store_queue_delete_domain (VaStore *self, const char *uuid);

guint va_store_get_n_pending (const VaStore *self);

/* Runs every queued operation in one transaction and commits it. An
 * operation that fails on its own (a UNIQUE violation, an invalid lease)
 * does not stop the others. Returns FALSE when the transaction as a whole
 * failed (I/O error, disk full, database locked): nothing of the batch was
 * written and every operation of it carries that error. With nothing
 * queued, returns TRUE and touches nothing. */
gboolean va_store_commit (VaStore *self, GError **error);

/* The two halves of va_store_commit(), for a commit off the main thread:
 * take the queued operations (NULL when none) where they are queued, then
 * run them in one transaction in any one thread at a time, while new
 * operations queue for the next batch. */
GPtrArray *va_store_take_batch (VaStore *self);
gboolean va_store_commit_batch (VaStore *self, GPtrArray *ops, GError **error);

VaStoreOp *va_store_op_ref (VaStoreOp *op);
void va_store_op_unref (VaStoreOp *op);

/* TRUE once the batch holding @op was committed or failed. */
gboolean va_store_op_is_done (const VaStoreOp *op);
/* FALSE with the operation's error when it failed, or VA_ERROR_BUSY when it
 * is still pending; TRUE when it is committed. */
gboolean va_store_op_propagate_error (const VaStoreOp *op, GError **error);
/* Rows inserted or deleted by a committed operation. */
guint va_store_op_get_changes (const VaStoreOp *op);
/* insert only: whether the key was stored already, and the lease that is
 * stored for the key now (ours, or the one found). NULL otherwise. */
gboolean va_store_op_get_existed (const VaStoreOp *op);
const VaLease *va_store_op_get_lease (const VaStoreOp *op);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaStore, va_store_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaStoreOp, va_store_op_unref)

G_END_DECLS
