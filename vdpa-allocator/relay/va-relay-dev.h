/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The relay's device loop: one VDUSE virtio-net device (one queue pair, no
 * control queue, split rings) and one tap. It answers the kernel's
 * messages on the device fd, maps the IOVA ranges the rings and buffers
 * live in (VDUSE_IOTLB_GET_FD), takes kicks on eventfds
 * (VDUSE_VQ_SETUP_KICKFD) and gives interrupts (VDUSE_VQ_INJECT_IRQ).
 * Both file descriptors come from the caller (the daemon, or a test), which
 * created the device and the tap: the loop needs no privilege and makes only
 * the system calls the sandbox (va-relay-sandbox.h) allows. */
#pragma once

#include <glib.h>
#include <signal.h>

/* the two virtqueues of virtio-net's one pair (virtio 1.x, 5.1.2) */
#define VA_RELAY_RXQ 0
#define VA_RELAY_TXQ 1

/* Runs until *stop is set (TRUE returned), the device goes (broken or its
 * fd hangs up: TRUE), or a fatal error (FALSE, error set). A queue the
 * driver breaks is stopped and logged once; the loop goes on, and a driver
 * reset (status 0) starts the queues afresh. */
gboolean va_relay_dev_run (int dev_fd, int tap_fd, volatile sig_atomic_t *stop, GError **error);
