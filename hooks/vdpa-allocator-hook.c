/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"

#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "va-hook-dispatch.h"

int
main (int argc, char **argv)
{
  char self[PATH_MAX];
  const char *dir = VA_LIBEXECDIR;

  /* the helper sits next to the real binary (the hook directory holds a
   * link to it); the build tree works the same way */
  if (realpath ("/proc/self/exe", self))
    dir = dirname (self);
  return va_hook_dispatch (argc, argv, dir);
}
