/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl's commands that talk to vdpa-allocatord: each builds records
 * (a{sv}) from the daemon's answers and prints them through va-ctl-out.c. */
#define G_LOG_DOMAIN "va-ctl-bus"

#include "config.h"

#include "va-ctl-private.h"

#include <json-glib/json-glib.h>

#include "va-bus.h"
#include "va-client.h"
#include "va-config.h"
#include "va-error.h"
#include "va-paths.h"

/* The daemon through the process's one client (va-client.h). */
#define CLIENT (va_client_get_default ())

/* a{sv} of every property of the manager (@path NULL) or of a pool. */
static GVariant *
get_all (const char *path, GError **error)
{
  return va_client_get_properties (CLIENT, path, error);
}

/* The columns of the tables: a title says what the column holds; an
 * extra one (TRUE) only with -o. */
static const VaCtlColumn pool_cols[] = {
  { "Name", "POOL" },
  { "Total", "TOTAL" },
  { "Free", "FREE" },
  { "Leased", "LEASED" },
  { "SoftwareLeased", "SOFTWARE" },
  { "SoftwareSlots", "SOFTWARE-SLOTS", TRUE },
  { "BrokenLeases", "BROKEN", TRUE },
  { "Healthy", "HEALTHY" },
  { "Draining", "DRAINING" },
  { "VlanMethod", "VLAN-METHOD" },
  { "HealthReason", "REASON", .text = TRUE },
  { "Warning", "WARNING", .text = TRUE },
  { NULL },
};

static const VaCtlColumn lease_cols[] = {
  { "domain_name", "DOMAIN" },
  { "mac", "MAC" },
  { "kind", "KIND" },
  { "form", "FORM" },
  { "network", "NETWORK" },
  { "pool", "POOL" },
  { "vlan", "VLAN" },
  { "queues", "QUEUES" },
  { "slot", "SLOT" },
  { "device", "DEVICE" },
  { "broken", "BROKEN" },
  { "created", "SINCE", TRUE },
  { "uuid", "UUID", TRUE },
  { "chardev", "NODE", .extra = TRUE, .text = TRUE },
  { "port", "PORT", .extra = TRUE, .text = TRUE },
  { NULL },
};

/* -o COLS and --no-headers of a command that prints a table */
#define TABLE_ENTRIES(output, no_headers)                                                                                                  \
  { "output", 'o', 0, G_OPTION_ARG_STRING, &output, "Only the columns COLS, in that order (their titles, comma-separated)", "COLS" },      \
  {                                                                                                                                        \
    "no-headers", 0, 0, G_OPTION_ARG_NONE, &no_headers, "Print no header line", NULL                                                       \
  }

/* After the options: -o names columns of @cols, and neither goes with -j. */
static int
table_options (const char *output, gboolean no_headers, gboolean json, const VaCtlColumn *cols)
{
  if (json && (output || no_headers))
    return va_ctl_usage ("-o and --no-headers are for the table, not -j");
  va_ctl_table_options (output, no_headers);
  return va_ctl_table_check (cols);
}

