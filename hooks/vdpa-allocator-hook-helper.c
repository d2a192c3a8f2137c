/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "va-hook.h"

int
main (int argc, char **argv)
{
  return va_hook_main (argc, argv);
}
