/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vdpactl metrics: the daemon's metrics file as node_exporter's textfile
 * collector reads it, so that a script or an operator sees the same. */
#define G_LOG_DOMAIN "va-ctl"

#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "va-ctl-private.h"
#include "va-error.h"
#include "va-paths.h"

int
va_ctl_cmd_metrics (int argc, char **argv)
{
  g_autofree char *path = g_build_filename (va_path_get (VA_PATH_RUN), "metrics.prom", NULL);
  g_autofree char *text = NULL;
  g_autoptr (GError) error = NULL;
  gsize len;
  int rc;

  if ((rc = va_ctl_parse (&argc, &argv, "- print the daemon's metrics",
                          "Prints the daemon's metrics file (Prometheus text format), the one node_exporter's textfile collector reads.",
                          NULL, NULL, 0, 0)))
    return rc;
  if (!g_file_get_contents (path, &text, &len, &error))
    {
      g_autoptr (GError) ours = NULL;

      /* no file: no daemon (it removes the file when it stops), exit 3 */
      if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        ours = g_error_new (VA_ERROR, VA_ERROR_UNREACHABLE, "no metrics in %s: is vdpa-allocatord running?", path);
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
