/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A split virtqueue (virtio 1.x, 2.7) walked by the device side, the guest
 * being hostile: no index read from guest memory is trusted, a chain is
 * bounded by the queue size (which also ends any loop), every buffer must lie
 * wholly inside the mapped regions with the right permission, a readable
 * descriptor after a writable one, an indirect descriptor (not offered) and
 * an avail index more than the queue size ahead are errors. The first error
 * stops the queue (va_vring_pop returns it once; the caller logs it once);
 * later calls say VA_VRING_STOPPED. Only the used index is written, from the
 * relay's own count. */
#pragma once

#include <glib.h>
#include <linux/virtio_ring.h>
#include <sys/uio.h>

#include "va-relay-mem.h"

/* the largest queue virtio allows for a split ring (2.7: Queue Size) */
#define VA_VRING_MAX_SIZE 32768
/* the pieces one chain may take in the relay: a descriptor may cross
 * regions, so this bounds the work a chain costs, not the descriptors */
#define VA_VRING_MAX_IOV 64

typedef enum
{
  VA_VRING_EMPTY,   /* nothing available */
  VA_VRING_CHAIN,   /* a chain was taken */
  VA_VRING_BROKEN,  /* the driver broke the ring: error set, queue stopped */
  VA_VRING_STOPPED, /* stopped earlier (or never started): nothing to do */
} VaVringResult;

typedef struct
{
  guint index; /* the virtqueue's number, for messages */
  guint num;   /* 0: not set up */
  guint64 desc_iova, avail_iova, used_iova;
  VaRelayMem *mem;
  guint64 generation; /* mem's generation the pointers below were taken at */
  struct vring_desc *desc;
  struct vring_avail *avail;
  struct vring_used *used;
  guint16 last_avail; /* the next avail entry to take */
  guint16 used_idx;   /* our count of used entries: never read back */
  gboolean stopped;
} VaVring;

typedef struct
{
  guint16 head;
  guint n_out; /* device-readable pieces: iov[0 .. n_out) */
  guint n_in;  /* device-writable pieces: iov[n_out .. n_out + n_in) */
  guint64 out_len, in_len;
  struct iovec iov[VA_VRING_MAX_IOV];
} VaVringChain;

/* checks num (a power of two, at most VA_VRING_MAX_SIZE) and the ring areas'
 * alignment (2.7: 16, 2, 4); the areas are looked up at first use */
gboolean va_vring_setup (VaVring *vr, VaRelayMem *mem, guint index, guint num, guint64 desc_iova, guint64 avail_iova, guint64 used_iova,
                         guint16 last_avail, GError **error);
void va_vring_reset (VaVring *vr);
/* a relay started on a running device (the one before it died): the
 * kernel's avail index is the one the driver began with, so take up where
 * the used ring stands; chains taken and not given back are taken again
 * (a transmit frame sent twice, a receive buffer reused) */
gboolean va_vring_resume (VaVring *vr, GError **error);
gboolean va_vring_is_running (const VaVring *vr);

VaVringResult va_vring_pop (VaVring *vr, VaVringChain *chain, GError **error);
/* gives back the chain last popped (nothing was written to it) */
void va_vring_unpop (VaVring *vr);
/* the chain is done: `written` bytes of its writable part were filled */
void va_vring_push (VaVring *vr, const VaVringChain *chain, guint32 written);
/* whether the driver has offered chains not yet taken (no error: a ring
 * that cannot be read says FALSE, and the next pop reports it) */
gboolean va_vring_has_avail (VaVring *vr);
/* 2.7.10: VRING_USED_F_NO_NOTIFY off (FALSE) while the relay takes chains
 * anyway, so the driver need not kick; back on (TRUE), then the caller must
 * look again (va_vring_has_avail), or a chain offered meanwhile waits */
void va_vring_set_notify (VaVring *vr, gboolean enable);
/* whether the driver wants an interrupt now (VRING_AVAIL_F_NO_INTERRUPT) */
gboolean va_vring_wants_irq (VaVring *vr);
