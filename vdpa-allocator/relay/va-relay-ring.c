/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-relay-ring"

#include "va-relay-ring.h"

#include <endian.h>
#include <string.h>

#include "va-error.h"

/* one read of a field the guest may change under us */
#define READ_ONCE(x) (*(const volatile __typeof__ (x) *) &(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__ (x) *) &(x) = (v))

gboolean
va_vring_setup (VaVring *vr, VaRelayMem *mem, guint index, guint num, guint64 desc_iova, guint64 avail_iova, guint64 used_iova,
                guint16 last_avail, GError **error)
{
  g_return_val_if_fail (vr != NULL && mem != NULL, FALSE);

  memset (vr, 0, sizeof *vr);
  vr->index = index;
  vr->stopped = TRUE;
  if (num == 0 || num > VA_VRING_MAX_SIZE || (num & (num - 1)) != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "queue %u: size %u is not a power of two up to %d", index, num,
                   VA_VRING_MAX_SIZE);
      return FALSE;
    }
  if ((desc_iova & 15) != 0 || (avail_iova & 1) != 0 || (used_iova & 3) != 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "queue %u: ring areas misaligned", index);
      return FALSE;
    }
  vr->mem = mem;
  vr->num = num;
  vr->desc_iova = desc_iova;
  vr->avail_iova = avail_iova;
  vr->used_iova = used_iova;
  vr->last_avail = last_avail;
  /* the used index starts where the avail one does: nothing in flight */
  vr->used_idx = last_avail;
  vr->generation = G_MAXUINT64; /* look the areas up at first use */
  vr->stopped = FALSE;
  return TRUE;
}

void
va_vring_reset (VaVring *vr)
{
  g_return_if_fail (vr != NULL);
  guint index = vr->index;
  memset (vr, 0, sizeof *vr);
  vr->index = index;
  vr->stopped = TRUE;
}

gboolean
va_vring_is_running (const VaVring *vr)
{
  return vr->num != 0 && !vr->stopped;
}

static VaVringResult broken (VaVring *vr, GError **error, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

static VaVringResult
broken (VaVring *vr, GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  g_autofree char *what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  vr->stopped = TRUE;
  g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "queue %u stopped: %s", vr->index, what);
  return VA_VRING_BROKEN;
}

/* the three areas as host pointers, again after any region went away */
static gboolean
map_areas (VaVring *vr, GError **error)
{
  if (vr->generation == vr->mem->generation && vr->desc != NULL)
    return TRUE;
  /* 2.7: descriptor table 16 * num, available ring 6 + 2 * num, used ring
   * 6 + 8 * num (the event fields included: the driver allocates them even
   * without VIRTIO_F_EVENT_IDX, which the relay does not offer) */
  guint64 n = vr->num;
  vr->desc = va_relay_mem_ptr (vr->mem, vr->desc_iova, 16 * n, FALSE);
  vr->avail = va_relay_mem_ptr (vr->mem, vr->avail_iova, 4 + 2 * n, FALSE);
  vr->used = va_relay_mem_ptr (vr->mem, vr->used_iova, 4 + 8 * n, TRUE);
  /* a miss may have mapped a region; the pointers are of this generation */
  vr->generation = vr->mem->generation;
  if (vr->desc == NULL || vr->avail == NULL || vr->used == NULL)
    {
      const char *which = vr->desc == NULL ? "descriptor table" : vr->avail == NULL ? "driver area" : "device area";
      vr->desc = NULL;
      broken (vr, error, "its %s is not mapped with the access it needs", which);
      return FALSE;
    }
  return TRUE;
}

gboolean
va_vring_resume (VaVring *vr, GError **error)
{
  g_return_val_if_fail (vr != NULL, FALSE);

  if (!va_vring_is_running (vr) || !map_areas (vr, error))
    return FALSE;
  /* the guest may have written it: a wrong value only makes the next pop
   * find the avail index too far ahead, which stops the queue */
  vr->used_idx = le16toh (READ_ONCE (vr->used->idx));
  vr->last_avail = vr->used_idx;
  return TRUE;
}

