/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-ctl"

#include "config.h"

#include "va-ctl-private.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "va-client.h"
#include "va-config.h"
#include "va-domain.h"
#include "va-error.h"
#include "va-paths.h"

typedef struct
{
  const char *name;
  const char *summary;
  int (*run) (int argc, char **argv);
} Command;

/* Reads FILE (or stdin for "-") up to the document size limit. */
static char *
read_input (const char *path, gsize *len, GError **error)
{
  g_autoptr (GString) buf = g_string_sized_new (16384);
  FILE *f = stdin;
  char chunk[65536];
  size_t n;

  if (g_strcmp0 (path, "-") != 0)
    {
      f = fopen (path, "re");
      if (!f)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: %s", path, g_strerror (errno));
          return NULL;
        }
    }
  while ((n = fread (chunk, 1, sizeof chunk, f)) > 0)
    {
      if (buf->len + n > VA_XML_MAX_SIZE)
        {
          if (f != stdin)
            fclose (f);
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_XML, "%s: document is over the limit of %d bytes", f == stdin ? "stdin" : path,
                       VA_XML_MAX_SIZE);
          return NULL;
        }
      g_string_append_len (buf, chunk, n);
    }
  if (ferror (f))
    {
      int err = errno;
      if (f != stdin)
        fclose (f);
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "%s: %s", path, g_strerror (err));
      return NULL;
    }
  if (f != stdin)
    fclose (f);
  *len = buf->len;
  return g_string_free (g_steal_pointer (&buf), FALSE);
}

static gboolean
write_all (int fd, const char *data, gsize len, GError **error)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "writing the output: %s", g_strerror (errno));
          return FALSE;
        }
      data += n;
      len -= n;
    }
  return TRUE;
}

static gboolean
apply_capacity (VaHostView *view, char **capacity, GError **error)
{
  for (guint i = 0; capacity && capacity[i]; i++)
    {
      const char *eq = strchr (capacity[i], '=');
      g_autofree char *pool = NULL;
      guint64 n;

      if (!eq || eq == capacity[i] || !g_ascii_string_to_unsigned (eq + 1, 10, 0, G_MAXUINT32, &n, NULL))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--capacity '%.*s' is not POOL=N", VA_CUT (capacity[i], 64));
          return FALSE;
        }
      pool = g_strndup (capacity[i], eq - capacity[i]);
      if (!va_host_view_set_pool_free (view, pool, (gint64) n, error))
        {
          g_prefix_error (error, "--capacity: ");
          return FALSE;
        }
    }
  return TRUE;
}

static void
print_summary (const VaDomain *domain, const VaHostView *view)
{
  GPtrArray *nics = va_domain_get_nics (domain);

  for (guint i = 0; i < nics->len; i++)
    {
      const VaNic *nic = g_ptr_array_index (nics, i);
      VaNicPlan plan;

      if (!va_nic_resolve (nic, view, &plan, NULL))
        continue;
      if (nic->form == VA_FORM_ACCELERATED && plan.kind == VA_POOL_KIND_SRIOV)
        g_printerr ("%s: accelerated on pool %s, VLAN %u, a VF passed through\n", nic->mac, plan.pool, plan.vlan);
      else if (nic->form == VA_FORM_ACCELERATED)
        g_printerr ("%s: accelerated on pool %s, VLAN %u, %u queue(s)\n", nic->mac, plan.pool, plan.vlan, plan.queues);
      else
        g_printerr ("%s: portable on %s bridge %s, VLAN %u%s\n", nic->mac, va_bridge_kind_to_string (plan.bridge_kind), plan.bridge,
                    plan.vlan, nic->fallback ? " (fallback: the pool has no free slot)" : "");
    }
}

