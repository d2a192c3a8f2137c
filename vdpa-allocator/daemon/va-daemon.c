/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpa-allocatord's edge. Loads the configuration, picks the
 * backend the configuration names, opens the store, exports the allocator on
 * the system bus (DBUS_SYSTEM_BUS_ADDRESS points it at a private one), and
 * reconciles once at start. */
#define G_LOG_DOMAIN "va-daemon"

#include "config.h"

#include "va-daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <locale.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "va-allocator.h"
#include "va-bus.h"
#include "va-daemon-dbus.h"
#include "va-error.h"
#include "va-software.h"
#include "va-daemon-events.h"
#include "va-ids.h"
#include "va-daemon-metrics.h"
#include "va-paths.h"
#include "va-daemon-promote.h"
#include "va-daemon-swapback.h"

typedef struct
{
  GMainLoop *loop;
  char *config_dir;
  VaAllocator *alloc;
  VaConfig *config; /* the allocator's: va_allocator_get_config() */
  VaMetrics *metrics;
  VaDbus *dbus;
  VaDaemonSwapBack *swap_back; /* or NULL before the bus */
  VaDaemonPromote *promote;    /* likewise */
  char *backend_chosen;        /* the [simulate] settings the backend was made from (backend_words()) */
  int lock_fd;
  int exit_code;
} Daemon;

/* The backend a configuration asks for, in words: the kernel's, or the
 * simulated NIC with its [simulate] keys. The backend is made once, at
 * start: a reload that asks another one can only say so. */
static char *
backend_words (const VaConfig *config)
{
  g_autofree char *down = NULL;

  if (!config->simulate)
    return g_strdup ("the kernel backend (no [simulate] group)");
  down = config->sim_unhealthy ? g_strjoinv (",", config->sim_unhealthy) : NULL;
  return g_strdup_printf ("the simulated NIC ([simulate] pfs=%u vfs=%u numa-nodes=%u%s%s)", config->sim_pfs, config->sim_vfs,
                          config->sim_numa_nodes, down ? " unhealthy-pfs=" : "", down ? down : "");
}

/* Everything the daemon holds, on every way out: the adapter first (it
 * holds the swap helpers, the metrics and the allocator), the allocator
 * before the configuration it reads. */
static void
daemon_clear (Daemon *d)
{
  g_clear_pointer (&d->dbus, va_dbus_free);
  g_clear_pointer (&d->promote, va_daemon_promote_free);
  g_clear_pointer (&d->swap_back, va_daemon_swap_back_free);
  g_clear_pointer (&d->metrics, va_metrics_free);
  g_clear_object (&d->alloc);
  g_clear_pointer (&d->loop, g_main_loop_unref);
  g_clear_pointer (&d->config, va_config_free);
  g_clear_pointer (&d->config_dir, g_free);
  g_clear_pointer (&d->backend_chosen, g_free);
  if (d->lock_fd >= 0)
    close (d->lock_fd);
  d->lock_fd = -1;
}

/* A VaDomainLister: the domains libvirt has, from a helper process, so that
 * libvirt's client library stays out of the daemon. */
#define LIBVIRT_TIMEOUT_S 30

static gboolean
give_up (gpointer user_data)
{
  g_cancellable_cancel (user_data);
  return G_SOURCE_REMOVE;
}

static void
communicated (GObject *source, GAsyncResult *res, gpointer user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (res);
}

/* Runs a libvirt helper @argv, on a main context of its own (so from any
 * thread), for at most LIBVIRT_TIMEOUT_S (or
 * $VDPA_ALLOCATOR_LIBVIRT_TIMEOUT): a libvirtd that does not answer counts
 * as unreachable, and the helper is killed. Its exit status in @status. */
