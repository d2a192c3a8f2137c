/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-allocator.h"

G_BEGIN_DECLS

/* Automatic promotion (issue 28): when a hardware slot of a pool frees (a
 * hardware lease released, a PF back, a drain ended), a NIC of that pool
 * on a software vDPA device, whose network says promote=true, is moved
 * onto hardware by vdpa-allocator-libvirt-swap --promote (the same-slot
 * swap of vdpactl domain accelerate --live): the oldest such lease first,
 * one promotion at a time in the whole daemon. A promotion that fails is
 * not tried again until another hardware lease is released (never a
 * loop); each start and end is a journal event. */
typedef struct _VaDaemonPromote VaDaemonPromote;

/* The helper is SIGTERMed past this bound and SIGKILLed
 * VA_DAEMON_PROMOTE_KILL_S later. */
#define VA_DAEMON_PROMOTE_BOUND_S 180
#define VA_DAEMON_PROMOTE_KILL_S 60

/* @uri: libvirt's, for the helper (NULL: its default). Follows @alloc's
 * signals from the thread-default main context of this call. */
VaDaemonPromote *va_daemon_promote_new (VaAllocator *alloc, const char *uri);
/* Sends SIGTERM to a running helper (it finishes the NIC it is on: a NIC
 * is never left between its unplug and its plug) and lets it go. */
void va_daemon_promote_free (VaDaemonPromote *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaDaemonPromote, va_daemon_promote_free)

G_END_DECLS
