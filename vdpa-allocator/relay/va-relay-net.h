/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* virtio-net over the rings: frames between a virtqueue pair and a tap (or
 * any file descriptor that keeps frame boundaries: a SOCK_DGRAM or
 * SOCK_SEQPACKET socket in the tests and the benchmark). The tap is opened
 * without IFF_VNET_HDR: the relay offers no checksum or segmentation
 * offload, so it strips the driver's virtio_net_hdr on transmit and writes
 * a zero one (num_buffers 1) on receive, and a hostile header never reaches
 * the host's stack. Frames move by readv/writev straight between guest
 * memory and the tap: no copy in the relay. */
#pragma once

#include <glib.h>

#include "va-relay-ring.h"

/* VIRTIO_F_VERSION_1 makes the header struct virtio_net_hdr_v1: 12 bytes
 * (virtio 1.x, 5.1.6) */
#define VA_RELAY_NET_HDR_LEN 12
/* the largest frame the relay passes either way: MTU 1500 is what the
 * creator advertises; a VLAN tag and slack for a larger MTU fit */
#define VA_RELAY_MAX_FRAME 9216

typedef struct
{
  guint64 frames;
  guint64 bytes;
  guint64 dropped; /* too long, too short, or the fd refused it */
} VaRelayNetStats;

/* Moves at most `budget` frames from the transmit queue to fd. Returns
 * FALSE with error set when the queue broke (it is stopped then); *irq says
 * whether used entries were pushed and the driver wants an interrupt. */
gboolean va_relay_net_tx (VaVring *tx, int fd, guint budget, VaRelayNetStats *stats, gboolean *irq, GError **error);

/* Moves at most `budget` frames from fd into the receive queue's buffers.
 * *starved is TRUE when a frame may be waiting but the queue has no buffer
 * (stop polling fd until the driver kicks). */
gboolean va_relay_net_rx (VaVring *rx, int fd, guint budget, VaRelayNetStats *stats, gboolean *irq, gboolean *starved, GError **error);
