/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gio/gio.h>

#include "va-host-view.h"

G_BEGIN_DECLS

/* The parts of a software vDPA device (issue 28) that the kernel backend
 * puts together: a VDUSE virtio-net device, a tap on the network's
 * fallback bridge in the NIC's VLAN, and the relay that serves the one
 * from the other (vdpa-allocator-relay, the daemon's sandboxed child).
 * Each step's error is one line naming the device or tap and the step. */

/* Names from the NIC's MAC, so that a device, its tap and its lease's slot
 * name one another: "vasw-525400aabbcc" for the VDUSE and vdpa device and
 * the slot (never "va-", which the backend lists and reconciles as its
 * hardware devices), "vs525400aabbcc" for the tap (IFNAMSIZ). NULL for a
 * MAC that does not parse. */
char *va_software_device_name (const char *mac);
char *va_software_tap_name (const char *mac);
/* The most software devices a listing returns: a host makes at most 256 per
 * pool, and a listing must not grow without bound on a hostile sysfs. */
#define VA_SOFTWARE_MAX_DEVICES 65536

/* Whether @name is a software device's (the prefix). */
gboolean va_software_is_device_name (const char *name);

/* NULL when this host can make software devices (VDUSE's control node is
 * there), else why not, in words an operator acts on. */
const char *va_software_unavailable (void);

/* VDUSE_CREATE_DEV on /dev/vduse/control: virtio-net with @mac and @mtu
 * (0: 1500), one queue pair and no control queue, features VERSION_1, MAC,
 * MTU, STATUS and ACCESS_PLATFORM (what VDUSE requires), each queue set up
 * for 256 entries; then /dev/vduse/NAME opened. Returns its fd (O_CLOEXEC),
 * or -1 with nothing left behind. */
int va_software_vduse_create (const char *name, const guint8 mac[6], guint16 mtu, GError **error);
/* /dev/vduse/@name of a device made before (its relay died, or the
 * daemon restarted): its fd, or -1 (VA_ERROR_NOT_FOUND when the device is
 * gone, VA_ERROR_BUSY while another process holds it: one opener only). */
int va_software_vduse_open (const char *name, GError **error);
/* VDUSE_DESTROY_DEV, retried for a while on EBUSY (a relay that just went
 * may still hold the device); a device already gone is no error. */
gboolean va_software_vduse_destroy (const char *name, GError **error);

/* A tap of @name (IFF_TAP | IFF_NO_PI, no vnet header: the relay writes
 * frames as they are), not persistent: it goes when its last fd closes,
 * that is when its relay exits. Returns the fd (O_CLOEXEC | O_NONBLOCK). */
int va_software_tap_open (const char *name, GError **error);
/* The tap on @bridge with @vlan (0: untagged), up. A Linux bridge by the
 * portable form's rule (va_nl_bridge_port_vlan); Open vSwitch bridges are
 * not done yet (one line saying so). */
gboolean va_software_tap_join (const char *tap, const char *bridge, VaBridgeKind kind, guint16 vlan, GError **error);

/* vdpa-allocator-relay started with @dev_fd as its fd 3 and @tap_fd as its
 * fd 4 (both taken: closed here whatever happens), --user @user,
 * --max-memory @mib. */
GSubprocess *va_software_relay_start (const char *name, int dev_fd, int tap_fd, const char *user, guint mib, GError **error);
/* SIGTERM, then SIGKILL if it has not gone within a bound; waits for it. */
void va_software_relay_stop (GSubprocess *relay);
/* A relay that is not our child (started by the daemon before a restart):
 * the processes holding /dev/vduse/@name open (a scan of /proc), each sent
 * SIGTERM, then SIGKILL past the same bound. Returns how many there were. */
guint va_software_relay_stop_stray (const char *name);

G_END_DECLS
