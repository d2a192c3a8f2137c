/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-sysfs"

#include "va-sysfs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "va-error.h"
#include "va-paths.h"

char *
va_sysfs_path (const char *path)
{
  const char *root;

  g_return_val_if_fail (path != NULL, NULL);

  root = va_path_get (VA_PATH_SYSFS);
  if (g_str_has_prefix (path, "/sys/"))
    path += strlen ("/sys/");
  else if (g_str_has_prefix (path, root) && path[strlen (root)] == '/')
    return g_strdup (path); /* already under the testbed */
  return g_build_filename (root, path, NULL);
}

char *
va_sysfs_read (const char *path, GError **error)
{
  g_autofree char *real = NULL;
  char buf[4096];
  ssize_t n;
  int fd;

  g_return_val_if_fail (path != NULL, NULL);

  real = va_sysfs_path (path);
  /* sysfs attributes are at most a page */
  fd = open (real, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "reading %s: %s", path, g_strerror (errno));
      return NULL;
    }
  do
    n = read (fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int e = errno;
      close (fd);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "reading %s: %s", path, g_strerror (e));
      return NULL;
    }
  close (fd);
  buf[n] = '\0';
  return g_strchomp (g_strdup (buf));
}

gboolean
va_sysfs_read_int (const char *path, gint64 *out, GError **error)
{
  g_autofree char *text = NULL;

  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (out != NULL, FALSE);

  text = va_sysfs_read (path, error);
  if (!text)
    return FALSE;
  if (!g_ascii_string_to_signed (text, 10, G_MININT32, G_MAXINT32, out, NULL))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "reading %s: '%.*s' is not a number", path, VA_CUT (text, 32));
      return FALSE;
    }
  return TRUE;
}

gboolean
va_sysfs_write (const char *path, const char *value, GError **error)
{
  g_autofree char *real = NULL;
  size_t len;
  ssize_t n;
  int fd;

  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (value != NULL, FALSE);

  real = va_sysfs_path (path);
  len = strlen (value);
  /* one write(2) of the whole value: sysfs takes a store per write */
  fd = open (real, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "writing '%s' to %s: %s", value, path, g_strerror (errno));
      return FALSE;
    }
  do
    n = write (fd, value, len);
  while (n < 0 && errno == EINTR);
  if (n < 0 || (size_t) n != len)
    {
      int e = n < 0 ? errno : EIO;
      close (fd);
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "writing '%s' to %s: %s", value, path, g_strerror (e));
      return FALSE;
    }
  if (close (fd) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_PROVISIONING_FAILED, "writing '%s' to %s: %s", value, path, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}
