/* SPDX-License-Identifier: LGPL-2.1-or-later */
#define G_LOG_DOMAIN "va-relay-dev"

#include "va-relay-dev.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vduse.h>
#include <linux/virtio_config.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "va-error.h"
#include "va-relay-net.h"
#include "va-relay-ring.h"

#define NUM_VQS 2
/* frames per queue between two looks at the device's messages */
#define BUDGET 256

typedef struct
{
  int dev_fd;
  int tap_fd;
  VaRelayMem mem;
  VaVring vq[NUM_VQS];
  int kick_fd[NUM_VQS];
  gboolean waiting[NUM_VQS]; /* kicks taken, the queue not ready yet */
  int wait_ms;               /* between two looks at waiting queues; -1: none waits */
  gint64 next_look;          /* the next look (monotonic, µs) */
  guint8 status;
  gboolean rx_starved; /* no receive buffer: do not poll the tap */
  VaRelayNetStats tx_stats, rx_stats;
} Dev;

/* an IOVA no region covers: ask the kernel for its map entry and mmap it.
 * drivers/vdpa/vdpa_user/vduse_dev.c (6.12), VDUSE_IOTLB_GET_FD: the first
 * entry of the device's IOTLB overlapping [start, last] comes back with its
 * bounds, file offset and permission, and a new fd opened O_RDONLY,
 * O_WRONLY or O_RDWR after that permission (perm_to_file_flags); -EINVAL
 * when no entry overlaps. Under virtio_vdpa the entries are the bounce
 * buffer (one, [0, bounce_size)) and the coherent allocations (the rings);
 * under vhost_vdpa, what QEMU mapped (guest RAM: only file-backed memory
 * has a file to hand out). */
static gboolean
iotlb_miss (VaRelayMem *mem, guint64 iova, gpointer user_data)
{
  Dev *dev = user_data;
  struct vduse_iotlb_entry entry = { .start = iova, .last = iova };
  int fd = ioctl (dev->dev_fd, VDUSE_IOTLB_GET_FD, &entry);
  if (fd < 0)
    {
      g_debug ("no IOTLB entry at 0x%" G_GINT64_MODIFIER "x: %s", iova, strerror (errno));
      return FALSE;
    }
  int prot = 0;
  switch (entry.perm)
    {
      case VDUSE_ACCESS_RO:
        prot = PROT_READ;
        break;
      case VDUSE_ACCESS_WO:
        prot = PROT_WRITE; /* x86 cannot map write-only: reads are refused by the table */
        break;
      case VDUSE_ACCESS_RW:
        prot = PROT_READ | PROT_WRITE;
        break;
      default:
        close (fd);
        return FALSE;
    }
  guint64 size = entry.last - entry.start + 1;
  if (entry.last < entry.start || size == 0 || size > G_MAXSIZE || entry.offset > G_MAXINT64)
    {
      close (fd);
      return FALSE;
    }
  void *p = mmap (NULL, size, prot, MAP_SHARED, fd, (off_t) entry.offset);
  close (fd);
  if (p == MAP_FAILED)
    {
      g_warning ("mmap of IOVA 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x: %s", (guint64) entry.start, (guint64) entry.last,
                 strerror (errno));
      return FALSE;
    }
  g_autoptr (GError) error = NULL;
  if (!va_relay_mem_add (mem, entry.start, entry.last, p, entry.perm != VDUSE_ACCESS_WO, entry.perm != VDUSE_ACCESS_RO, p, size, &error))
    {
      g_warning ("%s", error->message);
      munmap (p, size);
      return FALSE;
    }
  g_debug ("mapped IOVA 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x perm %u", (guint64) entry.start, (guint64) entry.last,
           entry.perm);
  return TRUE;
}

static void
iotlb_unmap (gpointer base, gsize len, gpointer user_data)
{
  munmap (base, len);
}

static void
queue_broke (Dev *dev, guint q, const GError *error)
{
  /* the one event a broken queue gives: the ring stays stopped until the
   * driver resets the device */
  g_log_structured (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "VA_RELAY_QUEUE", "%u", q, "MESSAGE", "%s", error->message);
}

