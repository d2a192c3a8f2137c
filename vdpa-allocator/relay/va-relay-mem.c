/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-relay-mem"

#include "va-relay-mem.h"

#include <string.h>

#include "va-error.h"

void
va_relay_mem_init (VaRelayMem *mem, VaRelayMissFunc miss, VaRelayUnmapFunc unmap, gpointer user_data)
{
  g_return_if_fail (mem != NULL);
  memset (mem, 0, sizeof *mem);
  mem->miss = miss;
  mem->unmap = unmap;
  mem->user_data = user_data;
}

gboolean
va_relay_mem_add (VaRelayMem *mem, guint64 first, guint64 last, gpointer host, gboolean readable, gboolean writable, gpointer unmap_base,
                  gsize unmap_len, GError **error)
{
  g_return_val_if_fail (mem != NULL, FALSE);

  if (last < first || host == NULL)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "IOVA region 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x is empty",
                   first, last);
      return FALSE;
    }
  /* the host range must not wrap either */
  if (last - first > G_MAXSIZE - (guintptr) host)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "IOVA region of 0x%" G_GINT64_MODIFIER "x bytes does not fit",
                   last - first + 1);
      return FALSE;
    }
  for (guint i = 0; i < mem->n_regions; i++)
    if (first <= mem->regions[i].last && mem->regions[i].first <= last)
      {
        g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                     "IOVA region 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x overlaps a mapped one", first, last);
        return FALSE;
      }
  if (mem->n_regions == VA_RELAY_MAX_REGIONS)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "more than %d IOVA regions mapped", VA_RELAY_MAX_REGIONS);
      return FALSE;
    }
  mem->regions[mem->n_regions++] = (VaRelayRegion){
    .first = first,
    .last = last,
    .host = host,
    .readable = readable,
    .writable = writable,
    .unmap_base = unmap_base,
    .unmap_len = unmap_len,
  };
  return TRUE;
}

static void
drop (VaRelayMem *mem, guint i)
{
  VaRelayRegion r = mem->regions[i];

  mem->regions[i] = mem->regions[--mem->n_regions];
  mem->generation++;
  if (mem->unmap)
    mem->unmap (r.unmap_base, r.unmap_len, mem->user_data);
}

void
va_relay_mem_invalidate (VaRelayMem *mem, guint64 first, guint64 last)
{
  g_return_if_fail (mem != NULL);
  for (guint i = 0; i < mem->n_regions;)
    if (first <= mem->regions[i].last && mem->regions[i].first <= last)
      drop (mem, i);
    else
      i++;
}

void
va_relay_mem_clear (VaRelayMem *mem)
{
  g_return_if_fail (mem != NULL);
  while (mem->n_regions > 0)
    drop (mem, mem->n_regions - 1);
}

/* the region holding iova, asking the miss function once */
static const VaRelayRegion *
lookup (VaRelayMem *mem, guint64 iova)
{
  for (int pass = 0; pass < 2; pass++)
    {
      for (guint i = 0; i < mem->n_regions; i++)
        if (mem->regions[i].first <= iova && iova <= mem->regions[i].last)
          return &mem->regions[i];
      if (pass == 0 && (mem->miss == NULL || !mem->miss (mem, iova, mem->user_data)))
        return NULL;
    }
  return NULL;
}

gpointer
va_relay_mem_ptr (VaRelayMem *mem, guint64 iova, guint64 len, gboolean write)
{
  g_return_val_if_fail (mem != NULL, NULL);
  if (len == 0 || iova > G_MAXUINT64 - (len - 1))
    return NULL;

  const VaRelayRegion *r = lookup (mem, iova);
  if (r == NULL || (write ? !r->writable : !r->readable))
    return NULL;
  if (len - 1 > r->last - iova)
    return NULL;
  return r->host + (iova - r->first);
}

gboolean
va_relay_mem_translate (VaRelayMem *mem, guint64 iova, guint64 len, gboolean write, struct iovec *iov, guint max_iov, guint *n_iov,
                        GError **error)
{
  g_return_val_if_fail (mem != NULL && n_iov != NULL, FALSE);

  if (len == 0)
    return TRUE;
  if (iova > G_MAXUINT64 - (len - 1))
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT,
                   "buffer at 0x%" G_GINT64_MODIFIER "x of %" G_GUINT64_FORMAT " bytes wraps the address space", iova, len);
      return FALSE;
    }
  while (len > 0)
    {
      const VaRelayRegion *r = lookup (mem, iova);
      if (r == NULL || (write ? !r->writable : !r->readable))
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "buffer byte at 0x%" G_GINT64_MODIFIER "x is %s", iova,
                       r == NULL ? "not mapped"
                       : write   ? "not writable"
                                 : "not readable");
          return FALSE;
        }
      if (*n_iov >= max_iov)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "buffer needs more than %u pieces", max_iov);
          return FALSE;
        }
      guint64 room = r->last - iova; /* bytes after iova in this region */
      guint64 take = (len - 1 <= room) ? len : room + 1;
      iov[*n_iov].iov_base = r->host + (iova - r->first);
      iov[*n_iov].iov_len = take;
      (*n_iov)++;
      len -= take;
      iova += take; /* no wrap: checked above */
    }
  return TRUE;
}
