/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The relay's ring walker on synthetic split rings in memory (no VDUSE):
 * good chains, and each way a hostile driver can break a ring, which must
 * stop that queue with one error and touch nothing outside the map. */
#include <errno.h>
#include <glib.h>
#include <linux/virtio_net.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "va-error.h"
#include "va-relay-mem.h"
#include "va-relay-net.h"
#include "va-relay-ring.h"

#define NUM 8
#define BASE 0x10000ULL /* IOVA of the guest memory */
#define SIZE 0x4000     /* 16 KiB */
#define DESC BASE       /* 16 * NUM */
#define AVAIL (BASE + 0x100)
#define USED (BASE + 0x200)
#define BUF (BASE + 0x1000) /* buffers from here */

typedef struct
{
  guint8 *guest; /* SIZE bytes, IOVA BASE */
  VaRelayMem mem;
  VaVring vr;
  guint16 avail_idx;
} Fixture;

static struct vring_desc *
desc (Fixture *f, guint i)
{
  return (struct vring_desc *) (f->guest + (DESC - BASE)) + i;
}

static struct vring_avail *
avail (Fixture *f)
{
  return (struct vring_avail *) (f->guest + (AVAIL - BASE));
}

static struct vring_used *
used (Fixture *f)
{
  return (struct vring_used *) (f->guest + (USED - BASE));
}

static guint8 *
at (Fixture *f, guint64 iova)
{
  return f->guest + (iova - BASE);
}

static void
set_desc (Fixture *f, guint i, guint64 addr, guint32 len, guint16 flags, guint16 next)
{
  *desc (f, i) = (struct vring_desc){ .addr = addr, .len = len, .flags = flags, .next = next };
}

/* the driver offers head */
static void
offer (Fixture *f, guint16 head)
{
  avail (f)->ring[f->avail_idx % NUM] = head;
  avail (f)->idx = ++f->avail_idx;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->guest = g_malloc0 (SIZE);
  va_relay_mem_init (&f->mem, NULL, NULL, NULL);
  g_assert_true (va_relay_mem_add (&f->mem, BASE, BASE + SIZE - 1, f->guest, TRUE, TRUE, NULL, 0, &error));
  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, NUM, DESC, AVAIL, USED, 0, &error));
  f->avail_idx = 0;
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_free (f->guest);
}

/* pops and expects the ring to break with a message containing `what`;
 * then the queue is stopped: no second error, the used index untouched */
static void
assert_breaks_at (Fixture *f, const char *what, guint16 used_idx)
{
  g_autoptr (GError) error = NULL;
  VaVringChain chain;

  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_BROKEN);
  g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, what));
  g_assert_true (g_str_has_prefix (error->message, "queue 1 stopped: "));
  g_clear_error (&error);
  /* stopped: one event, then nothing, even with more offered */
  offer (f, 0);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_STOPPED);
  g_assert_no_error (error);
  g_assert_false (va_vring_is_running (&f->vr));
  /* nothing was used */
  g_assert_cmpuint (used (f)->idx, ==, used_idx);
}

static void
assert_breaks (Fixture *f, const char *what)
{
  assert_breaks_at (f, what, 0);
}

static void
test_empty (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_EMPTY);
  g_assert_no_error (error);
  g_assert_true (va_vring_is_running (&f->vr));
}

static void
test_good_chain (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  /* 3 -> 5 -> 0: two readable, one writable */
  set_desc (f, 3, BUF, 100, VRING_DESC_F_NEXT, 5);
  set_desc (f, 5, BUF + 100, 50, VRING_DESC_F_NEXT, 0);
  set_desc (f, 0, BUF + 200, 300, VRING_DESC_F_WRITE, 7 /* ignored: no NEXT */);
  offer (f, 3);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  g_assert_no_error (error);
  g_assert_cmpuint (chain.head, ==, 3);
  g_assert_cmpuint (chain.n_out, ==, 2);
  g_assert_cmpuint (chain.n_in, ==, 1);
  g_assert_cmpuint (chain.out_len, ==, 150);
  g_assert_cmpuint (chain.in_len, ==, 300);
  g_assert_true (chain.iov[0].iov_base == at (f, BUF));
  g_assert_true (chain.iov[2].iov_base == at (f, BUF + 200));
  g_assert_cmpuint (chain.iov[2].iov_len, ==, 300);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_EMPTY);

  va_vring_push (&f->vr, &chain, 42);
  g_assert_cmpuint (used (f)->idx, ==, 1);
  g_assert_cmpuint (used (f)->ring[0].id, ==, 3);
  g_assert_cmpuint (used (f)->ring[0].len, ==, 42);
}

