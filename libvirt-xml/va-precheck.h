/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Whether a domain XML document may carry vdpa-allocator metadata. Plain C,
 * no GLib: the libvirt hook's dispatcher runs it at every VM start before
 * loading anything. 0 is certain; 1 means the parser must look. */
int va_text_may_have_intent (const char *xml, size_t len);
