/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-allocator.h"

G_BEGIN_DECLS

/* The calls open to every local user (RewriteDomain, ListLeases,
 * ListDevices, the properties' Get and GetAll, Introspect), off the main loop, which serves Allocate, Release and
 * Claim for VM starts and only admits and accounts here. Anyone may call these as often as it
 * likes, so what a user can cost is bounded by its uid, not by its bus
 * connections:
 *
 * - each uid other than 0 may have VA_OPEN_PER_UID calls running (queued
 *   on the workers or in progress), all of them together VA_OPEN_QUEUE,
 *   run on VA_OPEN_THREADS threads, below the main loop's priority while
 *   they work (not while they answer: va-daemon-open.c);
 * - each uid other than 0 may start VA_OPEN_RATE_PER_UID calls a second
 *   (after a burst of VA_OPEN_BURST_PER_UID), all of them together
 *   VA_OPEN_RATE_ALL (burst VA_OPEN_BURST_ALL): a call answered at once
 *   (a property, a copy of the leases already made) costs little, but a
 *   user that sends the next as each is answered would otherwise make
 *   thousands a second, and its own processes, the bus daemon's and ours
 *   would take the CPU that VM starts need (seen: 8 connections of one
 *   user made 1,600 Get a second, and the hook's prepare p99 was 5.9
 *   times the quiet one); a reply counts one call more per
 *   VA_OPEN_PACE_BYTES, charged once sent, so that a user cannot push the
 *   lease list (0.5 MB at 1,024 leases) through the daemon's one bus
 *   connection 50 times a second, in front of the replies VM starts wait
 *   for (seen: the hook's prepare timed out at load 14);
 * - a call over those bounds is held, in its uid's own queue, and runs
 *   when a slot of its uid frees (first come, first served within a uid,
 *   the uids in turn); a uid may have VA_OPEN_HOLD_PER_UID calls and
 *   VA_OPEN_HOLD_BYTES_PER_UID bytes of arguments held, all users together
 *   VA_OPEN_HOLD_ALL and VA_OPEN_HOLD_BYTES_ALL;
 * - a call that finds its uid's queue (or all users') full, or that has
 *   been held VA_OPEN_HOLD_MS, is answered TryAgain, which the clients
 *   wait out within their budgets.
 *
 * Holding rather than refusing at once is what keeps a flood cheap: a
 * caller that sends its next call when one is answered (and a refused one
 * again at once, whatever its size) is slowed to the pace its calls are
 * served at, instead of pushing megabyte documents through the bus in a
 * loop that delays every other message. VA_OPEN_HOLD_MS (10 s) is well
 * under the 25 s a D-Bus call waits by default and vdpactl's 30 s, so that
 * a held caller is answered, and has time to try again, before its own
 * timeout; and over the time the workers took to go through one user's
 * full queue of 0.8 MB documents on a loaded 2-core machine (about 5 a
 * second, 6 s for 32), so that a call held behind its own uid's is run,
 * not refused.
 *
 * Calls of uid 0 (the libvirt hook, the daemon's helpers, the admin's
 * vdpactl) never share these slots, threads or queues, nor count in the
 * bounds of all users: they have their own VA_OPEN_ROOT_QUEUE slots at
 * normal priority, and a queue of their own with the per-uid bounds. The
 * calls of a caller that has left the bus are dropped undone. */
typedef struct _VaOpen VaOpen;

#define VA_OPEN_THREADS 2
#define VA_OPEN_PER_UID 4
#define VA_OPEN_QUEUE 32
#define VA_OPEN_ROOT_QUEUE 32
#define VA_OPEN_HOLD_PER_UID 32
#define VA_OPEN_HOLD_BYTES_PER_UID (32 * 1024 * 1024)
#define VA_OPEN_HOLD_ALL 256
#define VA_OPEN_HOLD_BYTES_ALL (64 * 1024 * 1024)
#define VA_OPEN_HOLD_MS 10000
#define VA_OPEN_RATE_PER_UID 50
#define VA_OPEN_BURST_PER_UID 32
#define VA_OPEN_RATE_ALL 200
#define VA_OPEN_BURST_ALL 64
#define VA_OPEN_PACE_BYTES (16 * 1024)

/* Runs on the main context when @inv's call gets its slot: what the job
 * reads (a copy of the leases, the host as the engine sees it), taken
 * then rather than when the call came, so that a held call neither keeps
 * an old copy alive nor answers from it. Freed with the submit's
 * @data_free, on whichever thread ends the job. */
typedef gpointer (*VaOpenStart) (gpointer user_data, GDBusMethodInvocation *inv);

/* Runs on a worker thread: the reply to @inv's call ("(…)" tuple,
 * floating or a reference the caller gives up) or NULL and @error. @data is what the job's start
 * returned. Sets @bytes to the size of what it read or built: above a
 * megabyte, the worker gives the heap it grew back once the reply is
 * sent. */
typedef GVariant *(*VaOpenFunc) (GDBusMethodInvocation *inv, gpointer data, gsize *bytes, GError **error);

/* Its idle and timer sources go to the thread-default main context. */
VaOpen *va_open_new (void);
/* Answers what is held with TryAgain, and what runs when it has run. */
void va_open_free (VaOpen *self);

/* Answers @inv (taking the handler's reference) from a worker with what
 * @func returns from what @start returns, now or once held; or with
 * TryAgain when @uid's queue or all users' is full. */
void va_open_submit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenStart start, gpointer start_data, VaOpenFunc func,
                     GDestroyNotify data_free);

/* As va_open_submit(), for a call that a filter took off @conn before
 * GDBus dispatched it (Introspect: GDBus would answer it itself): @msg is
 * answered on @conn with what @func returns from @data (owned by the job,
 * freed with @data_free); @func's invocation is NULL. */
void va_open_submit_message (VaOpen *self, GDBusConnection *conn, GDBusMessage *msg, guint32 uid, VaOpenFunc func, gpointer data,
                             GDestroyNotify data_free);

/* Runs on the main context once a call va_open_admit() paces has its
 * turn: @inv is the method handler's reference, which answering
 * consumes. */
typedef void (*VaOpenAdmitted) (gpointer data, GDBusMethodInvocation *inv);

/* Paces @inv's call as the open methods' (the same pace, queue and
 * TryAgain for a uid other than 0; uid 0 at once) with no worker: @func
 * runs on the main context with @data once it is admitted, and its slot
 * is free again when @func returns. For the changes a caller other than
 * root asks, before polkit is: a user's refused calls would otherwise
 * cost the bus, polkit and the main loop as fast as they are answered.
 * @data is freed with @data_free if the call is answered here (TryAgain,
 * the caller gone) instead. */
void va_open_admit (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaOpenAdmitted func, gpointer data, GDestroyNotify data_free);

/* RewriteDomain ("(ss)" xml, to → "(s)") against @alloc's host view as it
 * is when the call gets its slot. @alloc outlives @self. */
void va_open_submit_rewrite (VaOpen *self, GDBusMethodInvocation *inv, guint32 uid, VaAllocator *alloc);

/* @sender has left the bus: its held calls are dropped now, its queued
 * ones are not run. */
void va_open_sender_gone (VaOpen *self, const char *sender);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaOpen, va_open_free)

G_END_DECLS