/* a full queue, and the 16-bit indexes wrapping */
static void
test_full_and_wrap (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, NUM, DESC, AVAIL, USED, 65533, &error));
  f->avail_idx = 65533;
  for (guint round = 0; round < 3; round++)
    {
      for (guint i = 0; i < NUM; i++)
        {
          set_desc (f, i, BUF + 64 * i, 64, 0, 0);
          offer (f, (guint16) i);
        }
      for (guint i = 0; i < NUM; i++)
        {
          g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
          g_assert_cmpuint (chain.head, ==, i);
          va_vring_push (&f->vr, &chain, 0);
        }
      g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_EMPTY);
      g_assert_no_error (error);
    }
  g_assert_cmpuint (used (f)->idx, ==, (guint16) (65533 + 3 * NUM));
}

static void
test_zero_length (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  /* a zero-length descriptor anywhere (even at an unmapped address) adds
   * nothing */
  set_desc (f, 0, 0xdead0000, 0, VRING_DESC_F_NEXT, 1);
  set_desc (f, 1, BUF, 10, 0, 0);
  offer (f, 0);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  g_assert_cmpuint (chain.n_out, ==, 1);
  g_assert_cmpuint (chain.out_len, ==, 10);
}

/* a buffer across two regions becomes two pieces */
static void
test_across_regions (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *more = g_malloc0 (4096);

  g_assert_true (va_relay_mem_add (&f->mem, BASE + SIZE, BASE + SIZE + 4095, more, TRUE, FALSE, NULL, 0, &error));
  set_desc (f, 0, BASE + SIZE - 10, 30, 0, 0);
  offer (f, 0);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  g_assert_cmpuint (chain.n_out, ==, 2);
  g_assert_true (chain.iov[0].iov_base == at (f, BASE + SIZE - 10));
  g_assert_cmpuint (chain.iov[0].iov_len, ==, 10);
  g_assert_true (chain.iov[1].iov_base == more);
  g_assert_cmpuint (chain.iov[1].iov_len, ==, 20);
}

/* kicks off while the relay takes chains, back on after; what was offered
 * meanwhile is seen */
static void
test_notify (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  /* before the first pop the areas are not looked up: "look" */
  g_assert_true (va_vring_has_avail (&f->vr));
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_EMPTY);
  g_assert_false (va_vring_has_avail (&f->vr));
  va_vring_set_notify (&f->vr, FALSE);
  g_assert_cmpuint (used (f)->flags, ==, VRING_USED_F_NO_NOTIFY);
  set_desc (f, 0, BUF, 10, 0, 0);
  offer (f, 0);
  va_vring_set_notify (&f->vr, TRUE);
  g_assert_cmpuint (used (f)->flags, ==, 0);
  g_assert_true (va_vring_has_avail (&f->vr));
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  g_assert_false (va_vring_has_avail (&f->vr));
  /* a stopped queue has nothing, and its flags are left alone */
  avail (f)->idx = 100;
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_BROKEN);
  g_assert_false (va_vring_has_avail (&f->vr));
  va_vring_set_notify (&f->vr, FALSE);
  g_assert_cmpuint (used (f)->flags, ==, 0);
}

/* a relay restarted on a running device: the kernel's avail index is the
 * one the driver began with (0 here), the used ring says where the dead
 * relay stood; the chains it took and never gave back are taken again */
static void
test_resume (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < 5; i++)
    {
      set_desc (f, i, BUF + 64 * i, 64, 0, 0);
      offer (f, (guint16) i);
    }
  for (guint i = 0; i < 5; i++)
    {
      g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
      if (i < 3)
        va_vring_push (&f->vr, &chain, 0);
    }
  /* the relay dies with chains 3 and 4 taken; its successor */
  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, NUM, DESC, AVAIL, USED, 0, &error));
  g_assert_true (va_vring_resume (&f->vr, &error));
  g_assert_no_error (error);
  for (guint i = 3; i < 5; i++)
    {
      g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
      g_assert_cmpuint (chain.head, ==, i);
      va_vring_push (&f->vr, &chain, 0);
    }
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_EMPTY);
  g_assert_cmpuint (used (f)->idx, ==, 5);
  g_assert_cmpuint (used (f)->ring[4].id, ==, 4);
}

