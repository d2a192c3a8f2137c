/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The relay's view of the device's address space: a bounded table of IOVA
 * regions, each mapped into the relay (from VDUSE_IOTLB_GET_FD in the
 * device, from plain memory in the tests and the benchmark). Every access
 * the ring walker makes goes through va_relay_mem_ptr or
 * va_relay_mem_translate, which refuse anything not wholly inside mapped
 * regions with the needed permission, and any address or length that
 * overflows. */
#pragma once

#include <glib.h>
#include <sys/uio.h>

/* a hostile driver cannot make the relay map more than this many regions:
 * a miss with the table full fails (and the queue stops) */
#define VA_RELAY_MAX_REGIONS 64

typedef struct VaRelayMem VaRelayMem;

/* called on an IOVA no region covers: add one that does (va_relay_mem_add)
 * or return FALSE */
typedef gboolean (*VaRelayMissFunc) (VaRelayMem *mem, guint64 iova, gpointer user_data);
/* called for a region that is dropped: undo its mapping */
typedef void (*VaRelayUnmapFunc) (gpointer base, gsize len, gpointer user_data);

typedef struct
{
  guint64 first; /* IOVA of the first byte */
  guint64 last;  /* IOVA of the last byte (inclusive, as VDUSE says) */
  guint8 *host;  /* where `first` is in the relay */
  gboolean readable;
  gboolean writable;
  gpointer unmap_base; /* what the unmap function gets */
  gsize unmap_len;
} VaRelayRegion;

struct VaRelayMem
{
  VaRelayRegion regions[VA_RELAY_MAX_REGIONS];
  guint n_regions;
  /* bumped whenever a region goes: a host pointer taken before is stale */
  guint64 generation;
  VaRelayMissFunc miss;
  VaRelayUnmapFunc unmap;
  gpointer user_data;
};

void va_relay_mem_init (VaRelayMem *mem, VaRelayMissFunc miss, VaRelayUnmapFunc unmap, gpointer user_data);
gboolean va_relay_mem_add (VaRelayMem *mem, guint64 first, guint64 last, gpointer host, gboolean readable, gboolean writable,
                           gpointer unmap_base, gsize unmap_len, GError **error);
/* drops every region that overlaps [first, last] */
void va_relay_mem_invalidate (VaRelayMem *mem, guint64 first, guint64 last);
void va_relay_mem_clear (VaRelayMem *mem);

/* [iova, iova + len) as one contiguous host range with the permission, or
 * NULL; len 0 is refused */
gpointer va_relay_mem_ptr (VaRelayMem *mem, guint64 iova, guint64 len, gboolean write);

/* [iova, iova + len) as at most max_iov host pieces appended at iov[*n_iov];
 * FALSE (error set) when any byte is unmapped or lacks the permission, when
 * iova + len overflows, or when it needs more pieces */
gboolean va_relay_mem_translate (VaRelayMem *mem, guint64 iova, guint64 len, gboolean write, struct iovec *iov, guint max_iov, guint *n_iov,
                                 GError **error);