static int
cmd_rewrite (int argc, char **argv)
{
  g_autofree char *to = NULL;
  g_autofree char *config_dir = NULL;
  g_auto (GStrv) capacity = NULL;
  gboolean verbose = FALSE;
  const GOptionEntry entries[] = {
    { "to", 't', 0, G_OPTION_ARG_STRING, &to, "Target form: accelerated (default) or portable", "FORM" },
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_dir, "Configuration directory (default " VA_SYSCONFDIR "/vdpa-allocator)", "DIR" },
    { "capacity", 0, 0, G_OPTION_ARG_STRING_ARRAY, &capacity, "Free slots of POOL (default: unlimited); repeatable", "POOL=N" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Say on stderr what became of each NIC", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[FILE|-] - rewrite a libvirt domain XML between its two forms");
  g_autoptr (GError) error = NULL;
  g_autoptr (VaHostView) view = NULL;
  g_autoptr (VaDomain) domain = NULL;
  g_autofree char *input = NULL;
  g_autofree char *output = NULL;
  gsize len, out_len;
  VaForm form = VA_FORM_ACCELERATED;
  const char *path = "-";

  g_option_context_set_summary (ctx, "Reads the domain XML from FILE (or stdin), rewrites each NIC marked in its\n"
                                     "vdpa:nics metadata, and prints the whole document on stdout. Works offline.\n"
                                     "On any error nothing is printed on stdout and the exit status is not 0.");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return va_ctl_fail (error);
  if (argc > 2)
    return va_ctl_usage ("rewrite takes one FILE (or - for stdin)");
  if (argc == 2)
    path = argv[1];
  if (to && !va_form_from_string (to, &form))
    return va_ctl_usage ("--to must be accelerated or portable");

  /* the offline rewrite's one policy (va-client.h) */
  view = va_client_offline_view (config_dir, &error);
  if (!view || !apply_capacity (view, capacity, &error))
    return va_ctl_fail (error);

  input = read_input (path, &len, &error);
  if (!input)
    return va_ctl_fail (error);
  domain = va_domain_parse (input, len, &error);
  if (!domain || !va_domain_rewrite (domain, view, form, &error))
    return va_ctl_fail (error);
  output = va_domain_to_string (domain, &out_len);
  if (!write_all (STDOUT_FILENO, output, out_len, &error))
    return va_ctl_fail (error);
  if (verbose)
    print_summary (domain, view);
  return 0;
}

static int
cmd_version (int argc, char **argv)
{
  if (argc > 1 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      g_print ("Usage: vdpactl version\n\nPrints the version.\n");
      return 0;
    }
  if (argc > 1)
    return va_ctl_usage ("version takes no arguments");
  g_print ("vdpactl %s\n", VA_VERSION);
  return 0;
}

static const Command commands[] = {
  { "status", "Show the daemon, its backend and its pools", va_ctl_cmd_status },
  { "pool", "list | show NAME | drain NAME | undrain NAME", va_ctl_cmd_pool },
  { "lease", "list [--domain DOMAIN]: which VM NIC holds which device", va_ctl_cmd_lease },
  { "network", "list: the configured networks (offline)", va_ctl_cmd_network },
  { "allocate", "Lease a vDPA device for a VM NIC, as the hook does", va_ctl_cmd_allocate },
  { "release", "Give a lease back (--mac M, or --all of a domain)", va_ctl_cmd_release },
  { "reconcile", "Compare leases, devices and libvirt's domains; clean up", va_ctl_cmd_reconcile },
  { "metrics", "Print the daemon's metrics (Prometheus text format)", va_ctl_cmd_metrics },
  { "domain", "show | accelerate | portable | attach | detach DOMAIN, through libvirt", va_ctl_cmd_domain },
  { "rewrite", "Rewrite a domain XML to its accelerated or portable form (offline)", cmd_rewrite },
  { "version", "Print the version", cmd_version },
};

static void
usage (FILE *out)
{
  fprintf (out, "Usage: vdpactl [-h|--help] [--version] COMMAND [ARGS...]\n\n"
                "See and steer the vdpa-allocator: VM NICs on hardware-accelerated\n"
                "vDPA devices from pools of ConnectX virtual functions.\n\n"
                "Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\nRun 'vdpactl COMMAND --help' for the options of a command; see vdpactl(8).\n");
}

int
va_ctl_main (int argc, char **argv)
{
  if (argc < 2)
    return va_ctl_usage ("no command given; see 'vdpactl --help'");
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "help") == 0)
    {
      usage (stdout);
      return 0;
    }
  if (strcmp (argv[1], "--version") == 0)
    return cmd_version (1, argv);
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        g_autofree char *prgname = g_strdup_printf ("vdpactl %s", commands[i].name);
        g_set_prgname (prgname);
        return commands[i].run (argc - 1, argv + 1);
      }
  g_printerr ("vdpactl: unknown command '%.*s'; see 'vdpactl --help'\n", VA_CUT (argv[1], 64));
  return VA_CTL_EXIT_USAGE;
}
