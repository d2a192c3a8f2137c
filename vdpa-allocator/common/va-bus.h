/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* Where the daemon is on the system bus, and what its errors are called:
 * the one home of these names for the daemon, vdpactl and the hook. */
#define VA_BUS_NAME "org.vdpa_allocator.Allocator1"
#define VA_BUS_PATH "/org/vdpa_allocator/Allocator1"
#define VA_BUS_IFACE "org.vdpa_allocator.Allocator1"
#define VA_BUS_POOL_IFACE "org.vdpa_allocator.Pool1"
#define VA_BUS_POOL_PATH_PREFIX VA_BUS_PATH "/pool/"
#define VA_BUS_ERROR_PREFIX "org.vdpa_allocator.Error."
#define VA_BUS_MANAGE_ACTION "org.vdpa_allocator.manage"

/* Maps every VA_ERROR code to VA_BUS_ERROR_PREFIX + va_error_name(), both
 * ways; idempotent. */
void va_bus_error_register (void);

/* The object path of pool @name. */
char *va_bus_pool_path (const char *name);

/* Whether @error is the daemon's own refusal, as opposed to no answer. */
gboolean va_bus_error_is_refusal (const GError *error);

/* The system bus, connected within @timeout_ms (a wedged dbus-daemon that
 * accepts and never authenticates must not hang a VM start). */
GDBusConnection *va_bus_connect (int timeout_ms, GError **error);

/* Rewrites @error of a call to the daemon that had @timeout_ms as
 * va_bus_call() reports it; for asynchronous calls. */
void va_bus_explain_error (GError **error, int timeout_ms);

/* @method of @iface at @path on the daemon, answered within @timeout_ms.
 * On failure @error is the daemon's refusal (VA_ERROR, its own message),
 * or VA_ERROR_UNREACHABLE with one wording for "not running" and "did not
 * answer". Consumes a floating @params. */
GVariant *va_bus_call (GDBusConnection *conn, const char *path, const char *iface, const char *method, GVariant *params,
                       const char *reply_type, int timeout_ms, GError **error);

G_END_DECLS
