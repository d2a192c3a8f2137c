/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-allocator.h"

G_BEGIN_DECLS

#define VA_DBUS_NAME "org.vdpa_allocator.Allocator1"
#define VA_DBUS_PATH "/org/vdpa_allocator/Allocator1"
#define VA_DBUS_IFACE "org.vdpa_allocator.Allocator1"

typedef struct _VaDbus VaDbus;

/* Exports the allocator on @conn: the manager object and one object per
 * pool. The bus name is the caller's to own. */
VaDbus *va_dbus_new (VaAllocator *alloc, GDBusConnection *conn, GError **error);
void va_dbus_free (VaDbus *self);

/* Maps VA_ERROR codes to org.vdpa_allocator.Error.* names, both ways. */
void va_dbus_error_register (void);

GVariant *va_dbus_lease_to_variant (const VaLease *lease);
GVariant *va_dbus_report_to_variant (const VaReconcileReport *report);
char *va_dbus_pool_path (const char *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDbus, va_dbus_free)

G_END_DECLS
