/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A VaDomainLister over libvirt's client API: @user_data is the URI
 * (a const char*, NULL for qemu:///system). Read-only connection. */
gboolean va_libvirt_list_domains (GHashTable **domains, gpointer user_data, GError **error);

G_END_DECLS
