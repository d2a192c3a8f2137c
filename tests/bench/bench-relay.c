/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The relay's per-packet CPU (issue 28): frames of 64 and 1,500 bytes
 * taken from a synthetic transmit ring (the driver's side simulated in the
 * same loop: descriptors offered in batches of 64, header and frame in one
 * buffer each, as Linux's virtio-net sends them) and written to a tap
 * through va_relay_net_tx, next to the floor: the same frames written to
 * the same fd in a plain loop. CPU time of the process
 * (CLOCK_PROCESS_CPUTIME_ID), so the kernel's share of each write counts
 * on both sides. Prints ns per frame, the ratio (target 1.5x at most), and
 * never fails on timing.
 *
 * The tap: as root, in a network namespace of its own (unshare), up, no
 * address, so the stack takes each frame and drops it. Without root, a
 * SOCK_DGRAM socketpair drained after every batch (on both sides) stands in,
 * and the output says so. VA_BENCH_SECONDS sets each measurement's time
 * (default 1).
 *
 * The receive path too: frames read from a SOCK_DGRAM socketpair (a tap
 * cannot be fed without traffic) into a synthetic receive ring's buffers
 * (header written, used entries pushed) through va_relay_net_rx, next to
 * the floor of reading the same frames into one buffer; the sends that
 * feed both are in both. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "va-relay-net.h"
#include "va-relay-ring.h"

#define NUM 256
#define BATCH 64
#define SLOT 2048 /* bytes of guest memory per buffer */
#define BASE 0x40000000ULL

static int out_fd = -1, drain_fd = -1;
static const char *sink = "";

static double
cpu_ns (void)
{
  struct timespec t;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void
drain (void)
{
  char buf[2048];
  if (drain_fd < 0)
    return;
  while (recv (drain_fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
    ;
}

static gboolean
open_tap (void)
{
  if (geteuid () != 0 || unshare (CLONE_NEWNET) < 0)
    return FALSE;
  int fd = open ("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
  g_strlcpy (ifr.ifr_name, "bench-relay0", IFNAMSIZ);
  if (fd < 0 || ioctl (fd, TUNSETIFF, &ifr) < 0)
    return FALSE;
  int s = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0 || ioctl (s, SIOCGIFFLAGS, &ifr) < 0)
    return FALSE;
  ifr.ifr_flags |= IFF_UP;
  if (ioctl (s, SIOCSIFFLAGS, &ifr) < 0)
    return FALSE;
  close (s);
  out_fd = fd;
  sink = "a tap (up, no address, own network namespace)";
  return TRUE;
}

static void
open_socketpair (void)
{
  int sv[2];
  if (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
    g_error ("socketpair: %s", g_strerror (errno));
  int big = 4 << 20;
  setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt (sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  out_fd = sv[0];
  drain_fd = sv[1];
  sink = "a SOCK_DGRAM socketpair drained after each batch (no tap: not root)";
}

/* an Ethernet frame that no stack takes: broadcast, IPv4 with a zero header */
static void
make_frame (guint8 *f, gsize len)
{
  memset (f, 0, len);
  memset (f, 0xff, 6);
  memcpy (f + 6, "\x52\x54\x00\x12\x34\x56", 6);
  f[12] = 0x08;
}

static double
floor_ns (gsize frame_len, double seconds)
{
  guint8 frame[SLOT];
  make_frame (frame, frame_len);
  guint64 n = 0;
  double start = cpu_ns (), now;
  do
    {
      for (guint i = 0; i < BATCH; i++)
        if (write (out_fd, frame, frame_len) < 0 && errno != EAGAIN && errno != ENOBUFS)
          g_error ("write: %s", g_strerror (errno));
      drain ();
      n += BATCH;
      now = cpu_ns ();
    }
  while (now - start < seconds * 1e9);
  return (now - start) / n;
}

static double
relay_ns (gsize frame_len, double seconds, guint64 *sent)
{
  gsize size = (gsize) NUM * SLOT + 0x10000;
  guint8 *guest = g_malloc0 (size);
  VaRelayMem mem;
  VaVring vr;
  g_autoptr (GError) error = NULL;

  va_relay_mem_init (&mem, NULL, NULL, NULL);
  if (!va_relay_mem_add (&mem, BASE, BASE + size - 1, guest, TRUE, TRUE, NULL, 0, &error)
      || !va_vring_setup (&vr, &mem, 1, NUM, BASE, BASE + 0x1000, BASE + 0x2000, 0, &error))
    g_error ("%s", error->message);
  struct vring_desc *desc = (struct vring_desc *) guest;
  struct vring_avail *avail = (struct vring_avail *) (guest + 0x1000);
  for (guint i = 0; i < NUM; i++)
    {
      guint64 buf = 0x10000 + (guint64) i * SLOT;
      make_frame (guest + buf + VA_RELAY_NET_HDR_LEN, frame_len);
      desc[i] = (struct vring_desc){ .addr = BASE + buf, .len = (guint32) (VA_RELAY_NET_HDR_LEN + frame_len) };
    }

  VaRelayNetStats stats = { 0 };
  guint16 idx = 0;
  guint64 n = 0;
  double start = cpu_ns (), now;
  do
    {
      /* the driver: a batch of chains offered */
      for (guint i = 0; i < BATCH; i++, idx++)
        avail->ring[idx % NUM] = idx % NUM;
      __atomic_store_n (&avail->idx, idx, __ATOMIC_RELEASE);
      gboolean irq;
      if (!va_relay_net_tx (&vr, out_fd, BATCH, &stats, &irq, &error))
        g_error ("%s", error->message);
      drain ();
      n += BATCH;
      now = cpu_ns ();
    }
  while (now - start < seconds * 1e9);
  *sent = stats.frames;
  if (stats.frames + stats.dropped != n)
    g_error ("the relay took %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " frames", stats.frames + stats.dropped, n);
  g_free (guest);
  return (now - start) / n;
}

static int rx_feed = -1, rx_fd = -1;

static void
feed (gsize frame_len)
{
  guint8 frame[SLOT];
  make_frame (frame, frame_len);
  for (guint i = 0; i < BATCH; i++)
    if (send (rx_feed, frame, frame_len, 0) < 0)
      g_error ("send: %s", g_strerror (errno));
}

static double
rx_floor_ns (gsize frame_len, double seconds)
{
  guint8 buf[SLOT];
  guint64 n = 0;
  double start = cpu_ns (), now;
  do
    {
      feed (frame_len);
      for (guint i = 0; i < BATCH; i++)
        if (read (rx_fd, buf, sizeof buf) != (ssize_t) frame_len)
          g_error ("read: %s", g_strerror (errno));
      n += BATCH;
      now = cpu_ns ();
    }
  while (now - start < seconds * 1e9);
  return (now - start) / n;
}

static double
rx_relay_ns (gsize frame_len, double seconds)
{
  gsize size = (gsize) NUM * SLOT + 0x10000;
  guint8 *guest = g_malloc0 (size);
  VaRelayMem mem;
  VaVring vr;
  g_autoptr (GError) error = NULL;

  va_relay_mem_init (&mem, NULL, NULL, NULL);
  if (!va_relay_mem_add (&mem, BASE, BASE + size - 1, guest, TRUE, TRUE, NULL, 0, &error)
      || !va_vring_setup (&vr, &mem, 0, NUM, BASE, BASE + 0x1000, BASE + 0x2000, 0, &error))
    g_error ("%s", error->message);
  struct vring_desc *desc = (struct vring_desc *) guest;
  struct vring_avail *avail = (struct vring_avail *) (guest + 0x1000);
  /* Linux's small receive buffers: header and frame room in one */
  for (guint i = 0; i < NUM; i++)
    desc[i]
      = (struct vring_desc){ .addr = BASE + 0x10000 + (guint64) i * SLOT, .len = VA_RELAY_NET_HDR_LEN + 1518, .flags = VRING_DESC_F_WRITE };
  VaRelayNetStats stats = { 0 };
  guint16 idx = 0;
  guint64 n = 0;
  double start = cpu_ns (), now;
  do
    {
      feed (frame_len);
      for (guint i = 0; i < BATCH; i++, idx++)
        avail->ring[idx % NUM] = idx % NUM;
      __atomic_store_n (&avail->idx, idx, __ATOMIC_RELEASE);
      gboolean irq, starved;
      if (!va_relay_net_rx (&vr, rx_fd, BATCH, &stats, &irq, &starved, &error))
        g_error ("%s", error->message);
      n += BATCH;
      now = cpu_ns ();
    }
  while (now - start < seconds * 1e9);
  if (stats.frames != n)
    g_error ("the relay received %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " frames", stats.frames, n);
  g_free (guest);
  return (now - start) / n;
}

int
main (void)
{
  const char *s = g_getenv ("VA_BENCH_SECONDS");
  double seconds = s ? g_ascii_strtod (s, NULL) : 1.0;
  if (!(seconds > 0))
    seconds = 1.0;
  if (!open_tap ())
    open_socketpair ();

  printf ("relay transmit path vs the floor, into %s; CPU ns per frame, %.1f s each\n", sink, seconds);
  printf ("%-8s %12s %12s %8s\n", "frame", "floor", "relay", "ratio");
  gsize sizes[] = { 64, 1500 };
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      guint64 sent = 0;
      /* warm both, then measure both */
      floor_ns (sizes[i], seconds / 10);
      relay_ns (sizes[i], seconds / 10, &sent);
      double f = floor_ns (sizes[i], seconds);
      double r = relay_ns (sizes[i], seconds, &sent);
      printf ("%-8s %12.0f %12.0f %7.2fx%s\n", sizes[i] == 64 ? "64 B" : "1,500 B", f, r, r / f, r / f <= 1.5 ? "" : "  (target 1.5x)");
    }

  int sv[2];
  if (socketpair (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
    g_error ("socketpair: %s", g_strerror (errno));
  int big = 4 << 20;
  setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt (sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  rx_feed = sv[0];
  rx_fd = sv[1];
  printf ("\nrelay receive path vs the floor, from a SOCK_DGRAM socketpair (each batch of %d sent first, on both "
          "sides); CPU ns per frame\n",
          BATCH);
  printf ("%-8s %12s %12s %8s\n", "frame", "floor", "relay", "ratio");
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      rx_floor_ns (sizes[i], seconds / 10);
      rx_relay_ns (sizes[i], seconds / 10);
      double f = rx_floor_ns (sizes[i], seconds);
      double r = rx_relay_ns (sizes[i], seconds);
      printf ("%-8s %12.0f %12.0f %7.2fx%s\n", sizes[i] == 64 ? "64 B" : "1,500 B", f, r, r / f, r / f <= 1.5 ? "" : "  (target 1.5x)");
    }
  return 0;
}