/* aa{sv} of every pool's properties. */
static GVariant *
pools_records (GError **error)
{
  g_autoptr (GVariant) props = get_all (NULL, error);
  g_autoptr (GVariant) paths = NULL;
  GVariantBuilder b;
  GVariantIter iter;
  const char *path;

  if (!props)
    return NULL;
  paths = g_variant_lookup_value (props, "Pools", G_VARIANT_TYPE_OBJECT_PATH_ARRAY);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  g_variant_iter_init (&iter, paths);
  while (g_variant_iter_next (&iter, "&o", &path))
    {
      GVariant *pool = get_all (path, error);
      if (!pool)
        {
          g_variant_builder_clear (&b);
          return NULL;
        }
      g_variant_builder_add_value (&b, pool);
      g_variant_unref (pool);
    }
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

/* ---- commands ------------------------------------------------------------ */

int
va_ctl_cmd_status (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) props = NULL;
  g_autoptr (GVariant) pools = NULL;
  g_autoptr (GVariant) leases = NULL;
  guint32 count = 0;
  gboolean json = FALSE;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "- show the allocator's state", "Shows the daemon, its backend and its pools.", NULL, &json, 0, 0)))
    return rc;
  props = get_all (NULL, &error);
  if (props)
    pools = pools_records (&error);
  /* the count, not the list: its size grows with the leases */
  if (pools && !va_client_lookup_lease_count (props, &count))
    {
      leases = va_client_list_leases (CLIENT, &error);
      count = leases ? g_variant_n_children (leases) : 0;
    }
  if (!pools || (!leases && error))
    return va_ctl_fail (error);

  if (json)
    {
      g_autoptr (JsonBuilder) b = va_ctl_json_begin ();
      const char *version = NULL, *backend = NULL;

      g_variant_lookup (props, "Version", "&s", &version);
      g_variant_lookup (props, "Backend", "&s", &backend);
      json_builder_set_member_name (b, "daemon_version");
      json_builder_add_string_value (b, version);
      json_builder_set_member_name (b, "backend");
      json_builder_add_string_value (b, backend);
      va_ctl_json_add_list (b, "pools", pools);
      json_builder_set_member_name (b, "lease_count");
      json_builder_add_int_value (b, count);
      va_ctl_json_print (b);
    }
  else
    {
      const char *version = NULL, *backend = NULL;

      g_variant_lookup (props, "Version", "&s", &version);
      g_variant_lookup (props, "Backend", "&s", &backend);
      guint32 software = 0, broken = 0;
      GVariantIter iter;
      GVariant *pool;

      g_variant_iter_init (&iter, pools);
      while ((pool = g_variant_iter_next_value (&iter)))
        {
          guint32 n = 0, b = 0;

          g_variant_lookup (pool, "SoftwareLeased", "u", &n);
          g_variant_lookup (pool, "BrokenLeases", "u", &b);
          software += n;
          broken += b;
          g_variant_unref (pool);
        }
      g_print ("vdpa-allocatord %s, backend %s%s, %u lease(s)", version, backend, g_strcmp0 (backend, "sim") == 0 ? " (simulated NIC)" : "",
               count);
      if (software)
        g_print (", %u of them on software vDPA devices", software);
      /* a NIC that carries nothing: lease list says which and why */
      if (broken)
        g_print (", %u broken (carrying nothing: 'vdpactl lease list' says why)", broken);
      g_print ("\n\n");
      if (g_variant_n_children (pools) == 0)
        g_print ("no pools configured: see vdpa-allocator.conf(5)\n");
      else
        va_ctl_print_table (pools, pool_cols, NULL);
    }
  return 0;
}

static int
pool_list (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) pools = NULL;
  g_autofree char *output = NULL;
  gboolean json = FALSE, no_headers = FALSE;
  const GOptionEntry entries[] = { TABLE_ENTRIES (output, no_headers), { NULL } };
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "- list the pools", "Lists every pool with its slots.", entries, &json, 0, 0))
      || (rc = table_options (output, no_headers, json, pool_cols)))
    return rc;
  pools = pools_records (&error);
  if (!pools)
    return va_ctl_fail (error);
  va_ctl_print_table (pools, pool_cols, json ? "pools" : NULL);
  return 0;
}

static int
pool_show (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) props = NULL;
  g_autofree char *path = NULL;
  gboolean json = FALSE;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "NAME - show one pool", "Shows every property of one pool.", NULL, &json, 1, 1)))
    return rc;
  if (!va_name_is_valid (argv[1]))
    return va_ctl_usage ("not a pool name");
  path = va_bus_pool_path (argv[1]);
  props = get_all (path, &error);
  if (!props)
    {
      if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD)
          || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT)
          || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_INTERFACE))
        {
          g_printerr ("vdpactl: no pool named '%s'\n", argv[1]);
          return 1;
        }
      return va_ctl_fail (error);
    }
  va_ctl_print_record (props, json);
  return 0;
}

static int
pool_drain (int argc, char **argv, gboolean draining)
{
  g_autoptr (GError) error = NULL;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, draining ? "NAME - stop handing out slots of a pool" : "NAME - hand out slots of a pool again",
                          draining ? "A draining pool gives no new leases; its leases stay until released." : "Ends draining.", NULL, NULL,
                          1, 1)))
    return rc;
  if (!va_client_drain (CLIENT, argv[1], draining, &error))
    return va_ctl_fail (error);
  g_print ("pool %s %s\n", argv[1], draining ? "draining" : "no longer draining");
  return 0;
}