static gboolean
run_helper (const char *const *argv, char **out, char **err, int *status, GError **error)
{
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  g_autoptr (GCancellable) cancel = g_cancellable_new ();
  const char *limit = g_getenv ("VDPA_ALLOCATOR_LIBVIRT_TIMEOUT");
  guint timeout_s = limit && atoi (limit) > 0 ? (guint) atoi (limit) : LIBVIRT_TIMEOUT_S;
  g_autoptr (GSource) timer = g_timeout_source_new_seconds (timeout_s);
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GAsyncResult) res = NULL;
  gboolean ok = FALSE;

  g_main_context_push_thread_default (ctx);
  proc = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, error);
  if (proc)
    {
      g_source_set_callback (timer, give_up, cancel, NULL);
      g_source_attach (timer, ctx);
      g_subprocess_communicate_utf8_async (proc, NULL, cancel, communicated, &res);
      while (!res)
        g_main_context_iteration (ctx, TRUE);
      g_source_destroy (timer);
      ok = g_subprocess_communicate_utf8_finish (proc, res, out, err, error);
      if (!ok)
        {
          g_subprocess_force_exit (proc);
          if (g_cancellable_is_cancelled (cancel))
            {
              g_clear_error (error);
              g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "libvirt did not answer within %u s", timeout_s);
            }
        }
      else
        *status = g_subprocess_get_if_exited (proc) ? g_subprocess_get_exit_status (proc) : -1;
    }
  g_main_context_pop_thread_default (ctx);
  return ok;
}

/* A VaDomainLister: the domains libvirt has, from a helper process, so that
 * libvirt's client library stays out of the daemon. It runs in the
 * allocator's worker thread. */
static gboolean
list_domains (GHashTable **domains, gpointer user_data, GError **error)
{
  const char *uri = user_data;
  g_autofree char *helper = va_path_libexec ("vdpa-allocator-libvirt-domains");
  const char *argv[] = { helper, uri, NULL };
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_auto (GStrv) lines = NULL;
  int status = -1;

  if (!run_helper (argv, &out, &err, &status, error))
    return FALSE;
  if (status != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_UNREACHABLE, "%s", err && *g_strstrip (err) ? err : "libvirt unreachable");
      return FALSE;
    }
  *domains = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      char uuid[VA_UUID_STRING_LEN];
      g_auto (GStrv) f = g_strsplit (lines[i], " ", 2);

      if (f[0] && f[1] && va_uuid_normalize (f[0], uuid))
        g_hash_table_insert (*domains, g_strdup (uuid), GINT_TO_POINTER (strcmp (f[1], "active") == 0));
    }
  return TRUE;
}

/* A VaNetworkSyncer: the hostdev network of a kind=sriov pool, through
 * vdpa-allocator-libvirt-network (exit 0: done; 3: done with a warning;
 * else an error), in the allocator's sync thread, bounded as run_helper is. */
static char *
sync_network (const char *pool, const char *const *vfs, gpointer user_data)
{
  const char *uri = user_data;
  g_autofree char *helper = va_path_libexec ("vdpa-allocator-libvirt-network");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autofree char *name = va_sriov_network_name (pool);
  g_autoptr (GError) error = NULL;
  int status = -1;

  g_ptr_array_add (argv, helper);
  if (uri)
    {
      g_ptr_array_add (argv, (gpointer) "--uri");
      g_ptr_array_add (argv, (gpointer) uri);
    }
  g_ptr_array_add (argv, (gpointer) pool);
  for (guint i = 0; vfs[i]; i++)
    g_ptr_array_add (argv, (gpointer) vfs[i]);
  g_ptr_array_add (argv, NULL);
  if (!run_helper ((const char *const *) argv->pdata, &out, &err, &status, &error))
    return g_strdup_printf ("network %s: %s", name, error->message);
  if (status == 0)
    return NULL;
  /* one line: the helper's first */
  if (err && *g_strstrip (err))
    {
      char *nl = strchr (err, '\n');
      if (nl)
        *nl = '\0';
      return g_strdup (err);
    }
  return g_strdup_printf ("network %s: vdpa-allocator-libvirt-network exited with status %d", name, status);
}