/* a used index the guest scribbled on: the queue stops at the next pop,
 * nothing is read outside the ring */
static void
test_resume_hostile_used_index (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  used (f)->idx = 40000;
  offer (f, 0);
  g_assert_true (va_vring_resume (&f->vr, &error));
  assert_breaks_at (f, "beyond the queue size", 40000);
}

static void
test_avail_index_ahead (Fixture *f, gconstpointer data)
{
  avail (f)->idx = NUM + 1;
  assert_breaks (f, "beyond the queue size");
}

static void
test_avail_index_behind (Fixture *f, gconstpointer data)
{
  /* an index moved back is, modulo 2^16, far ahead */
  avail (f)->idx = (guint16) -1;
  assert_breaks (f, "beyond the queue size");
}

static void
test_head_out_of_range (Fixture *f, gconstpointer data)
{
  offer (f, NUM);
  assert_breaks (f, "head descriptor 8 is beyond");
}

static void
test_next_out_of_range (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, BUF, 10, VRING_DESC_F_NEXT, 0xffff);
  offer (f, 0);
  assert_breaks (f, "next 65535 is beyond");
}

static void
test_loop (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, BUF, 10, VRING_DESC_F_NEXT, 1);
  set_desc (f, 1, BUF, 10, VRING_DESC_F_NEXT, 2);
  set_desc (f, 2, BUF, 10, VRING_DESC_F_NEXT, 0);
  offer (f, 0);
  assert_breaks (f, "a loop");
}

static void
test_self_loop (Fixture *f, gconstpointer data)
{
  set_desc (f, 4, BUF, 0, VRING_DESC_F_NEXT, 4);
  offer (f, 4);
  assert_breaks (f, "a loop");
}

/* a chain through every descriptor is the longest allowed */
static void
test_longest_chain (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < NUM; i++)
    set_desc (f, i, BUF + i, 1, i + 1 < NUM ? VRING_DESC_F_NEXT : 0, (guint16) (i + 1));
  offer (f, 0);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  g_assert_cmpuint (chain.n_out, ==, NUM);
}

static void
test_out_of_map (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, 0x1000, 10, 0, 0);
  offer (f, 0);
  assert_breaks (f, "not mapped");
}

static void
test_straddles_map_end (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, BASE + SIZE - 4, 8, 0, 0);
  offer (f, 0);
  assert_breaks (f, "not mapped");
}

static void
test_overflow (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, G_MAXUINT64 - 10, 100, 0, 0);
  offer (f, 0);
  assert_breaks (f, "wraps the address space");
}

static void
test_write_to_read_only (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *ro = g_malloc0 (4096);

  g_assert_true (va_relay_mem_add (&f->mem, 0x100000, 0x100fff, ro, TRUE, FALSE, NULL, 0, &error));
  set_desc (f, 0, 0x100000, 64, VRING_DESC_F_WRITE, 0);
  offer (f, 0);
  assert_breaks (f, "not writable");
}

static void
test_readable_after_writable (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, BUF, 10, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
  set_desc (f, 1, BUF, 10, 0, 0);
  offer (f, 0);
  assert_breaks (f, "device-readable after a device-writable");
}

static void
test_indirect (Fixture *f, gconstpointer data)
{
  set_desc (f, 0, BUF, 16, VRING_DESC_F_INDIRECT, 0);
  offer (f, 0);
  assert_breaks (f, "indirect");
}

static void
test_too_many_pieces (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  /* 128 descriptors, one byte each, in a queue of 128: more pieces than a
   * chain may take */
  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, 128, BUF + 0x800, AVAIL, BUF, 0, &error));
  struct vring_desc *d = (struct vring_desc *) at (f, BUF + 0x800);
  for (guint i = 0; i < 128; i++)
    d[i] = (struct vring_desc){ .addr = BUF + 0x1000 + i, .len = 1, .flags = i < 127 ? VRING_DESC_F_NEXT : 0, .next = (guint16) (i + 1) };
  avail (f)->ring[0] = 0;
  avail (f)->idx = 1;
  VaVringChain chain;
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_BROKEN);
  g_assert_nonnull (strstr (error->message, "more than 64 pieces"));
}

