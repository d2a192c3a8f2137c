/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _VaDaemonSwapBack VaDaemonSwapBack;

/* What the daemon's stop waits for the helpers: a swap's unplug may take
 * 30 s, then its plug; well within the unit's TimeoutStopSec=90. */
#define VA_DAEMON_SWAP_BACK_STOP_S 45

/* @uri: libvirt's, for the helper (NULL: its default). The helpers' ends
 * are dispatched in the thread-default main context of this call. */
VaDaemonSwapBack *va_daemon_swap_back_new (const char *uri);
/* SIGKILLs and reaps the helpers still running (va_daemon_swap_back_stop (self, 0)). */
void va_daemon_swap_back_free (VaDaemonSwapBack *self);

/* The daemon's stop: refuses new helpers, sends SIGTERM to each running
 * one (it finishes the NIC it is on), runs the main context until all have
 * ended or @wait_s passed, then SIGKILLs and reaps the rest. Each end is
 * its journal event, "stopped as the daemon stopped". */
void va_daemon_swap_back_stop (VaDaemonSwapBack *self, guint wait_s);

/* After the daemon's start: the running domains with NICs still marked for
 * a swap back and not tried (a stop or a crash cut it short), listed by
 * the helper's --pending, each as for va_daemon_swap_back_start. Returns at
 * once. */
void va_daemon_swap_back_resume (VaDaemonSwapBack *self);

/* The bound of each helper from now on: [hook] swap-back-timeout-s. */
void va_daemon_swap_back_set_timeout (VaDaemonSwapBack *self, guint timeout_s);
/* For tests: SIGTERM @grace_s after the bound (default 60), SIGKILL
 * @kill_s after that (default 120). */
void va_daemon_swap_back_set_bounds (VaDaemonSwapBack *self, guint grace_s, guint kill_s);

/* Runs vdpa-allocator-libvirt-swap for the domain @uuid in the
 * background, or queues it while 8 run (at most 1024 wait); returns at
 * once. VA_ERROR_INVALID_ARGUMENT for a bad @uuid or @name, VA_ERROR_BUSY
 * while one runs or waits for @uuid, the queue is full, or at the stop. */
gboolean va_daemon_swap_back_start (VaDaemonSwapBack *self, const char *uuid, const char *name, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDaemonSwapBack, va_daemon_swap_back_free)

G_END_DECLS
