/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-libvirt"

#include "va-libvirt.h"

#include <errno.h>
#include <libvirt/libvirt-qemu.h>
#include <stdlib.h>
#include <libvirt/virterror.h>

#include "va-domain.h"
#include "va-error.h"
#include "va-ids.h"

static void
quiet (void *user_data, virErrorPtr error)
{
  /* errors are read with virGetLastErrorMessage, not printed */
}

VaLibvirt *
va_libvirt_open (const char *uri, gboolean read_only, GError **error)
{
  g_autoptr (VaLibvirt) self = g_new0 (VaLibvirt, 1);

  virSetErrorFunc (NULL, quiet);
  if (!uri)
    uri = g_getenv ("VDPA_ALLOCATOR_LIBVIRT_URI") ?: "qemu:///system";
  self->uri = g_strdup (uri);
  self->conn = read_only ? virConnectOpenReadOnly (uri) : virConnectOpen (uri);
  if (!self->conn)
    {
      virErrorPtr e = virGetLastError ();
      gboolean denied = e
                        && (e->code == VIR_ERR_AUTH_FAILED || e->code == VIR_ERR_AUTH_CANCELLED || e->code == VIR_ERR_ACCESS_DENIED
                            || (e->code == VIR_ERR_SYSTEM_ERROR && (e->int1 == EACCES || e->int1 == EPERM)));

      /* refused is not unreachable: a retry with rights may succeed */
      if (denied)
        g_set_error (error, VA_ERROR, VA_ERROR_PERMISSION_DENIED, "libvirt at %s refused the connection: %s%s", uri,
                     virGetLastErrorMessage (), read_only ? "" : " (this command changes domains: it needs root, or libvirt's own rights)");
      else
        g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "libvirt at %s: %s", uri, virGetLastErrorMessage ());
      return NULL;
    }
  return g_steal_pointer (&self);
}

void
va_libvirt_close (VaLibvirt *self)
{
  if (!self)
    return;
  if (self->dom)
    virDomainFree (self->dom);
  if (self->conn)
    virConnectClose (self->conn);
  g_free (self->uri);
  g_free (self);
}

gboolean
va_libvirt_lookup (VaLibvirt *self, const char *name, GError **error)
{
  char uuid[VA_UUID_STRING_LEN];

  g_return_val_if_fail (self != NULL && self->conn != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_clear_pointer (&self->dom, virDomainFree);
  self->dom = va_uuid_normalize (name, uuid) ? virDomainLookupByUUIDString (self->conn, uuid) : NULL;
  if (!self->dom)
    self->dom = virDomainLookupByName (self->conn, name);
  if (!self->dom)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "no domain '%s' in libvirt at %s", name, self->uri);
      return FALSE;
    }
  return TRUE;
}

char *
va_libvirt_last_error (const char *what)
{
  g_return_val_if_fail (what != NULL, NULL);

  return g_strdup_printf ("%s: %s", what, virGetLastErrorMessage ());
}

gboolean
va_libvirt_list_domains (GHashTable **domains, gpointer user_data, GError **error)
{
  g_autoptr (VaLibvirt) lv = NULL;
  virDomainPtr *list = NULL;
  int n;

  g_return_val_if_fail (domains != NULL, FALSE);

  lv = va_libvirt_open (user_data, TRUE, error);
  if (!lv)
    return FALSE;
  n = virConnectListAllDomains (lv->conn, &list, 0);
  if (n < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt at %s: listing domains: %s", lv->uri, virGetLastErrorMessage ());
      return FALSE;
    }
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (int i = 0; i < n; i++)
    {
      char raw[VIR_UUID_STRING_BUFLEN];
      char uuid[VA_UUID_STRING_LEN];

      if (virDomainGetUUIDString (list[i], raw) == 0 && va_uuid_normalize (raw, uuid))
        g_hash_table_insert (*domains, g_strdup (uuid), GINT_TO_POINTER (virDomainIsActive (list[i]) == 1));
      virDomainFree (list[i]);
    }
  free (list);
  return TRUE;
}

char *
va_libvirt_qmp (VaLibvirt *self, const char *command, GError **error)
{
  char *reply = NULL;

  g_return_val_if_fail (self != NULL && self->dom != NULL, NULL);
  g_return_val_if_fail (command != NULL, NULL);

  if (virDomainQemuMonitorCommand (self->dom, command, &reply, 0) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "QMP through libvirt at %s: %s", self->uri, virGetLastErrorMessage ());
      return NULL;
    }
  /* libvirt's allocation: copied, so that the caller frees with g_free */
  {
    char *copy = g_strdup (reply);
    free (reply);
    return copy;
  }
}