static void
kick_fd_close (Dev *dev, guint q)
{
  if (dev->kick_fd[q] < 0)
    return;
  struct vduse_vq_eventfd ev = { .index = q, .fd = VDUSE_EVENTFD_DEASSIGN };
  ioctl (dev->dev_fd, VDUSE_VQ_SETUP_KICKFD, &ev);
  close (dev->kick_fd[q]);
  dev->kick_fd[q] = -1;
}

static void
stop_queues (Dev *dev)
{
  for (guint q = 0; q < NUM_VQS; q++)
    {
      kick_fd_close (dev, q);
      dev->waiting[q] = FALSE;
      dev->wait_ms = -1;
      va_vring_reset (&dev->vq[q]);
    }
  va_relay_mem_clear (&dev->mem);
  dev->rx_starved = FALSE;
}

/* A queue the driver has made ready: its ring from VDUSE_VQ_GET_INFO
 * (addresses, size, and the split ring's avail index the kernel was given
 * with set_vq_state). Tried once per ready: a ring that fails its checks
 * stays stopped until the driver resets the device. */
static void
start_queue (Dev *dev, guint q, gboolean resuming)
{
  struct vduse_vq_info info = { .index = q };
  if (ioctl (dev->dev_fd, VDUSE_VQ_GET_INFO, &info) < 0)
    {
      g_warning ("VDUSE_VQ_GET_INFO %u: %s", q, strerror (errno));
      dev->waiting[q] = FALSE;
      return;
    }
  if (!info.ready)
    {
      if (dev->wait_ms < 0)
        g_debug ("queue %u: not ready yet", q);
      return;
    }
  dev->waiting[q] = FALSE;
  g_autoptr (GError) error = NULL;
  if (!va_vring_setup (&dev->vq[q], &dev->mem, q, info.num, info.desc_addr, info.driver_addr, info.device_addr, info.split.avail_index,
                       &error))
    {
      queue_broke (dev, q, error);
      return;
    }
  if (resuming && !va_vring_resume (&dev->vq[q], &error))
    {
      queue_broke (dev, q, error);
      return;
    }
  g_debug ("queue %u: size %u, avail index %u", q, info.num, dev->vq[q].last_avail);
}

/* The next avail entry queue @q would take: ours once it runs; before
 * (not ready yet, or DRIVER_OK not come), the one the kernel was given
 * with set_vq_state, which a save right after a restore must get back
 * (seen: 0, whatever the restore had set). */
static gboolean
vq_avail_index (Dev *dev, guint q, guint16 *avail_index)
{
  struct vduse_vq_info info = { .index = q };

  if (dev->vq[q].num != 0)
    {
      *avail_index = dev->vq[q].last_avail;
      return TRUE;
    }
  if (ioctl (dev->dev_fd, VDUSE_VQ_GET_INFO, &info) < 0)
    {
      g_warning ("VDUSE_VQ_GET_INFO %u: %s", q, strerror (errno));
      return FALSE;
    }
  *avail_index = info.split.avail_index;
  return TRUE;
}

/* DRIVER_OK: take every queue's kicks and start the queues that are ready,
 * before answering SET_STATUS, as QEMU's libvduse does
 * (subprojects/libvduse/libvduse.c, vduse_queue_enable). virtio_vdpa and
 * QEMU 7.2 make the queues ready before DRIVER_OK; QEMU 8.2 and later make
 * a net device's data queues ready after it when it has no control queue
 * (net/vhost-vdpa.c, vhost_vdpa_net_data_load), and VDUSE says nothing of
 * that (6.12, vduse_dev.c: vduse_vdpa_set_vq_ready sets a flag,
 * vduse_vq_kick drops kicks while it is clear): such a queue starts at its
 * first kick. */
