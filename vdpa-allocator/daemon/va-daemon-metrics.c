/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-metrics"

#include "config.h"

#include "va-daemon-metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "va-error.h"

/* seconds; a simulated allocation takes well under a millisecond, a
 * ConnectX VF with a VLAN bridge port tens of milliseconds */
static const double buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

/* by VaError code, as a label value */
static const char *const reasons[] = {
  "failed",       "invalid_argument", "invalid_xml",       "invalid_config",      "no_such_network",
  "no_such_pool", "pool_exhausted",   "permission_denied", "provisioning_failed", "not_found",
  "busy",         "unreachable",      "try_again",
};
G_STATIC_ASSERT (G_N_ELEMENTS (reasons) == VA_ERROR_LAST);

typedef struct
{
  guint64 bucket_counts[G_N_ELEMENTS (buckets)];
  guint64 count;
  double sum;
} Histogram;

struct _VaMetrics
{
  VaAllocator *alloc;
  char *path;
  gulong handlers[7];
  guint idle;     /* the next write, while one is due */
  gint64 written; /* monotonic µs of the last, 0 before it */
  guint64 allocations;
  guint64 failures[VA_ERROR_LAST];
  guint64 failures_other; /* errors of another domain */
  Histogram duration;
  Histogram steps[VA_DEVICE_STEP_LAST];
};

static void
observe (Histogram *h, double seconds)
{
  for (guint i = 0; i < G_N_ELEMENTS (buckets); i++)
    if (seconds <= buckets[i])
      h->bucket_counts[i]++;
  h->count++;
  h->sum += seconds;
}

static gboolean
write_idle (gpointer user_data)
{
  VaMetrics *self = user_data;
  g_autoptr (GError) error = NULL;

  self->idle = 0;
  self->written = g_get_monotonic_time ();
  if (!va_metrics_write (self, &error))
    g_warning ("%s", error->message);
  return G_SOURCE_REMOVE;
}

/* The file is rendered whole, at a cost that grows with the leases: at
 * most once per WRITE_EVERY_US, when the main loop is idle, whatever the
 * rate of changes; a scrape sees a change at most that late. */
#define WRITE_EVERY_US G_USEC_PER_SEC

static void
changed (VaMetrics *self)
{
  gint64 due;

  if (self->idle)
    return;
  due = self->written ? self->written + WRITE_EVERY_US - g_get_monotonic_time () : 0;
  if (due <= 0)
    self->idle = g_idle_add_full (G_PRIORITY_LOW, write_idle, self, NULL);
  else
    self->idle = g_timeout_add_full (G_PRIORITY_LOW, (guint) ((due + 999) / 1000), write_idle, self, NULL);
}

static void
on_lease (VaAllocator *alloc, gpointer lease, VaMetrics *self)
{
  changed (self);
}

static void
on_broken (VaAllocator *alloc, gpointer lease, const char *reason, VaMetrics *self)
{
  changed (self);
}

static void
on_device (VaAllocator *alloc, const char *pool, gpointer device, VaMetrics *self)
{
  const VaDeviceInfo *dev = device;

  for (guint i = 0; i < VA_DEVICE_STEP_LAST; i++)
    if (dev->step_us[i] > 0)
      observe (&self->steps[i], dev->step_us[i] / 1e6);
  changed (self);
}

static void
on_pools (VaAllocator *alloc, VaMetrics *self)
{
  changed (self);
}

static void
on_pf (VaAllocator *alloc, const char *pool, const char *pf, const char *message, VaMetrics *self)
{
  changed (self);
}