int
va_ctl_cmd_pool (int argc, char **argv)
{
  if (argc >= 2 && argv[1][0] != '-')
    {
      g_autofree char *prgname = g_strdup_printf ("vdpactl pool %.*s", VA_CUT (argv[1], 32));
      g_set_prgname (prgname);
    }
  if (argc < 2 || strcmp (argv[1], "list") == 0)
    return pool_list (argc > 1 ? argc - 1 : argc, argc > 1 ? argv + 1 : argv);
  if (strcmp (argv[1], "show") == 0)
    return pool_show (argc - 1, argv + 1);
  if (strcmp (argv[1], "drain") == 0)
    return pool_drain (argc - 1, argv + 1, TRUE);
  if (strcmp (argv[1], "undrain") == 0)
    return pool_drain (argc - 1, argv + 1, FALSE);
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      g_print ("Usage: vdpactl pool list|show NAME|drain NAME|undrain NAME [-j]\n");
      return 0;
    }
  g_printerr ("vdpactl: unknown pool command '%.*s'; use list, show, drain or undrain\n", VA_CUT (argv[1], 64));
  return VA_CTL_EXIT_USAGE;
}

int
va_ctl_cmd_lease (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) list = NULL;
  g_autofree char *domain = NULL, *output = NULL;
  gboolean json = FALSE, no_headers = FALSE;
  const GOptionEntry entries[] = {
    { "domain", 'd', 0, G_OPTION_ARG_STRING, &domain, "Only the leases of this domain (name or UUID)", "DOMAIN" },
    TABLE_ENTRIES (output, no_headers),
    { NULL },
  };
  g_autofree char *shown = NULL;
  GVariantBuilder b;
  GVariantIter iter;
  GVariant *rec;
  int rc;

  if (argc >= 2 && strcmp (argv[1], "list") == 0)
    {
      argc--;
      argv++;
    }
  else if (argc >= 2 && argv[1][0] != '-')
    {
      g_printerr ("vdpactl: unknown lease command '%.*s'; use list\n", VA_CUT (argv[1], 64));
      return VA_CTL_EXIT_USAGE;
    }
  if ((rc = va_ctl_parse (&argc, &argv, "- list the leases",
                          "Lists every lease: which VM NIC holds which slot and device. The columns SINCE, UUID, NODE\n"
                          "and PORT are shown with -o only.",
                          entries, &json, 0, 0))
      || (rc = table_options (output, no_headers, json, lease_cols)))
    return rc;
  list = va_client_list_leases (CLIENT, &error);
  if (!list)
    return va_ctl_fail (error);
  /* a lease holds a name's display form: the name as libvirt spells it
   * (a tab, over 256 bytes) finds it too */
  shown = domain ? va_domain_name_display (domain) : NULL;
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  g_variant_iter_init (&iter, list);
  while ((rec = g_variant_iter_next_value (&iter)))
    {
      const char *uuid = "", *name = "";
      char want[VA_UUID_STRING_LEN];

      g_variant_lookup (rec, "uuid", "&s", &uuid);
      g_variant_lookup (rec, "domain_name", "&s", &name);
      if (!domain || strcmp (domain, name) == 0 || strcmp (shown, name) == 0
          || (va_uuid_normalize (domain, want) && strcmp (want, uuid) == 0))
        g_variant_builder_add_value (&b, rec);
      g_variant_unref (rec);
    }
  {
    g_autoptr (GVariant) out = g_variant_ref_sink (g_variant_builder_end (&b));
    va_ctl_print_table (out, lease_cols, json ? "leases" : NULL);
  }
  return 0;
}

/* ---- dev list ------------------------------------------------------------ */

static const VaCtlColumn pf_cols[] = {
  { "name", "PF" },      { "pci", "PCI" },   { "model", "MODEL" }, { "numa", "NUMA" }, { "eswitch", "ESWITCH" },
  { "vf_count", "VFS" }, { "pool", "POOL" }, { "state", "STATE" }, { NULL },
};

static const VaCtlColumn vf_cols[] = {
  { "pci", "VF" },
  { "pf", "PF" },
  { "mgmtdev", "MGMTDEV" },
  { "state", "STATE" },
  { "domain", "DOMAIN" },
  { "mac", "MAC" },
  { "reason", "REASON", .text = TRUE },
  { NULL },
};

