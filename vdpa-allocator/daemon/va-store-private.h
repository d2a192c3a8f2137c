/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "va-store.h"

G_BEGIN_DECLS

/* One step of the upgrade path: the SQL that takes a database from
 * @version - 1 to @version. Steps are consecutive from 1. */
typedef struct
{
  guint version;
  const char *sql;
} VaStoreMigration;

/* This build's upgrade path. */
const VaStoreMigration *va_store_get_migrations (guint *n_steps);

/* va_store_open() with another upgrade path; for tests of the upgrade
 * machinery (a fake newer schema). */
VaStore *va_store_open_with_migrations (const char *dir, const VaStoreMigration *steps, guint n_steps, GError **error);

G_END_DECLS
