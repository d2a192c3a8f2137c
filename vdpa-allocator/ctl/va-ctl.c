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

static gboolean global_json;
static char *global_connect;

gboolean
va_ctl_global_json (void)
{
  return global_json;
}

const char *
va_ctl_global_connect (void)
{
  return global_connect;
}

int
va_ctl_parse (int *argc, char ***argv, const char *args, const char *summary, const GOptionEntry *extra, gboolean *json, int min, int max)
{
  const GOptionEntry json_entry[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, json, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new (args);
  g_autoptr (GError) error = NULL;

  g_option_context_set_summary (ctx, summary);
  if (json)
    g_option_context_add_main_entries (ctx, json_entry, NULL);
  if (extra)
    g_option_context_add_main_entries (ctx, extra, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error))
    return va_ctl_fail (error);
  if (global_json && !json)
    return va_ctl_usage ("-j: this command prints no JSON");
  if (json && global_json)
    *json = TRUE;
  if (*argc - 1 < min || *argc - 1 > max)
    return va_ctl_usage (max == 0 ? "this command takes no arguments" : "wrong number of arguments; see --help");
  return 0;
}

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
      if (nic->form == VA_FORM_ACCELERATED && nic->failover)
        g_printerr ("%s: accelerated on pool %s, VLAN %u, a virtio standby on bridge %s for a VF plugged while the domain runs "
                    "(failover)\n",
                    nic->mac, plan.pool, plan.vlan, plan.bridge);
      else if (nic->form == VA_FORM_ACCELERATED && plan.kind == VA_POOL_KIND_SRIOV)
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
  { "dev", "list [pf|vf]: the PFs, VFs and vdpa management devices the daemon sees", va_ctl_cmd_dev },
  { "network", "list: the configured networks (offline)", va_ctl_cmd_network },
  { "allocate", "Lease a vDPA device for a VM NIC, as the hook does", va_ctl_cmd_allocate },
  { "release", "Give a lease back (--uuid U or --domain NAME; --mac M, or --all)", va_ctl_cmd_release },
  { "reconcile", "Compare leases, devices and libvirt's domains; clean up", va_ctl_cmd_reconcile },
  { "metrics", "Print the daemon's metrics (Prometheus text format)", va_ctl_cmd_metrics },
  { "domain",
    "show | accelerate | portable | attach | detach | migrate | save | managedsave | restore:\n"
    "             a libvirt domain and its NICs",
    va_ctl_cmd_domain },
  { "rewrite", "Rewrite a domain XML to its accelerated or portable form (offline)", cmd_rewrite },
  { "version", "Print the version", cmd_version },
};

static void
usage (FILE *out)
{
  fprintf (out, "Usage: vdpactl [-h|--help] [--version] [-j|--json] [--connect URI] COMMAND [ARGS...]\n\n"
                "See and steer the vdpa-allocator: VM NICs on hardware-accelerated\n"
                "vDPA devices from pools of ConnectX virtual functions.\n\n"
                "-j and --connect (of 'domain') may come before the command or anywhere after it.\n\n"
                "Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\nRun 'vdpactl help COMMAND' or 'vdpactl COMMAND --help' for the options of a command; see vdpactl(8).\n");
}

static const Command *
command_named (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (name, commands[i].name) == 0)
      return &commands[i];
  return NULL;
}

static int
run (const Command *cmd, int argc, char **argv)
{
  g_autofree char *prgname = g_strdup_printf ("vdpactl %s", cmd->name);

  g_set_prgname (prgname);
  if (global_json && (cmd->run == cmd_rewrite || cmd->run == cmd_version || cmd->run == va_ctl_cmd_metrics))
    return va_ctl_usage ("-j: this command prints no JSON");
  if (global_connect && cmd->run != va_ctl_cmd_domain)
    return va_ctl_usage ("--connect is an option of 'vdpactl domain'");
  return cmd->run (argc, argv);
}

/* vdpactl help COMMAND [SUBCOMMAND]: the command's --help. */
static int
cmd_help (int argc, char **argv)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  const Command *cmd;

  if (argc < 2)
    {
      usage (stdout);
      return 0;
    }
  if (!(cmd = command_named (argv[1])))
    {
      g_printerr ("vdpactl: no command '%.*s' to help with; see 'vdpactl --help'\n", VA_CUT (argv[1], 64));
      return VA_CTL_EXIT_USAGE;
    }
  if (argc > 3)
    return va_ctl_usage ("help takes a command and at most one subcommand");
  for (int i = 1; i < argc; i++)
    g_ptr_array_add (args, argv[i]);
  g_ptr_array_add (args, (char *) "--help");
  g_ptr_array_add (args, NULL);
  return run (cmd, (int) args->len - 1, (char **) args->pdata);
}

/* Takes the global options out of @argv: -j anywhere before a "--", and
 * --connect URI anywhere for domain (its subcommands parse their own). */
static int
take_globals (int *argc, char **argv)
{
  int out = 1;

  for (int i = 1; i < *argc; i++)
    {
      if (strcmp (argv[i], "--") == 0)
        {
          while (i < *argc)
            argv[out++] = argv[i++];
          break;
        }
      if (strcmp (argv[i], "-j") == 0 || strcmp (argv[i], "--json") == 0)
        global_json = TRUE;
      else if (strcmp (argv[i], "--connect") == 0 || g_str_has_prefix (argv[i], "--connect="))
        {
          const char *uri = argv[i][9] == '=' ? argv[i] + 10 : (i + 1 < *argc ? argv[++i] : NULL);

          if (!uri || !*uri)
            return va_ctl_usage ("--connect needs a libvirt URI");
          if (global_connect)
            return va_ctl_usage ("--connect given twice");
          global_connect = g_strdup (uri);
        }
      else
        argv[out++] = argv[i];
    }
  *argc = out;
  argv[out] = NULL;
  return 0;
}

int
va_ctl_main (int argc, char **argv)
{
  const Command *cmd;
  int rc;

  if ((rc = take_globals (&argc, argv)))
    return rc;
  if (argc < 2)
    return va_ctl_usage ("no command given; see 'vdpactl --help'");
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 || (strcmp (argv[1], "help") == 0 && argc == 2))
    {
      usage (stdout);
      return 0;
    }
  if (strcmp (argv[1], "help") == 0)
    return cmd_help (argc - 1, argv + 1);
  if (strcmp (argv[1], "--version") == 0)
    return cmd_version (1, argv);
  if ((cmd = command_named (argv[1])))
    return run (cmd, argc - 1, argv + 1);
  g_printerr ("vdpactl: unknown command '%.*s'; see 'vdpactl --help'\n", VA_CUT (argv[1], 64));
  return VA_CTL_EXIT_USAGE;
}