static gboolean
on_term (gpointer user_data)
{
  Daemon *d = user_data;

  g_message ("stopping");
  g_main_loop_quit (d->loop);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_hup (gpointer user_data)
{
  Daemon *d = user_data;
  g_autoptr (GError) error = NULL;
  VaConfig *config = va_config_load (d->config_dir, &error);
  gboolean ok;

  if (!config)
    {
      g_warning ("reload refused, keeping the running configuration: %s", error->message);
      g_clear_pointer (&config, va_config_free);
      return G_SOURCE_CONTINUE;
    }
  ok = va_allocator_reload (d->alloc, config, &error);
  /* Free the configuration the allocator does not read (the old one, or
   * the new one it refused): lookups go through the allocator's at each
   * use, and what it derives (host view, pools) holds copies. Keeping each
   * old one cost the whole configuration per reload. */
  if (va_allocator_get_config (d->alloc) == config)
    {
      va_config_free (d->config);
      d->config = config;
    }
  else
    va_config_free (config);
  if (!ok)
    {
      g_warning ("reload failed: %s", error->message);
      return G_SOURCE_CONTINUE;
    }
  config = d->config;
  if (d->swap_back)
    va_daemon_swap_back_set_timeout (d->swap_back, config->swap_back_timeout_s);
  {
    g_autofree char *asked = backend_words (config);

    /* said, not silently ignored: the pools and networks are reloaded,
     * the NIC under them is the one the daemon started with */
    if (g_strcmp0 (asked, d->backend_chosen) != 0)
      g_warning ("the configuration now asks for %s, but this daemon runs %s, chosen at start: restart vdpa-allocatord to "
                 "change it; the pools and networks are reloaded on the running one",
                 asked, d->backend_chosen);
  }
  {
    char pools[16], networks[16];
    const char *fields[] = { "VA_CONFIG_DIR", d->config_dir, "VA_POOLS", pools, "VA_NETWORKS", networks, NULL };

    g_snprintf (pools, sizeof pools, "%u", config->pools->len);
    g_snprintf (networks, sizeof networks, "%u", config->networks->len);
    va_event (G_LOG_LEVEL_MESSAGE, VA_EVENT_RELOAD, NULL, fields, "configuration reloaded from %s: %u pool(s), %u network(s)",
              d->config_dir, config->pools->len, config->networks->len);
  }
  return G_SOURCE_CONTINUE;
}

static void
on_name_lost (GDBusConnection *conn, const char *name, gpointer user_data)
{
  Daemon *d = user_data;

  g_printerr ("vdpa-allocatord: cannot own %s on the system bus (another instance, or the bus policy forbids it)\n", name);
  d->exit_code = 1;
  g_main_loop_quit (d->loop);
}

static void
on_name_acquired (GDBusConnection *conn, const char *name, gpointer user_data)
{
  g_message ("serving %s", name);
}

static void
reconciled (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Daemon *d = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (VaReconcileReport) r = va_allocator_reconcile_finish (VA_ALLOCATOR (source), res, &error);

  /* after the leases are right: the swaps back a stop or a crash cut short */
  va_daemon_swap_back_resume (d->swap_back);
  if (!r)
    {
      g_warning ("reconciliation failed: %s", error->message);
      return;
    }
  if (!r->libvirt_reachable)
    g_warning ("libvirt unreachable, so no lease was released: %s", r->libvirt_error);
  g_message ("reconciled: %u lease(s) of gone domains released, %u orphan device(s) removed, %u busy, %u device(s) re-made, "
             "%u stale port link(s) removed, %u VF(s) reset",
             r->released, r->orphans->len, r->busy->len, r->missing->len, r->stale_links->len, r->repaired->len);
}

/* One daemon per state directory: a second one, on another bus, would
 * serve the same leases and its cleanup would delete the first one's
 * devices. The lock lives as long as the process. */
static int
lock_state_dir (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, "lock", NULL);
  g_autofree char *pid = NULL;
  int fd;

  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "cannot create the state directory %s: %s", dir, g_strerror (errno));
      return -1;
    }
  fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  /* a read-only state still locks: the store then says what is wrong */
  if (fd < 0 && errno == EROFS)
    fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "%s: %s", path, g_strerror (errno));
      return -1;
    }
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      char other[32] = "";
      ssize_t n = errno == EWOULDBLOCK ? pread (fd, other, sizeof other - 1, 0) : -1;

      if (n > 0)
        other[strcspn (other, "\n")] = '\0';
      g_set_error (error, VA_ERROR, VA_ERROR_BUSY, "another vdpa-allocatord%s%s%s serves the state in %s", n > 0 ? " (pid " : "",
                   n > 0 ? other : "", n > 0 ? ")" : "", dir);
      close (fd);
      return -1;
    }
  pid = g_strdup_printf ("%d\n", (int) getpid ());
  if ((fcntl (fd, F_GETFL) & O_ACCMODE) == O_RDWR && (ftruncate (fd, 0) < 0 || pwrite (fd, pid, strlen (pid), 0) < 0))
    g_warning ("%s: recording the pid: %s", path, g_strerror (errno));
  return fd;
}

