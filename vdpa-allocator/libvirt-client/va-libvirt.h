/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>
#include <libvirt/libvirt.h>

G_BEGIN_DECLS

/* The one way into libvirt: errors are silenced (libvirt would print them
 * on stderr) and read back into GErrors. */
typedef struct
{
  char *uri;
  virConnectPtr conn;
  virDomainPtr dom; /* after va_libvirt_lookup(), else NULL */
} VaLibvirt;

/* @uri NULL: $VDPA_ALLOCATOR_LIBVIRT_URI, else qemu:///system.
 * VA_ERROR_UNREACHABLE when libvirt cannot be reached. */
VaLibvirt *va_libvirt_open (const char *uri, gboolean read_only, GError **error);
void va_libvirt_close (VaLibvirt *self);

/* Finds the domain by UUID or name into @self->dom; VA_ERROR_NOT_FOUND. */
gboolean va_libvirt_lookup (VaLibvirt *self, const char *name, GError **error);

/* "@what: libvirt's last error", for a failed libvirt call. */
char *va_libvirt_last_error (const char *what);

/* A VaDomainLister over libvirt's client API: @user_data is the URI
 * (a const char*, NULL as for va_libvirt_open()). Read-only connection. */
gboolean va_libvirt_list_domains (GHashTable **domains, gpointer user_data, GError **error);

/* QEMU's reply (JSON text) to the QMP @command for @self->dom, through
 * libvirt's qemu-monitor-command (the QEMU driver only). */
char *va_libvirt_qmp (VaLibvirt *self, const char *command, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VaLibvirt, va_libvirt_close)

G_END_DECLS
