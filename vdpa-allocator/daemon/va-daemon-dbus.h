/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-allocator.h"
#include "va-daemon-metrics.h"
#include "va-daemon-swapback.h"

G_BEGIN_DECLS

typedef struct _VaDbus VaDbus;

/* Exports the allocator on @conn: the manager object and one object per
 * pool. The bus name is the caller's to own. */
VaDbus *va_dbus_new (VaAllocator *alloc, GDBusConnection *conn, GError **error);
void va_dbus_free (VaDbus *self);

/* Allocations are counted and timed in @metrics (not owned; outlives @self). */
void va_dbus_set_metrics (VaDbus *self, VaMetrics *metrics);

/* SwapBack runs @swap_back's helpers (not owned; outlives @self). */
void va_dbus_set_swap_back (VaDbus *self, VaDaemonSwapBack *swap_back);

GVariant *va_dbus_report_to_variant (const VaReconcileReport *report);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDbus, va_dbus_free)

G_END_DECLS
