/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

#include "va-allocator.h"
#include "va-store.h"

G_BEGIN_DECLS

/* The journal's events: one fixed MESSAGE_ID per kind, each explained in
 * contrib/vdpa-allocator.catalog (installed to systemd's catalog directory,
 * so that `journalctl -x` shows the explanation). Never change an ID: an
 * operator's filters (`journalctl MESSAGE_ID=...`) name them. */
#define VA_EVENT_ALLOCATE "d73213d9ccab4db7b837ac41c78e9183"
#define VA_EVENT_RELEASE "df37de9a4776449e87d7a29642093ed7"
#define VA_EVENT_CLAIM "ecddd6d0a5054f8c88a60a3a9128b973"
#define VA_EVENT_LEASE_BROKEN "e87cb17030b04b2e940c49df37de2ec6"
#define VA_EVENT_DRAIN "323cefc46043433eac69d748d5fa0683"
#define VA_EVENT_RELOAD "75cb046076e24ce8be03434141720342"
#define VA_EVENT_DENIED "6a144a9b1f41448f9937e80526573101"
#define VA_EVENT_LOW_WATERMARK "aa0d82a61dbd440598a1a70e801c2e36"
#define VA_EVENT_PF_HEALTH "d06469585f4346028a2c219cd6086096"
#define VA_EVENT_POOL_WARNING "7d946d9fafcd48dfba9d154a07ab5217"
#define VA_EVENT_SWAP_BACK "5ed5e85968c54c54bfda2254e2f5200d"
#define VA_EVENT_PROMOTE "ab8b0f391e004ed1afbc4f8b83335d3b"

/* Logs one event through GLib's structured logging (journald under
 * systemd, stderr otherwise) in the caller's log domain. @lease, if any,
 * gives VA_POOL, VA_DOMAIN_UUID, VA_DOMAIN_NAME, VA_MAC, VA_VLAN, VA_SLOT
 * and VA_NETWORK (unless inline); @fields, if any, is a NULL-terminated
 * list of further "KEY", "value" pairs. */
#define va_event(level, message_id, lease, fields, ...) va_event_full (G_LOG_DOMAIN, level, message_id, lease, fields, __VA_ARGS__)

void va_event_full (const char *domain, GLogLevelFlags level, const char *message_id, const VaLease *lease, const char *const *fields,
                    const char *fmt, ...) G_GNUC_PRINTF (6, 7);

/* @text (a helper's output, NULL for none) as one line, its line breaks
 * as ';' and its ends trimmed: a journal event is one line. */
char *va_event_one_line (const char *text);

/* Logs the allocator's signals as events, where the daemon decides what an
 * operator reads (the core logs only its own failures): allocations,
 * releases, broken and repaired leases, low watermarks, PF changes. */
void va_events_connect (VaAllocator *alloc);

G_END_DECLS
