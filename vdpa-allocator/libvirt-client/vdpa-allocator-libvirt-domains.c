/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Prints the domains libvirt has, one "UUID active|inactive" a line, for
 * vdpa-allocatord's reconciliation: the daemon keeps libvirt's client
 * library (and its 9 MiB) out of its own process. Exit status 1 with one
 * line on stderr when libvirt cannot be reached. */
#define G_LOG_DOMAIN "vdpa-allocator-libvirt-domains"

#include <stdio.h>

#include "va-libvirt.h"

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) domains = NULL;
  GHashTableIter iter;
  gpointer uuid, active;

  if (argc > 2)
    {
      fprintf (stderr, "usage: %s [URI]\n", argv[0]);
      return 2;
    }
  if (!va_libvirt_list_domains (&domains, argc == 2 ? argv[1] : NULL, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  g_hash_table_iter_init (&iter, domains);
  while (g_hash_table_iter_next (&iter, &uuid, &active))
    printf ("%s %s\n", (const char *) uuid, GPOINTER_TO_INT (active) ? "active" : "inactive");
  return fflush (stdout) == 0 ? 0 : 1;
}
