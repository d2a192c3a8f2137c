/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "vdpa-allocatord"

#include "va-daemon.h"

int
main (int argc, char **argv)
{
  return va_daemon_main (argc, argv);
}
