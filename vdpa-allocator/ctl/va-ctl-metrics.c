/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl metrics: the daemon's metrics file as node_exporter's textfile
 * collector reads it, so that a script or an operator sees the same. The
 * daemon says where it is (MetricsFile): the run directory it was started
 * with, whatever ours would be. */
#define G_LOG_DOMAIN "va-ctl"

#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "va-client.h"
#include "va-ctl-private.h"
#include "va-error.h"
#include "va-paths.h"

/* The running daemon's file; a daemon older than MetricsFile keeps it in
 * the run directory vdpactl would use. */
static char *
metrics_path (GError **error)
{
  g_autoptr (GVariant) props = va_client_get_properties (va_client_get_default (), NULL, error);
  const char *file = NULL;

  if (!props)
    return NULL;
  if (!g_variant_lookup (props, "MetricsFile", "&s", &file))
    return g_build_filename (va_path_get (VA_PATH_RUN), "metrics.prom", NULL);
  if (!*file)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "the daemon keeps no metrics file");
      return NULL;
    }
  return g_strdup (file);
}

int
va_ctl_cmd_metrics (int argc, char **argv)
{
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  gsize len;
  int rc;

  if ((rc = va_ctl_parse (
         &argc, &argv, "- print the daemon's metrics",
         "Prints the running daemon's metrics file (Prometheus text format), the one node_exporter's textfile collector reads, from the "
         "run directory the daemon was started with.",
         NULL, NULL, 0, 0)))
    return rc;
  /* no daemon on the bus: status 3, as for every command that asks it */
  path = metrics_path (&error);
  if (!path)
    return va_ctl_fail (error);
  if (!g_file_get_contents (path, &text, &len, &error))
    {
      g_autoptr (GError) ours = NULL;

      /* the daemon writes it once it has started, and removes it when it stops */
      if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        ours = g_error_new (VA_ERROR, VA_ERROR_FAILED, "no metrics in %s: the daemon has not written them (its journal says why)", path);
      else
        ours = g_error_new (VA_ERROR, VA_ERROR_FAILED, "%s", error->message);
      return va_ctl_fail (ours);
    }
  if (fwrite (text, 1, len, stdout) != len || fflush (stdout) != 0)
    {
      g_autofree char *msg = g_strdup_printf ("writing the metrics: %s", g_strerror (errno));
      return va_ctl_fail_msg (msg);
    }
  return 0;
}
