/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-host-view.h"

G_BEGIN_DECLS

/* The calls open to every local user (RewriteDomain, ListLeases), off
 * the main loop, which serves Allocate, Release and Claim for VM starts
 * and only admits and accounts here. Anyone may call these as often as it
 * likes, so what a user can cost is bounded by its uid, not by its bus
 * connections: each uid other than 0 may have VA_OPEN_PER_UID calls queued
 * or running, all of them together VA_OPEN_QUEUE, run on VA_OPEN_THREADS
 * threads below the main loop's priority; more get TryAgain at once. Calls of
 * uid 0 (the libvirt hook, the daemon's helpers, the admin's vdpactl) never
 * share these slots nor these threads: they have their own
 * (VA_OPEN_ROOT_QUEUE, at normal priority). The queued calls of a caller
 * that has left the bus are dropped undone. */
typedef struct _VaOpen VaOpen;

#define VA_OPEN_THREADS 2
#define VA_OPEN_PER_UID 4
#define VA_OPEN_QUEUE 32
#define VA_OPEN_ROOT_QUEUE 32

/* Runs on a worker thread: the reply to @inv's call ("(…)" tuple,
 * floating or not) or NULL and @error. @data is the job's. Sets @bytes to
 * the size of what it read or built: above a megabyte, the worker gives
 * the heap it grew back once the reply is sent. */
typedef GVariant *(*VaOpenFunc) (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error);

VaOpen *va_open_new (void);
void va_open_free (VaOpen *self);

/* Answers @inv (taking the handler's reference) from a worker with what
 * @func returns, or with TryAgain at once when @uid's slots or all are taken.
 * @data is freed with @data_free, on the main context. */
void va_open_submit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenFunc func, gpointer data, GDestroyNotify data_free);

/* RewriteDomain ("(ss)" xml, to → "(s)") against @view. */
void va_open_submit_rewrite (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaHostView *view);

/* @sender has left the bus: its queued calls are not run. */
void va_open_sender_gone (VaOpen *self, const char *sender);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaOpen, va_open_free)

G_END_DECLS
