/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "va-backend.h"

G_BEGIN_DECLS

/* The kernel backend's steps after DEV_NEW, for the testbed tests: a vdpa
 * device @name already on the bus gets bound to vhost_vdpa, its node found
 * and given the pool's group and mode, and the pool's VLAN method applied.
 * create_device runs exactly this after DEV_NEW. */
VaDeviceInfo *va_backend_kernel_attach (VaBackend *backend, const VaDeviceRequest *req, const char *name, GError **error);

/* The vdpa device name the backend gives a slot: "va-" and the VF's PCI
 * address, so that a restarted daemon recognises its own devices. */
char *va_backend_kernel_device_name (const char *slot);

G_END_DECLS