VaVringResult
va_vring_pop (VaVring *vr, VaVringChain *chain, GError **error)
{
  g_return_val_if_fail (vr != NULL && chain != NULL, VA_VRING_STOPPED);

  if (!va_vring_is_running (vr))
    return VA_VRING_STOPPED;
  if (!map_areas (vr, error))
    return VA_VRING_BROKEN;

  guint16 avail_idx = le16toh (READ_ONCE (vr->avail->idx));
  guint16 pending = (guint16) (avail_idx - vr->last_avail);
  if (pending == 0)
    return VA_VRING_EMPTY;
  if (pending > vr->num)
    return broken (vr, error, "avail index %u is %u entries ahead of %u, beyond the queue size %u", avail_idx, pending, vr->last_avail,
                   vr->num);
  /* read the entry only after the index that published it (2.7.13.3) */
  __atomic_thread_fence (__ATOMIC_ACQUIRE);

  guint mask = vr->num - 1;
  guint16 head = le16toh (READ_ONCE (vr->avail->ring[vr->last_avail & mask]));
  if (head >= vr->num)
    return broken (vr, error, "head descriptor %u is beyond the queue size %u", head, vr->num);

  memset (chain, 0, offsetof (VaVringChain, iov));
  chain->head = head;
  guint i = head;
  gboolean seen_writable = FALSE;
  for (guint count = 1;; count++)
    {
      /* a chain longer than the queue revisits a descriptor: a loop */
      if (count > vr->num)
        return broken (vr, error, "chain from descriptor %u is longer than the queue size %u (a loop)", head, vr->num);
      /* one copy: the guest may change the table while we look */
      struct vring_desc d;
      memcpy (&d, (const void *) &vr->desc[i], sizeof d);
      __atomic_signal_fence (__ATOMIC_SEQ_CST);
      guint16 flags = le16toh (d.flags);
      guint64 addr = le64toh (d.addr);
      guint32 len = le32toh (d.len);

      if (flags & VRING_DESC_F_INDIRECT)
        return broken (vr, error, "descriptor %u is indirect, which was not offered", i);
      gboolean writable = (flags & VRING_DESC_F_WRITE) != 0;
      if (!writable && seen_writable)
        return broken (vr, error, "descriptor %u is device-readable after a device-writable one", i);
      seen_writable |= writable;

      g_autoptr (GError) local = NULL;
      guint n = chain->n_out + chain->n_in;
      if (!va_relay_mem_translate (vr->mem, addr, len, writable, chain->iov, VA_VRING_MAX_IOV, &n, &local))
        return broken (vr, error, "descriptor %u: %s", i, local->message);
      if (writable)
        {
          chain->n_in = n - chain->n_out;
          chain->in_len += len;
        }
      else
        {
          chain->n_out = n;
          chain->out_len += len;
        }
      if (!(flags & VRING_DESC_F_NEXT))
        break;
      guint16 next = le16toh (d.next);
      if (next >= vr->num)
        return broken (vr, error, "descriptor %u's next %u is beyond the queue size %u", i, next, vr->num);
      i = next;
    }
  /* a translation may have mapped a region; nothing was dropped (only
   * va_relay_mem_invalidate drops, never a miss) */
  vr->last_avail++;
  return VA_VRING_CHAIN;
}

void
va_vring_unpop (VaVring *vr)
{
  g_return_if_fail (vr != NULL);
  vr->last_avail--;
}

void
va_vring_push (VaVring *vr, const VaVringChain *chain, guint32 written)
{
  g_return_if_fail (vr != NULL && chain != NULL);
  if (!va_vring_is_running (vr) || !map_areas (vr, NULL))
    return;

  struct vring_used_elem *e = &vr->used->ring[vr->used_idx & (vr->num - 1)];
  WRITE_ONCE (e->id, htole32 (chain->head));
  WRITE_ONCE (e->len, htole32 (written));
  /* the entry before the index that publishes it (2.7.14) */
  __atomic_thread_fence (__ATOMIC_RELEASE);
  vr->used_idx++;
  WRITE_ONCE (vr->used->idx, htole16 (vr->used_idx));
}

gboolean
va_vring_wants_irq (VaVring *vr)
{
  g_return_val_if_fail (vr != NULL, FALSE);
  if (vr->avail == NULL)
    return FALSE;
  /* the used index before the flag (2.7.7.2) */
  __atomic_thread_fence (__ATOMIC_SEQ_CST);
  return !(le16toh (READ_ONCE (vr->avail->flags)) & VRING_AVAIL_F_NO_INTERRUPT);
}

/* the areas of the current generation, if they were looked up: no lookup
 * here, so no error to report */
static gboolean
areas_current (const VaVring *vr)
{
  return va_vring_is_running (vr) && vr->desc != NULL && vr->generation == vr->mem->generation;
}

gboolean
va_vring_has_avail (VaVring *vr)
{
  g_return_val_if_fail (vr != NULL, FALSE);
  if (!areas_current (vr))
    return va_vring_is_running (vr); /* let the next pop look */
  return le16toh (READ_ONCE (vr->avail->idx)) != vr->last_avail;
}

void
va_vring_set_notify (VaVring *vr, gboolean enable)
{
  g_return_if_fail (vr != NULL);
  if (!areas_current (vr))
    return;
  WRITE_ONCE (vr->used->flags, htole16 (enable ? 0 : VRING_USED_F_NO_NOTIFY));
  /* the flag before the caller reads the avail index again (2.7.10) */
  __atomic_thread_fence (__ATOMIC_SEQ_CST);
}
