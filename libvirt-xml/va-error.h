/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The one error domain of the suite; the D-Bus adapter maps each code to
 * D-Bus error names (common/va-bus.h, va_bus_error_register()). */
#define VA_ERROR (va_error_quark ())

typedef enum
{
  VA_ERROR_FAILED,
  VA_ERROR_INVALID_ARGUMENT,
  VA_ERROR_INVALID_XML,
  VA_ERROR_INVALID_CONFIG,
  VA_ERROR_NO_SUCH_NETWORK,
  VA_ERROR_NO_SUCH_POOL,
  VA_ERROR_POOL_EXHAUSTED,
  VA_ERROR_PERMISSION_DENIED,
  VA_ERROR_PROVISIONING_FAILED,
  VA_ERROR_NOT_FOUND,
  VA_ERROR_BUSY,
  VA_ERROR_UNREACHABLE, /* the daemon, the bus or libvirt did not answer */
  /* the daemon is at a bound (its slots, its queue) or mid-way through the
   * same operation: the same call later can succeed. A caller acting for
   * libvirt waits and retries within its budget (va-client.c); Busy is
   * a conflict that waiting does not settle. */
  VA_ERROR_TRY_AGAIN,
} VaError;

#define VA_ERROR_LAST (VA_ERROR_TRY_AGAIN + 1)

GQuark va_error_quark (void);

/* The longest prefix of @s, at most @max bytes, that is whole, valid
 * UTF-8: hostile input quoted in a message is cut there, never inside a
 * character (GDBus would send "[Invalid UTF-8]" instead). */
int va_utf8_prefix (const char *s, int max);

/* For "%.*s": quotes at most @max bytes of @s, cut as va_utf8_prefix()
 * cuts; @s is evaluated twice and may be NULL. */
#define VA_CUT(s, max) va_utf8_prefix ((const char *) (s), (max)), ((s) ? (const char *) (s) : "(null)")

/* The CamelCase name used for D-Bus error names and JSON output. */
const char *va_error_name (VaError code);

G_END_DECLS