static void
start_queues (Dev *dev, gboolean resuming)
{
  guint64 features = 0;
  if (ioctl (dev->dev_fd, VDUSE_DEV_GET_FEATURES, &features) < 0)
    {
      g_warning ("VDUSE_DEV_GET_FEATURES: %s", strerror (errno));
      return;
    }
  if (features & (1ULL << VIRTIO_F_RING_PACKED))
    {
      g_warning ("the driver negotiated packed rings, which the relay does not serve: queues stay stopped");
      return;
    }
  for (guint q = 0; q < NUM_VQS; q++)
    {
      if (dev->kick_fd[q] < 0)
        {
          int efd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
          struct vduse_vq_eventfd ev = { .index = q, .fd = efd };
          if (efd < 0 || ioctl (dev->dev_fd, VDUSE_VQ_SETUP_KICKFD, &ev) < 0)
            {
              g_warning ("kick eventfd of queue %u: %s", q, strerror (errno));
              if (efd >= 0)
                close (efd);
              continue;
            }
          dev->kick_fd[q] = efd;
        }
      dev->waiting[q] = TRUE;
      start_queue (dev, q, resuming);
    }
  dev->wait_ms = dev->waiting[0] || dev->waiting[1] ? 10 : -1;
  dev->next_look = g_get_monotonic_time () + 10 * G_TIME_SPAN_MILLISECOND;
}

/* Queues made ready after DRIVER_OK without a kick since: a guest restored
 * from a save (QEMU 10 on VDUSE: `vdpactl domain save`'s native path) has
 * its receive ring full of the buffers it gave before the save, and kicks
 * it no more until a frame arrives, which a queue not started never
 * delivers (the lab saw that). So they are looked at, 10 ms after
 * DRIVER_OK and then ever more seldom, up to once a second. */
static void
look_at_waiting (Dev *dev)
{
  gboolean any = FALSE;

  for (guint q = 0; q < NUM_VQS; q++)
    if (dev->waiting[q])
      {
        start_queue (dev, q, FALSE);
        any = any || dev->waiting[q];
      }
  dev->wait_ms = any ? MIN (dev->wait_ms * 2, 1000) : -1;
  dev->next_look = g_get_monotonic_time () + dev->wait_ms * G_TIME_SPAN_MILLISECOND;
}

/* poll's timeout: none while chains wait to be taken, until the next look
 * while a queue waits to be ready, else forever */
static int
poll_timeout (Dev *dev)
{
  if (va_vring_has_avail (&dev->vq[VA_RELAY_TXQ]))
    return 0;
  if (dev->wait_ms < 0)
    return -1;
  return (int) CLAMP ((dev->next_look - g_get_monotonic_time () + 999) / 1000, 0, 1000);
}

static void
inject_irq (Dev *dev, guint q)
{
  guint32 index = q;
  if (ioctl (dev->dev_fd, VDUSE_VQ_INJECT_IRQ, &index) < 0)
    g_debug ("VDUSE_VQ_INJECT_IRQ %u: %s", q, strerror (errno));
}

/* One message from the kernel, answered. FALSE: the device fd failed. */
static gboolean
serve_message (Dev *dev, GError **error)
{
  struct vduse_dev_request req;
  struct vduse_dev_response resp;
  ssize_t n = read (dev->dev_fd, &req, sizeof req);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return TRUE;
  if (n != (ssize_t) sizeof req)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "reading the device's message: %s", n < 0 ? strerror (errno) : "short read");
      return FALSE;
    }
  memset (&resp, 0, sizeof resp);
  resp.request_id = req.request_id;
  resp.result = VDUSE_REQ_RESULT_OK;
  switch (req.type)
    {
      case VDUSE_GET_VQ_STATE:
        /* vduse_dev_get_vq_state_split: only split.avail_index is read, the
         * next entry the device would take */
        if (req.vq_state.index >= NUM_VQS)
          resp.result = VDUSE_REQ_RESULT_FAILED;
        else if (!vq_avail_index (dev, req.vq_state.index, &resp.vq_state.split.avail_index))
          resp.result = VDUSE_REQ_RESULT_FAILED;
        else
          resp.vq_state.index = req.vq_state.index;
        break;
      case VDUSE_SET_STATUS:
        g_debug ("status 0x%02x", req.s.status);
        if ((req.s.status & VIRTIO_CONFIG_S_DRIVER_OK) && !(dev->status & VIRTIO_CONFIG_S_DRIVER_OK))
          start_queues (dev, FALSE);
        else if (req.s.status == 0)
          stop_queues (dev); /* reset (vduse_dev_reset follows on the kernel's side) */
        dev->status = req.s.status;
        break;
      case VDUSE_UPDATE_IOTLB:
        /* vduse_dev_update_iotlb: [start, last] changed; drop what we mapped
         * of it, the next access maps it again */
        g_debug ("IOTLB update 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x", (guint64) req.iova.start, (guint64) req.iova.last);
        va_relay_mem_invalidate (&dev->mem, req.iova.start, req.iova.last);
        break;
      default:
        resp.result = VDUSE_REQ_RESULT_FAILED;
        break;
    }
  if (write (dev->dev_fd, &resp, sizeof resp) != (ssize_t) sizeof resp)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "answering the device: %s", strerror (errno));
      return FALSE;
    }
  return TRUE;
}

