/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* sysfs reads and writes under VA_PATH_SYSFS. @path is absolute as the
 * kernel names it ("/sys/devices/..." or "/sys/bus/..."); the root is
 * swapped for the testbed's when one is active. Errors name the file. */
char *va_sysfs_path (const char *path);
char *va_sysfs_read (const char *path, GError **error);
gboolean va_sysfs_read_int (const char *path, gint64 *out, GError **error);
gboolean va_sysfs_write (const char *path, const char *value, GError **error);

G_END_DECLS