static void
test_rings_unmapped (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VaVringChain chain;

  /* the descriptor table runs past the map's end */
  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, NUM, BASE + SIZE - 64, AVAIL, USED, 0, &error));
  assert_breaks (f, "descriptor table is not mapped");

  /* the used ring read-only */
  g_autofree guint8 *ro = g_malloc0 (4096);
  g_assert_true (va_relay_mem_add (&f->mem, 0x100000, 0x100fff, ro, TRUE, FALSE, NULL, 0, &error));
  g_assert_true (va_vring_setup (&f->vr, &f->mem, 1, NUM, DESC, AVAIL, 0x100000, 0, &error));
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_BROKEN);
  g_assert_nonnull (strstr (error->message, "device area is not mapped"));
}

/* an IOTLB update drops the region the rings are in: the next pop looks
 * again, and finds nothing */
static void
test_invalidated (Fixture *f, gconstpointer data)
{
  VaVringChain chain;
  g_autoptr (GError) error = NULL;

  set_desc (f, 0, BUF, 10, 0, 0);
  offer (f, 0);
  g_assert_cmpint (va_vring_pop (&f->vr, &chain, &error), ==, VA_VRING_CHAIN);
  va_relay_mem_invalidate (&f->mem, BASE + 5, BASE + 5);
  g_assert_cmpuint (f->mem.n_regions, ==, 0);
  offer (f, 0);
  assert_breaks (f, "not mapped");
}

static void
test_setup_refused (void)
{
  VaRelayMem mem;
  VaVring vr;
  guint bad[] = { 0, 3, 6, 65536, 100 };

  va_relay_mem_init (&mem, NULL, NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_false (va_vring_setup (&vr, &mem, 0, bad[i], 0, 0, 0, 0, &error));
      g_assert_error (error, VA_ERROR, VA_ERROR_INVALID_ARGUMENT);
      g_assert_false (va_vring_is_running (&vr));
    }
  guint64 misaligned[][3] = { { 8, 0, 0 }, { 0, 1, 0 }, { 0, 0, 2 } };
  for (gsize i = 0; i < G_N_ELEMENTS (misaligned); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_false (va_vring_setup (&vr, &mem, 0, 8, misaligned[i][0], misaligned[i][1], misaligned[i][2], 0, &error));
      g_assert_nonnull (strstr (error->message, "misaligned"));
    }
}

static void
test_mem_bounds (void)
{
  VaRelayMem mem;
  guint8 buf[64];
  g_autoptr (GError) error = NULL;

  va_relay_mem_init (&mem, NULL, NULL, NULL);
  g_assert_true (va_relay_mem_add (&mem, 0x1000, 0x103f, buf, TRUE, TRUE, NULL, 0, &error));
  g_assert_false (va_relay_mem_add (&mem, 0x1020, 0x2000, buf, TRUE, TRUE, NULL, 0, &error));
  g_assert_nonnull (strstr (error->message, "overlaps"));
  g_clear_error (&error);
  g_assert_false (va_relay_mem_add (&mem, 0x3000, 0x2000, buf, TRUE, TRUE, NULL, 0, &error));
  g_clear_error (&error);
  /* a host range that would wrap */
  g_assert_false (va_relay_mem_add (&mem, 0, G_MAXUINT64 - 1, buf, TRUE, TRUE, NULL, 0, &error));
  g_clear_error (&error);
  for (guint i = 1; i < VA_RELAY_MAX_REGIONS; i++)
    g_assert_true (va_relay_mem_add (&mem, 0x100000ULL * i, 0x100000ULL * i, buf, TRUE, TRUE, NULL, 0, &error));
  g_assert_false (va_relay_mem_add (&mem, 0x7000000000ULL, 0x7000000000ULL, buf, TRUE, TRUE, NULL, 0, &error));
  g_assert_nonnull (strstr (error->message, "more than 64"));
  /* ptr: whole range in one region, permission, no overflow */
  g_assert_true (va_relay_mem_ptr (&mem, 0x1000, 64, TRUE) == buf);
  g_assert_null (va_relay_mem_ptr (&mem, 0x1000, 65, FALSE));
  g_assert_null (va_relay_mem_ptr (&mem, 0x1000, 0, FALSE));
  g_assert_null (va_relay_mem_ptr (&mem, G_MAXUINT64, 2, FALSE));
  va_relay_mem_clear (&mem);
  g_assert_cmpuint (mem.n_regions, ==, 0);
  g_assert_null (va_relay_mem_ptr (&mem, 0x1000, 1, FALSE));
}

