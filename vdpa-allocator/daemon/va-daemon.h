/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The whole of vdpa-allocatord but its main(): returns the exit status. */
int va_daemon_main (int argc, char **argv);
