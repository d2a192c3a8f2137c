/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* The metadata namespace, and the largest domain document any part of the
 * suite reads; plain C, for the dispatcher too. */
#define VA_XML_NS "http://vdpa-allocator.org/xmlns/domain/1.0"
#define VA_XML_MAX_SIZE (16 * 1024 * 1024)

/* Whether a domain XML document may carry vdpa-allocator metadata. Plain C,
 * no GLib: the libvirt hook's dispatcher runs it at every VM start before
 * loading anything. 0 is certain; 1 means the parser must look. */
int va_text_may_have_intent (const char *xml, size_t len);
