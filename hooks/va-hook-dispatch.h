/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The libvirt hook's first stage, plain C without GLib: libvirt runs it at
 * every start of every VM on the host, so a domain without vdpa-allocator
 * metadata must cost no more than reading its XML. Only a call that has work
 * to do executes the helper, with the same arguments and the XML on stdin.
 * Returns the exit status, or does not return. */
int va_hook_dispatch (int argc, char **argv, const char *helper_dir);
