/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _VaSwapBack VaSwapBack;

/* @uri: libvirt's, for the helper (NULL: its default). */
VaSwapBack *va_swap_back_new (const char *uri);
void va_swap_back_free (VaSwapBack *self);

/* The bound of each helper from now on: [hook] swap-back-timeout-s. */
void va_swap_back_set_timeout (VaSwapBack *self, guint timeout_s);

/* Runs vdpa-allocator-libvirt-swap for the domain @uuid in the
 * background; returns at once. VA_ERROR_INVALID_ARGUMENT for a bad @uuid
 * or @name, VA_ERROR_BUSY while one runs for @uuid or too many run. */
gboolean va_swap_back_start (VaSwapBack *self, const char *uuid, const char *name, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaSwapBack, va_swap_back_free)

G_END_DECLS