static void
print_check (const VaConfig *config, const char *dir)
{
  if (!config->dir)
    {
      /* the default directory is not there: what the daemon would do */
      g_print ("no configuration: %s does not exist; the daemon would serve no pools (see vdpa-allocator.conf(5))\n", dir);
      return;
    }
  g_print ("configuration in %s is valid: %u file(s), %u pool(s), %u network(s)%s\n", config->dir, config->files->len, config->pools->len,
           config->networks->len, config->simulate ? ", simulated NIC" : "");
  for (guint i = 0; i < config->pools->len; i++)
    {
      const VaPoolConfig *p = g_ptr_array_index (config->pools, i);
      g_print ("  pool %s: vfs=%u eswitch=%s vlan-method=%s max-vqp=%u software-slots=%u\n", p->name, p->vfs,
               va_eswitch_mode_to_string (p->eswitch), va_vlan_method_to_string (p->vlan_method), p->max_vqp, p->software_slots);
      if (p->software_slots && !config->simulate && va_software_unavailable ())
        g_print ("  pool %s: note: %s\n", p->name, va_software_unavailable ());
    }
  for (guint i = 0; i < config->networks->len; i++)
    {
      const VaNetworkConfig *n = g_ptr_array_index (config->networks, i);
      const VaPoolConfig *p = n->net.pool ? va_config_lookup_pool (config, n->net.pool) : NULL;
      /* a passed-through VF's filter, where its pool passes VFs through */
      g_autofree char *vf = p && p->kind == VA_POOL_KIND_SRIOV
                              ? g_strdup_printf (" spoofchk=%s trust=%s", n->spoofchk ? "on" : "off", n->trust ? "on" : "off")
                              : NULL;

      g_print ("  network %s: mode=%s pool=%s vlan=%u fallback=%s%s%s%s%s\n", n->net.name, va_mode_to_string (n->net.mode),
               n->net.pool ? n->net.pool : "-", n->net.vlan, n->net.bridge ? n->net.bridge : "-", n->net.bridge ? " " : "",
               n->net.bridge ? va_bridge_kind_to_string (n->net.bridge_kind) : "", vf ? vf : "",
               /* only where set: the default is off */
               n->promote ? " promote=on (software NICs move onto hardware by themselves)" : "");
    }
}

