/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vdpa-allocator-hook-helper"

#include "va-hook.h"

int
main (int argc, char **argv)
{
  return va_hook_main (argc, argv);
}