static const char *
lookup_str (GVariant *rec, const char *key)
{
  const char *s = "";

  g_variant_lookup (rec, key, "&s", &s);
  return s;
}

/* A PF's line: its state in words, in a pool or why in none. */
static GVariant *
pf_row (GVariant *pf)
{
  GVariantBuilder b;
  gint32 numa = -1;
  guint32 vfs = 0;
  gboolean healthy = FALSE;
  const char *pool = lookup_str (pf, "pool_name"), *why = lookup_str (pf, "no_pool_reason");
  g_autofree char *state = NULL;
  g_autofree char *numa_s = NULL;

  g_variant_lookup (pf, "numa", "i", &numa);
  g_variant_lookup (pf, "vf_count", "u", &vfs);
  g_variant_lookup (pf, "healthy", "b", &healthy);
  if (!*pool)
    state = *why ? g_strdup_printf ("in no pool: %s", why) : g_strdup ("in no pool: no pool is configured");
  else
    state = g_strdup (healthy ? "healthy" : lookup_str (pf, "health_reason"));
  numa_s = numa >= 0 ? g_strdup_printf ("%d", numa) : g_strdup ("");
  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "name", g_variant_new_string (lookup_str (pf, "name")));
  g_variant_builder_add (&b, "{sv}", "pci", g_variant_new_string (lookup_str (pf, "pci")));
  g_variant_builder_add (&b, "{sv}", "model", g_variant_new_string (lookup_str (pf, "model")));
  g_variant_builder_add (&b, "{sv}", "numa", g_variant_new_string (numa_s));
  g_variant_builder_add (&b, "{sv}", "eswitch", g_variant_new_string (lookup_str (pf, "eswitch")));
  g_variant_builder_add (&b, "{sv}", "vf_count", g_variant_new_uint32 (vfs));
  g_variant_builder_add (&b, "{sv}", "pool", g_variant_new_string (pool));
  g_variant_builder_add (&b, "{sv}", "state", g_variant_new_string (state));
  return g_variant_builder_end (&b);
}

static GVariant *
vf_row (GVariant *vf, const char *pf)
{
  GVariantBuilder b;
  const char *name = lookup_str (vf, "domain_name");

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "pci", g_variant_new_string (lookup_str (vf, "pci")));
  g_variant_builder_add (&b, "{sv}", "pf", g_variant_new_string (pf));
  g_variant_builder_add (&b, "{sv}", "mgmtdev", g_variant_new_string (lookup_str (vf, "mgmtdev")));
  g_variant_builder_add (&b, "{sv}", "state", g_variant_new_string (lookup_str (vf, "state")));
  g_variant_builder_add (&b, "{sv}", "domain", g_variant_new_string (*name ? name : lookup_str (vf, "uuid")));
  g_variant_builder_add (&b, "{sv}", "mac", g_variant_new_string (lookup_str (vf, "mac")));
  g_variant_builder_add (&b, "{sv}", "reason", g_variant_new_string (lookup_str (vf, "reason")));
  return g_variant_builder_end (&b);
}