/* ------------------------------------------------------------------------ */
/* virtio-net frames between the rings and a SOCK_DGRAM socket (a tap's
 * frame boundaries) */

static void
test_net_tx (Fixture *f, gconstpointer data)
{
  int sv[2];
  g_autoptr (GError) error = NULL;
  VaRelayNetStats stats = { 0 };
  gboolean irq;

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv));
  /* header and frame in separate descriptors, then in one */
  memset (at (f, BUF), 0xee, VA_RELAY_NET_HDR_LEN); /* a hostile header: never forwarded */
  memcpy (at (f, BUF + 0x100), "frame-one", 9);
  set_desc (f, 0, BUF, VA_RELAY_NET_HDR_LEN, VRING_DESC_F_NEXT, 1);
  set_desc (f, 1, BUF + 0x100, 9, 0, 0);
  offer (f, 0);
  memcpy (at (f, BUF + 0x200 + VA_RELAY_NET_HDR_LEN), "frame-two", 9);
  set_desc (f, 2, BUF + 0x200, VA_RELAY_NET_HDR_LEN + 9, 0, 0);
  offer (f, 2);
  /* a header alone: dropped, but used */
  set_desc (f, 3, BUF, VA_RELAY_NET_HDR_LEN, 0, 0);
  offer (f, 3);
  g_assert_true (va_relay_net_tx (&f->vr, sv[0], 64, &stats, &irq, &error));
  g_assert_no_error (error);
  g_assert_true (irq);
  g_assert_cmpuint (stats.frames, ==, 2);
  g_assert_cmpuint (stats.dropped, ==, 1);
  g_assert_cmpuint (used (f)->idx, ==, 3);

  char got[64];
  g_assert_cmpint (recv (sv[1], got, sizeof got, 0), ==, 9);
  g_assert_cmpmem (got, 9, "frame-one", 9);
  g_assert_cmpint (recv (sv[1], got, sizeof got, 0), ==, 9);
  g_assert_cmpmem (got, 9, "frame-two", 9);
  g_assert_cmpint (recv (sv[1], got, sizeof got, 0), ==, -1);

  /* the driver asks for no interrupt */
  avail (f)->flags = VRING_AVAIL_F_NO_INTERRUPT;
  set_desc (f, 2, BUF + 0x200, VA_RELAY_NET_HDR_LEN + 9, 0, 0);
  offer (f, 2);
  g_assert_true (va_relay_net_tx (&f->vr, sv[0], 64, &stats, &irq, &error));
  g_assert_false (irq);
  close (sv[0]);
  close (sv[1]);
}

