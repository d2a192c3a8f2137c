/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define _GNU_SOURCE
#include "va-hook-dispatch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "va-hook-calls.h"
#include "va-precheck.h"

#define HELPER "vdpa-allocator-hook-helper"

/* Reads stdin to its end, keeping at most VA_XML_MAX_SIZE + 1 bytes: libvirt must
 * never write into a closed pipe, and the helper says "over the limit". */
static char *
read_all (size_t *len, int *over)
{
  size_t cap = 65536, n = 0;
  char *buf = malloc (cap);
  char sink[65536];

  *over = 0;
  while (buf)
    {
      ssize_t r;

      if (n == cap && cap < VA_XML_MAX_SIZE + 1)
        {
          size_t bigger_cap = cap * 2 > VA_XML_MAX_SIZE + 1 ? VA_XML_MAX_SIZE + 1 : cap * 2;
          char *bigger = realloc (buf, bigger_cap);

          if (!bigger)
            {
              free (buf);
              return NULL;
            }
          buf = bigger;
          cap = bigger_cap;
        }
      if (n < cap)
        r = read (STDIN_FILENO, buf + n, cap - n);
      else
        r = read (STDIN_FILENO, sink, sizeof sink);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      if (n < cap)
        n += r;
      else
        *over = 1;
    }
  *len = n;
  return buf;
}

static int
exec_helper (char **argv, const char *helper_dir, const char *xml, size_t len)
{
  char path[PATH_MAX];
  int fd = memfd_create ("domain-xml", MFD_CLOEXEC);
  size_t off = 0;

  if (fd < 0)
    goto fail;
  while (off < len)
    {
      ssize_t w = write (fd, xml + off, len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        goto fail;
      off += w;
    }
  if (lseek (fd, 0, SEEK_SET) < 0 || dup2 (fd, STDIN_FILENO) < 0)
    goto fail;
  snprintf (path, sizeof path, "%s/%s", helper_dir, HELPER);
  argv[0] = path;
  execv (path, argv);
fail:
  fprintf (stderr, "vdpa-allocator: cannot run %s/%s: %s\n", helper_dir, HELPER, strerror (errno));
  return 1;
}

/* Whether the call may have work on @xml: our namespace, and one of the
 * call's own needles where it has them. */
static int
has_work (const char *op, const char *sub, const char *xml, size_t len)
{
  const char *const *needles = va_hook_call_needles (op, sub);

  if (!va_text_may_have_intent (xml, len))
    return 0;
  if (!needles)
    return 1;
  for (; *needles; needles++)
    if (memmem (xml, len, *needles, strlen (*needles)))
      return 1;
  return 0;
}

int
va_hook_dispatch (int argc, char **argv, const char *helper_dir)
{
  VaHookCall call = argc < 4 ? VA_HOOK_CALL_NONE : va_hook_call_lookup (argv[2], argv[3]);
  /* a reconnect, started, stopped or release hook that fails would kill,
   * stop or strand a guest: those say why and exit 0 */
  int failed = va_hook_call_may_fail (call) ? 1 : 0;
  size_t len = 0;
  char *xml;
  int over, rc;

  /* libvirt writes the XML for every call: read it all, so that it never
   * writes into a closed pipe */
  xml = read_all (&len, &over);
  if (!xml)
    {
      fprintf (stderr, "vdpa-allocator: out of memory reading the domain XML\n");
      return failed;
    }
  /* an oversized document goes to the helper, which refuses it: its
   * namespace may lie past what was kept */
  if (call == VA_HOOK_CALL_NONE || (!over && len <= VA_XML_MAX_SIZE && !has_work (argv[2], argv[3], xml, len)))
    {
      free (xml);
      return 0;
    }
  rc = exec_helper (argv, helper_dir, xml, len);
  free (xml);
  return rc ? failed : 0;
}