static int
dev_list (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) pfs = NULL;
  g_autofree char *output = NULL;
  guint left_out = 0;
  gboolean json = FALSE, no_headers = FALSE;
  const GOptionEntry entries[] = { TABLE_ENTRIES (output, no_headers), { NULL } };
  const VaCtlColumn *only = NULL; /* one table: pf_cols or vf_cols */
  GVariantBuilder pb, vb;
  GVariantIter iter;
  GVariant *pf;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "[pf|vf] - list the PFs, VFs and vdpa management devices the daemon sees",
                          "Lists every PF the daemon's discovery saw, in a pool or not: model, PCI address, NUMA node,\n"
                          "eswitch mode, VF count, its pool or why no pool takes it (the key that leaves it out);\n"
                          "then every VF: its vdpa management device, whether it is free, leased (to which domain)\n"
                          "or lost, and why it takes no lease. pf or vf prints that table alone, the one -o and\n"
                          "--no-headers are for.",
                          entries, &json, 0, 1)))
    return rc;
  if (argc == 2 && strcmp (argv[1], "pf") == 0)
    only = pf_cols;
  else if (argc == 2 && strcmp (argv[1], "vf") == 0)
    only = vf_cols;
  else if (argc == 2)
    return va_ctl_usage ("dev list takes pf or vf");
  if (json && only)
    return va_ctl_usage ("-j lists the PFs with their VFs: pf and vf are for the tables");
  if (!only && (output || no_headers))
    return va_ctl_usage ("-o and --no-headers are for one table: dev list pf or dev list vf");
  if ((rc = table_options (output, no_headers, json, only ? only : pf_cols)))
    return rc;
  pfs = va_client_list_devices (CLIENT, &left_out, &error);
  if (!pfs)
    return va_ctl_fail (error);
  if (json)
    {
      g_autoptr (JsonBuilder) b = va_ctl_json_begin ();

      va_ctl_json_add_list (b, "pfs", pfs);
      json_builder_set_member_name (b, "vfs_left_out");
      json_builder_add_int_value (b, left_out);
      va_ctl_json_print (b);
      return 0;
    }
  if (g_variant_n_children (pfs) == 0 && !only)
    {
      g_print ("the daemon sees no PF: no ConnectX (or other SR-IOV) PF on this host; see connectx-hosts.md\n");
      return 0;
    }
  g_variant_builder_init (&pb, G_VARIANT_TYPE ("aa{sv}"));
  g_variant_builder_init (&vb, G_VARIANT_TYPE ("aa{sv}"));
  g_variant_iter_init (&iter, pfs);
  while ((pf = g_variant_iter_next_value (&iter)))
    {
      g_autoptr (GVariant) vfs = g_variant_lookup_value (pf, "vfs", G_VARIANT_TYPE ("aa{sv}"));
      GVariantIter viter;
      GVariant *vf;

      g_variant_builder_add_value (&pb, pf_row (pf));
      if (vfs)
        {
          g_variant_iter_init (&viter, vfs);
          while ((vf = g_variant_iter_next_value (&viter)))
            {
              g_variant_builder_add_value (&vb, vf_row (vf, lookup_str (pf, "name")));
              g_variant_unref (vf);
            }
        }
      g_variant_unref (pf);
    }
  {
    g_autoptr (GVariant) prows = g_variant_ref_sink (g_variant_builder_end (&pb));
    g_autoptr (GVariant) vrows = g_variant_ref_sink (g_variant_builder_end (&vb));

    /* one table: the rows only, for a script (an empty one too) */
    if (only)
      va_ctl_print_table (only == pf_cols ? prows : vrows, only, NULL);
    else
      {
        va_ctl_print_table (prows, pf_cols, NULL);
        if (g_variant_n_children (vrows))
          {
            g_print ("\n");
            va_ctl_print_table (vrows, vf_cols, NULL);
          }
      }
  }
  /* on stderr under a table a script reads */
  if (left_out && only)
    g_printerr ("vdpactl: %u more VFs not listed: the daemon sends at most 4096\n", left_out);
  else if (left_out)
    g_print ("(%u more VFs not listed: the daemon sends at most 4096)\n", left_out);
  return 0;
}

int
va_ctl_cmd_dev (int argc, char **argv)
{
  if (argc >= 2 && argv[1][0] != '-')
    {
      g_autofree char *prgname = g_strdup_printf ("vdpactl dev %.*s", VA_CUT (argv[1], 32));
      g_set_prgname (prgname);
    }
  if (argc < 2 || argv[1][0] == '-')
    return dev_list (argc, argv);
  if (strcmp (argv[1], "list") == 0)
    return dev_list (argc - 1, argv + 1);
  g_printerr ("vdpactl: unknown dev command '%.*s'; use list\n", VA_CUT (argv[1], 64));
  return VA_CTL_EXIT_USAGE;
}