static void
test_net_rx (Fixture *f, gconstpointer data)
{
  int sv[2];
  g_autoptr (GError) error = NULL;
  VaRelayNetStats stats = { 0 };
  gboolean irq, starved;

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv));
  /* nothing waiting: the buffer stays the driver's */
  memset (at (f, BUF), 0xaa, 0x200);
  set_desc (f, 0, BUF, 0x200, VRING_DESC_F_WRITE, 0);
  offer (f, 0);
  g_assert_true (va_relay_net_rx (&f->vr, sv[0], 64, &stats, &irq, &starved, &error));
  g_assert_false (irq);
  g_assert_false (starved);
  g_assert_cmpuint (used (f)->idx, ==, 0);

  g_assert_cmpint (send (sv[1], "hello-frame", 11, 0), ==, 11);
  g_assert_true (va_relay_net_rx (&f->vr, sv[0], 64, &stats, &irq, &starved, &error));
  g_assert_no_error (error);
  g_assert_true (irq);
  g_assert_cmpuint (used (f)->idx, ==, 1);
  g_assert_cmpuint (used (f)->ring[0].len, ==, VA_RELAY_NET_HDR_LEN + 11);
  struct virtio_net_hdr_v1 hdr;
  memcpy (&hdr, at (f, BUF), sizeof hdr);
  g_assert_cmpuint (hdr.flags, ==, 0);
  g_assert_cmpuint (hdr.gso_type, ==, VIRTIO_NET_HDR_GSO_NONE);
  g_assert_cmpuint (hdr.num_buffers, ==, 1);
  g_assert_cmpmem (at (f, BUF + VA_RELAY_NET_HDR_LEN), 11, "hello-frame", 11);

  /* a frame waiting and no buffer: starved */
  g_assert_cmpint (send (sv[1], "second", 6, 0), ==, 6);
  g_assert_true (va_relay_net_rx (&f->vr, sv[0], 64, &stats, &irq, &starved, &error));
  g_assert_true (starved);

  /* a receive buffer no larger than the header stops the queue */
  set_desc (f, 1, BUF, VA_RELAY_NET_HDR_LEN, VRING_DESC_F_WRITE, 0);
  offer (f, 1);
  g_assert_false (va_relay_net_rx (&f->vr, sv[0], 64, &stats, &irq, &starved, &error));
  g_assert_nonnull (strstr (error->message, "not larger than the virtio-net header"));
  g_assert_false (va_vring_is_running (&f->vr));
  close (sv[0]);
  close (sv[1]);
}

static void
test_net_rx_readable_buffer (Fixture *f, gconstpointer data)
{
  int sv[2];
  g_autoptr (GError) error = NULL;
  VaRelayNetStats stats = { 0 };
  gboolean irq, starved;

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv));
  set_desc (f, 0, BUF, 0x200, 0, 0);
  offer (f, 0);
  g_assert_false (va_relay_net_rx (&f->vr, sv[0], 64, &stats, &irq, &starved, &error));
  g_assert_nonnull (strstr (error->message, "device-readable"));
  close (sv[0]);
  close (sv[1]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define RING_TEST(path, fn) g_test_add ("/relay/ring/" path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  RING_TEST ("empty", test_empty);
  RING_TEST ("good-chain", test_good_chain);
  RING_TEST ("full-and-wrap", test_full_and_wrap);
  RING_TEST ("zero-length", test_zero_length);
  RING_TEST ("across-regions", test_across_regions);
  RING_TEST ("longest-chain", test_longest_chain);
  RING_TEST ("notify", test_notify);
  RING_TEST ("resume", test_resume);
  RING_TEST ("malformed/resume-used-index", test_resume_hostile_used_index);
  RING_TEST ("malformed/avail-index-ahead", test_avail_index_ahead);
  RING_TEST ("malformed/avail-index-behind", test_avail_index_behind);
  RING_TEST ("malformed/head-out-of-range", test_head_out_of_range);
  RING_TEST ("malformed/next-out-of-range", test_next_out_of_range);
  RING_TEST ("malformed/loop", test_loop);
  RING_TEST ("malformed/self-loop", test_self_loop);
  RING_TEST ("malformed/out-of-map", test_out_of_map);
  RING_TEST ("malformed/straddles-map-end", test_straddles_map_end);
  RING_TEST ("malformed/overflow", test_overflow);
  RING_TEST ("malformed/write-to-read-only", test_write_to_read_only);
  RING_TEST ("malformed/readable-after-writable", test_readable_after_writable);
  RING_TEST ("malformed/indirect", test_indirect);
  RING_TEST ("malformed/too-many-pieces", test_too_many_pieces);
  RING_TEST ("malformed/rings-unmapped", test_rings_unmapped);
  RING_TEST ("malformed/invalidated", test_invalidated);
  RING_TEST ("net/tx", test_net_tx);
  RING_TEST ("net/rx", test_net_rx);
  RING_TEST ("net/rx-readable-buffer", test_net_rx_readable_buffer);
  g_test_add_func ("/relay/ring/setup-refused", test_setup_refused);
  g_test_add_func ("/relay/mem/bounds", test_mem_bounds);
  return g_test_run ();
}
