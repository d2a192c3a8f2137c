/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "va-allocator.h"

G_BEGIN_DECLS

/* The daemon's metrics in Prometheus' text format (node_exporter's textfile
 * collector reads it): the pools, leases, PFs of @alloc, and the counters
 * and latencies of the allocations the D-Bus adapter reports. The file
 * @run_dir/metrics.prom is replaced (write, rename; mode 0644) once per
 * main-loop turn in which anything changed, and removed at the end. */
typedef struct _VaMetrics VaMetrics;

VaMetrics *va_metrics_new (VaAllocator *alloc, const char *run_dir);
void va_metrics_free (VaMetrics *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaMetrics, va_metrics_free)

/* One allocation took @seconds (< 0: refused before it started, not timed);
 * @error NULL: it succeeded, else why not. */
void va_metrics_allocation (VaMetrics *self, double seconds, const GError *error);

/* The file's path, @run_dir/metrics.prom (owned by @self). */
const char *va_metrics_get_path (VaMetrics *self);

/* The text the file holds now. */
char *va_metrics_render (VaMetrics *self);

/* Writes the file now; FALSE with @error when it cannot. */
gboolean va_metrics_write (VaMetrics *self, GError **error);

G_END_DECLS