int
va_ctl_cmd_reconcile (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) report = NULL;
  gboolean json = FALSE;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "- compare leases, devices and libvirt's domains",
                          "Removes devices no lease owns (unless held open), re-makes leased devices that are gone,\n"
                          "releases leases of domains libvirt no longer has (only when libvirt answers), and resets\n"
                          "kind=sriov VFs that no lease holds and no one passes through but a crash left with a VLAN or MAC;\n"
                          "a VF a host driver holds is left alone, reported (host_held) and not offered.",
                          NULL, &json, 0, 0)))
    return rc;
  report = va_client_reconcile (CLIENT, &error);
  if (!report)
    return va_ctl_fail (error);
  {
    static const char *const nulls[] = { "libvirt_error", NULL };
    g_autoptr (GVariant) full = json ? va_ctl_record_complete (report, nulls, NULL) : g_variant_ref (report);
    gboolean libvirt = TRUE;
    const char *why = NULL;

    va_ctl_print_record (full, json);
    g_variant_lookup (report, "libvirt", "b", &libvirt);
    g_variant_lookup (report, "libvirt_error", "&s", &why);
    if (!libvirt)
      {
        /* devices were checked, the leases of vanished domains not; one
         * line, whatever libvirt's message holds */
        g_autofree char *line = g_strdelimit (g_strdup (why ? why : "no reason given"), "\r\n", ' ');

        g_printerr ("vdpactl: reconcile done in part: libvirt did not answer (%s), so no lease of a domain it no longer has was "
                    "released\n",
                    line);
        return VA_CTL_EXIT_PARTIAL;
      }
  }
  return 0;
}

int
va_ctl_cmd_allocate (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaLease) got = NULL;
  g_autoptr (GVariant) lease = NULL;
  g_autofree char *uuid = NULL, *name = NULL, *mac = NULL, *network = NULL, *pool = NULL;
  gint vlan = 0, queues = 0, numa = -1;
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
    { "uuid", 'u', 0, G_OPTION_ARG_STRING, &uuid, "Domain UUID (required)", "UUID" },
    { "domain", 'd', 0, G_OPTION_ARG_STRING, &name, "Domain name, for people", "NAME" },
    { "mac", 'm', 0, G_OPTION_ARG_STRING, &mac, "The NIC's MAC address (required)", "MAC" },
    { "network", 'n', 0, G_OPTION_ARG_STRING, &network, "A configured network", "NETWORK" },
    { "pool", 'p', 0, G_OPTION_ARG_STRING, &pool, "A pool, for inline intent instead of --network", "POOL" },
    { "vlan", 0, 0, G_OPTION_ARG_INT, &vlan, "VLAN with --pool (" G_STRINGIFY (VA_VLAN_MIN) "-" G_STRINGIFY (VA_VLAN_MAX) ")", "ID" },
    { "queues", 'q', 0, G_OPTION_ARG_INT, &queues, "Queue pairs (default: the pool's max-vqp)", "N" },
    { "numa-node", 0, 0, G_OPTION_ARG_INT, &numa, "Preferred NUMA node", "N" },
    { NULL },
  };
  VaAllocRequest req = VA_ALLOC_REQUEST_INIT;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "- lease a vDPA device for a VM NIC",
                          "Allocates as the hook does at 'prepare': makes the device and the port link.\n"
                          "Idempotent for the same UUID and MAC.",
                          entries, &json, 0, 0)))
    return rc;
  if (!uuid || !mac)
    return va_ctl_usage ("--uuid and --mac are required");
  if (!network == !pool)
    return va_ctl_usage ("give --network, or --pool with --vlan");
  if (network && vlan)
    return va_ctl_usage ("--vlan goes with --pool: a network has its own VLAN (see 'vdpactl network list')");
  {
    char canon_uuid[VA_UUID_STRING_LEN], canon_mac[VA_MAC_STRING_LEN];

    if (!va_uuid_check (uuid, canon_uuid, &error))
      g_prefix_error (&error, "--uuid: ");
    else if (!va_mac_check (mac, canon_mac, &error))
      g_prefix_error (&error, "--mac: ");
    if (error)
      return va_ctl_usage (error->message);
  }
  if (vlan < 0 || vlan > VA_VLAN_MAX || queues < 0 || queues > VA_QUEUES_MAX)
    return va_ctl_usage ("--vlan must be " G_STRINGIFY (VA_VLAN_MIN) "-" G_STRINGIFY (VA_VLAN_MAX) " and --queues " G_STRINGIFY (
      VA_QUEUES_MIN) "-" G_STRINGIFY (VA_QUEUES_MAX));
  req.uuid = uuid;
  req.domain_name = name;
  req.mac = mac;
  req.network = network;
  req.pool = pool;
  req.vlan = (guint16) vlan;
  req.queues = (guint16) queues;
  req.numa_node = numa;
  got = va_client_allocate (CLIENT, &req, &error);
  if (!got)
    return va_ctl_fail (error);
  /* the record as the daemon sent it: one codec on both ends */
  lease = g_variant_ref_sink (va_lease_to_variant (got));
  {
    /* a lease just made is not broken; ListLeases says so, Allocate not */
    static const char *const nulls[] = { "broken_reason", NULL };
    static const char *const falses[] = { "broken", NULL };
    g_autoptr (GVariant) full = json ? va_ctl_record_complete (lease, nulls, falses) : g_variant_ref (lease);
    va_ctl_print_record (full, json);
  }
  return 0;
}