VaMetrics *
va_metrics_new (VaAllocator *alloc, const char *run_dir)
{
  VaMetrics *self;

  g_return_val_if_fail (VA_IS_ALLOCATOR (alloc), NULL);
  g_return_val_if_fail (run_dir != NULL, NULL);

  self = g_new0 (VaMetrics, 1);
  self->alloc = g_object_ref (alloc);
  self->path = g_build_filename (run_dir, "metrics.prom", NULL);
  self->handlers[0] = g_signal_connect (alloc, "lease-added", G_CALLBACK (on_lease), self);
  self->handlers[1] = g_signal_connect (alloc, "lease-removed", G_CALLBACK (on_lease), self);
  self->handlers[2] = g_signal_connect (alloc, "lease-broken", G_CALLBACK (on_broken), self);
  self->handlers[3] = g_signal_connect (alloc, "pools-changed", G_CALLBACK (on_pools), self);
  self->handlers[4] = g_signal_connect (alloc, "pf-event", G_CALLBACK (on_pf), self);
  self->handlers[5] = g_signal_connect (alloc, "device-made", G_CALLBACK (on_device), self);
  self->handlers[6] = g_signal_connect (alloc, "lease-repaired", G_CALLBACK (on_lease), self);
  changed (self);
  return self;
}

void
va_metrics_free (VaMetrics *self)
{
  if (!self)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (self->handlers); i++)
    g_clear_signal_handler (&self->handlers[i], self->alloc);
  g_clear_handle_id (&self->idle, g_source_remove);
  /* no daemon, no numbers: a stale file would say the pools are fine */
  g_unlink (self->path);
  g_object_unref (self->alloc);
  g_free (self->path);
  g_free (self);
}

const char *
va_metrics_get_path (VaMetrics *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  return self->path;
}

void
va_metrics_allocation (VaMetrics *self, double seconds, const GError *error)
{
  g_return_if_fail (self != NULL);

  if (!error)
    self->allocations++;
  else if (error->domain == VA_ERROR && error->code >= 0 && error->code < VA_ERROR_LAST)
    self->failures[error->code]++;
  else
    self->failures_other++;
  if (seconds >= 0)
    observe (&self->duration, seconds);
  changed (self);
}

/* A label value as the text format quotes it. */
static void
label (GString *out, const char *name, const char *value, gboolean first)
{
  g_string_append_printf (out, "%s%s=\"", first ? "" : ",", name);
  for (const char *p = value ? value : ""; *p; p++)
    {
      if (*p == '\\' || *p == '"')
        g_string_append_c (out, '\\');
      if (*p == '\n')
        {
          g_string_append (out, "\\n");
          continue;
        }
      g_string_append_c (out, *p);
    }
  g_string_append_c (out, '"');
}

static void
pf_labels (GString *out, const VaPfStatus *pf)
{
  label (out, "pool", pf->pool, TRUE);
  label (out, "pf", pf->name, FALSE);
  label (out, "pci", pf->pci, FALSE);
}

static void
head (GString *out, const char *name, const char *type, const char *help)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
pool_gauge (GString *out, const char *name, const char *pool, guint64 value)
{
  g_string_append_printf (out, "%s{", name);
  label (out, "pool", pool, TRUE);
  g_string_append_printf (out, "} %" G_GUINT64_FORMAT "\n", value);
}

static void
number (GString *out, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  /* "0.0025", not the round-trip "0.0025000000000000001": le labels are
   * matched as strings by queries */
  g_string_append (out, g_ascii_formatd (buf, sizeof buf, "%.9g", v));
}

/* @name's series; @step, when set, labels them. */
static void
histogram (GString *out, const char *name, const char *step, const Histogram *h)
{
  g_autoptr (GString) labels = g_string_new (NULL);

  if (step)
    {
      label (labels, "step", step, TRUE);
      g_string_append_c (labels, ',');
    }
  for (guint i = 0; i < G_N_ELEMENTS (buckets); i++)
    {
      g_string_append_printf (out, "%s_bucket{%sle=\"", name, labels->str);
      number (out, buckets[i]);
      g_string_append_printf (out, "\"} %" G_GUINT64_FORMAT "\n", h->bucket_counts[i]);
    }
  g_string_append_printf (out, "%s_bucket{%sle=\"+Inf\"} %" G_GUINT64_FORMAT "\n", name, labels->str, h->count);
  if (step)
    g_string_truncate (labels, labels->len - 1);
  g_string_append_printf (out, step ? "%s_sum{%s} " : "%s_sum%s ", name, labels->str);
  number (out, h->sum);
  g_string_append_printf (out, step ? "\n%s_count{%s} %" G_GUINT64_FORMAT "\n" : "\n%s_count%s %" G_GUINT64_FORMAT "\n", name, labels->str,
                          h->count);
}