static void
drain_eventfd (int fd)
{
  guint64 v;
  while (read (fd, &v, sizeof v) == (ssize_t) sizeof v)
    ;
}

/* Takes what the driver offers, with its kicks off meanwhile; at most a few
 * budgets, then the caller's poll does not wait while more is offered */
static void
do_tx (Dev *dev)
{
  VaVring *tx = &dev->vq[VA_RELAY_TXQ];
  for (guint round = 0; round < 4 && va_vring_is_running (tx); round++)
    {
      g_autoptr (GError) local = NULL;
      gboolean irq = FALSE;
      va_vring_set_notify (tx, FALSE);
      gboolean ok = va_relay_net_tx (tx, dev->tap_fd, BUDGET, &dev->tx_stats, &irq, &local);
      va_vring_set_notify (tx, TRUE);
      if (!ok)
        queue_broke (dev, VA_RELAY_TXQ, local);
      if (irq)
        inject_irq (dev, VA_RELAY_TXQ);
      if (!va_vring_has_avail (tx))
        break;
    }
}

static gboolean
do_rx (Dev *dev, GError **error)
{
  g_autoptr (GError) local = NULL;
  gboolean irq = FALSE, starved = FALSE;
  VaVring *rx = &dev->vq[VA_RELAY_RXQ];
  if (!va_relay_net_rx (rx, dev->tap_fd, BUDGET, &dev->rx_stats, &irq, &starved, &local))
    {
      if (!rx->stopped)
        {
          /* the tap failed, not the ring */
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      queue_broke (dev, VA_RELAY_RXQ, local);
    }
  dev->rx_starved = starved;
  if (irq)
    inject_irq (dev, VA_RELAY_RXQ);
  return TRUE;
}

/* A device whose driver is running already: the relay before this one
 * died (vduse_dev_release keeps the device and queues again the messages
 * it had not answered). No status can be read back (VDUSE has no such
 * request in 6.12), but a queue is ready only between the driver's setup
 * and its reset, so a ready queue means DRIVER_OK. The driver may wait for
 * an interrupt the dead relay owed it: one per queue. */
static void
resume (Dev *dev)
{
  gboolean live = FALSE;

  for (guint q = 0; q < NUM_VQS && !live; q++)
    {
      struct vduse_vq_info info = { .index = q };
      live = ioctl (dev->dev_fd, VDUSE_VQ_GET_INFO, &info) == 0 && info.ready;
    }
  if (!live)
    return;
  g_message ("the device is running: taking its queues up where the used rings stand");
  start_queues (dev, TRUE);
  dev->status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;
  for (guint q = 0; q < NUM_VQS; q++)
    if (va_vring_is_running (&dev->vq[q]))
      inject_irq (dev, q);
}

gboolean
va_relay_dev_run (int dev_fd, int tap_fd, volatile sig_atomic_t *stop, GError **error)
{
  Dev dev = { .dev_fd = dev_fd, .tap_fd = tap_fd, .kick_fd = { -1, -1 }, .wait_ms = -1 };
  gboolean ok = TRUE;
  gboolean seen_tx = FALSE, seen_rx = FALSE;

  g_return_val_if_fail (dev_fd >= 0 && tap_fd >= 0 && stop != NULL, FALSE);
  va_relay_mem_init (&dev.mem, iotlb_miss, iotlb_unmap, &dev);
  for (guint q = 0; q < NUM_VQS; q++)
    va_vring_reset (&dev.vq[q]);
  if (fcntl (dev_fd, F_SETFL, fcntl (dev_fd, F_GETFL) | O_NONBLOCK) < 0
      || fcntl (tap_fd, F_SETFL, fcntl (tap_fd, F_GETFL) | O_NONBLOCK) < 0)
    {
      g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "making the fds non-blocking: %s", strerror (errno));
      return FALSE;
    }

  resume (&dev);
  while (!*stop)
    {
      struct pollfd p[4] = {
        { .fd = dev_fd, .events = POLLIN },
        { .fd = dev.kick_fd[VA_RELAY_RXQ], .events = POLLIN },
        { .fd = dev.kick_fd[VA_RELAY_TXQ], .events = POLLIN },
        /* the tap only while the receive queue has room */
        { .fd = va_vring_is_running (&dev.vq[VA_RELAY_RXQ]) && !dev.rx_starved ? tap_fd : -1, .events = POLLIN },
      };
      /* chains offered and not taken (a budget's end, or offered while
       * kicks were off): look again at once */
      int r = poll (p, G_N_ELEMENTS (p), poll_timeout (&dev));
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          g_set_error (error, VA_ERROR, VA_ERROR_FAILED, "poll: %s", strerror (errno));
          ok = FALSE;
          break;
        }
      if (dev.wait_ms >= 0 && g_get_monotonic_time () >= dev.next_look)
        look_at_waiting (&dev);
      /* vduse_dev_poll: EPOLLERR once the device is broken (a message timed
       * out); a closed socket in the tests hangs up */
      if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
        {
          g_message ("the device went (poll 0x%x): stopping", p[0].revents);
          break;
        }
      if ((p[0].revents & POLLIN) && !serve_message (&dev, error))
        {
          ok = FALSE;
          break;
        }
      if (p[3].revents & (POLLERR | POLLHUP | POLLNVAL))
        {
          g_message ("the tap went (poll 0x%x): stopping", p[3].revents);
          break;
        }
      if (p[2].revents & POLLIN)
        {
          drain_eventfd (p[2].fd);
          if (dev.waiting[VA_RELAY_TXQ])
            start_queue (&dev, VA_RELAY_TXQ, FALSE);
          do_tx (&dev);
        }
      if (p[1].revents & POLLIN)
        {
          /* new receive buffers */
          drain_eventfd (p[1].fd);
          if (dev.waiting[VA_RELAY_RXQ])
            start_queue (&dev, VA_RELAY_RXQ, FALSE);
          dev.rx_starved = FALSE;
        }
      if (((p[1].revents | p[3].revents) & POLLIN) && va_vring_is_running (&dev.vq[VA_RELAY_RXQ]))
        if (!do_rx (&dev, error))
          {
            ok = FALSE;
            break;
          }
      /* what was offered while kicks were off, or beyond the budgets */
      if (va_vring_has_avail (&dev.vq[VA_RELAY_TXQ]))
        do_tx (&dev);
      if (!seen_tx && dev.tx_stats.frames)
        {
          g_debug ("first frame transmitted");
          seen_tx = TRUE;
        }
      if (!seen_rx && dev.rx_stats.frames)
        {
          g_debug ("first frame received");
          seen_rx = TRUE;
        }
    }
  g_message ("transmitted %" G_GUINT64_FORMAT " frames (%" G_GUINT64_FORMAT " dropped), received %" G_GUINT64_FORMAT, dev.tx_stats.frames,
             dev.tx_stats.dropped, dev.rx_stats.frames);
  stop_queues (&dev);
  return ok;
}