/* The UUID of the domain @name (a name, or a UUID) as the leases know it:
 * NULL with @error when no lease names it, or two domains of that name
 * hold leases. */
static char *
domain_uuid_of_leases (GVariant *leases, const char *name, GError **error)
{
  g_autofree char *found = NULL;
  char want[VA_UUID_STRING_LEN];
  gboolean is_uuid = va_uuid_normalize (name, want);
  GVariantIter iter;
  GVariant *rec;

  g_variant_iter_init (&iter, leases);
  while ((rec = g_variant_iter_next_value (&iter)))
    {
      g_autoptr (GVariant) r = rec;
      const char *uuid = "", *dname = "";

      g_variant_lookup (r, "uuid", "&s", &uuid);
      g_variant_lookup (r, "domain_name", "&s", &dname);
      if (!(strcmp (dname, name) == 0 || (is_uuid && strcmp (uuid, want) == 0)))
        continue;
      if (found && strcmp (found, uuid) != 0)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "two domains named '%s' hold leases (%s and %s): give --uuid", name,
                       found, uuid);
          return NULL;
        }
      if (!found)
        found = g_strdup (uuid);
    }
  if (!found)
    g_set_error (error, VA_ERROR, VA_ERROR_NOT_FOUND, "domain '%s' holds no lease: nothing was released", name);
  return g_steal_pointer (&found);
}

/* Whether @leases hold one of @uuid (canonical) with @mac (canonical). */
static gboolean
leases_hold (GVariant *leases, const char *uuid, const char *mac)
{
  GVariantIter iter;
  GVariant *rec;
  gboolean held = FALSE;

  g_variant_iter_init (&iter, leases);
  while (!held && (rec = g_variant_iter_next_value (&iter)))
    {
      const char *u = "", *m = "";

      g_variant_lookup (rec, "uuid", "&s", &u);
      g_variant_lookup (rec, "mac", "&s", &m);
      held = strcmp (u, uuid) == 0 && g_ascii_strcasecmp (m, mac) == 0;
      g_variant_unref (rec);
    }
  return held;
}

int
va_ctl_cmd_release (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) leases = NULL;
  g_autofree char *uuid_arg = NULL, *mac_arg = NULL, *domain = NULL, *by_name = NULL;
  gboolean all = FALSE;
  const GOptionEntry entries[] = {
    { "uuid", 'u', 0, G_OPTION_ARG_STRING, &uuid_arg, "Domain UUID", "UUID" },
    { "domain", 'd', 0, G_OPTION_ARG_STRING, &domain, "Domain name (or UUID), as 'lease list' shows it", "DOMAIN" },
    { "mac", 'm', 0, G_OPTION_ARG_STRING, &mac_arg, "The NIC's MAC address", "MAC" },
    { "all", 'a', 0, G_OPTION_ARG_NONE, &all, "Every lease of the domain", NULL },
    { NULL },
  };
  char uuid[VA_UUID_STRING_LEN], mac[VA_MAC_STRING_LEN];
  int rc;

  if ((rc
       = va_ctl_parse (&argc, &argv, "- give a lease back",
                       "Deletes the vDPA device and the port link. Fails (status 1) when there was no such lease.", entries, NULL, 0, 0)))
    return rc;
  if (!uuid_arg == !domain || (!mac_arg == !all))
    return va_ctl_usage ("give --uuid or --domain, and --mac or --all");
  if (uuid_arg && !va_uuid_check (uuid_arg, uuid, &error))
    {
      g_prefix_error (&error, "--uuid: ");
      return va_ctl_usage (error->message);
    }
  if (domain && !va_name_is_valid (domain) && !va_uuid_normalize (domain, uuid))
    return va_ctl_usage ("--domain: not a domain name or UUID");
  if (mac_arg && !va_mac_check (mac_arg, mac, &error))
    {
      g_prefix_error (&error, "--mac: ");
      return va_ctl_usage (error->message);
    }
  if (domain || mac_arg)
    {
      /* the daemon's Release is idempotent (the hook relies on it): what
       * there is to release, read first, so that nothing is not "released" */
      leases = va_client_list_leases (CLIENT, &error);
      if (!leases)
        return va_ctl_fail (error);
    }
  if (domain)
    {
      by_name = domain_uuid_of_leases (leases, domain, &error);
      if (!by_name)
        return va_ctl_fail (error);
      g_strlcpy (uuid, by_name, sizeof uuid);
    }
  if (all)
    {
      gint n = va_client_release_domain (CLIENT, uuid, &error);
      if (n < 0)
        return va_ctl_fail (error);
      if (n == 0)
        {
          g_autofree char *msg = g_strdup_printf ("domain %s holds no lease: nothing was released", uuid);
          return va_ctl_fail_msg (msg);
        }
      g_print ("released %d lease(s) of domain %s\n", n, domain ? domain : uuid);
      return 0;
    }
  if (!leases_hold (leases, uuid, mac))
    {
      g_autofree char *msg
        = g_strdup_printf ("no lease of NIC %s of domain %s: nothing was released; see 'vdpactl lease list'", mac, domain ? domain : uuid);
      return va_ctl_fail_msg (msg);
    }
  if (!va_client_release (CLIENT, uuid, mac, &error))
    return va_ctl_fail (error);
  g_print ("released the lease of NIC %s of domain %s\n", mac, domain ? domain : uuid);
  return 0;
}

