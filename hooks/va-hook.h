/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The hook helper: argv as libvirt passes it to a qemu hook, the domain XML
 * on stdin. Returns the exit status. */
int va_hook_main (int argc, char **argv);