int
va_daemon_main (int argc, char **argv)
{
  g_autofree char *config_dir = NULL;
  g_autofree char *state_arg = NULL;
  g_autofree char *run_arg = NULL;
  g_autofree char *state_dir = NULL;
  g_autofree char *run_dir = NULL;
  gboolean check_config = FALSE;
  gboolean version = FALSE;
  const GOptionEntry entries[] = {
    { "config", 'c', 0, G_OPTION_ARG_FILENAME, &config_dir, "Configuration directory (default " VA_SYSCONFDIR "/vdpa-allocator)", "DIR" },
    { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &state_arg, "Durable state (default " VA_LOCALSTATEDIR "/lib/vdpa-allocator)", "DIR" },
    { "run-dir", 0, 0, G_OPTION_ARG_FILENAME, &run_arg, "Run directory for port links and the metrics (default /run/vdpa-allocator)",
      "DIR" },
    { "check-config", 0, 0, G_OPTION_ARG_NONE, &check_config, "Validate the configuration, print a summary and exit", NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- hands out vDPA devices for VM NICs");
  g_autoptr (GError) error = NULL;
  g_autoptr (VaStore) store = NULL;
  g_autoptr (VaBackend) backend = NULL;
  g_autoptr (GDBusConnection) conn = NULL;
  Daemon d = { .lock_fd = -1 };
  guint owner;

  g_return_val_if_fail (argc >= 0 && argv != NULL, 1);

  /* A large reply (ListLeases of thousands of leases, a rewritten
   * document) is a block of megabytes: keep such blocks mapped on their
   * own and unmapped when freed, rather than let glibc raise this threshold
   * after the first one and keep the next ones in the heap for good. */
  mallopt (M_MMAP_THRESHOLD, 128 * 1024);

  setlocale (LC_ALL, "");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      g_printerr ("vdpa-allocatord: %s\n", error->message);
      return 1;
    }
  if (version)
    {
      g_print ("vdpa-allocatord %s\n", VA_VERSION);
      return 0;
    }
  if (argc > 1)
    {
      g_printerr ("vdpa-allocatord: unexpected argument '%s'\n", argv[1]);
      return 1;
    }
  d.config_dir = config_dir ? g_strdup (config_dir) : g_strdup (va_path_get (VA_PATH_CONFIG));
  d.config = va_config_load (d.config_dir, &error);
  if (!d.config && !config_dir && g_error_matches (error, VA_ERROR, VA_ERROR_NOT_FOUND))
    {
      /* no configuration installed: serve no pools, and say so */
      g_message ("%s; serving no pools (see vdpa-allocator.conf(5))", error->message);
      g_clear_error (&error);
      d.config = va_config_new_empty ();
    }
  if (!d.config)
    goto fail;
  if (check_config)
    {
      print_check (d.config, d.config_dir);
      daemon_clear (&d);
      return 0;
    }
  /* absolute: port links and leases carry these paths */
  state_dir = g_canonicalize_filename (state_arg ? state_arg : va_path_get_for_unit (VA_PATH_STATE), NULL);
  run_dir = g_canonicalize_filename (run_arg ? run_arg : va_path_get_for_unit (VA_PATH_RUN), NULL);
  d.lock_fd = lock_state_dir (state_dir, &error);
  if (d.lock_fd < 0)
    goto fail;
  /* the unit's RuntimeDirectory= makes it; run by hand, the metrics were
   * not written until the first lease's port link made it */
  if (g_mkdir_with_parents (run_dir, 0755) < 0)
    {
      g_set_error (&error, VA_ERROR, VA_ERROR_FAILED, "cannot create the run directory %s: %s", run_dir, g_strerror (errno));
      goto fail;
    }

  d.backend_chosen = backend_words (d.config);
  if (d.config->simulate)
    {
      g_message ("simulating a ConnectX-6 Dx: %u PF(s) x %u VF(s) on %u NUMA node(s); no hardware is touched", d.config->sim_pfs,
                 d.config->sim_vfs, d.config->sim_numa_nodes);
      backend = va_backend_sim_new (d.config, run_dir, &error);
    }
  else
    {
      g_message ("driving the ConnectX NICs of this host (kernel backend)");
      backend = va_backend_kernel_new (d.config, run_dir, &error);
    }
  if (!backend)
    goto fail;

  store = va_store_open (state_dir, &error);
  if (!store)
    goto fail;
  d.alloc = va_allocator_new (d.config, backend, store, run_dir, &error);
  if (!d.alloc)
    goto fail;
  va_allocator_set_domain_lister (d.alloc, list_domains, (gpointer) g_getenv ("VDPA_ALLOCATOR_LIBVIRT_URI"));
  va_events_connect (d.alloc);
  /* after the events: a network's failure is a pool warning in the journal */
  va_allocator_set_network_syncer (d.alloc, sync_network, (gpointer) g_getenv ("VDPA_ALLOCATOR_LIBVIRT_URI"));
  d.metrics = va_metrics_new (d.alloc, run_dir);

  conn = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  if (!conn)
    goto fail;
  d.dbus = va_dbus_new (d.alloc, conn, &error);
  if (!d.dbus)
    goto fail;
  va_dbus_set_metrics (d.dbus, d.metrics);
  d.swap_back = va_daemon_swap_back_new (g_getenv ("VDPA_ALLOCATOR_LIBVIRT_URI"));
  va_daemon_swap_back_set_timeout (d.swap_back, d.config->swap_back_timeout_s);
  va_dbus_set_swap_back (d.dbus, d.swap_back);
  d.promote = va_daemon_promote_new (d.alloc, g_getenv ("VDPA_ALLOCATOR_LIBVIRT_URI"));

  d.loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_term, &d);
  g_unix_signal_add (SIGINT, on_term, &d);
  g_unix_signal_add (SIGHUP, on_hup, &d);
  owner = g_bus_own_name_on_connection (conn, VA_BUS_NAME, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, on_name_acquired, on_name_lost, &d, NULL);
  va_allocator_reconcile_async (d.alloc, reconciled, &d);

  g_main_loop_run (d.loop);

  /* still on the bus: a helper finishes its NIC with a lease of ours */
  va_daemon_swap_back_stop (d.swap_back, VA_DAEMON_SWAP_BACK_STOP_S);
  g_bus_unown_name (owner);
  if (!va_allocator_flush (d.alloc, &error))
    {
      g_warning ("committing the last leases: %s", error->message);
      g_clear_error (&error);
    }
  daemon_clear (&d);
  return d.exit_code;

fail:
  g_printerr ("vdpa-allocatord: %s\n", error->message);
  daemon_clear (&d);
  return 1;
}