int
va_ctl_cmd_network (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VaConfig) config = NULL;
  g_autofree char *config_dir = NULL;
  gboolean json = FALSE;
  const GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_dir, "Configuration directory (default " VA_SYSCONFDIR "/vdpa-allocator)", "DIR" },
    { NULL },
  };
  GVariantBuilder b;
  int rc;

  if (argc >= 2 && strcmp (argv[1], "list") == 0)
    {
      argc--;
      argv++;
    }
  else if (argc >= 2 && argv[1][0] != '-')
    {
      g_printerr ("vdpactl: unknown network command '%.*s'; use list\n", VA_CUT (argv[1], 64));
      return VA_CTL_EXIT_USAGE;
    }
  if ((rc
       = va_ctl_parse (&argc, &argv, "- list the configured networks", "Reads the configuration; needs no daemon.", entries, &json, 0, 0)))
    return rc;
  config = va_config_load (config_dir ? config_dir : va_path_get (VA_PATH_CONFIG), &error);
  if (!config)
    return va_ctl_fail (error);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("aa{sv}"));
  for (guint i = 0; i < config->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (config->networks, i);
      GVariantBuilder r;

      g_variant_builder_init (&r, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&r, "{sv}", "name", g_variant_new_string (n->net.name));
      g_variant_builder_add (&r, "{sv}", "mode", g_variant_new_string (va_mode_to_string (n->net.mode)));
      g_variant_builder_add (&r, "{sv}", "pool", g_variant_new_string (n->net.pool ? n->net.pool : ""));
      /* 0 (none) is "" here: null in JSON, "-" in the table */
      g_variant_builder_add (&r, "{sv}", "vlan", n->net.vlan ? g_variant_new_uint16 (n->net.vlan) : g_variant_new_string (""));
      g_variant_builder_add (&r, "{sv}", "fallback_bridge", g_variant_new_string (n->net.bridge ? n->net.bridge : ""));
      g_variant_builder_add (&r, "{sv}", "bridge_type", g_variant_new_string (va_bridge_kind_to_string (n->net.bridge_kind)));
      g_variant_builder_add (&r, "{sv}", "quota", n->quota ? g_variant_new_uint32 (n->quota) : g_variant_new_string (""));
      g_variant_builder_add_value (&b, g_variant_builder_end (&r));
    }
  {
    static const VaCtlColumn cols[] = {
      { "name", "NETWORK" },     { "mode", "MODE" },   { "pool", "POOL" }, { "vlan", "VLAN" }, { "fallback_bridge", "FALLBACK" },
      { "bridge_type", "TYPE" }, { "quota", "QUOTA" }, { NULL },
    };
    g_autoptr (GVariant) out = g_variant_ref_sink (g_variant_builder_end (&b));
    va_ctl_print_table (out, cols, json ? "networks" : NULL);
  }
  return 0;
}
