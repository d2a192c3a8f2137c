/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vdpactl"

#include <locale.h>

#include "va-ctl.h"

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");
  return va_ctl_main (argc, argv);
}
