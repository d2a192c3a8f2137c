/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vduse-net: a VDUSE virtio-net device that moves no packets, for the lab
 * host (issue 7). It creates /dev/vduse/NAME, answers the control messages
 * the kernel sends while the device is added to the vdpa bus, bound to
 * vhost_vdpa and opened, and destroys the device when it is told to stop.
 *
 *   vduse-net [-n NAME] [-m MAC] [-q QUEUE_SIZE] [-r READY_FILE] [-v]
 *   vduse-net -c [-n NAME] [-m MAC] [-q QUEUE_SIZE]   create, leave, exit
 *   vduse-net -D [-n NAME]                           destroy, exit
 *
 * QUEUE_SIZE: the largest ring each queue offers (default 1024).
 *
 * -c creates the device and sets its queues up, then closes it and exits 0,
 * leaving it for another server (vdpa-allocator-relay, issue 28) to open
 * /dev/vduse/NAME; -D destroys it (retrying while it is busy: a vdpa device
 * on it, or a server holding it open).
 *
 * Once the device exists it writes its name to READY_FILE (if given) and
 * prints "vduse-net: NAME ready". SIGTERM or SIGINT: it destroys the device
 * (which fails with EBUSY while a vdpa device still sits on it: it then
 * retries until the vdpa device is deleted) and exits 0.
 *
 * Kernel facts (6.12, VDUSE API version 0): the features must include
 * VERSION_1 and ACCESS_PLATFORM and must not include CTRL_VQ, so there is
 * one queue pair: two virtqueues, each set up with VDUSE_VQ_SETUP before
 * the device can be added. `vdpa dev add ... mgmtdev vduse` refuses mac,
 * mtu and max_vqp: those come from the config space given here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/vduse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NUM_VQS 2 /* one rx, one tx: no control queue */

static volatile sig_atomic_t stop;
static int verbose;

static void
on_signal (int sig)
{
  (void) sig;
  stop = 1;
}

static void
say (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  fputs ("vduse-net: ", stderr);
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
  va_end (ap);
}

