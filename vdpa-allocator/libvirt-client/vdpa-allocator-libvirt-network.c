/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Defines, updates and starts the libvirt network of a kind=sriov pool,
 * vdpa-allocator-POOL (va_sriov_network_name), for vdpa-allocatord, which
 * keeps libvirt's client library out of its own process (issue 15):
 *
 *   vdpa-allocator-libvirt-network [--uri URI] POOL [VF-PCI-ADDRESS...]
 *
 * The network is <forward mode='hostdev' managed='yes'> listing exactly
 * the VFs given, each as an <address type='pci'>: libvirt picks a free one
 * at each domain start, binds it to vfio-pci and sets its MAC and VLAN.
 * Defined persistent and autostarted; a running network with another VF
 * list is restarted when no domain holds a port on it, else left running
 * with its old list (a warning: it takes the new one at its next start).
 * No VF at all: the network is stopped and undefined, under the same rule.
 *
 * Exit status 0; 3 with one warning line on stderr; 1 with one error line
 * on stderr; 2 for a usage error. Prints nothing on stdout. */
#define G_LOG_DOMAIN "vdpa-allocator-libvirt-network"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "va-error.h"
#include "va-ids.h"
#include "va-libvirt.h"

#define EXIT_WARNING 3

typedef struct
{
  unsigned domain, bus, slot, function;
} PciAddress;

static gboolean
parse_pci (const char *text, PciAddress *a)
{
  char tail;

  return va_pci_address_is_valid (text) && sscanf (text, "%x:%x:%x.%x%c", &a->domain, &a->bus, &a->slot, &a->function, &tail) == 4;
}

/* As libvirt formats a PCI address (virPCIDeviceAddressFormat), so that
 * the live XML can be compared line by line. */
static char *
address_xml (const PciAddress *a)
{
  return g_strdup_printf ("<address type='pci' domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>", a->domain, a->bus, a->slot,
                          a->function);
}

static guint
count_of (const char *haystack, const char *needle)
{
  guint n = 0;

  for (const char *p = haystack; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

/* Whether the network's live definition lists exactly @addresses. */
static gboolean
lists_exactly (virNetworkPtr net, GPtrArray *addresses)
{
  g_autofree char *xml = virNetworkGetXMLDesc (net, 0);

  if (!xml || count_of (xml, "<address type='pci'") != addresses->len)
    return FALSE;
  for (guint i = 0; i < addresses->len; i++)
    if (!strstr (xml, g_ptr_array_index (addresses, i)))
      return FALSE;
  return TRUE;
}

/* The ports domains hold on @net; -1 when libvirt cannot say. */
static int
ports_of (virNetworkPtr net)
{
  virNetworkPortPtr *ports = NULL;
  int n = virNetworkListAllPorts (net, &ports, 0);

  for (int i = 0; i < n; i++)
    virNetworkPortFree (ports[i]);
  free (ports);
  return n;
}

static int fail (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

/* One line: what failed and libvirt's last error. */
static int
fail (const char *fmt, ...)
{
  g_autofree char *what = NULL;
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  msg = va_libvirt_last_error (what);
  fprintf (stderr, "%s\n", msg);
  return 1;
}

int
main (int argc, char **argv)
{
  const char *uri = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLibvirt) lv = NULL;
  g_autoptr (GPtrArray) addresses = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) xml = g_string_new (NULL);
  g_autofree char *name = NULL;
  virNetworkPtr net = NULL;
  int first = 1, active, status = 0;

  if (argc > 2 && strcmp (argv[1], "--uri") == 0)
    {
      uri = argv[2];
      first = 3;
    }
  if (first >= argc || !va_name_is_valid (argv[first]))
    {
      fprintf (stderr, "usage: %s [--uri URI] POOL [VF-PCI-ADDRESS...]\n", argv[0]);
      return 2;
    }
  name = va_sriov_network_name (argv[first]);
  for (int i = first + 1; i < argc; i++)
    {
      PciAddress a;

      if (!parse_pci (argv[i], &a))
        {
          fprintf (stderr, "network %s: '%s' is no PCI address like 0000:01:10.0\n", name, argv[i]);
          return 2;
        }
      g_ptr_array_add (addresses, address_xml (&a));
    }

  lv = va_libvirt_open (uri, FALSE, &error);
  if (!lv)
    {
      fprintf (stderr, "network %s: %s\n", name, error->message);
      return 1;
    }
  net = virNetworkLookupByName (lv->conn, name);

  if (addresses->len == 0)
    {
      /* the pool has no VF: no network to pick one from */
      if (!net)
        return 0;
      active = virNetworkIsActive (net);
      if (active == 1 && ports_of (net) > 0)
        {
          fprintf (stderr, "network %s: the pool has no VF left, but domains hold ports on it: left as it is\n", name);
          status = EXIT_WARNING;
        }
      else if ((active == 1 && virNetworkDestroy (net) < 0) || virNetworkUndefine (net) < 0)
        status = fail ("network %s: removing it", name);
      virNetworkFree (net);
      return status;
    }

  g_string_append_printf (xml, "<network>\n  <name>%s</name>\n", name);
  if (net)
    {
      /* libvirt takes a definition without a UUID for another network of
       * the same name ("already exists with uuid") */
      char uuid[VIR_UUID_STRING_BUFLEN];

      if (virNetworkGetUUIDString (net, uuid) < 0)
        {
          virNetworkFree (net);
          return fail ("network %s: reading its UUID", name);
        }
      g_string_append_printf (xml, "  <uuid>%s</uuid>\n", uuid);
    }
  g_string_append (xml, "  <forward mode='hostdev' managed='yes'>\n");
  for (guint i = 0; i < addresses->len; i++)
    g_string_append_printf (xml, "    %s\n", (const char *) g_ptr_array_index (addresses, i));
  g_string_append (xml, "  </forward>\n</network>\n");

  /* defining again updates what it starts with */
  if (net)
    virNetworkFree (net);
  net = virNetworkDefineXML (lv->conn, xml->str);
  if (!net)
    return fail ("network %s: defining it", name);
  active = virNetworkIsActive (net);
  if (active < 0)
    status = fail ("network %s: reading its state", name);
  else if (active == 1 && !lists_exactly (net, addresses))
    {
      int ports = ports_of (net);

      if (ports != 0)
        {
          g_autofree char *held = ports < 0 ? g_strdup ("some") : g_strdup_printf ("%d", ports);

          fprintf (stderr,
                   "network %s: runs with another VF list while domains hold %s port(s) on it: it takes the pool's %u VF(s) at its "
                   "next start\n",
                   name, held, addresses->len);
          status = EXIT_WARNING;
        }
      else if (virNetworkDestroy (net) < 0 || virNetworkCreate (net) < 0)
        status = fail ("network %s: restarting it with the pool's VFs", name);
    }
  else if (active == 0 && virNetworkCreate (net) < 0)
    status = fail ("network %s: starting it", name);
  if (status != 1 && virNetworkSetAutostart (net, 1) < 0)
    status = fail ("network %s: setting it to autostart", name);
  virNetworkFree (net);
  return status;
}
