/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The whole of vdpactl but its main(): returns the exit status. */
int va_ctl_main (int argc, char **argv);
