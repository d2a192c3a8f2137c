/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target: the relay's split-ring walker and transmit path on a
 * guest memory image the input writes (a hostile driver's rings). The
 * input's first 8 bytes choose the queue (size 2^(1..8)), the ring areas'
 * offsets and the starting index; the rest fills two regions: 16 KiB
 * read-write and 4 KiB read-only, with an unmapped gap between them.
 * Invariants: the walker never takes more chains than were offered and a
 * chain is never longer than the queue, every piece it hands out lies wholly
 * inside a region with the access its direction needs, the lengths add up,
 * and once the ring is broken it stays stopped. ASan catches any access
 * outside the image. */
#include <fcntl.h>
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "va-relay-mem.h"
#include "va-relay-net.h"
#include "va-relay-ring.h"

#define RW_IOVA 0x100000ULL
#define RW_SIZE 0x4000
#define RO_IOVA (RW_IOVA + RW_SIZE + 0x1000)
#define RO_SIZE 0x1000

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
invariant (gboolean ok, const char *what)
{
  if (!ok)
    {
      fprintf (stderr, "INVARIANT BROKEN: %s\n", what);
      abort ();
    }
}

static gboolean
inside (guint8 *rw, guint8 *ro, const struct iovec *v, gboolean write)
{
  guint8 *p = v->iov_base;
  if (p >= rw && v->iov_len <= RW_SIZE && p - rw <= (ptrdiff_t) (RW_SIZE - v->iov_len))
    return TRUE;
  if (!write && p >= ro && v->iov_len <= RO_SIZE && p - ro <= (ptrdiff_t) (RO_SIZE - v->iov_len))
    return TRUE;
  return FALSE;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static int devnull = -1;
  if (devnull < 0)
    devnull = open ("/dev/null", O_WRONLY | O_CLOEXEC);
  if (size < 8)
    return 0;

  guint num = 1u << (1 + data[0] % 8);
  /* offsets into the read-write region, some in the read-only one or the
   * gap when the high bit says so */
  guint64 desc = RW_IOVA + (guint64) (data[1] | (data[2] & 0x3f) << 8);
  guint64 avail = RW_IOVA + (guint64) (data[3] | (data[4] & 0x3f) << 8);
  guint64 used = (data[4] & 0x80) ? RO_IOVA : RW_IOVA + (guint64) (data[5] | (data[6] & 0x3f) << 8);
  guint16 start = (guint16) (data[7] * 257);
  gboolean resume = (data[6] & 0x40) != 0;
  data += 8;
  size -= 8;

  guint8 *rw = g_malloc0 (RW_SIZE);
  guint8 *ro = g_malloc0 (RO_SIZE);
  memcpy (rw, data, MIN (size, RW_SIZE));
  if (size > RW_SIZE)
    memcpy (ro, data + RW_SIZE, MIN (size - RW_SIZE, RO_SIZE));

  VaRelayMem mem;
  VaVring vr;
  va_relay_mem_init (&mem, NULL, NULL, NULL);
  invariant (va_relay_mem_add (&mem, RW_IOVA, RW_IOVA + RW_SIZE - 1, rw, TRUE, TRUE, NULL, 0, NULL), "add rw");
  invariant (va_relay_mem_add (&mem, RO_IOVA, RO_IOVA + RO_SIZE - 1, ro, TRUE, FALSE, NULL, 0, NULL), "add ro");

  /* a relay started on a running device takes the used index the guest
   * may have written (va_vring_resume) instead of the kernel's */
  if (va_vring_setup (&vr, &mem, 0, num, desc & ~15ULL, avail & ~1ULL, used & ~3ULL, start, NULL)
      && (!resume || va_vring_resume (&vr, NULL)))
    {
      VaVringChain chain;
      guint taken = 0;
      gboolean broke = FALSE;
      for (guint round = 0; round < 2 * num + 2; round++)
        {
          GError *error = NULL;
          VaVringResult r = va_vring_pop (&vr, &chain, &error);
          if (r == VA_VRING_BROKEN)
            {
              invariant (error != NULL && !broke, "one error when the ring breaks");
              g_error_free (error);
              broke = TRUE;
              continue;
            }
          invariant (error == NULL, "no error without a break");
          if (broke)
            invariant (r == VA_VRING_STOPPED, "stopped after a break");
          if (r != VA_VRING_CHAIN)
            break;
          taken++;
          invariant (taken <= num, "no more chains than the queue holds");
          invariant (chain.head < num, "head inside the queue");
          invariant (chain.n_out + chain.n_in <= VA_VRING_MAX_IOV, "pieces bounded");
          guint64 out = 0, in = 0;
          for (guint i = 0; i < chain.n_out + chain.n_in; i++)
            {
              gboolean w = i >= chain.n_out;
              invariant (inside (rw, ro, &chain.iov[i], w), "piece inside a region with its access");
              *(w ? &in : &out) += chain.iov[i].iov_len;
            }
          invariant (out == chain.out_len && in == chain.in_len, "lengths add up");
          va_vring_push (&vr, &chain, (guint32) MIN (in, G_MAXUINT32));
          /* the driver offers again: the ring's own avail index is unchanged,
           * so a well-formed ring is drained by now */
        }
      /* the transmit path over the same ring, from where it stands */
      VaRelayNetStats stats = { 0 };
      gboolean irq;
      GError *error = NULL;
      if (!va_relay_net_tx (&vr, devnull, 64, &stats, &irq, &error))
        g_error_free (error);
    }
  g_free (rw);
  g_free (ro);
  return 0;
}
