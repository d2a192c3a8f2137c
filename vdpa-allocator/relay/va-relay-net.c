/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-relay-net"

#include "va-relay-net.h"

#include <errno.h>
#include <linux/virtio_net.h>
#include <string.h>
#include <sys/uio.h>

#include "va-error.h"

G_STATIC_ASSERT (sizeof (struct virtio_net_hdr_v1) == VA_RELAY_NET_HDR_LEN);

/* iov without its first `skip` bytes, into out (which has room for n) */
static guint
iov_skip (const struct iovec *iov, guint n, gsize skip, struct iovec *out)
{
  guint k = 0;
  for (guint i = 0; i < n; i++)
    {
      if (skip >= iov[i].iov_len)
        {
          skip -= iov[i].iov_len;
          continue;
        }
      out[k].iov_base = (guint8 *) iov[i].iov_base + skip;
      out[k].iov_len = iov[i].iov_len - skip;
      skip = 0;
      k++;
    }
  return k;
}

/* copies len bytes of src into the front of iov (which holds them) */
static void
iov_fill (const struct iovec *iov, guint n, const void *src, gsize len)
{
  const guint8 *p = src;
  for (guint i = 0; i < n && len > 0; i++)
    {
      gsize take = MIN (len, iov[i].iov_len);
      memcpy (iov[i].iov_base, p, take);
      p += take;
      len -= take;
    }
}

gboolean
va_relay_net_tx (VaVring *tx, int fd, guint budget, VaRelayNetStats *stats, gboolean *irq, GError **error)
{
  VaVringChain chain;
  struct iovec frame[VA_VRING_MAX_IOV];
  gboolean pushed = FALSE;

  *irq = FALSE;
  for (guint done = 0; done < budget; done++)
    {
      VaVringResult r = va_vring_pop (tx, &chain, error);
      if (r == VA_VRING_BROKEN)
        return FALSE;
      if (r != VA_VRING_CHAIN)
        break;
      /* 5.1.6.2: the driver's buffers are device-readable; a header alone
       * or a frame beyond the bound is dropped, not sent */
      guint64 len = chain.out_len;
      if (len <= VA_RELAY_NET_HDR_LEN || len - VA_RELAY_NET_HDR_LEN > VA_RELAY_MAX_FRAME)
        stats->dropped++;
      else
        {
          guint n = iov_skip (chain.iov, chain.n_out, VA_RELAY_NET_HDR_LEN, frame);
          ssize_t w;
          do
            w = writev (fd, frame, (int) n);
          while (w < 0 && errno == EINTR);
          if (w < 0)
            stats->dropped++; /* EAGAIN, ENOBUFS, EIO of a tap that is down */
          else
            {
              stats->frames++;
              stats->bytes += (guint64) w;
            }
        }
      va_vring_push (tx, &chain, 0);
      pushed = TRUE;
    }
  *irq = pushed && va_vring_wants_irq (tx);
  return TRUE;
}

gboolean
va_relay_net_rx (VaVring *rx, int fd, guint budget, VaRelayNetStats *stats, gboolean *irq, gboolean *starved, GError **error)
{
  VaVringChain chain;
  struct iovec frame[VA_VRING_MAX_IOV];
  gboolean pushed = FALSE;

  *irq = FALSE;
  *starved = FALSE;
  for (guint done = 0; done < budget; done++)
    {
      VaVringResult r = va_vring_pop (rx, &chain, error);
      if (r == VA_VRING_BROKEN)
        return FALSE;
      if (r != VA_VRING_CHAIN)
        {
          *starved = (r == VA_VRING_EMPTY);
          break;
        }
      /* 5.1.6.3: receive buffers are device-writable and hold at least the
       * header; without VIRTIO_NET_F_MRG_RXBUF a frame takes one chain */
      if (chain.n_out != 0 || chain.in_len <= VA_RELAY_NET_HDR_LEN)
        {
          g_set_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT, "queue %u stopped: receive buffer %u is %s", rx->index, chain.head,
                       chain.n_out != 0 ? "device-readable" : "not larger than the virtio-net header");
          rx->stopped = TRUE;
          return FALSE;
        }
      guint n = iov_skip (chain.iov + chain.n_out, chain.n_in, VA_RELAY_NET_HDR_LEN, frame);
      ssize_t got;
      do
        got = readv (fd, frame, (int) n);
      while (got < 0 && errno == EINTR);
      if (got <= 0)
        {
          /* nothing waiting (EAGAIN), or the fd went: give the buffer back */
          va_vring_unpop (rx);
          if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            {
              g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading a frame: %s", strerror (errno));
              return FALSE;
            }
          break;
        }
      struct virtio_net_hdr_v1 hdr = { .gso_type = VIRTIO_NET_HDR_GSO_NONE, .num_buffers = htole16 (1) };
      iov_fill (chain.iov + chain.n_out, chain.n_in, &hdr, sizeof hdr);
      va_vring_push (rx, &chain, (guint32) (VA_RELAY_NET_HDR_LEN + got));
      pushed = TRUE;
      stats->frames++;
      stats->bytes += (guint64) got;
    }
  *irq = pushed && va_vring_wants_irq (rx);
  return TRUE;
}
