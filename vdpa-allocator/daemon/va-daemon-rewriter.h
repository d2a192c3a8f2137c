/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-host-view.h"

G_BEGIN_DECLS

/* RewriteDomain off the main loop. Anyone may call it, and a hostile
 * document costs real time, so the work runs on a few low-priority
 * threads, each caller may have only a few calls queued or running, the
 * queue as a whole is bounded, and the queued calls of a caller that has
 * left the bus are dropped unparsed. The main loop, which serves Allocate,
 * Release and Claim for VM starts, only queues and answers. */
typedef struct _VaRewriter VaRewriter;

#define VA_REWRITER_THREADS 2
#define VA_REWRITER_PER_SENDER 4
#define VA_REWRITER_QUEUE 32

VaRewriter *va_rewriter_new (void);
void va_rewriter_free (VaRewriter *self);

/* Answers @inv ("(ss)" xml, to) with "(s)" or an error, from the thread
 * default main context of this call, against @view. */
void va_rewriter_submit (VaRewriter *self, GDBusMethodInvocation *inv, VaHostView *view);

/* @sender has left the bus: its queued calls are not parsed. */
void va_rewriter_sender_gone (VaRewriter *self, const char *sender);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaRewriter, va_rewriter_free)

G_END_DECLS