char *
va_metrics_render (VaMetrics *self)
{
  g_autoptr (GPtrArray) pools = NULL;
  g_autoptr (GPtrArray) leases = NULL;
  g_autoptr (GPtrArray) pfs = NULL;
  g_autoptr (GHashTable) by_network = NULL;
  g_autoptr (GList) keys = NULL;
  GString *out;

  g_return_val_if_fail (self != NULL, NULL);

  out = g_string_new (NULL);
  pools = va_allocator_list_pools (self->alloc);
  leases = va_allocator_list_leases (self->alloc);
  pfs = va_allocator_list_pfs (self->alloc);

  head (out, "vdpa_allocator_info", "gauge", "The daemon's version and backend.");
  g_string_append (out, "vdpa_allocator_info{");
  label (out, "version", VA_VERSION, TRUE);
  label (out, "backend", va_allocator_get_backend_name (self->alloc), FALSE);
  g_string_append (out, "} 1\n");

#define POOLS(metric, type, help, expr)                                                                                                    \
  do                                                                                                                                       \
    {                                                                                                                                      \
      head (out, metric, type, help);                                                                                                      \
      for (guint i = 0; i < pools->len; i++)                                                                                               \
        {                                                                                                                                  \
          const VaPoolStatus *p = g_ptr_array_index (pools, i);                                                                            \
          pool_gauge (out, metric, p->name, (expr));                                                                                       \
        }                                                                                                                                  \
    }                                                                                                                                      \
  while (0)

  POOLS ("vdpa_allocator_pool_slots", "gauge", "Slots (VFs or VDUSE devices) in the pool.", p->total);
  POOLS ("vdpa_allocator_pool_slots_free", "gauge", "Slots an allocation can get now.", p->free);
  POOLS ("vdpa_allocator_pool_slots_leased", "gauge", "Slots leased to a VM NIC.", p->leased);
  POOLS ("vdpa_allocator_pool_healthy", "gauge", "1 when every PF of the pool is present, linked up and prepared.", p->healthy ? 1 : 0);
  POOLS ("vdpa_allocator_pool_draining", "gauge", "1 while the pool is drained: no new allocations.", p->draining ? 1 : 0);
#undef POOLS

  /* leases by network (network="" for inline intent), pool and form */
  by_network = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < leases->len; i++)
    {
      const VaLease *l = g_ptr_array_index (leases, i);
      char *key = g_strdup_printf ("%s%c%s%c%s", l->network ? l->network : "", '\1', l->pool, '\1', VA_LEASE_FORM (l));

      g_hash_table_insert (by_network, key, GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (by_network, key)) + 1));
    }
  head (out, "vdpa_allocator_leases", "gauge", "Leases by network (empty: inline intent), pool and form (hardware or software).");
  keys = g_list_sort (g_hash_table_get_keys (by_network), (GCompareFunc) strcmp);
  for (GList *k = keys; k; k = k->next)
    {
      g_auto (GStrv) f = g_strsplit (k->data, "\1", 3);

      g_string_append (out, "vdpa_allocator_leases{");
      label (out, "network", f[0], TRUE);
      label (out, "pool", f[1], FALSE);
      label (out, "form", f[2], FALSE);
      g_string_append_printf (out, "} %u\n", GPOINTER_TO_UINT (g_hash_table_lookup (by_network, k->data)));
    }
  g_clear_pointer (&keys, g_list_free);
  head (out, "vdpa_allocator_leases_broken", "gauge",
        "Leases that carry nothing: their slot left the host or came back without its device, or their software device's relay was "
        "given up on.");
  for (guint i = 0; i < pools->len; i++)
    {
      const VaPoolStatus *p = g_ptr_array_index (pools, i);
      pool_gauge (out, "vdpa_allocator_leases_broken", p->name, p->broken_leases);
    }

  head (out, "vdpa_allocator_pf_present", "gauge", "1 while the PF is on the host.");
  for (guint i = 0; i < pfs->len; i++)
    {
      const VaPfStatus *pf = g_ptr_array_index (pfs, i);

      g_string_append (out, "vdpa_allocator_pf_present{");
      pf_labels (out, pf);
      g_string_append_printf (out, "} %d\n", pf->present ? 1 : 0);
    }
  head (out, "vdpa_allocator_pf_healthy", "gauge", "1 while the PF is present, its link up and prepared.");
  for (guint i = 0; i < pfs->len; i++)
    {
      const VaPfStatus *pf = g_ptr_array_index (pfs, i);

      g_string_append (out, "vdpa_allocator_pf_healthy{");
      pf_labels (out, pf);
      g_string_append_printf (out, "} %d\n", pf->healthy ? 1 : 0);
    }
  /* the reason as a state set (node_exporter's node_systemd_unit_state):
   * a series for each of a fixed set of words, 1 on the current one, so
   * the series stay the same when the reason or its wording changes; the
   * words themselves are in the journal and vdpactl dev list */
  head (out, "vdpa_allocator_pf_unhealthy_reason", "gauge",
        "1 for the reason the PF takes no lease, 0 for the other reasons; all 0 while it is healthy.");
  for (guint i = 0; i < pfs->len; i++)
    {
      const VaPfStatus *pf = g_ptr_array_index (pfs, i);

      for (VaPfHealth code = VA_PF_HEALTH_OK + 1; code < VA_PF_HEALTH_LAST; code++)
        {
          g_string_append (out, "vdpa_allocator_pf_unhealthy_reason{");
          pf_labels (out, pf);
          label (out, "reason", va_pf_health_to_string (code), FALSE);
          g_string_append_printf (out, "} %d\n", !pf->healthy && pf->health_code == code ? 1 : 0);
        }
    }

  head (out, "vdpa_allocator_allocations_total", "counter", "Allocations that succeeded since the daemon started.");
  g_string_append_printf (out, "vdpa_allocator_allocations_total %" G_GUINT64_FORMAT "\n", self->allocations);
  head (out, "vdpa_allocator_allocation_failures_total", "counter", "Allocations refused or failed since the daemon started, by reason.");
  for (guint i = 0; i < G_N_ELEMENTS (reasons); i++)
    {
      g_string_append (out, "vdpa_allocator_allocation_failures_total{");
      label (out, "reason", reasons[i], TRUE);
      g_string_append_printf (out, "} %" G_GUINT64_FORMAT "\n", self->failures[i]);
    }
  g_string_append_printf (out, "vdpa_allocator_allocation_failures_total{reason=\"other\"} %" G_GUINT64_FORMAT "\n", self->failures_other);

  head (out, "vdpa_allocator_allocation_duration_seconds", "histogram", "Time from an authorized Allocate call to its answer.");
  histogram (out, "vdpa_allocator_allocation_duration_seconds", NULL, &self->duration);
  head (out, "vdpa_allocator_device_step_seconds", "histogram", "Time each step of making a vDPA device took, by step.");
  for (guint i = 0; i < VA_DEVICE_STEP_LAST; i++)
    histogram (out, "vdpa_allocator_device_step_seconds", va_device_step_to_string (i), &self->steps[i]);
  return g_string_free (out, FALSE);
}

gboolean
va_metrics_write (VaMetrics *self, GError **error)
{
  g_autofree char *text = va_metrics_render (self);
  g_autofree char *tmp = g_strconcat (self->path, ".XXXXXX", NULL);
  size_t len = strlen (text);
  int fd;

  /* a temporary name node_exporter skips (it reads *.prom only), then an
   * atomic rename: a scrape never sees half a file */
  fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "writing the metrics to %s: %s", tmp, g_strerror (errno));
      return FALSE;
    }
  /* world-readable whatever the unit's UMask: node_exporter is no root */
  if (fchmod (fd, 0644) < 0 || write (fd, text, len) != (ssize_t) len)
    {
      int saved = errno;

      close (fd);
      g_unlink (tmp);
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "writing the metrics to %s: %s", tmp, g_strerror (saved));
      return FALSE;
    }
  close (fd);
  if (g_rename (tmp, self->path) < 0)
    {
      int saved = errno;

      g_unlink (tmp);
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "replacing %s: %s", self->path, g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}
