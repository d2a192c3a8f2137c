/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
#include "va-precheck.h"

#include <string.h>

static int
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int
va_text_may_have_intent (const char *xml, size_t len)
{
  const char *p = xml;
  const char *end = xml + len;

  if (!xml || len == 0)
    return 0;
  if (memmem (xml, len, VA_XML_NS, sizeof VA_XML_NS - 1))
    return 1;

  /* The byte search only sees the namespace spelled out in ASCII. A
   * document that could spell it another way (UTF-16 or UCS-4, which have
   * NUL bytes; EBCDIC or a declared encoding; character references) may
   * still have intent, so the parser must look. libvirt writes none of
   * these, so its documents keep the fast path. */
  if (memchr (xml, '\0', len) || memmem (xml, len, "&#", 2))
    return 1;
  if (len >= 3 && memcmp (p, "\xEF\xBB\xBF", 3) == 0)
    p += 3;
  while (p < end && is_space (*p))
    p++;
  if (p < end && *p != '<')
    return 1;
  if (end - p >= 5 && memcmp (p, "<?xml", 5) == 0)
    {
      const char *decl_end = memmem (p, end - p, "?>", 2);

      if (!decl_end || memmem (p, decl_end - p, "encoding", 8))
        return 1;
    }
  return 0;
}
