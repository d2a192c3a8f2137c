/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the relay gives up before it reads a guest's ring: root (to a given
 * user, supplementary groups dropped), memory beyond a bound
 * (RLIMIT_DATA: the heap and private mappings; the guest's memory is
 * shared file mappings, bounded by VA_RELAY_MAX_REGIONS), file descriptors
 * beyond a few, new processes, and every system call but the device loop's
 * (seccomp, libseccomp: anything else kills the process). After the
 * filter, the relay's code reports errors with libc's strerror, not
 * g_strerror, which may open charset and iconv files on first use. */
#pragma once

#include <glib.h>

/* user NULL: stay who we are (the daemon may start us unprivileged) */
gboolean va_relay_drop_privileges (const char *user, GError **error);
gboolean va_relay_limit_memory (guint64 max_bytes, GError **error);
gboolean va_relay_seccomp (GError **error);