static int
parse_mac (const char *s, uint8_t mac[6])
{
  unsigned v[6];
  if (sscanf (s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    return -1;
  for (int i = 0; i < 6; i++)
    {
      if (v[i] > 0xff)
        return -1;
      mac[i] = (uint8_t) v[i];
    }
  return 0;
}

static const char *
req_name (uint32_t type)
{
  switch (type)
    {
      case VDUSE_GET_VQ_STATE:
        return "GET_VQ_STATE";
      case VDUSE_SET_STATUS:
        return "SET_STATUS";
      case VDUSE_UPDATE_IOTLB:
        return "UPDATE_IOTLB";
      default:
        return "?";
    }
}

/* One control message: read a request, write its answer. Returns -1 on a
 * read or write error other than EAGAIN/EINTR. */
static int
serve_one (int dev_fd, uint8_t *status)
{
  struct vduse_dev_request req;
  struct vduse_dev_response resp;
  ssize_t n = read (dev_fd, &req, sizeof req);

  if (n < 0)
    return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  if ((size_t) n != sizeof req)
    {
      say ("short request (%zd bytes)", n);
      return -1;
    }
  memset (&resp, 0, sizeof resp);
  resp.request_id = req.request_id;
  resp.result = VDUSE_REQ_RESULT_OK;
  switch (req.type)
    {
      case VDUSE_GET_VQ_STATE:
        /* nothing was ever consumed: every ring starts at 0 */
        resp.vq_state.index = req.vq_state.index;
        resp.vq_state.split.avail_index = 0;
        if (verbose)
          say ("GET_VQ_STATE vq %u", req.vq_state.index);
        break;
      case VDUSE_SET_STATUS:
        *status = req.s.status;
        if (verbose)
          say ("SET_STATUS 0x%02x", req.s.status);
        break;
      case VDUSE_UPDATE_IOTLB:
        /* a real device would VDUSE_IOTLB_GET_FD and mmap the range; this
         * one never touches guest memory */
        if (verbose)
          say ("UPDATE_IOTLB 0x%llx-0x%llx", (unsigned long long) req.iova.start, (unsigned long long) req.iova.last);
        break;
      default:
        say ("unknown request type %u", req.type);
        resp.result = VDUSE_REQ_RESULT_FAILED;
        break;
    }
  if (write (dev_fd, &resp, sizeof resp) != (ssize_t) sizeof resp)
    {
      say ("answering %s: %s", req_name (req.type), strerror (errno));
      return -1;
    }
  return 0;
}

int
main (int argc, char **argv)
{
  const char *name = "vduse-net0";
  const char *ready_file = NULL;
  uint8_t mac[6] = { 0x52, 0x54, 0x00, 0x7a, 0x00, 0x01 };
  /* as the daemon's software devices (va-software.c): under QEMU 10 a
   * device offering 256 entries fell back to userspace virtio
   * (docs/kernel-facts.md) */
  unsigned qsize = 1024;
  int opt;
  int create_only = 0, destroy_only = 0;

  while ((opt = getopt (argc, argv, "cDn:m:q:r:v")) != -1)
    switch (opt)
      {
        case 'c':
          create_only = 1;
          break;
        case 'D':
          destroy_only = 1;
          break;
        case 'n':
          name = optarg;
          break;
        case 'm':
          if (parse_mac (optarg, mac) < 0)
            {
              say ("bad MAC %s", optarg);
              return 2;
            }
          break;
        case 'q':
          qsize = (unsigned) strtoul (optarg, NULL, 0);
          break;
        case 'r':
          ready_file = optarg;
          break;
        case 'v':
          verbose = 1;
          break;
        default:
          fprintf (stderr, "usage: vduse-net [-c|-D] [-n NAME] [-m MAC] [-q QUEUE_SIZE] [-r READY_FILE] [-v]\n");
          return 2;
      }
  if (strlen (name) >= VDUSE_NAME_MAX || qsize == 0 || qsize > 32768 || (qsize & (qsize - 1)))
    {
      say ("bad name or queue size");
      return 2;
    }

  int ctl = open ("/dev/vduse/control", O_RDWR | O_CLOEXEC);
  if (ctl < 0)
    {
      say ("/dev/vduse/control: %s (is vduse loaded?)", strerror (errno));
      return 1;
    }
  uint64_t version = VDUSE_API_VERSION;
  if (ioctl (ctl, VDUSE_SET_API_VERSION, &version) < 0)
    {
      say ("VDUSE_SET_API_VERSION %llu: %s", (unsigned long long) version, strerror (errno));
      return 1;
    }

  if (destroy_only)
    goto destroy_dev;

  size_t cfg_len = sizeof (struct vduse_dev_config) + sizeof (struct virtio_net_config);
  struct vduse_dev_config *cfg = calloc (1, cfg_len);
  if (!cfg)
    return 1;
  struct virtio_net_config net = { 0 };
  memcpy (net.mac, mac, 6);
  net.status = VIRTIO_NET_S_LINK_UP;
  net.max_virtqueue_pairs = 1;
  net.mtu = 1500;
  snprintf (cfg->name, sizeof cfg->name, "%s", name);
  cfg->device_id = VIRTIO_ID_NET;
  cfg->vendor_id = 0;
  cfg->features = (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_F_ACCESS_PLATFORM) | (1ULL << VIRTIO_NET_F_MAC)
                  | (1ULL << VIRTIO_NET_F_STATUS) | (1ULL << VIRTIO_NET_F_MTU);
  cfg->vq_num = NUM_VQS;
  cfg->vq_align = 4096;
  cfg->config_size = sizeof net;
  memcpy (cfg->config, &net, sizeof net);
  if (ioctl (ctl, VDUSE_CREATE_DEV, cfg) < 0)
    {
      say ("VDUSE_CREATE_DEV %s: %s", name, strerror (errno));
      return 1;
    }
  free (cfg);

  int rc = 1;
  char path[VDUSE_NAME_MAX + 16];
  snprintf (path, sizeof path, "/dev/vduse/%s", name);
  int dev_fd = -1;
  /* the node comes from devtmpfs; udev, if any, may still be at it */
  for (int i = 0; i < 50 && dev_fd < 0; i++)
    {
      dev_fd = open (path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (dev_fd < 0)
        usleep (100000);
    }
  if (dev_fd < 0)
    {
      say ("%s: %s", path, strerror (errno));
      goto destroy;
    }
  for (unsigned i = 0; i < NUM_VQS; i++)
    {
      struct vduse_vq_config vq = { .index = i, .max_size = (uint16_t) qsize };
      if (ioctl (dev_fd, VDUSE_VQ_SETUP, &vq) < 0)
        {
          say ("VDUSE_VQ_SETUP %u: %s", i, strerror (errno));
          goto destroy;
        }
    }

  if (create_only)
    {
      close (dev_fd);
      close (ctl);
      say ("%s created", name);
      return 0;
    }

  struct sigaction sa = { .sa_handler = on_signal };
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGINT, &sa, NULL);
  if (ready_file)
    {
      FILE *f = fopen (ready_file, "w");
      if (!f || fprintf (f, "%s\n", name) < 0 || fclose (f) != 0)
        {
          say ("%s: %s", ready_file, strerror (errno));
          goto destroy;
        }
    }
  say ("%s ready", name);

  uint8_t status = 0;
  while (!stop)
    {
      struct pollfd p = { .fd = dev_fd, .events = POLLIN };
      int r = poll (&p, 1, 1000);
      if (r < 0 && errno != EINTR)
        {
          say ("poll: %s", strerror (errno));
          goto destroy;
        }
      if (r > 0 && serve_one (dev_fd, &status) < 0)
        {
          say ("read: %s", strerror (errno));
          goto destroy;
        }
    }
  rc = 0;

destroy:
  if (dev_fd >= 0)
    close (dev_fd);
destroy_dev:
  rc = destroy_only ? 0 : rc;
  /* EBUSY while a vdpa device is still on it: wait for its deletion (which
   * is slow now: nobody answers the kernel's messages, so each times out;
   * delete the vdpa device first) */
  char dname[VDUSE_NAME_MAX] = { 0 };
  snprintf (dname, sizeof dname, "%s", name);
  for (int i = 0;; i++)
    {
      if (ioctl (ctl, VDUSE_DESTROY_DEV, dname) == 0)
        break;
      if (errno != EBUSY || i == 300)
        {
          say ("VDUSE_DESTROY_DEV %s: %s", name, strerror (errno));
          rc = 1;
          break;
        }
      usleep (100000);
    }
  close (ctl);
  if (rc == 0)
    say ("%s destroyed", name);
  return rc;
}
