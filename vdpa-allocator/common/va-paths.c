/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-paths"

#include "config.h"

#include "va-paths.h"

#include <string.h>

static const char *
env_or (const char *var, const char *fallback)
{
  const char *v = g_getenv (var);
  return (v && *v) ? v : fallback;
}

static const char *
testbed_path (const char *sub)
{
  const char *testbed = g_getenv ("UMOCKDEV_DIR");
  g_autofree char *path = g_build_filename ((testbed && *testbed) ? testbed : "/", sub, NULL);

  return g_intern_string (path);
}

/* systemd's StateDirectory= and RuntimeDirectory= give the daemon its
 * directories as $STATE_DIRECTORY and $RUNTIME_DIRECTORY, colon-separated
 * when the unit names several: ours is the first. */
static const char *
systemd_dir (const char *var)
{
  const char *v = g_getenv (var);
  g_autofree char *first = NULL;

  if (!v || !*v)
    return NULL;
  first = g_strndup (v, strcspn (v, ":"));
  return g_intern_string (first);
}

const char *
va_path_get (VaPath which)
{
  switch (which)
    {
      case VA_PATH_CONFIG:
        return env_or ("VDPA_ALLOCATOR_CONFIG_DIR", VA_SYSCONFDIR "/vdpa-allocator");
      case VA_PATH_STATE:
        return env_or ("VDPA_ALLOCATOR_STATE_DIR", VA_LOCALSTATEDIR "/lib/vdpa-allocator");
      case VA_PATH_RUN:
        return env_or ("VDPA_ALLOCATOR_RUN_DIR", "/run/vdpa-allocator");
      case VA_PATH_SYSFS:
        return testbed_path ("sys");
      case VA_PATH_DEV:
        return testbed_path ("dev");
      case VA_PATH_HOOKS:
        return env_or ("VDPA_ALLOCATOR_HOOKS_DIR", VA_SYSCONFDIR "/libvirt/hooks");
      case VA_PATH_MODULES:
        return testbed_path ("lib/modules");
      case VA_PATH_BOOT:
        return testbed_path ("boot");
    }
  g_return_val_if_reached (NULL);
}

const char *
va_path_get_for_unit (VaPath which)
{
  const char *var = which == VA_PATH_STATE ? "VDPA_ALLOCATOR_STATE_DIR" : which == VA_PATH_RUN ? "VDPA_ALLOCATOR_RUN_DIR" : NULL;
  const char *unit = which == VA_PATH_STATE ? "STATE_DIRECTORY" : which == VA_PATH_RUN ? "RUNTIME_DIRECTORY" : NULL;
  const char *dir;

  if (var && !(g_getenv (var) && *g_getenv (var)) && (dir = systemd_dir (unit)))
    return dir;
  return va_path_get (which);
}

char *
va_path_ports (const char *run_dir)
{
  g_return_val_if_fail (run_dir != NULL, NULL);

  return g_build_filename (run_dir, "ports", NULL);
}

char *
va_path_libexec (const char *name)
{
  g_autofree char *self = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *beside = NULL;

  g_return_val_if_fail (name != NULL, NULL);

  self = g_file_read_link ("/proc/self/exe", NULL);
  dir = self ? g_path_get_dirname (self) : NULL;
  beside = dir ? g_build_filename (dir, name, NULL) : NULL;
  /* beside our own binary first: the build tree works like an install */
  if (beside && g_file_test (beside, G_FILE_TEST_IS_EXECUTABLE))
    return g_steal_pointer (&beside);
  return g_build_filename (VA_LIBEXECDIR, name, NULL);
}
