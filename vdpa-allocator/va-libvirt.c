/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "va-libvirt.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "va-domain.h"
#include "va-error.h"

static void
quiet (void *user_data, virErrorPtr error)
{
  /* errors are read with virGetLastErrorMessage, not printed */
}

gboolean
va_libvirt_list_domains (GHashTable **domains, gpointer user_data, GError **error)
{
  const char *uri = user_data ? user_data : "qemu:///system";
  virConnectPtr conn;
  virDomainPtr *list = NULL;
  int n;

  virSetErrorFunc (NULL, quiet);
  conn = virConnectOpenReadOnly (uri);
  if (!conn)
    return g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "libvirt at %s: %s", uri, virGetLastErrorMessage ()), FALSE;
  n = virConnectListAllDomains (conn, &list, 0);
  if (n < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "libvirt at %s: listing domains: %s", uri, virGetLastErrorMessage ());
      virConnectClose (conn);
      return FALSE;
    }
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (int i = 0; i < n; i++)
    {
      char raw[VIR_UUID_STRING_BUFLEN];
      char uuid[37];

      if (virDomainGetUUIDString (list[i], raw) == 0 && va_uuid_normalize (raw, uuid))
        g_hash_table_insert (*domains, g_strdup (uuid), GINT_TO_POINTER (virDomainIsActive (list[i]) == 1));
      virDomainFree (list[i]);
    }
  free (list);
  virConnectClose (conn);
  return TRUE;
}
